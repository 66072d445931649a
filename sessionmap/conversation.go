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

// PutTurn records one answered message in a single transaction: the session
// record (its LastUsed moved on) and the conversation's latest reply. The chat
// path calls it once per message, so one fsync covers both.
func (s *Store) PutTurn(rec Session, reply string) error {
	if err := checkKey("conversation key", rec.Key); err != nil {
		return fmt.Errorf("put turn: %w", err)
	}
	v, err := appendSession(nil, rec)
	if err != nil {
		return fmt.Errorf("put turn %q: %w", rec.Key, err)
	}
	if len(reply) >= bolt.MaxValueSize {
		return fmt.Errorf("put turn %q: reply of %d bytes is too large", rec.Key, len(reply))
	}
	text := append([]byte{textV1}, reply...)
	err = s.update(func(tx *bolt.Tx) error {
		if err := putSessionTx(tx, rec.Key, v); err != nil {
			return err
		}
		k := []byte(rec.Key)
		if reply == "" {
			return tx.Bucket(bucketReplies).Delete(k)
		}
		return tx.Bucket(bucketReplies).Put(k, text)
	})
	if err != nil {
		return fmt.Errorf("put turn %q: %w", rec.Key, err)
	}
	return nil
}
