// Package bridgestore lets the bbolt session store serve as the bridge's Store.
package bridgestore

import (
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/sessionmap"
)

// Store adapts *sessionmap.Store to bridge.Store. sessionmap knows nothing of
// the bridge and the bridge nothing of bbolt; this is the one place both meet.
type Store struct {
	*sessionmap.Store
}

var _ bridge.Store = Store{}

// New wraps s.
func New(s *sessionmap.Store) Store { return Store{Store: s} }

// LoadSession returns the session a conversation is mapped to.
func (s Store) LoadSession(key string) (bridge.Session, bool, error) {
	rec, ok, err := s.Store.Session(key)
	if err != nil || !ok {
		return bridge.Session{}, ok, err
	}
	return bridge.Session{Agent: rec.Agent, SessionUUID: rec.SessionUUID, Created: rec.Created, LastUsed: rec.LastUsed}, true, nil
}

// SaveSession maps a conversation to a session.
func (s Store) SaveSession(key string, r bridge.Session) error {
	return s.Store.PutSession(sessionmap.Session{Key: key, Agent: r.Agent, SessionUUID: r.SessionUUID, Created: r.Created, LastUsed: r.LastUsed})
}

// SaveTurns records answered messages in one write.
func (s Store) SaveTurns(turns []bridge.Turn) error {
	out := make([]sessionmap.Turn, len(turns))
	for i, t := range turns {
		r := t.Session
		out[i] = sessionmap.Turn{Session: sessionmap.Session{Key: t.Key, Agent: r.Agent, SessionUUID: r.SessionUUID, Created: r.Created, LastUsed: r.LastUsed}, Reply: t.Reply}
	}
	_, err := s.Store.PutTurns(out)
	return err
}

// MarkEvents records delivered event IDs. The bridge hands over only IDs it
// found new (in memory and in the store), so they need not be looked up in
// every live generation again.
func (s Store) MarkEvents(ids []string, ttl time.Duration, now time.Time) error {
	return s.Store.AddEvents(ids, ttl, now)
}

// AppendAudit records an audit entry.
func (s Store) AppendAudit(e bridge.AuditEntry) error {
	return s.Store.AppendAudit(sessionmap.AuditEntry{
		Time: e.Time, Platform: e.Platform, User: e.User, UserName: e.UserName, Channel: e.Channel,
		Conversation: e.Conversation, Flow: e.Flow, Params: e.Params, Outcome: e.Outcome, Detail: e.Detail, Duration: e.Duration,
	})
}
