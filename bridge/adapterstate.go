package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// adapterStateTries bounds the compare-and-set rounds of one change of an
// adapter's state: each lost round means another process wrote it in
// between, which replicas of one bot do at most a few at a time.
const adapterStateTries = 16

// errAdapterStateContended is returned when every round lost.
var errAdapterStateContended = errors.New("written by others in every attempt")

// AdapterState returns the text an adapter saved under name
// (SaveAdapterState, UpdateAdapterState), if it was saved within maxAge by
// the core's clock; ok is false otherwise. Adapter state is a record of
// its own in the store (store.AdapterStates), no conversation's.
func (b *Bridge) AdapterState(ctx context.Context, name string, maxAge time.Duration) (text string, ok bool, err error) {
	s, found, err := b.store.AdapterState(ctx, name)
	if err != nil {
		return "", false, fmt.Errorf("adapter state %s: %w", name, err)
	}
	if !found || b.cfg.Now().Sub(s.Updated) > maxAge {
		return "", false, nil
	}
	return s.Text, true, nil
}

// SaveAdapterState keeps text under name for the next process, stamped
// with the core's clock, replacing what was saved before, whoever saved
// it; "" forgets it.
func (b *Bridge) SaveAdapterState(ctx context.Context, name, text string) error {
	_, err := b.UpdateAdapterState(ctx, name, 0, func(string, bool) (string, error) { return text, nil })
	if err != nil {
		return fmt.Errorf("save adapter state %s: %w", name, err)
	}
	return nil
}

// UpdateAdapterState changes the text kept under name by change, which is
// given the text kept now (ok false when none was saved within maxAge, by
// the core's clock) and returns the text to keep. The write is a
// compare-and-set: when another process (a replica) wrote name in between,
// change is called again with what it wrote, so that no write is lost (a
// count each replica adds to). An error of change is returned as it is,
// with nothing written. It returns the text kept.
func (b *Bridge) UpdateAdapterState(ctx context.Context, name string, maxAge time.Duration, change func(text string, ok bool) (string, error)) (string, error) {
	for range adapterStateTries {
		cur, found, err := b.store.AdapterState(ctx, name)
		if err != nil {
			return "", fmt.Errorf("adapter state %s: %w", name, err)
		}
		now := b.cfg.Now()
		fresh := found && (maxAge <= 0 || now.Sub(cur.Updated) <= maxAge)
		text := cur.Text
		if !fresh {
			text = ""
		}
		next, err := change(text, fresh)
		if err != nil {
			return "", err
		}
		written, err := b.store.PutAdapterState(ctx, name, next, now, cur.Version)
		if err != nil {
			return "", fmt.Errorf("update adapter state %s: %w", name, err)
		}
		if written {
			return next, nil
		}
	}
	return "", fmt.Errorf("update adapter state %s: %w", name, errAdapterStateContended)
}
