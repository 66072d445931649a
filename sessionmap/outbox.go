package sessionmap

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// The outbox is one bucket, outbox: platform key -> the answer kept for
// the inbox entry of that key (store.InboxEntry.Outbox), from PutReply
// until Finish deletes it in the transaction that answers the entry. Only
// entries not yet answered have one, so it stays as small as inbox_seq.

// PutReply keeps reply as the answer of the entry (Received or Sent) until
// it is posted: the entry becomes Sent, reply is written beside it, and
// turn, when not nil, is applied by Finish's rule, all in one transaction.
// An answered entry gives an error wrapping store.ErrAlreadySent, a stopped
// one (Stop) one wrapping store.ErrStopped, a key the inbox does not hold
// one wrapping store.ErrUnknownEntry; in each case nothing is written. A zero now is refused (store.ErrNoTime).
func (s *Store) PutReply(ctx context.Context, key string, reply []byte, turn *store.Turn, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put reply %q: %w", key, err)
	}
	if err := checkTime(now); err != nil {
		return fmt.Errorf("put reply %q: %w", key, err)
	}
	var t *encodedTurn
	if turn != nil {
		et, err := encodeTurn(*turn)
		if err != nil {
			return fmt.Errorf("put reply %q: %w", key, err)
		}
		t = &et
	}
	if reply == nil {
		reply = []byte{}
	}
	k := []byte(key)
	err := s.update(func(tx *bolt.Tx) error {
		inbox := tx.Bucket(bucketInbox)
		r, err := lookInbox(inbox, k)
		if err != nil {
			return err
		}
		if r.state == store.Answered {
			return fmt.Errorf("%w: %w", store.ErrAlreadySent, errAnswered)
		}
		if len(r.stoppedBy) > 0 {
			// Checked in the transaction that would write the answer: a
			// Stop commits before it or after it, never between.
			return fmt.Errorf("%w by %s", store.ErrStopped, r.stoppedBy)
		}
		v, err := r.restate(store.Sent, now)
		if err != nil {
			return err
		}
		if err := inbox.Put(k, v); err != nil {
			return err
		}
		if err := tx.Bucket(bucketOutbox).Put(k, reply); err != nil {
			return err
		}
		if t != nil {
			_, err = t.apply(tx)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("put reply %q: %w", key, err)
	}
	return nil
}

// keptReply returns the answer kept for the entry of key, copied out of
// bbolt's memory, or nil. A file opened read-only that predates the
// outbox has no bucket for it, and so no answers.
func keptReply(tx *bolt.Tx, key []byte) []byte {
	b := tx.Bucket(bucketOutbox)
	if b == nil {
		return nil
	}
	if v := b.Get(key); v != nil {
		return bytes.Clone(v)
	}
	return nil
}

// dropReply deletes the answer kept for the entry of key, if any.
func dropReply(tx *bolt.Tx, key []byte) error {
	return tx.Bucket(bucketOutbox).Delete(key)
}
