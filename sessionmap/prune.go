package sessionmap

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// PruneSessions forgets the sessions last used before before (a session
// never used: created before before), and with each its conversation's
// agent choice, context and latest reply, and returns how many. A session
// with neither time is kept: its age is unknown. The conversation's next
// message starts a new session. It reads and deletes in transactions of at
// most s.chunk keys, so a large store never holds the writer lock for long;
// a session used between the read and the delete is kept.
func (s *Store) PruneSessions(ctx context.Context, before time.Time) (int, error) {
	old := func(v []byte) bool {
		rec, err := decodeSession(v)
		if err != nil {
			return false // a damaged record is for its reader to report
		}
		at := rec.LastUsed
		if at.IsZero() {
			at = rec.Created
		}
		return !at.IsZero() && at.Before(before)
	}
	n, err := s.prune(ctx, bucketSessions, old, func(tx *bolt.Tx, k []byte) error {
		for _, b := range [][]byte{bucketSessions, bucketAgents, bucketContexts, bucketReplies} {
			if err := tx.Bucket(b).Delete(k); err != nil {
				return err
			}
		}
		return addCounter(tx, metaSessions, -1)
	})
	if err != nil {
		return n, fmt.Errorf("prune sessions: %w", err)
	}
	return n, nil
}

// PruneReplies drops the latest replies recorded before before, and
// returns how many. A reply recorded without a time (by a flowbridge before
// reply times, or by SetLastReply) is kept, and goes with its session.
func (s *Store) PruneReplies(ctx context.Context, before time.Time) (int, error) {
	old := func(v []byte) bool {
		_, at, err := decodeText(v)
		return err == nil && !at.IsZero() && at.Before(before)
	}
	n, err := s.prune(ctx, bucketReplies, old, func(tx *bolt.Tx, k []byte) error {
		return tx.Bucket(bucketReplies).Delete(k)
	})
	if err != nil {
		return n, fmt.Errorf("prune replies: %w", err)
	}
	return n, nil
}

// prune deletes, with del, the keys of bucket whose value old says is old.
// Each round reads at most s.chunk keys in one read transaction, then
// deletes those found old in one write transaction, in which it reads each
// again: a key changed meanwhile is deleted only if it is old still. ctx
// is checked between rounds.
func (s *Store) prune(ctx context.Context, bucket []byte, old func(v []byte) bool, del func(tx *bolt.Tx, k []byte) error) (int, error) {
	total := 0
	var next []byte
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var found [][]byte
		done := true
		err := s.view(func(tx *bolt.Tx) error {
			found, done = found[:0], true
			c := tx.Bucket(bucket).Cursor()
			k, v := c.First()
			if next != nil {
				k, v = c.Seek(next)
			}
			for i := 0; k != nil; k, v = c.Next() {
				if i == s.chunk {
					next, done = bytes.Clone(k), false
					return nil
				}
				if v != nil && old(v) {
					found = append(found, bytes.Clone(k))
				}
				i++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		if len(found) > 0 {
			n := 0
			err := s.update(func(tx *bolt.Tx) error {
				n = 0
				b := tx.Bucket(bucket)
				for _, k := range found {
					if v := b.Get(k); v == nil || !old(v) {
						continue
					}
					if err := del(tx, k); err != nil {
						return err
					}
					n++
				}
				return nil
			})
			if err != nil {
				return total, err
			}
			total += n
		}
		if done {
			return total, nil
		}
	}
}
