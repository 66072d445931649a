package sessionmap

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ClaimRun records at as the latest run of the schedule name unless a run
// at at or later is recorded already. The value is timeKey(at).
func (s *Store) ClaimRun(ctx context.Context, name string, at time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("claim run %q: %w", name, err)
	}
	if err := checkKey("schedule name", name); err != nil {
		return false, fmt.Errorf("claim run: %w", err)
	}
	if at.Before(minNanoTime) || at.After(maxNanoTime) {
		return false, fmt.Errorf("claim run: time %v out of range", at)
	}
	var claimed bool
	err := s.update(func(tx *bolt.Tx) error {
		claimed = false
		b := tx.Bucket(bucketSchedules)
		if v := b.Get([]byte(name)); v != nil {
			last, err := keyTime(v)
			if err != nil {
				return fmt.Errorf("%w: run time of schedule %q: %v", ErrCorrupt, name, err)
			}
			if !at.After(last) {
				return nil
			}
		}
		k := timeKey(at)
		claimed = true
		return b.Put([]byte(name), k[:])
	})
	if err != nil {
		return false, fmt.Errorf("claim run: %w", err)
	}
	return claimed, nil
}

// LastRun returns the latest run recorded for name.
func (s *Store) LastRun(ctx context.Context, name string) (time.Time, bool, error) {
	var (
		at time.Time
		ok bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSchedules).Get([]byte(name))
		if v == nil {
			return nil
		}
		t, err := keyTime(v)
		if err != nil {
			return errors.Join(ErrCorrupt, err)
		}
		at, ok = t, true
		return nil
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("last run: %w", err)
	}
	return at, ok, nil
}
