package sessionmap

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// Agent choices and last replies are stored as a version byte followed by
// the UTF-8 text (version 1); a latest reply written by a turn whose
// session has a LastUsed time carries that time, for PruneReplies, between
// the two (version 2: 8 bytes, Unix nanoseconds big-endian).
const (
	textV1 = 1
	textV2 = 2
)

// decodeText decodes a text record: its text, not copied, and its time
// (zero for version 1).
func decodeText(v []byte) ([]byte, time.Time, error) {
	switch {
	case len(v) >= 1 && v[0] == textV1:
		return v[1:], time.Time{}, nil
	case len(v) >= 9 && v[0] == textV2:
		return v[9:], time.Unix(0, int64(binary.BigEndian.Uint64(v[1:9]))), nil
	}
	return nil, time.Time{}, fmt.Errorf("%w: text record of %d bytes without version %d or %d", errRecord, len(v), textV1, textV2)
}

// appendText encodes a text record, of version 2 when at is not zero.
func appendText(dst []byte, text string, at time.Time) []byte {
	if at.IsZero() {
		return append(append(slices.Grow(dst, 1+len(text)), textV1), text...)
	}
	dst = append(slices.Grow(dst, 9+len(text)), textV2)
	dst = binary.BigEndian.AppendUint64(dst, uint64(at.UnixNano()))
	return append(dst, text...)
}

// ConversationAgent returns the agent the conversation chose with
// /agent use; ok is false when it uses the default agent.
func (s *Store) ConversationAgent(ctx context.Context, key string) (string, bool, error) {
	agent, ok, err := s.getText(bucketAgents, key)
	if err != nil {
		return "", false, fmt.Errorf("conversation agent %q: %w", key, err)
	}
	return agent, ok, nil
}

// SetConversationAgent records the conversation's agent; an empty agent
// removes the choice, so the conversation falls back to the default.
func (s *Store) SetConversationAgent(ctx context.Context, key, agent string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("set conversation agent %q: %w", key, err)
	}
	if err := s.putText(bucketAgents, key, agent); err != nil {
		return fmt.Errorf("set conversation agent %q: %w", key, err)
	}
	return nil
}

// LastReply returns the latest Agent reply of the conversation, for
// /agent share; ok is false when there is none.
func (s *Store) LastReply(ctx context.Context, key string) (string, bool, error) {
	text, ok, err := s.getText(bucketReplies, key)
	if err != nil {
		return "", false, fmt.Errorf("last reply %q: %w", key, err)
	}
	return text, ok, nil
}

// SetLastReply records the latest Agent reply of the conversation; an empty
// text removes it.
func (s *Store) SetLastReply(ctx context.Context, key, text string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("set last reply %q: %w", key, err)
	}
	if err := s.putText(bucketReplies, key, text); err != nil {
		return fmt.Errorf("set last reply %q: %w", key, err)
	}
	return nil
}

func (s *Store) getText(bucket []byte, key string) (text string, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(key))
		if v == nil {
			return nil
		}
		t, _, err := decodeText(v)
		if err != nil {
			return err
		}
		text, ok = string(t), true
		return nil
	})
	return text, ok, err
}

func (s *Store) putText(bucket []byte, key, text string) error {
	if err := checkKey("conversation key", key); err != nil {
		return err
	}
	if text == "" {
		return s.update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucket).Delete([]byte(key))
		})
	}
	if len(text) >= bolt.MaxValueSize {
		return fmt.Errorf("text of %d bytes is too large", len(text))
	}
	v := make([]byte, 0, 1+len(text))
	v = append(append(v, textV1), text...)
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(key), v)
	})
}

// Turn is one answered message of a conversation: its session with LastUsed
// moved on, and the reply, which becomes the conversation's latest.
type Turn = store.Turn

// PutTurns records answered messages in one transaction, each by the rule of
// Finish: a turn is applied only while its conversation still maps to the
// turn's session, so a turn written after /agent reset (or after a new
// session replaced the old one) does not bring the old mapping back. It
// reports how many were applied.
func (s *Store) PutTurns(ctx context.Context, turns []Turn) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("put turns: %w", err)
	}
	if len(turns) == 0 {
		return 0, nil
	}
	encs := make([]encodedTurn, len(turns))
	for i, t := range turns {
		var err error
		if encs[i], err = encodeTurn(t); err != nil {
			return 0, fmt.Errorf("put turns: %w", err)
		}
	}
	var applied int
	err := s.update(func(tx *bolt.Tx) error {
		applied = 0
		for _, e := range encs {
			ok, err := e.apply(tx)
			if err != nil {
				return err
			}
			if ok {
				applied++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("put %d turns: %w", len(turns), err)
	}
	return applied, nil
}

// encodedTurn is a turn encoded outside the transaction that applies it.
type encodedTurn struct {
	key, rec, text []byte
	uuid           string
	also           [][]byte
}

func encodeTurn(t Turn) (encodedTurn, error) {
	if err := checkKey("conversation key", t.Session.Key); err != nil {
		return encodedTurn{}, fmt.Errorf("turn: %w", err)
	}
	v, err := appendSession(nil, t.Session)
	if err != nil {
		return encodedTurn{}, fmt.Errorf("turn %q: %w", t.Session.Key, err)
	}
	if len(t.Reply) >= bolt.MaxValueSize {
		return encodedTurn{}, fmt.Errorf("turn %q: reply of %d bytes is too large", t.Session.Key, len(t.Reply))
	}
	e := encodedTurn{key: []byte(t.Session.Key), rec: v, text: appendText(nil, t.Reply, t.Session.LastUsed), uuid: t.Session.SessionUUID}
	for _, k := range t.Also {
		if err := checkKey("reply key", k); err != nil {
			return encodedTurn{}, fmt.Errorf("turn %q: %w", t.Session.Key, err)
		}
		e.also = append(e.also, []byte(k))
	}
	return e, nil
}

// apply writes the turn's session and reply in tx if the conversation still
// maps to the turn's session, and reports whether it did.
func (e encodedTurn) apply(tx *bolt.Tx) (bool, error) {
	sessions := tx.Bucket(bucketSessions)
	sessions.FillPercent = sessionFill
	cur := sessions.Get(e.key)
	if cur == nil {
		return false, nil // reset since the turn: leave it forgotten
	}
	stored, err := decodeSession(cur)
	if err != nil {
		return false, fmt.Errorf("session %q: %w", e.key, err)
	}
	if stored.SessionUUID != e.uuid {
		return false, nil // a newer session took over
	}
	if err := sessions.Put(e.key, e.rec); err != nil {
		return false, err
	}
	replies := tx.Bucket(bucketReplies)
	if err := replies.Put(e.key, e.text); err != nil {
		return false, err
	}
	for _, k := range e.also {
		if err := replies.Put(k, e.text); err != nil {
			return false, err
		}
	}
	return true, nil
}
