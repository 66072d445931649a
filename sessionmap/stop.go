package sessionmap

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// The store keeps the Stops contract beside the inbox and outbox it guards.
var _ store.Stops = (*Store)(nil)

// errNoStopper is a Stop that names nobody: "" is an entry nobody stopped.
var errNoStopper = errors.New("stop by nobody: who is empty")

// Stop marks the entry of key stopped by who, updated at now, and reports
// true: the entry's record carries who (as version 4, see inbox.go) until
// Finish answers the entry, and PutReply refuses it (store.ErrStopped). An
// entry answered already, or stopped already, is left as it is, the first
// stop's who kept, and Stop reports false. A key the inbox does not hold
// gives an error wrapping store.ErrUnknownEntry. Like MarkSent, it is one
// transaction through the group commit, committed and synced before it
// returns, and checked against the entry's state inside it, so of a Stop
// and a PutReply of one entry exactly one goes first. A zero now is refused
// (store.ErrNoTime), and so is an empty who.
func (s *Store) Stop(ctx context.Context, key, who string, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("stop %q: %w", key, err)
	}
	if err := checkTime(now); err != nil {
		return false, fmt.Errorf("stop %q: %w", key, err)
	}
	if who == "" {
		return false, fmt.Errorf("stop %q: %w", key, errNoStopper)
	}
	k := []byte(key)
	var stopped bool
	err := s.update(func(tx *bolt.Tx) error {
		stopped = false
		inbox := tx.Bucket(bucketInbox)
		r, err := lookInbox(inbox, k)
		if err != nil {
			return err
		}
		if r.state == store.Answered || len(r.stoppedBy) > 0 {
			return nil
		}
		v, err := r.stop(who, now)
		if err != nil {
			return err
		}
		if err := inbox.Put(k, v); err != nil {
			return err
		}
		stopped = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("stop %q: %w", key, err)
	}
	return stopped, nil
}
