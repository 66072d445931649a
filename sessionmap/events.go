package sessionmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// An event entry is the event ID mapped to a version byte and its expiry
// (timeKey). A second bucket indexes the same entries by expiry followed by
// ID, so purging reads only what has expired.
const eventV1 = 1

// MarkEvent records that the event id was delivered, to expire ttl after now,
// and reports whether this is its first delivery: false means id was seen
// before and has not expired, so the caller drops the event. An expired
// entry counts as new and is renewed. The check and the write are one
// transaction, so of two concurrent deliveries exactly one is first.
func (s *Store) MarkEvent(id string, ttl time.Duration, now time.Time) (first bool, err error) {
	if err := checkKey("event id", id); err != nil {
		return false, fmt.Errorf("mark event: %w", err)
	}
	if ttl <= 0 {
		return false, fmt.Errorf("mark event %q: ttl %v is not positive", id, ttl)
	}
	exp := now.Add(ttl)
	if now.Before(minNanoTime) || exp.After(maxNanoTime) {
		return false, fmt.Errorf("mark event %q: time %v out of range", id, now)
	}
	nowKey := timeKey(now)
	expKey := timeKey(exp)
	err = s.update(func(tx *bolt.Tx) error {
		var err error
		first, err = markEventTx(tx, id, nowKey, expKey)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("mark event %q: %w", id, err)
	}
	return first, nil
}

// MarkEvents records several event deliveries in one transaction (one fsync),
// for callers that decide first delivery themselves and persist in batches.
func (s *Store) MarkEvents(ids []string, ttl time.Duration, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if ttl <= 0 {
		return fmt.Errorf("mark events: ttl %v is not positive", ttl)
	}
	exp := now.Add(ttl)
	if now.Before(minNanoTime) || exp.After(maxNanoTime) {
		return fmt.Errorf("mark events: time %v out of range", now)
	}
	for _, id := range ids {
		if err := checkKey("event id", id); err != nil {
			return fmt.Errorf("mark events: %w", err)
		}
	}
	nowKey, expKey := timeKey(now), timeKey(exp)
	err := s.update(func(tx *bolt.Tx) error {
		for _, id := range ids {
			if _, err := markEventTx(tx, id, nowKey, expKey); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark %d events: %w", len(ids), err)
	}
	return nil
}

// EventSeen reports whether id was recorded and has not expired at now. It
// only reads, so it costs no fsync.
func (s *Store) EventSeen(id string, now time.Time) (bool, error) {
	nowKey := timeKey(now)
	var seen bool
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketEvents).Get([]byte(id))
		if v == nil {
			return nil
		}
		exp, err := decodeEvent(v)
		if err != nil {
			return err
		}
		seen = string(exp[:]) > string(nowKey[:])
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("event seen %q: %w", id, err)
	}
	return seen, nil
}

// markEventTx records id with expiry expKey unless it is already live at
// nowKey, and reports whether it was new (or expired).
func markEventTx(tx *bolt.Tx, id string, nowKey, expKey [8]byte) (bool, error) {
	events, index := tx.Bucket(bucketEvents), tx.Bucket(bucketEventExp)
	// The index is keyed by expiry, so it grows at its end: pages split
	// nearly full there instead of half full.
	index.FillPercent = 0.95
	k := []byte(id)
	if v := events.Get(k); v != nil {
		old, err := decodeEvent(v)
		if err != nil {
			return false, err
		}
		if string(old[:]) > string(nowKey[:]) {
			return false, nil // seen and still live
		}
		if err := index.Delete(indexKey(old, id)); err != nil {
			return false, err
		}
	} else if err := addCounter(tx, metaEvents, 1); err != nil {
		return false, err
	}
	if err := events.Put(k, append([]byte{eventV1}, expKey[:]...)); err != nil {
		return false, err
	}
	return true, index.Put(indexKey(expKey, id), nil)
}

// PurgeEvents removes the entries expired at now and returns how many. It
// deletes in chunks of short transactions, so it never holds the write lock
// for long.
func (s *Store) PurgeEvents(now time.Time) (int, error) {
	if now.Before(minNanoTime) || now.After(maxNanoTime) {
		return 0, fmt.Errorf("purge events: time %v out of range", now)
	}
	nowKey := timeKey(now)
	total := 0
	for {
		n, more := 0, false
		err := s.update(func(tx *bolt.Tx) error {
			n, more = 0, false
			events, index := tx.Bucket(bucketEvents), tx.Bucket(bucketEventExp)
			var expired [][]byte
			c := index.Cursor()
			for k, _ := c.First(); k != nil && len(k) >= 8 && string(k[:8]) <= string(nowKey[:]); k, _ = c.Next() {
				if len(expired) == s.chunk {
					more = true
					break
				}
				expired = append(expired, k) // valid until the txn ends
			}
			// Deleting after the walk: bbolt cursors can skip a key when the
			// bucket changes under them.
			for _, k := range expired {
				if err := index.Delete(k); err != nil {
					return err
				}
				id := k[8:]
				// A renewed event has a newer index entry; its main entry
				// then belongs to that one.
				if v := events.Get(id); v != nil {
					if exp, err := decodeEvent(v); err != nil || string(exp[:]) == string(k[:8]) {
						if err := events.Delete(id); err != nil {
							return err
						}
						n++
					}
				}
			}
			return addCounter(tx, metaEvents, -int64(n))
		})
		if err != nil {
			return total, fmt.Errorf("purge events: %w", err)
		}
		total += n
		if !more {
			return total, nil
		}
	}
}

func decodeEvent(v []byte) ([8]byte, error) {
	if len(v) != 9 || v[0] != eventV1 {
		return [8]byte{}, fmt.Errorf("%w: event record of %d bytes", errRecord, len(v))
	}
	return [8]byte(v[1:]), nil
}

func indexKey(exp [8]byte, id string) []byte {
	k := make([]byte, 0, 8+len(id))
	return append(append(k, exp[:]...), id...)
}

// timeKey encodes t's Unix nanoseconds so that byte order is time order,
// negative times included (the sign bit is flipped). t must lie between
// minNanoTime and maxNanoTime.
func timeKey(t time.Time) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(t.UnixNano())^(1<<63))
	return k
}

func keyTime(k []byte) (time.Time, error) {
	if len(k) < 8 {
		return time.Time{}, errors.New("time key too short")
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k)^(1<<63))), nil
}
