package sessionmap

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
)

// De-duplication entries are kept in generations: the nested buckets of
// bucketDedupe, each named by the timeKey of the moment all its entries
// expire. An entry is the first eventKeyLen bytes of the SHA-256 of the
// event ID (fixed length, and the same in every process) with an empty
// value, and lives in the generation of its expiry, now+ttl rounded up to
// a multiple of eventSlot(ttl). Purging deletes whole expired generations,
// which frees their pages in one go, so entries are never deleted one by
// one and no expiry index is needed. Each generation's bucket sequence
// counts its entries, so the Stats counter is kept without walking pages.
//
// Format 1 stored every entry twice under the raw ID (by ID, and by expiry
// for purging), and scattered deletes left the pages of both part empty.
// BenchmarkEventFileSize, at 1,000 events a second with a 10-minute ttl,
// measured 155 bytes of data per live event for it and 57 for this layout
// (32 of them bbolt's: a 16-byte leaf element and the 16-byte key).
const eventKeyLen = 16 // collision odds for a million live IDs: below 2^-88

// eventFill is the fill percent of the generation buckets. Their keys are
// hashes, so inserts land in random order, and a page is split whenever it
// overflows. Splitting it in halves, bbolt's default, gives the smallest
// file: a higher fill leaves the second part of a split with a narrow key
// range that few later keys fall in. BenchmarkEventFileSize measured
// 57 bytes per live event at 0.5, 58-59 at 0.4 and 0.6, 65 at 0.7,
// 115 at 0.9 and 405 at 1.0.
const eventFill = 0.5

// noValue is the value of every entry. It is not nil: bbolt hands back a
// nil value for a nested bucket too, which hasEvent then has to rule out.
var noValue = []byte{}

// eventSlot is the width of the slots expiries are rounded up to for ttl:
// an eighth of ttl, and at least a second. An entry thus lives less than
// one slot longer than ttl, never shorter. A lookup visits every live
// generation; with one ttl in use they expire within ttl+slot of now, so
// there are at most ceil(ttl/slot)+1 of them: 10 (8 or 9 in practice).
// Narrower slots would keep entries closer to their ttl but cost more
// lookups; the width is not rounded to whole seconds, which would allow up
// to 16 generations for ttls between 8 and 16 seconds.
func eventSlot(ttl time.Duration) time.Duration {
	return max(ttl/8, time.Second)
}

// generationKey returns the name of the generation of an entry marked at
// now to expire ttl later: the timeKey of now+ttl rounded up to a multiple
// of eventSlot(ttl) counted from the Unix epoch, so that entries marked
// around the same time with the same ttl share a generation.
func generationKey(now time.Time, ttl time.Duration) ([8]byte, error) {
	exp := now.Add(ttl)
	if now.Before(minNanoTime) || exp.After(maxNanoTime) {
		return [8]byte{}, fmt.Errorf("time %v out of range", now)
	}
	ns, slot := exp.UnixNano(), int64(eventSlot(ttl))
	switch r := ns % slot; {
	case r > 0:
		if ns > math.MaxInt64-(slot-r) {
			return [8]byte{}, fmt.Errorf("time %v out of range", now)
		}
		ns += slot - r
	case r < 0: // before 1970, truncation toward zero rounds up
		ns -= r
	}
	return timeKey(time.Unix(0, ns)), nil
}

// eventKey is the key of the event id in its generation.
func eventKey(id string) [eventKeyLen]byte {
	sum := sha256.Sum256([]byte(id))
	return [eventKeyLen]byte(sum[:eventKeyLen])
}

// MarkEvent records that the event id was delivered, to expire ttl after now,
// and reports whether this is its first delivery: false means id was seen
// before and has not expired, so the caller drops the event. An expired
// entry counts as new, and the ID gets a new entry. The check and the write
// are one transaction, so of two concurrent deliveries exactly one is
// first.
//
// The entry may outlive ttl by less than an eighth of it (or a second, for
// ttls under 8 s), never expire sooner: expiries are rounded up so that
// entries marked close together share a generation, purged as a whole.
func (s *Store) MarkEvent(id string, ttl time.Duration, now time.Time) (first bool, err error) {
	if err := checkKey("event id", id); err != nil {
		return false, fmt.Errorf("mark event: %w", err)
	}
	if ttl <= 0 {
		return false, fmt.Errorf("mark event %q: ttl %v is not positive", id, ttl)
	}
	gen, err := generationKey(now, ttl)
	if err != nil {
		return false, fmt.Errorf("mark event %q: %w", id, err)
	}
	key := eventKey(id)
	err = s.update(func(tx *bolt.Tx) error {
		m, err := newMarker(tx, timeKey(now), gen)
		if err != nil {
			return err
		}
		if first, err = m.mark(key[:]); err != nil {
			return err
		}
		return m.finish()
	})
	if err != nil {
		return false, fmt.Errorf("mark event %q: %w", id, err)
	}
	return first, nil
}

// MarkEvents records several event deliveries in one transaction (one fsync),
// for callers that decide first delivery themselves and persist in batches.
// An ID already recorded and live at now keeps its entry and expiry.
func (s *Store) MarkEvents(ids []string, ttl time.Duration, now time.Time) error {
	return s.markBatch("mark events", ids, ttl, now, true)
}

// AddEvents records event IDs its caller already knows to be first
// deliveries, in one transaction. Unlike MarkEvents it looks only in the
// generation the IDs go to, not in every live one, which under load was most
// of the batch's cost. An ID live in another generation thus gains a second
// entry: it stays seen until the later expiry, and Stats counts it twice
// until the older entry is purged.
func (s *Store) AddEvents(ids []string, ttl time.Duration, now time.Time) error {
	return s.markBatch("add events", ids, ttl, now, false)
}

func (s *Store) markBatch(op string, ids []string, ttl time.Duration, now time.Time, checkLive bool) error {
	if len(ids) == 0 {
		return nil
	}
	if ttl <= 0 {
		return fmt.Errorf("%s: ttl %v is not positive", op, ttl)
	}
	gen, err := generationKey(now, ttl)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	keys := make([][eventKeyLen]byte, len(ids))
	for i, id := range ids {
		if err := checkKey("event id", id); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		keys[i] = eventKey(id)
	}
	err = s.update(func(tx *bolt.Tx) error {
		var m *marker
		if checkLive {
			var err error
			if m, err = newMarker(tx, timeKey(now), gen); err != nil {
				return err
			}
		} else {
			m = newTargetMarker(tx, gen)
		}
		for i := range keys {
			if _, err := m.mark(keys[i][:]); err != nil {
				return fmt.Errorf("event %q: %w", ids[i], err)
			}
		}
		return m.finish()
	})
	if err != nil {
		return fmt.Errorf("%s (%d): %w", op, len(ids), err)
	}
	return nil
}

// EventSeen reports whether id was recorded and has not expired at now. It
// only reads, so it costs no fsync; it looks the ID up in each live
// generation.
func (s *Store) EventSeen(id string, now time.Time) (bool, error) {
	nowKey, key := timeKey(now), eventKey(id)
	var seen bool
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		seen, err = eachLiveGeneration(tx.Bucket(bucketDedupe), nowKey, func(gen *bolt.Bucket) (bool, error) {
			return hasEvent(gen, key[:])
		})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("event seen %q: %w", id, err)
	}
	return seen, nil
}

// eachLiveGeneration calls fn on each generation of dd that expires after
// nowKey, newest first (a repeat is most often of a recent event), until fn
// returns true, and returns whether one did.
func eachLiveGeneration(dd *bolt.Bucket, nowKey [8]byte, fn func(gen *bolt.Bucket) (bool, error)) (bool, error) {
	c := dd.Cursor()
	for k, _ := c.Last(); k != nil && bytes.Compare(k, nowKey[:]) > 0; k, _ = c.Prev() {
		gen := dd.Bucket(k)
		if gen == nil || len(k) != 8 {
			return false, fmt.Errorf("%w: de-duplication generation %x is not a bucket", errRecord, k)
		}
		if done, err := fn(gen); done || err != nil {
			return done, err
		}
	}
	return false, nil
}

// hasEvent reports whether gen holds key.
func hasEvent(gen *bolt.Bucket, key []byte) (bool, error) {
	k, v := gen.Cursor().Seek(key)
	if !bytes.Equal(k, key) {
		return false, nil
	}
	// bbolt gives a nil value for a nested bucket, and may for an empty one.
	if len(v) != 0 || v == nil && gen.Bucket(k) != nil {
		return false, fmt.Errorf("%w: event record of %d bytes", errRecord, len(v))
	}
	return true, nil
}

// marker records events in one write transaction.
type marker struct {
	tx     *bolt.Tx
	gens   []*bolt.Bucket // live at now, newest first, then target once created
	dd     *bolt.Bucket
	genKey [8]byte
	target *bolt.Bucket // the generation of genKey, once looked up
	added  uint64       // entries put into target
}

// newMarker prepares to record events at nowKey into the generation genKey,
// which expires after nowKey.
func newMarker(tx *bolt.Tx, nowKey, genKey [8]byte) (*marker, error) {
	m := &marker{tx: tx, dd: tx.Bucket(bucketDedupe), genKey: genKey}
	_, err := eachLiveGeneration(m.dd, nowKey, func(gen *bolt.Bucket) (bool, error) {
		m.gens = append(m.gens, gen)
		return false, nil
	})
	return m, err
}

// newTargetMarker prepares to record events into the generation genKey,
// looking for them there only.
func newTargetMarker(tx *bolt.Tx, genKey [8]byte) *marker {
	m := &marker{tx: tx, dd: tx.Bucket(bucketDedupe), genKey: genKey}
	if gen := m.dd.Bucket(genKey[:]); gen != nil {
		m.gens = append(m.gens, gen)
	}
	return m
}

// mark records key unless a live generation holds it, and reports whether
// it was new (or had expired).
func (m *marker) mark(key []byte) (bool, error) {
	for _, gen := range m.gens {
		if found, err := hasEvent(gen, key); found || err != nil {
			return false, err
		}
	}
	if m.target == nil {
		// The generation expires after now, so if it exists it is among
		// m.gens; a new one joins them for the rest of the batch.
		gen := m.dd.Bucket(m.genKey[:])
		if gen == nil {
			var err error
			if gen, err = m.dd.CreateBucket(m.genKey[:]); err != nil {
				return false, fmt.Errorf("create de-duplication generation: %w", err)
			}
			m.gens = append(m.gens, gen)
		}
		gen.FillPercent = eventFill
		m.target = gen
	}
	if err := m.target.Put(key, noValue); err != nil {
		return false, err
	}
	m.added++
	return true, nil
}

// finish updates the counters for the entries added.
func (m *marker) finish() error {
	if m.added == 0 {
		return nil
	}
	if err := m.target.SetSequence(m.target.Sequence() + m.added); err != nil {
		return err
	}
	return addCounter(m.tx, metaEvents, int64(m.added))
}

// PurgeEvents removes the entries expired at now and returns how many:
// the generations whose expiry is at or before now, each deleted as a whole
// (bbolt frees its pages without visiting its entries one by one). Each
// transaction deletes at least one generation and stops adding more once
// s.chunk entries are gone, so it never holds the write lock for long.
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
			dd := tx.Bucket(bucketDedupe)
			var expired [][]byte
			var entries uint64
			c := dd.Cursor()
			for k, _ := c.First(); k != nil && bytes.Compare(k, nowKey[:]) <= 0; k, _ = c.Next() {
				if len(expired) > 0 && entries >= uint64(s.chunk) {
					more = true
					break
				}
				expired = append(expired, bytes.Clone(k))
				if gen := dd.Bucket(k); gen != nil {
					entries += gen.Sequence()
				}
			}
			// Deleting after the walk: bbolt cursors can skip a key when the
			// bucket changes under them.
			for _, k := range expired {
				gen := dd.Bucket(k)
				if gen == nil {
					// Not a generation (damage): expired all the same.
					if err := dd.Delete(k); err != nil {
						return err
					}
					continue
				}
				n += int(gen.Sequence())
				if err := dd.DeleteBucket(k); err != nil {
					return fmt.Errorf("delete generation %x: %w", k, err)
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

// countEvents sums the entry counts of the generations in dd, to rebuild
// the Stats counter.
func countEvents(dd *bolt.Bucket) int64 {
	var n int64
	c := dd.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if gen := dd.Bucket(k); gen != nil {
			n += int64(gen.Sequence())
		}
	}
	return n
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
