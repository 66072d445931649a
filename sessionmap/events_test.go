package sessionmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// putRawEvent writes the entry of id with value v straight into the
// generation expiring at exp, bypassing MarkEvent (and the counters).
func putRawEvent(t testing.TB, s *Store, id string, exp time.Time, v []byte) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		name := timeKey(exp)
		gen, err := tx.Bucket(bucketDedupe).CreateBucketIfNotExists(name[:])
		if err != nil {
			return err
		}
		k := eventKey(id)
		return gen.Put(k[:], v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// generations walks the store's generations and returns, by expiry, how
// many keys each holds, checking that its recorded count agrees.
func generations(t testing.TB, s *Store) map[time.Time]int {
	t.Helper()
	gens := make(map[time.Time]int)
	err := s.db.View(func(tx *bolt.Tx) error {
		dd := tx.Bucket(bucketDedupe)
		return dd.ForEach(func(k, _ []byte) error {
			gen := dd.Bucket(k)
			if gen == nil || len(k) != 8 {
				return fmt.Errorf("entry %x of %s is not a generation", k, bucketDedupe)
			}
			n := 0
			err := gen.ForEach(func(k, v []byte) error {
				if len(k) != eventKeyLen || len(v) != 0 {
					return fmt.Errorf("generation entry %x = %x", k, v)
				}
				n++
				return nil
			})
			if err != nil {
				return err
			}
			exp, _ := keyTime(k)
			if gen.Sequence() != uint64(n) {
				return fmt.Errorf("generation %v counts %d entries, holds %d", exp, gen.Sequence(), n)
			}
			gens[exp.UTC()] = n
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return gens
}

// checkEventCount checks that Stats().Events is the number of entries held
// and returns it.
func checkEventCount(t testing.TB, s *Store) int {
	t.Helper()
	n := 0
	for _, c := range generations(t, s) {
		n += c
	}
	if got := s.Stats().Events; got != int64(n) {
		t.Errorf("Stats().Events = %d, but the generations hold %d entries", got, n)
	}
	return n
}

func TestMarkEvent(t *testing.T) {
	s, _ := openTest(t, Options{})
	// t0 is on a slot boundary (75 s for this ttl), so entries marked at t0
	// expire exactly ttl later.
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ttl := 10 * time.Minute
	steps := []struct {
		name string
		id   string
		at   time.Time
		want bool
	}{
		{"first delivery", "Ev1", t0, true},
		{"retry", "Ev1", t0.Add(time.Second), false},
		{"other event", "Ev2", t0.Add(time.Second), true},
		{"just before expiry", "Ev1", t0.Add(ttl - time.Nanosecond), false},
		{"at expiry", "Ev1", t0.Add(ttl), true},
		{"renewed by the expired delivery", "Ev1", t0.Add(ttl + time.Minute), false},
		{"clock behind", "Ev2", t0.Add(-time.Hour), false},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			got, err := s.MarkEvent(st.id, ttl, st.at)
			if err != nil || got != st.want {
				t.Errorf("MarkEvent(%q, %v, %v) = %v, %v, want %v, nil", st.id, ttl, st.at, got, err, st.want)
			}
		})
	}
	// The expired entry of Ev1 is counted until purged.
	if got := s.Stats().Events; got != 3 {
		t.Errorf("Stats().Events = %d, want 3", got)
	}
	if gone, err := s.PurgeEvents(t0.Add(ttl)); err != nil || gone != 1 {
		t.Errorf("PurgeEvents(t0+ttl) = %d, %v, want 1, nil", gone, err)
	}
	if got := s.Stats().Events; got != 2 {
		t.Errorf("Stats().Events after purge = %d, want 2", got)
	}

	for _, tt := range []struct {
		name string
		id   string
		ttl  time.Duration
		at   time.Time
	}{
		{"empty id", "", time.Minute, t0},
		{"id too long", strings.Repeat("x", bolt.MaxKeySize+1), time.Minute, t0},
		{"zero ttl", "x", 0, t0},
		{"negative ttl", "x", -time.Second, t0},
		{"expiry out of range", "x", time.Hour, maxNanoTime.Add(-time.Minute)},
		{"rounded expiry out of range", "x", 16 * time.Second, maxNanoTime.Add(-16 * time.Second)},
		{"before 1678", "x", time.Hour, minNanoTime.Add(-time.Hour)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := s.MarkEvent(tt.id, tt.ttl, tt.at); err == nil {
				t.Errorf("MarkEvent(%.20q, %v, %v) = %v, nil, want an error", tt.id, tt.ttl, tt.at, got)
			}
			if err := s.MarkEvents([]string{tt.id}, tt.ttl, tt.at); err == nil {
				t.Errorf("MarkEvents([%.20q], %v, %v) = nil, want an error", tt.id, tt.ttl, tt.at)
			}
		})
	}
	checkEventCount(t, s)
}

func TestMarkEventConcurrentDeliveries(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	now := time.Now()
	var firsts atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			first, err := s.MarkEvent("Ev-dup", time.Minute, now)
			if err != nil {
				t.Error(err)
			}
			if first {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	if got := firsts.Load(); got != 1 {
		t.Errorf("16 concurrent MarkEvent of one id gave %d firsts, want 1", got)
	}
	if got := checkEventCount(t, s); got != 1 {
		t.Errorf("entries after 16 deliveries of one id = %d, want 1", got)
	}
}

func TestPurgeEvents(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// With this ttl the slots are a second wide. Event i is marked at
	// t0 + i/4 s - ttl, so it expires in the generation of t0 + ceil(i/4) s:
	// four events a generation (one at t0).
	const ttl = 8 * time.Second
	// More entries than one purge transaction handles.
	s.chunk = 6
	const n = 4*10 + 1
	for i := range n {
		if first, err := s.MarkEvent(fmt.Sprintf("Ev%05d", i), ttl, t0.Add(time.Duration(i)*time.Second/4-ttl)); err != nil || !first {
			t.Fatalf("MarkEvent(%d) = %v, %v", i, first, err)
		}
	}
	if gens := generations(t, s); len(gens) != 11 || gens[t0] != 1 || gens[t0.Add(time.Second)] != 4 {
		t.Fatalf("generations = %v, want 11: one at t0, then four a second", gens)
	}
	// Renewing an expired entry makes a new one; the old one stays until
	// its generation is purged.
	if first, err := s.MarkEvent("Ev00000", time.Hour, t0.Add(time.Second)); err != nil || !first {
		t.Fatalf("MarkEvent(renew) = %v, %v, want true, nil", first, err)
	}

	steps := []struct {
		at        time.Time
		wantGone  int
		wantLeft  int64
		liveID    string
		expiredID string
	}{
		{t0.Add(-time.Hour), 0, n + 1, "Ev00001", ""},
		{t0.Add(5 * time.Second), 21, n + 1 - 21, "Ev00021", "Ev00020"},
		{t0.Add(5*time.Second + time.Millisecond), 0, n + 1 - 21, "Ev00040", ""},
		{t0.Add(2 * time.Hour), n + 1 - 21, 0, "", "Ev00000"},
	}
	for _, st := range steps {
		gone, err := s.PurgeEvents(st.at)
		if err != nil || gone != st.wantGone {
			t.Fatalf("PurgeEvents(%v) = %d, %v, want %d, nil", st.at, gone, err, st.wantGone)
		}
		if got := s.Stats().Events; got != st.wantLeft {
			t.Errorf("Stats().Events after PurgeEvents(%v) = %d, want %d", st.at, got, st.wantLeft)
		}
		for exp := range generations(t, s) {
			if !exp.After(st.at) {
				t.Errorf("generation %v left after PurgeEvents(%v)", exp, st.at)
			}
		}
		// A purged id is new again; a live one is still a duplicate.
		if st.liveID != "" {
			if first, err := s.MarkEvent(st.liveID, time.Nanosecond, st.at); err != nil || first {
				t.Errorf("MarkEvent(%q) after purge at %v = %v, %v, want false (still live)", st.liveID, st.at, first, err)
			}
		}
		if st.expiredID != "" {
			if first, err := s.MarkEvent(st.expiredID, time.Nanosecond, st.at.Add(-time.Hour)); err != nil || !first {
				t.Errorf("MarkEvent(%q) after purge at %v = %v, %v, want true (purged)", st.expiredID, st.at, first, err)
			}
			// Leave the store as it was: remove the entry just made.
			if gone, err := s.PurgeEvents(st.at); err != nil || gone != 1 {
				t.Fatalf("PurgeEvents(%v) after a mark = %d, %v, want 1", st.at, gone, err)
			}
		}
	}
}

func TestMarkEventsAndEventSeen(t *testing.T) {
	s, _ := openTest(t, Options{})
	now := time.Unix(1700000000, 0)
	ttl := time.Minute
	if err := s.MarkEvents([]string{"a", "b", "a"}, ttl, now); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		at   time.Time
		want bool
	}{
		{"a", now, true},
		{"b", now.Add(59 * time.Second), true},
		{"b", now.Add(ttl - time.Nanosecond), true},
		{"b", now.Add(ttl + eventSlot(ttl)), false},
		{"c", now, false},
	} {
		if got, err := s.EventSeen(tc.id, tc.at); err != nil || got != tc.want {
			t.Errorf("EventSeen(%q, +%v) = %v, %v; want %v", tc.id, tc.at.Sub(now), got, err, tc.want)
		}
	}
	if st := s.Stats(); st.Events != 2 {
		t.Errorf("Stats().Events = %d, want 2", st.Events)
	}
	if first, err := s.MarkEvent("a", ttl, now); err != nil || first {
		t.Errorf("MarkEvent after MarkEvents = %v, %v; want a repeat", first, err)
	}
	// A batch with a live ID keeps its entry and adds the others.
	if err := s.MarkEvents([]string{"a", "c"}, time.Hour, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.EventSeen("a", now.Add(ttl+eventSlot(ttl))); err != nil || got {
		t.Errorf("EventSeen(a) after its expiry = %v, %v; want false: a live entry is not renewed", got, err)
	}
	if got, err := s.EventSeen("c", now.Add(time.Hour)); err != nil || !got {
		t.Errorf("EventSeen(c) within its hour = %v, %v; want true", got, err)
	}
	if err := s.MarkEvents([]string{""}, ttl, now); err == nil {
		t.Error("MarkEvents accepted an empty id")
	}
	if got := checkEventCount(t, s); got != 3 {
		t.Errorf("entries = %d, want 3", got)
	}
}

func TestEventSlot(t *testing.T) {
	for _, tt := range []struct {
		ttl, want time.Duration
	}{
		{time.Nanosecond, time.Second},
		{time.Second, time.Second},
		{8 * time.Second, time.Second},
		{12 * time.Second, 1500 * time.Millisecond},
		{10 * time.Minute, 75 * time.Second},
		{24 * time.Hour, 3 * time.Hour},
	} {
		if got := eventSlot(tt.ttl); got != tt.want {
			t.Errorf("eventSlot(%v) = %v, want %v", tt.ttl, got, tt.want)
		}
	}
}

// TestEventNeverExpiresEarly marks events at and around slot boundaries and
// checks each stays seen (and survives purges) until ttl has passed, and is
// gone one slot later.
func TestEventNeverExpiresEarly(t *testing.T) {
	ttls := []time.Duration{time.Nanosecond, 300 * time.Millisecond, time.Second, 7 * time.Second, 8 * time.Second, 9 * time.Second, 13 * time.Second, time.Minute, 10 * time.Minute, 25 * time.Hour}
	bases := []time.Time{
		time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).Add(-time.Nanosecond),
		time.Date(1960, 6, 1, 0, 0, 0, 0, time.UTC), // negative Unix times
		time.Unix(0, 0),
	}
	for _, ttl := range ttls {
		t.Run(ttl.String(), func(t *testing.T) {
			s, _ := openTest(t, Options{NoSync: true})
			slot := eventSlot(ttl)
			i := 0
			for _, base := range bases {
				// A slot boundary near base, and times such that now+ttl
				// falls on, just before and just after a boundary.
				b := time.Unix(0, base.UnixNano()/int64(slot)*int64(slot))
				for _, off := range []time.Duration{-slot, -slot / 2, -time.Nanosecond, 0, time.Nanosecond, slot / 3, slot - time.Nanosecond} {
					now := b.Add(off - ttl)
					i++
					id := fmt.Sprintf("ev%d", i)
					if first, err := s.MarkEvent(id, ttl, now); err != nil || !first {
						t.Fatalf("MarkEvent(%s, %v) = %v, %v, want true", id, now, first, err)
					}
					last := now.Add(ttl - time.Nanosecond)
					if _, err := s.PurgeEvents(last); err != nil {
						t.Fatal(err)
					}
					for _, at := range []time.Time{now, now.Add(ttl / 2), last} {
						if seen, err := s.EventSeen(id, at); err != nil || !seen {
							t.Errorf("EventSeen(%s) marked at %v, at +%v = %v, %v, want true", id, now, at.Sub(now), seen, err)
						}
					}
					if first, err := s.MarkEvent(id, ttl, last); err != nil || first {
						t.Errorf("MarkEvent(%s) marked at %v, again at +%v = %v, %v, want false", id, now, last.Sub(now), first, err)
					}
					late := now.Add(ttl + slot)
					if seen, err := s.EventSeen(id, late); err != nil || seen {
						t.Errorf("EventSeen(%s) marked at %v, at +%v = %v, %v, want false", id, now, late.Sub(now), seen, err)
					}
					before := s.Stats().Events
					if gone, err := s.PurgeEvents(late); err != nil || gone < 1 || s.Stats().Events != before-int64(gone) {
						t.Errorf("PurgeEvents(+ttl+slot) = %d, %v with %d entries before, %d after; want the entry gone", gone, err, before, s.Stats().Events)
					}
				}
			}
			checkEventCount(t, s)
		})
	}
}

// TestPurgeDropsWholeGenerations mixes marks, repeats and purges and
// checks that each purge removes exactly the generations expired by then,
// leaving the others as they were, and that the counter follows.
func TestPurgeDropsWholeGenerations(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	s.chunk = 50
	rng := rand.New(rand.NewPCG(7, 8))
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	const ttl = time.Minute // slots of 7.5 s
	next := 0
	for round := range 40 {
		now = now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		ids := make([]string, 1+rng.IntN(30))
		for i := range ids {
			if next > 0 && rng.IntN(4) == 0 {
				ids[i] = fmt.Sprintf("ev%d", rng.IntN(next)) // a repeat, live or not
			} else {
				ids[i] = fmt.Sprintf("ev%d", next)
				next++
			}
		}
		if round%2 == 0 {
			if err := s.MarkEvents(ids, ttl, now); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, id := range ids {
				if _, err := s.MarkEvent(id, ttl, now); err != nil {
					t.Fatal(err)
				}
			}
		}
		checkEventCount(t, s)
		if round%3 != 2 {
			continue
		}
		before := generations(t, s)
		at := now.Add(time.Duration(rng.IntN(30)) * time.Second)
		gone, err := s.PurgeEvents(at)
		if err != nil {
			t.Fatal(err)
		}
		after := generations(t, s)
		want := 0
		for exp, n := range before {
			switch {
			case !exp.After(at):
				want += n
				if _, ok := after[exp]; ok {
					t.Errorf("PurgeEvents(%v) left generation %v", at, exp)
				}
			case after[exp] != n:
				t.Errorf("PurgeEvents(%v) changed live generation %v: %d entries, was %d", at, exp, after[exp], n)
			}
		}
		if gone != want {
			t.Errorf("PurgeEvents(%v) = %d, want %d (the entries of the expired generations)", at, gone, want)
		}
		checkEventCount(t, s)
	}
	if gone, err := s.PurgeEvents(now.Add(ttl + eventSlot(ttl))); err != nil || s.Stats().Events != 0 || len(generations(t, s)) != 0 {
		t.Errorf("final PurgeEvents = %d, %v, left %d entries, want none", gone, err, s.Stats().Events)
	}
}

// writeV1Store writes a store in format 1's layout, as flowbridge before
// format 2 left it: a session, two de-duplication entries (each in the
// events bucket and its expiry index) and the counters.
func writeV1Store(t *testing.T, path string, rec Session, exp time.Time) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	type put struct {
		bucket string
		k, v   []byte
	}
	err = db.Update(func(tx *bolt.Tx) error {
		bk := map[string]*bolt.Bucket{}
		for _, name := range []string{"meta", "sessions", "agents", "replies", "events", "events_by_expiry", "audit"} {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			bk[name] = b
		}
		v, err := appendSession(nil, rec)
		if err != nil {
			return err
		}
		expKey := timeKey(exp)
		puts := []put{
			{"meta", []byte("format"), encodeCounter(1)},
			{"meta", []byte("n_sessions"), encodeCounter(1)},
			{"meta", []byte("n_events"), encodeCounter(2)},
			{"meta", []byte("n_audit"), encodeCounter(0)},
			{"sessions", []byte(rec.Key), v},
			{"agents", []byte(rec.Key), []byte{1, 'o', 'p', 's'}},
		}
		for _, id := range []string{"Ev1", "Ev2"} {
			puts = append(puts,
				put{"events", []byte(id), append([]byte{1}, expKey[:]...)},
				put{"events_by_expiry", append(expKey[:], id...), nil})
		}
		for _, p := range puts {
			if err := bk[p.bucket].Put(p.k, p.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenUpgradesFormat1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flowbridge.db")
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := Session{Key: "slack/T1/C1/1.2", Agent: "helper", SessionUUID: testUUID(1), Created: now, LastUsed: now}
	writeV1Store(t, path, rec, now.Add(time.Hour))

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open of a format 1 store = %v", err)
	}
	if got, ok, err := s.Session(rec.Key); err != nil || !ok || !sameSession(got, rec) {
		t.Errorf("Session after upgrade = %+v, %v, %v, want %+v", got, ok, err, rec)
	}
	if got, ok, err := s.ConversationAgent(rec.Key); err != nil || !ok || got != "ops" {
		t.Errorf("ConversationAgent after upgrade = %q, %v, %v, want ops", got, ok, err)
	}
	// The old entries are dropped: the IDs are new again.
	if seen, err := s.EventSeen("Ev1", now); err != nil || seen {
		t.Errorf("EventSeen(Ev1) after upgrade = %v, %v, want false (dropped)", seen, err)
	}
	if st := s.Stats(); st.Sessions != 1 || st.Events != 0 {
		t.Errorf("Stats() after upgrade = %+v, want 1 session and 0 events", st)
	}
	if first, err := s.MarkEvent("Ev2", time.Minute, now); err != nil || !first {
		t.Errorf("MarkEvent(Ev2) after upgrade = %v, %v, want true", first, err)
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check() after upgrade = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The upgrade was written: the file is format 2 without the old buckets.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		if v, err := decodeCounter(tx.Bucket(bucketMeta).Get(metaFormat)); err != nil || v != 2 {
			t.Errorf("format after upgrade = %d, %v, want 2", v, err)
		}
		for _, name := range v1EventBuckets {
			if tx.Bucket(name) != nil {
				t.Errorf("bucket %s kept after upgrade", name)
			}
		}
		if tx.Bucket(bucketDedupe) == nil {
			t.Errorf("no %s bucket after upgrade", bucketDedupe)
		}
		return nil
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}

	// And it opens again as format 2, keeping what was written since.
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen after upgrade = %v", err)
	}
	defer s.Close()
	if seen, err := s.EventSeen("Ev2", now); err != nil || !seen {
		t.Errorf("EventSeen(Ev2) after reopen = %v, %v, want true", seen, err)
	}
	if st := s.Stats(); st.Sessions != 1 || st.Events != 1 {
		t.Errorf("Stats() after reopen = %+v, want 1 session and 1 event", st)
	}
}

func TestEventCounterRebuilt(t *testing.T) {
	s, path := openTest(t, Options{})
	now := time.Unix(1700000000, 0)
	if err := s.MarkEvents([]string{"a", "b", "c"}, time.Minute, now); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkEvents([]string{"c", "d"}, time.Hour, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	s = reopenWithoutCounter(t, s, path, metaEvents)
	if got := s.Stats().Events; got != 4 {
		t.Errorf("Stats().Events after rebuild = %d, want 4", got)
	}
}

func TestDamagedGeneration(t *testing.T) {
	s, path := openTest(t, Options{})
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// A plain value where a generation should be.
	live, old := timeKey(now.Add(time.Minute)), timeKey(now.Add(-time.Minute))
	err := s.db.Update(func(tx *bolt.Tx) error {
		dd := tx.Bucket(bucketDedupe)
		if err := dd.Put(live[:], []byte("x")); err != nil {
			return err
		}
		return dd.Put(old[:], []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventSeen("Ev1", now); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "Ev1") {
		t.Errorf("EventSeen beside a damaged generation = %v, want ErrCorrupt naming the id", err)
	}
	if _, err := s.MarkEvent("Ev1", time.Minute, now); !errors.Is(err, ErrCorrupt) {
		t.Errorf("MarkEvent beside a damaged generation = %v, want ErrCorrupt", err)
	}
	// Once expired, purging clears it.
	if gone, err := s.PurgeEvents(now.Add(time.Minute)); err != nil || gone != 0 {
		t.Errorf("PurgeEvents over damaged generations = %d, %v, want 0, nil", gone, err)
	}
	if first, err := s.MarkEvent("Ev1", time.Minute, now.Add(time.Minute)); err != nil || !first {
		t.Errorf("MarkEvent after the purge = %v, %v, want true, nil", first, err)
	}
	_ = s.Close()

	// A generation rooted past the end of the file is refused on open.
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pages uint64
	err = s.db.Update(func(tx *bolt.Tx) error {
		pages = uint64(tx.Size()) / uint64(s.db.Info().PageSize)
		gen, err := tx.Bucket(bucketDedupe).CreateBucket(live[:])
		if err != nil {
			return err
		}
		for i := range 1000 { // more than a page: the bucket gets its own root
			k := eventKey(fmt.Sprint(i))
			if err := gen.Put(k[:], noValue); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	_ = s.db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket(bucketDedupe).Bucket(live[:]).Root())
		return nil
	})
	_ = s.Close()
	if root == 0 {
		t.Fatal("generation is inline")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The generation's header (root page id, then sequence) follows its
	// name in the parent's leaf; point it past the end of the file.
	i := bytes.Index(data, binary.NativeEndian.AppendUint64(live[:], root))
	if i < 0 {
		t.Fatal("generation header not found")
	}
	binary.NativeEndian.PutUint64(data[i+8:], pages+100)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "dedupe/") {
		t.Errorf("Open with a generation rooted past the end = %v, want ErrCorrupt naming it", err)
	}
}

// checkEventsModel runs the operations ops encodes (three bytes each)
// against a store and against a model of what it promises, at increasing
// times: an entry marked at t with ttl expires at some moment in
// [t+ttl, t+ttl+slot); the model keeps that interval per ID and narrows it
// as the store's answers reveal where in it the expiry lies.
func checkEventsModel(t *testing.T, ops []byte) {
	s, _ := openTest(t, Options{NoSync: true})
	s.chunk = 4
	type window struct{ lo, hi time.Time } // expiry in [lo, hi)
	model := map[string]window{}
	ttls := []time.Duration{time.Second, 3 * time.Second, 10 * time.Second, time.Minute}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	// observe checks the store's answer about id at now against the model
	// and narrows the model by it.
	observe := func(op, id string, seen bool) {
		t.Helper()
		w, ok := model[id]
		switch {
		case !ok || !now.Before(w.hi):
			if seen {
				t.Fatalf("%s(%s) at %v: seen, but it expired by %v", op, id, now, w.hi)
			}
		case now.Before(w.lo):
			if !seen {
				t.Fatalf("%s(%s) at %v: not seen, but it lives until %v", op, id, now, w.lo)
			}
		case seen:
			w.lo = now.Add(time.Nanosecond)
		default:
			w.hi = now
		}
		if ok {
			model[id] = w
		}
	}
	mark := func(id string, ttl time.Duration) {
		model[id] = window{now.Add(ttl), now.Add(ttl + eventSlot(ttl))}
	}
	for len(ops) >= 3 {
		op, arg, step := ops[0], ops[1], ops[2]
		ops = ops[3:]
		now = now.Add(time.Duration(step) * time.Duration(step) * time.Millisecond / 4) // up to 16 s
		id := fmt.Sprintf("ev%d", arg%32)
		ttl := ttls[int(arg/32)%len(ttls)]
		switch op % 4 {
		case 0:
			first, err := s.MarkEvent(id, ttl, now)
			if err != nil {
				t.Fatal(err)
			}
			observe("MarkEvent", id, !first)
			if first {
				mark(id, ttl)
			}
		case 1:
			// A batch: a few consecutive IDs, one of them twice. The store
			// does not say which were new, so ask it first where the model
			// cannot tell.
			ids := []string{id, fmt.Sprintf("ev%d", (arg+1)%32), id, fmt.Sprintf("ev%d", (arg+5)%32)}
			for _, id := range ids {
				seen, err := s.EventSeen(id, now)
				if err != nil {
					t.Fatal(err)
				}
				observe("EventSeen", id, seen)
			}
			if err := s.MarkEvents(ids, ttl, now); err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if w, ok := model[id]; !ok || !now.Before(w.lo) { // known not seen
					mark(id, ttl)
				}
			}
		case 2:
			seen, err := s.EventSeen(id, now)
			if err != nil {
				t.Fatal(err)
			}
			observe("EventSeen", id, seen)
		case 3:
			before := s.Stats().Events
			gone, err := s.PurgeEvents(now)
			if err != nil {
				t.Fatal(err)
			}
			if after := s.Stats().Events; after != before-int64(gone) {
				t.Fatalf("PurgeEvents = %d: Stats().Events went from %d to %d", gone, before, after)
			}
			for exp := range generations(t, s) {
				if !exp.After(now) {
					t.Fatalf("PurgeEvents(%v) left generation %v", now, exp)
				}
			}
		}
		checkEventCount(t, s)
	}
}

// The seeds run as part of go test; go test -fuzz=FuzzEventsModel explores.
func FuzzEventsModel(f *testing.F) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 99))
		ops := make([]byte, 3*300)
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		f.Add(ops)
	}
	f.Fuzz(checkEventsModel)
}

// TestAddEvents: IDs known to be new are added to their generation only; a
// repeat within it is not counted twice, and an ID live in an older
// generation stays seen until the later expiry.
func TestAddEvents(t *testing.T) {
	s, _ := openTest(t, Options{})
	now := time.Unix(1700000000, 0)
	ttl := time.Minute
	if err := s.AddEvents([]string{"a", "b", "a"}, ttl, now); err != nil {
		t.Fatal(err)
	}
	if got := checkEventCount(t, s); got != 2 {
		t.Errorf("entries after one batch = %d, want 2 (a repeat in one generation is one entry)", got)
	}
	later := now.Add(ttl) // a later generation
	if err := s.AddEvents([]string{"a", "c"}, ttl, later); err != nil {
		t.Fatal(err)
	}
	if got := checkEventCount(t, s); got != 4 {
		t.Errorf("entries after the second batch = %d, want 4 (a again, in its new generation)", got)
	}
	for _, tc := range []struct {
		id   string
		at   time.Time
		want bool
	}{
		{"a", later.Add(ttl - time.Nanosecond), true}, // the later entry
		{"b", later.Add(ttl), false},
		{"c", later, true},
	} {
		if got, err := s.EventSeen(tc.id, tc.at); err != nil || got != tc.want {
			t.Errorf("EventSeen(%q, +%v) = %v, %v; want %v", tc.id, tc.at.Sub(now), got, err, tc.want)
		}
	}
	if err := s.AddEvents([]string{""}, ttl, now); err == nil {
		t.Error("AddEvents accepted an empty id")
	}
	if err := s.AddEvents([]string{"x"}, 0, now); err == nil {
		t.Error("AddEvents accepted a zero ttl")
	}
}
