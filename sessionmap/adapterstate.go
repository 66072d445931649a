package sessionmap

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// An adapter state record (bucketAdapterStates, name -> record) is a
// version byte, the record's version (8 bytes, big-endian: the
// compare-and-set of PutAdapterState), the update time in Unix nanoseconds
// (8 bytes, big-endian), then the text; a forgotten state keeps its record
// with no text, so that its version is not reused.
const (
	adapterStateV1       = 1
	adapterStateHeader   = 1 + 8 + 8
	adapterStateMaxBytes = 64 << 10
)

func decodeAdapterState(v []byte) (store.AdapterState, error) {
	if len(v) < adapterStateHeader || v[0] != adapterStateV1 {
		return store.AdapterState{}, fmt.Errorf("%w: adapter state record of %d bytes", errRecord, len(v))
	}
	return store.AdapterState{
		Version: int64(binary.BigEndian.Uint64(v[1:9])),
		Updated: time.Unix(0, int64(binary.BigEndian.Uint64(v[9:adapterStateHeader]))),
		Text:    string(v[adapterStateHeader:]),
	}, nil
}

func appendAdapterState(dst []byte, s store.AdapterState) []byte {
	dst = append(dst, adapterStateV1)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Version))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Updated.UnixNano()))
	return append(dst, s.Text...)
}

// AdapterState returns the state kept under name; found is false when none
// is, s.Version being then the version to write over.
func (s *Store) AdapterState(ctx context.Context, name string) (st store.AdapterState, found bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketAdapterStates).Get([]byte(name))
		if v == nil {
			return nil
		}
		var err error
		st, err = decodeAdapterState(v)
		return err
	})
	if err != nil {
		return store.AdapterState{}, false, fmt.Errorf("adapter state %q: %w", name, err)
	}
	return st, st.Text != "", nil
}

// PutAdapterState writes text under name if the version kept is still want,
// in one transaction with the check; "" forgets the state.
func (s *Store) PutAdapterState(ctx context.Context, name, text string, updated time.Time, want int64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("put adapter state: %w", err)
	}
	if err := checkKey("adapter state name", name); err != nil {
		return false, fmt.Errorf("put adapter state: %w", err)
	}
	if len(text) > adapterStateMaxBytes {
		return false, fmt.Errorf("put adapter state %q: text of %d bytes exceeds %d", name, len(text), adapterStateMaxBytes)
	}
	if updated.IsZero() {
		return false, fmt.Errorf("put adapter state %q: %w", name, store.ErrNoTime)
	}
	var ok bool
	err := s.update(func(tx *bolt.Tx) error {
		ok = false
		b := tx.Bucket(bucketAdapterStates)
		var have int64
		if v := b.Get([]byte(name)); v != nil {
			cur, err := decodeAdapterState(v)
			if err != nil {
				return err
			}
			have = cur.Version
		}
		if have != want {
			return nil
		}
		ok = true
		return b.Put([]byte(name), appendAdapterState(nil, store.AdapterState{Text: text, Version: have + 1, Updated: updated}))
	})
	if err != nil {
		return false, fmt.Errorf("put adapter state %q: %w", name, err)
	}
	return ok, nil
}

// moveLegacyAdapterStates moves the adapter state a flowbridge before
// AdapterStates kept as context records, under keys starting with
// store.LegacyAdapterStatePrefix, to the adapter states, in tx. It runs at
// every open, so a store a flowbridge of before wrote to again (after a
// downgrade) is taken up too; the newer of a moved record and one already
// kept under its name wins. A damaged legacy record is dropped: it would
// have been refused when read, and the adapter starts afresh without it
// (a Discord shard identifies instead of resuming).
func moveLegacyAdapterStates(tx *bolt.Tx) error {
	contexts, states := tx.Bucket(bucketContexts), tx.Bucket(bucketAdapterStates)
	prefix := []byte(store.LegacyAdapterStatePrefix)
	var keys [][]byte
	c := contexts.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		v := contexts.Get(k)
		name := strings.TrimPrefix(string(k), store.LegacyAdapterStatePrefix)
		if len(v) > contextHeader && v[0] == contextV1 && name != "" {
			moved := store.AdapterState{
				Text:    string(v[contextHeader:]),
				Updated: time.Unix(0, int64(binary.BigEndian.Uint64(v[2:contextHeader]))),
			}
			if cur := states.Get([]byte(name)); cur != nil {
				kept, err := decodeAdapterState(cur)
				if err == nil && !moved.Updated.After(kept.Updated) {
					moved = store.AdapterState{} // the kept one is newer
				} else if err == nil {
					moved.Version = kept.Version
				}
			}
			if moved.Text != "" {
				moved.Version++
				if err := states.Put([]byte(name), appendAdapterState(nil, moved)); err != nil {
					return err
				}
			}
		}
		if err := contexts.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
