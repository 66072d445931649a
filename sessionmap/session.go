package sessionmap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/google/uuid"
)

// Session maps a conversation to an Agent session of the AI workspace. Its
// times survive a round trip through the Store to the nanosecond, and the
// zero time stays zero.
type Session = store.Session

// Session returns the session of the conversation key; ok is false when the
// conversation has none.
func (s *Store) Session(ctx context.Context, key string) (rec Session, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSessions).Get([]byte(key))
		if v == nil {
			return nil
		}
		rec, err = decodeSession(v)
		if err != nil {
			return err
		}
		rec.Key, ok = key, true
		return nil
	})
	if err != nil {
		return Session{}, false, fmt.Errorf("session %q: %w", key, err)
	}
	return rec, ok, nil
}

// PutSession stores rec under rec.Key, replacing any previous record.
func (s *Store) PutSession(ctx context.Context, rec Session) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put session: %w", err)
	}
	if err := checkKey("conversation key", rec.Key); err != nil {
		return fmt.Errorf("put session: %w", err)
	}
	v, err := appendSession(nil, rec)
	if err != nil {
		return fmt.Errorf("put session %q: %w", rec.Key, err)
	}
	err = s.update(func(tx *bolt.Tx) error { return putSessionTx(tx, rec.Key, v) })
	if err != nil {
		return fmt.Errorf("put session %q: %w", rec.Key, err)
	}
	return nil
}

// putSessionTx writes an encoded session record and keeps the count right.
func putSessionTx(tx *bolt.Tx, key string, v []byte) error {
	b := tx.Bucket(bucketSessions)
	b.FillPercent = sessionFill
	k := []byte(key)
	isNew := b.Get(k) == nil
	if err := b.Put(k, v); err != nil {
		return err
	}
	if isNew {
		return addCounter(tx, metaSessions, 1)
	}
	return nil
}

// DeleteSession forgets the session of the conversation key and reports
// whether there was one. The conversation's agent choice and last reply stay.
func (s *Store) DeleteSession(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("delete session %q: %w", key, err)
	}
	var found bool
	err := s.update(func(tx *bolt.Tx) error {
		found = false
		b := tx.Bucket(bucketSessions)
		k := []byte(key)
		if b.Get(k) == nil {
			return nil
		}
		found = true
		if err := b.Delete(k); err != nil {
			return err
		}
		return addCounter(tx, metaSessions, -1)
	})
	if err != nil {
		return false, fmt.Errorf("delete session %q: %w", key, err)
	}
	return found, nil
}

// ListSessions returns the sessions whose key starts with prefix ("" for
// all), sorted by key. A large listing is read in chunks of short
// transactions, so it is not one snapshot.
func (s *Store) ListSessions(ctx context.Context, prefix string) ([]Session, error) {
	var out []Session
	p := []byte(prefix)
	err := s.scan(bucketSessions, p,
		func(k []byte) bool { return bytes.HasPrefix(k, p) },
		func(k, v []byte) (bool, error) {
			rec, err := decodeSession(v)
			if err != nil {
				return false, fmt.Errorf("session %q: %w", k, err)
			}
			rec.Key = string(k)
			out = append(out, rec)
			return true, nil
		})
	if err != nil {
		return nil, fmt.Errorf("list sessions %q: %w", prefix, err)
	}
	return out, nil
}

// sessionFill is how full bbolt leaves a page it splits. Keys of a channel
// share a prefix and grow at its end (thread timestamps), so the left half
// of a split is rarely written again: bbolt's default of 0.5 leaves the file
// half empty. Measured with BenchmarkStore1M.
const sessionFill = 0.9

// Session record, format version 1:
//
//	version   byte (1)
//	flags     byte: flagUUID16, flagCreated, flagLastUsed
//	agent     uvarint length, bytes
//	session   16 bytes if flagUUID16, else uvarint length, bytes
//	created   varint Unix nanoseconds, if flagCreated
//	last used varint Unix nanoseconds, if flagLastUsed
//
// A canonical lower-case UUID is stored as its 16 bytes, which saves 20 bytes
// a record; any other session ID is stored as given. Absent times are zero.
const (
	sessionV1 = 1

	flagUUID16   = 1 << 0
	flagCreated  = 1 << 1
	flagLastUsed = 1 << 2
	flagsKnown   = flagUUID16 | flagCreated | flagLastUsed
)

// errRecord is wrapped by every decoding failure; it itself wraps
// ErrCorrupt.
var errRecord = fmt.Errorf("%w: bad record", ErrCorrupt)

// minNanoTime and maxNanoTime bound the times a record can hold (years 1678
// to 2262): Unix nanoseconds outside them do not fit an int64.
var (
	minNanoTime = time.Unix(0, math.MinInt64)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

func appendSession(dst []byte, rec Session) ([]byte, error) {
	var flags byte
	uuid, isUUID := parseUUID(rec.SessionUUID)
	if isUUID {
		flags |= flagUUID16
	}
	if !rec.Created.IsZero() {
		flags |= flagCreated
	}
	if !rec.LastUsed.IsZero() {
		flags |= flagLastUsed
	}
	// One allocation for the record, its varints counted at their longest.
	dst = slices.Grow(dst, 2+4*binary.MaxVarintLen64+len(rec.Agent)+len(rec.SessionUUID))
	dst = append(dst, sessionV1, flags)
	dst = binary.AppendUvarint(dst, uint64(len(rec.Agent)))
	dst = append(dst, rec.Agent...)
	if isUUID {
		dst = append(dst, uuid[:]...)
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(rec.SessionUUID)))
		dst = append(dst, rec.SessionUUID...)
	}
	for _, t := range []struct {
		name string
		t    time.Time
	}{{"created", rec.Created}, {"last used", rec.LastUsed}} {
		if t.t.IsZero() {
			continue
		}
		if t.t.Before(minNanoTime) || t.t.After(maxNanoTime) {
			return nil, fmt.Errorf("%s time %v out of range", t.name, t.t)
		}
		dst = binary.AppendVarint(dst, t.t.UnixNano())
	}
	return dst, nil
}

// decodeSession decodes a record, copying every byte out of v (which may be
// bbolt's memory). Key is left empty.
func decodeSession(v []byte) (Session, error) {
	d := decoder{b: v}
	var rec Session
	if ver := d.byte(); d.err == nil && ver != sessionV1 {
		return Session{}, fmt.Errorf("%w: session record version %d", errRecord, ver)
	}
	flags := d.byte()
	if d.err == nil && flags&^flagsKnown != 0 {
		return Session{}, fmt.Errorf("%w: session record flags %#x", errRecord, flags)
	}
	rec.Agent = d.string()
	if flags&flagUUID16 != 0 {
		if b := d.bytes(16); b != nil {
			rec.SessionUUID = formatUUID([16]byte(b))
		}
	} else {
		rec.SessionUUID = d.string()
	}
	if flags&flagCreated != 0 {
		rec.Created = time.Unix(0, d.varint())
	}
	if flags&flagLastUsed != 0 {
		rec.LastUsed = time.Unix(0, d.varint())
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return Session{}, fmt.Errorf("%w: session record: %w", errRecord, d.err)
	}
	return rec, nil
}

// decoder reads a record front to back; the first failure sticks and later
// reads return zero values.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("record too short")

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errShort
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if uint64(len(d.b)) < n {
		d.err = errShort
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

// lenBytes reads a uvarint length and that many bytes, not copied.
func (d *decoder) lenBytes() []byte {
	if d.err != nil {
		return nil
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = errors.New("bad length")
		return nil
	}
	d.b = d.b[k:]
	return d.bytes(n)
}

func (d *decoder) string() string {
	return string(d.lenBytes())
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	n, k := binary.Varint(d.b)
	if k <= 0 {
		d.err = errors.New("bad number")
		return 0
	}
	d.b = d.b[k:]
	return n
}

// parseUUID reports whether s is a UUID in canonical lower-case form, the
// only form the compact encoding gives back exactly (uuid.Parse also accepts
// upper case, braces and URNs, which must be stored as text).
func parseUUID(s string) ([16]byte, bool) {
	u, err := uuid.Parse(s)
	if err != nil || u.String() != s {
		return [16]byte{}, false
	}
	return u, true
}

func formatUUID(u [16]byte) string { return uuid.UUID(u).String() }
