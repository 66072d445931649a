package sessionmap

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// A context record is a version byte, a flags byte (bit 0: told), the
// update time in Unix nanoseconds (8 bytes, big-endian), then the text.
const (
	contextV1       = 1
	contextTold     = 1 << 0
	contextHeader   = 1 + 1 + 8
	contextMaxBytes = 64 << 10
)

// ConversationContext returns what the conversation's user has open beside
// it; ok is false when nothing is recorded.
func (s *Store) ConversationContext(ctx context.Context, key string) (c store.Context, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketContexts)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(key))
		if v == nil {
			return nil
		}
		if len(v) <= contextHeader || v[0] != contextV1 {
			return fmt.Errorf("%w: context record of %d bytes", errRecord, len(v))
		}
		c = store.Context{
			Key:     key,
			Told:    v[1]&contextTold != 0,
			Updated: time.Unix(0, int64(binary.BigEndian.Uint64(v[2:contextHeader]))),
			Text:    string(v[contextHeader:]),
		}
		ok = true
		return nil
	})
	if err != nil {
		return store.Context{}, false, fmt.Errorf("conversation context %q: %w", key, err)
	}
	return c, ok, nil
}

// PutConversationContext records c under c.Key; an empty text deletes it.
func (s *Store) PutConversationContext(ctx context.Context, c store.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put conversation context: %w", err)
	}
	if err := checkKey("conversation key", c.Key); err != nil {
		return fmt.Errorf("put conversation context: %w", err)
	}
	if len(c.Text) > contextMaxBytes {
		return fmt.Errorf("put conversation context %q: text of %d bytes exceeds %d", c.Key, len(c.Text), contextMaxBytes)
	}
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketContexts)
		if c.Text == "" {
			return b.Delete([]byte(c.Key))
		}
		v := make([]byte, contextHeader, contextHeader+len(c.Text))
		v[0] = contextV1
		if c.Told {
			v[1] = contextTold
		}
		binary.BigEndian.PutUint64(v[2:], uint64(c.Updated.UnixNano()))
		return b.Put([]byte(c.Key), append(v, c.Text...))
	})
	if err != nil {
		return fmt.Errorf("put conversation context %q: %w", c.Key, err)
	}
	return nil
}
