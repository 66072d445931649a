package sessionmap

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Agent choices and last replies are stored as a version byte followed by
// the UTF-8 text.
const textV1 = 1

// ConversationAgent returns the agent the conversation chose with
// /agent use; ok is false when it uses the default agent.
func (s *Store) ConversationAgent(key string) (string, bool, error) {
	agent, ok, err := s.getText(bucketAgents, key)
	if err != nil {
		return "", false, fmt.Errorf("conversation agent %q: %w", key, err)
	}
	return agent, ok, nil
}

// SetConversationAgent records the conversation's agent; an empty agent
// removes the choice, so the conversation falls back to the default.
func (s *Store) SetConversationAgent(key, agent string) error {
	if err := s.putText(bucketAgents, key, agent); err != nil {
		return fmt.Errorf("set conversation agent %q: %w", key, err)
	}
	return nil
}

// LastReply returns the latest Agent reply of the conversation, for
// /agent share; ok is false when there is none.
func (s *Store) LastReply(key string) (string, bool, error) {
	text, ok, err := s.getText(bucketReplies, key)
	if err != nil {
		return "", false, fmt.Errorf("last reply %q: %w", key, err)
	}
	return text, ok, nil
}

// SetLastReply records the latest Agent reply of the conversation; an empty
// text removes it.
func (s *Store) SetLastReply(key, text string) error {
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
		if len(v) == 0 || v[0] != textV1 {
			return fmt.Errorf("%w: text record of %d bytes without version %d", errRecord, len(v), textV1)
		}
		text, ok = string(v[1:]), true
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
type Turn struct {
	Session Session
	Reply   string
}

// PutTurns records answered messages in one transaction. A turn is applied
// only while its conversation still maps to the turn's session: a batch
// written after /agent reset (or after a new session replaced the old one)
// must not bring the old mapping back. It reports how many were applied.
func (s *Store) PutTurns(turns []Turn) (int, error) {
	type enc struct {
		key, rec, text []byte
		uuid           string
	}
	encs := make([]enc, 0, len(turns))
	for _, t := range turns {
		if err := checkKey("conversation key", t.Session.Key); err != nil {
			return 0, fmt.Errorf("put turns: %w", err)
		}
		v, err := appendSession(nil, t.Session)
		if err != nil {
			return 0, fmt.Errorf("put turn %q: %w", t.Session.Key, err)
		}
		if len(t.Reply) >= bolt.MaxValueSize {
			return 0, fmt.Errorf("put turn %q: reply of %d bytes is too large", t.Session.Key, len(t.Reply))
		}
		encs = append(encs, enc{key: []byte(t.Session.Key), rec: v, text: append([]byte{textV1}, t.Reply...), uuid: t.Session.SessionUUID})
	}
	var applied int
	err := s.update(func(tx *bolt.Tx) error {
		applied = 0
		sessions, replies := tx.Bucket(bucketSessions), tx.Bucket(bucketReplies)
		sessions.FillPercent = sessionFill
		for _, e := range encs {
			cur := sessions.Get(e.key)
			if cur == nil {
				continue // reset since the turn: leave it forgotten
			}
			stored, err := decodeSession(cur)
			if err != nil {
				return fmt.Errorf("session %q: %w", e.key, err)
			}
			if stored.SessionUUID != e.uuid {
				continue // a newer session took over
			}
			if err := sessions.Put(e.key, e.rec); err != nil {
				return err
			}
			if err := replies.Put(e.key, e.text); err != nil {
				return err
			}
			applied++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("put %d turns: %w", len(turns), err)
	}
	return applied, nil
}
