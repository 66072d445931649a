package sessionmap

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// LastOrders returns, per conversation with inbox entries keyed under
// keyPrefix and received at or after since, their highest Order: how far
// each conversation was recorded, for an adapter to fetch what it missed
// while down (store.RecentInbox). Entries without an Order or a
// conversation are left out. An entry is answered after it is received, so
// the answered ones are among those inbox_done holds from since on; the
// others are the few in inbox_seq. Both are read in short transactions of
// at most s.chunk entries.
func (s *Store) LastOrders(ctx context.Context, keyPrefix string, since time.Time) (map[string]int64, error) {
	out := make(map[string]int64)
	prefix := []byte(keyPrefix)
	visit := func(tx *bolt.Tx, _, key []byte) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if !bytes.HasPrefix(key, prefix) {
			return true, nil
		}
		v := tx.Bucket(bucketInbox).Get(key)
		if v == nil {
			return false, fmt.Errorf("%w: inbox index names entry %q, which is missing", ErrCorrupt, key)
		}
		e, err := decodeInbox(v)
		if err != nil {
			return false, fmt.Errorf("inbox entry %q: %w", key, err)
		}
		if e.Order > 0 && e.Conversation != "" && !e.Received.Before(since) && e.Order > out[e.Conversation] {
			out[e.Conversation] = e.Order
		}
		return true, nil
	}
	all := func([]byte) bool { return true }
	// Pending first: an entry answered between two transactions moves to
	// the end of inbox_done, which is read after, so none is missed.
	if err := s.scanTx(bucketInboxSeq, nil, all, visit); err != nil {
		return nil, fmt.Errorf("last orders: %w", err)
	}
	from := timeKey(clampTime(since))
	if err := s.scanTx(bucketInboxDone, from[:], all, visit); err != nil {
		return nil, fmt.Errorf("last orders: %w", err)
	}
	return out, nil
}
