package sessionmap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// The fixture of the damage tests: sessions from buildFixture, and through
// the API agent choices, replies, inbox entries in every state and audit
// entries, so that every bucket spans pages.
const (
	fixSessions = 3000
	fixInbox    = 300
	fixAudit    = 400
)

var fixTime = time.Unix(1716212345, 0)

func fixInboxKey(i int) string { return fmt.Sprintf("slack/msg/C0456/%d.%06d", 1716212345+i, i) }

// fixturePages are the pages of the fixture file, by what they hold.
type fixturePages struct {
	size             int // page size
	pgid             int // pages in use or free
	leaves, branches []int
	root, freelist   int // the root bucket's page, the freelist page
}

// damageFixture writes the fixture, closed, and returns its bytes and pages.
func damageFixture(t *testing.T) ([]byte, fixturePages) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fixture.db")
	buildFixture(t, path, fixSessions)
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := s.SetConversationAgent(t.Context(), fixtureKey(i), "helper"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetLastReply(t.Context(), fixtureKey(i), strings.Repeat("reply ", 40)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range fixInbox {
		e := store.InboxEntry{Key: fixInboxKey(i), Conversation: fixtureKey(i), Event: bytes.Repeat([]byte{'e'}, 120), Received: fixTime.Add(time.Duration(i) * time.Second)}
		if _, err := s.Receive(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 1:
			err = s.MarkSent(t.Context(), e.Key, e.Received)
		case 2:
			err = s.Finish(t.Context(), e.Key, "ts", nil, e.Received)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range fixAudit {
		err := s.AppendAudit(t.Context(), AuditEntry{Time: fixTime.Add(time.Duration(i) * time.Minute), Platform: "slack", User: "U1", Flow: "deploy", Outcome: store.OutcomeOK, Params: map[string]string{"env": "prod"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	var pages fixturePages
	err = s.db.Update(func(tx *bolt.Tx) error { // tx.Page wants a writable transaction
		pages.size = tx.DB().Info().PageSize
		for id := 2; id < int(tx.Size())/pages.size; id++ {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			switch {
			case info == nil:
			case info.Type == "leaf":
				pages.leaves = append(pages.leaves, id)
			case info.Type == "branch":
				pages.branches = append(pages.branches, id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, problem, err := fileMeta(bytes.NewReader(data), uint64(len(data)))
	if err != nil || problem != "" {
		t.Fatalf("fixture meta: %v %s", err, problem)
	}
	pages.root, pages.freelist, pages.pgid = int(m.root), int(m.freelist), int(m.pgid)
	if len(pages.branches) < 2 || len(pages.leaves) < 20 {
		t.Fatalf("fixture of %d branch and %d leaf pages, want more", len(pages.branches), len(pages.leaves))
	}
	return data, pages
}

// A corruption damages a copy of the fixture.
type corruption struct {
	name string
	// cyclic: the damage may make the page tree a cycle. Only Open's check
	// catches that: bbolt would recurse until the stack overflows, which Go
	// does not let a program recover from.
	cyclic bool
	apply  func(data []byte, p fixturePages, rng *rand.Rand) []byte
}

func pageOf(data []byte, p fixturePages, id int) []byte {
	return data[id*p.size : (id+1)*p.size]
}

func pick(rng *rand.Rand, ids []int) int { return ids[rng.IntN(len(ids))] }

func flip(pg []byte, rng *rand.Rand) {
	for range 1 + rng.IntN(8) {
		pg[pageHeaderSize+rng.IntN(len(pg)-pageHeaderSize)] ^= byte(1 + rng.IntN(255))
	}
}

func garbage(pg []byte, rng *rand.Rand) {
	for i := range pg {
		pg[i] = byte(rng.Uint32())
	}
}

var ne = binary.NativeEndian

var corruptions = []corruption{
	{"flip bytes in a leaf page", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		flip(pageOf(d, p, pick(r, p.leaves)), r)
		return d
	}},
	{"flip bytes in a branch page", true, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		flip(pageOf(d, p, pick(r, p.branches)), r)
		return d
	}},
	{"flip bytes in the root bucket's page", false, func(d []byte, p fixturePages, r *rand.Rand) []byte { flip(pageOf(d, p, p.root), r); return d }},
	{"zero a leaf page's header", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		clear(pageOf(d, p, pick(r, p.leaves))[:pageHeaderSize])
		return d
	}},
	{"zero a branch page's header", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		clear(pageOf(d, p, pick(r, p.branches))[:pageHeaderSize])
		return d
	}},
	{"zero a leaf page", false, func(d []byte, p fixturePages, r *rand.Rand) []byte { clear(pageOf(d, p, pick(r, p.leaves))); return d }},
	{"garbage over a leaf page", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		garbage(pageOf(d, p, pick(r, p.leaves)), r)
		return d
	}},
	{"garbage over a branch page", true, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		garbage(pageOf(d, p, pick(r, p.branches)), r)
		return d
	}},
	{"huge element count in a branch page", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		ne.PutUint16(pageOf(d, p, pick(r, p.branches))[10:], uint16(0xFFFF-r.IntN(1000)))
		return d
	}},
	{"huge element count in a leaf page", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		ne.PutUint16(pageOf(d, p, pick(r, p.leaves))[10:], uint16(0xFFFF-r.IntN(1000)))
		return d
	}},
	{"branch child past the end", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		pg := pageOf(d, p, pick(r, p.branches))
		i := r.IntN(int(ne.Uint16(pg[10:])))
		ne.PutUint64(pg[pageHeaderSize+i*16+8:], uint64(len(d)/p.size)+r.Uint64N(1<<40))
		return d
	}},
	{"leaf element past the page", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		pg := pageOf(d, p, pick(r, p.leaves))
		i := r.IntN(int(ne.Uint16(pg[10:])))
		ne.PutUint32(pg[pageHeaderSize+i*16+4:], 1<<31+r.Uint32N(1<<30))
		return d
	}},
	{"huge overflow of a leaf page", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		ne.PutUint32(pageOf(d, p, pick(r, p.leaves))[12:], 1<<20+r.Uint32N(1<<20))
		return d
	}},
	{"freelist longer than its page", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		pg := pageOf(d, p, p.freelist)
		ne.PutUint16(pg[10:], 0xFFFF)
		ne.PutUint64(pg[pageHeaderSize:], 1<<30+r.Uint64N(1<<40))
		return d
	}},
	{"leaf page copied over another", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		a, b := pick(r, p.leaves), pick(r, p.leaves)
		copy(pageOf(d, p, b), pageOf(d, p, a))
		return d
	}},
	{"truncated", false, func(d []byte, p fixturePages, r *rand.Rand) []byte { return d[:2*p.size+r.IntN((p.pgid-3)*p.size)] }},
	{"first byte of a record flipped", false, func(d []byte, p fixturePages, r *rand.Rand) []byte {
		// The damage no page check sees: bbolt keeps no checksums.
		pg := pageOf(d, p, pick(r, p.leaves))
		i := r.IntN(int(ne.Uint16(pg[10:])))
		e := pg[pageHeaderSize+i*16:]
		pg[pageHeaderSize+i*16+int(ne.Uint32(e[4:]))+int(ne.Uint32(e[8:]))] ^= 0x80
		return d
	}},
	{"zero-length", false, func(d []byte, p fixturePages, r *rand.Rand) []byte { return d[:0] }},
}

// apiCall is one call of the Store's API on the fixture.
type apiCall struct {
	name string
	call func(ctx context.Context, s *Store) error
	// also lists errors other than ErrCorrupt the call may give on a
	// damaged file: damage can lose an entry or change its state.
	also []error
}

var apiCalls = []apiCall{
	{"Session", func(ctx context.Context, s *Store) error { _, _, err := s.Session(ctx, fixtureKey(7)); return err }, nil},
	{"ListSessions", func(ctx context.Context, s *Store) error { _, err := s.ListSessions(ctx, ""); return err }, nil},
	{"ListSessions prefix", func(ctx context.Context, s *Store) error {
		_, err := s.ListSessions(ctx, "slack/T00000001/")
		return err
	}, nil},
	{"ConversationAgent", func(ctx context.Context, s *Store) error {
		_, _, err := s.ConversationAgent(ctx, fixtureKey(3))
		return err
	}, nil},
	{"LastReply", func(ctx context.Context, s *Store) error { _, _, err := s.LastReply(ctx, fixtureKey(3)); return err }, nil},
	{"Pending", func(ctx context.Context, s *Store) error { _, err := s.Pending(ctx); return err }, nil},
	{"Audit", func(ctx context.Context, s *Store) error { _, err := s.Audit(ctx, AuditFilter{}); return err }, nil},
	{"Audit newest", func(ctx context.Context, s *Store) error {
		_, err := s.Audit(ctx, AuditFilter{Newest: true, Limit: 10})
		return err
	}, nil},
	{"Stats", func(ctx context.Context, s *Store) error { s.Stats(); return nil }, nil},
	{"Backup", func(ctx context.Context, s *Store) error { _, err := s.Backup(io.Discard); return err }, nil},
	{"PutSession", func(ctx context.Context, s *Store) error {
		return s.PutSession(ctx, Session{Key: "slack/T1/C1/new", Agent: "helper", SessionUUID: testUUID(1)})
	}, nil},
	{"DeleteSession", func(ctx context.Context, s *Store) error { _, err := s.DeleteSession(ctx, fixtureKey(8)); return err }, nil},
	{"SetConversationAgent", func(ctx context.Context, s *Store) error { return s.SetConversationAgent(ctx, fixtureKey(9), "ops") }, nil},
	{"SetLastReply", func(ctx context.Context, s *Store) error { return s.SetLastReply(ctx, fixtureKey(9), "hello") }, nil},
	{"PutTurns", func(ctx context.Context, s *Store) error {
		_, err := s.PutTurns(ctx, []Turn{{Session: Session{Key: fixtureKey(10), Agent: "helper", SessionUUID: testUUID(10), LastUsed: fixTime}, Reply: "r"}})
		return err
	}, nil},
	{"Receive", func(ctx context.Context, s *Store) error {
		_, err := s.Receive(ctx, store.InboxEntry{Key: "slack/msg/new", Event: []byte("x"), Received: time.Now()})
		return err
	}, nil},
	{"MarkSent", func(ctx context.Context, s *Store) error { return s.MarkSent(ctx, fixInboxKey(3), time.Now()) }, []error{store.ErrUnknownEntry, errAnswered}},
	{"Finish", func(ctx context.Context, s *Store) error {
		return s.Finish(ctx, fixInboxKey(4), "ts", nil, time.Now())
	}, []error{store.ErrUnknownEntry, errAnswered}},
	{"ExpireInbox", func(ctx context.Context, s *Store) error {
		_, err := s.ExpireInbox(ctx, fixTime.Add(time.Minute))
		return err
	}, nil},
	{"AppendAudit", func(ctx context.Context, s *Store) error {
		return s.AppendAudit(ctx, AuditEntry{Flow: "deploy", Outcome: store.OutcomeOK, Time: time.Now()})
	}, nil},
	{"PruneAudit", func(ctx context.Context, s *Store) error {
		_, err := s.PruneAudit(ctx, fixTime.Add(time.Hour))
		return err
	}, nil},
	{"AdapterState", func(ctx context.Context, s *Store) error {
		_, _, err := s.AdapterState(ctx, "discord/gateway/0-of-1")
		return err
	}, nil},
	{"PutAdapterState", func(ctx context.Context, s *Store) error {
		_, err := s.PutAdapterState(ctx, "discord/gateway/0-of-1", "x", time.Now(), 0)
		return err
	}, nil},
	{"Check", func(ctx context.Context, s *Store) error { return s.Check() }, nil},
	{"Health", func(ctx context.Context, s *Store) error { return s.Health() }, nil},
}

// callAll makes every API call on s and reports which failed with
// ErrCorrupt. A call that panics, or fails otherwise than ErrCorrupt or its
// also errors, fails the test.
func callAll(t *testing.T, name string, s *Store) (corrupt []string) {
	t.Helper()
	for _, c := range apiCalls {
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: %s panicked: %v", name, c.name, r)
					err = nil
				}
			}()
			return c.call(t.Context(), s)
		}()
		switch {
		case err == nil:
		case errors.Is(err, ErrCorrupt):
			corrupt = append(corrupt, c.name)
		default:
			allowed := false
			for _, a := range c.also {
				allowed = allowed || errors.Is(err, a)
			}
			if !allowed {
				t.Errorf("%s: %s = %v, want nil or ErrCorrupt", name, c.name, err)
			}
		}
	}
	return corrupt
}

// TestDamagedStoreDoesNotCrash is the crash loop of the finding: a store
// with damaged pages either is refused by Open with ErrCorrupt and the way
// out, or opens and then every call returns nil or ErrCorrupt; nothing
// panics out of the store. Each corruption is tried twice: with Open's check
// (the default), and with CheckOff, which leaves the damage to the guard of
// every read.
func TestDamagedStoreDoesNotCrash(t *testing.T) {
	t.Parallel()
	fixture, pages := damageFixture(t)
	dir := t.TempDir()

	// The intact fixture serves every call.
	intact := filepath.Join(dir, "intact.db")
	if err := os.WriteFile(intact, fixture, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(intact, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if failed := callAll(t, "intact", s); len(failed) > 0 {
		t.Fatalf("intact fixture: %v failed", failed)
	}
	_ = s.Close()

	const rounds = 2 // of every corruption: 36 in all
	rng := rand.New(rand.NewPCG(20261123, 1))
	var tried, refused, caught, harmless int
	var offTried, offRefused, offCaught, offMarked, offHarmless int
	for round := range rounds {
		for _, c := range corruptions {
			tried++
			name := fmt.Sprintf("%s #%d", c.name, round+1)
			data := c.apply(bytes.Clone(fixture), pages, rng)
			path := filepath.Join(dir, fmt.Sprintf("%02d.db", tried))
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}

			s, err := Open(path, Options{NoSync: true, Timeout: 10 * time.Millisecond})
			if err != nil {
				refused++
				t.Logf("%s: refused: %.200s", name, strings.TrimPrefix(err.Error(), "open store "+path+": "))
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "backup") || !strings.Contains(err.Error(), "move it aside") {
					t.Errorf("%s: Open = %v, want ErrCorrupt naming the file and the way out", name, err)
				}
			} else {
				if failed := callAll(t, name, s); len(failed) > 0 {
					caught++
					t.Logf("%s: opened; failed with ErrCorrupt: %v", name, failed)
				} else {
					harmless++
					t.Logf("%s: opened; no call failed", name)
				}
				if err := s.Close(); err != nil {
					t.Errorf("%s: Close = %v", name, err)
				}
			}

			if c.cyclic {
				continue
			}
			offTried++
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			// The first Open moved the store's generation on: without its
			// marker, the copy is not taken for a restored older one.
			if err := os.Remove(CreatedMarker(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			s, err = Open(path, Options{NoSync: true, Timeout: 10 * time.Millisecond, Check: CheckOff})
			if err != nil {
				offRefused++
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("%s: Open(CheckOff) = %v, want ErrCorrupt", name, err)
				}
				continue
			}
			if failed := callAll(t, name+" (CheckOff)", s); len(failed) > 0 {
				t.Logf("%s (CheckOff): failed with ErrCorrupt: %v; %.150v", name, failed, s.Health())
				offCaught++
				if s.Health() != nil {
					offMarked++
				}
			} else {
				offHarmless++
			}
			if err := s.Close(); err != nil {
				t.Errorf("%s (CheckOff): Close = %v", name, err)
			}
		}
	}
	t.Logf("with Open's check: %d corruptions tried: %d refused at Open, %d opened and caught later, %d opened and no call failed; crashes: 0",
		tried, refused, caught, harmless)
	t.Logf("with CheckOff: %d tried: %d refused at Open, %d caught by calls (%d of them marking the store damaged), %d with no call failing; crashes: 0",
		offTried, offRefused, offCaught, offMarked, offHarmless)
	if tried < 30 {
		t.Errorf("%d corruptions tried, want at least 30", tried)
	}
}

// TestHealth: a sound store is healthy, a closed one says so.
func TestHealth(t *testing.T) {
	s, _ := openTest(t, Options{})
	if err := s.Health(); err != nil {
		t.Errorf("Health() of a new store = %v, want nil", err)
	}
	_ = s.Close()
	if err := s.Health(); !errors.Is(err, ErrClosed) {
		t.Errorf("Health() after Close = %v, want ErrClosed", err)
	}
}

// TestPanicInReadMarksStoreDamaged: a panic inside a read transaction (as
// bbolt panics on a damaged page) is an error wrapping ErrCorrupt, not a
// crash; the store then reports itself damaged and fails every later call
// at once, without touching the file again.
func TestPanicInReadMarksStoreDamaged(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	if err := s.PutSession(t.Context(), Session{Key: "k", Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	err := s.view(func(*bolt.Tx) error { panic("unexpected fault address 0x7f0000000000") })
	d, ok := errors.AsType[*DamageError](err)
	if !ok || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "unexpected fault address") {
		t.Fatalf("view(panics) = %v, want a *DamageError with the panic", err)
	}
	if h := s.Health(); h != d {
		t.Errorf("Health() after the panic = %v, want the damage %v", h, d)
	}
	reads := 0
	for _, c := range apiCalls {
		if c.name == "Health" || c.name == "Stats" {
			continue
		}
		if err := c.call(t.Context(), s); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s on a damaged store = %v, want ErrCorrupt", c.name, err)
		}
	}
	// Fail fast: no call reaches bbolt any more.
	if err := s.view(func(*bolt.Tx) error { reads++; return nil }); !errors.Is(err, ErrCorrupt) || reads != 0 {
		t.Errorf("view on a damaged store = %v after %d reads, want ErrCorrupt and none", err, reads)
	}
	if st := s.Stats(); st.Open {
		t.Errorf("Stats() of a damaged store = %+v, want Open false", st)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() of a damaged store = %v", err)
	}
	if err := s.Health(); !errors.Is(err, ErrClosed) {
		t.Errorf("Health() after Close = %v, want ErrClosed", err)
	}
}

// TestPanicInUpdateLeavesNoLock: a panic inside db.Update runs bbolt's own
// deferred rollback, which releases bbolt's writer lock: bbolt still takes
// a write, the store reports ErrCorrupt, and it closes and reopens.
func TestPanicInUpdateLeavesNoLock(t *testing.T) {
	s, path := openTest(t, Options{NoSync: true})
	err := s.update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketSessions).Put([]byte("lost"), []byte{1}); err != nil {
			return err
		}
		panic("slice bounds out of range")
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("update(panics) = %v, want ErrCorrupt", err)
	}
	if s.wedged.Load() {
		t.Error("store wedged after a panic bbolt rolled back")
	}
	// bbolt itself (under the store, which refuses) still takes a write:
	// its writer lock was released. This would block for ever if not.
	if err := s.db.Update(func(*bolt.Tx) error { return nil }); err != nil {
		t.Errorf("bbolt Update after the panic = %v", err)
	}
	if err := s.PutSession(t.Context(), Session{Key: "k"}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("PutSession after the panic = %v, want ErrCorrupt", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen after the panic = %v", err)
	}
	defer s.Close()
	if _, ok, err := s.Session(t.Context(), "lost"); ok || err != nil {
		t.Errorf("Session(lost) = %v, %v, want the panicked write rolled back", ok, err)
	}
}

// TestWedgedRollbackClosesWithoutWaiting: when bbolt's own rollback
// panics too (here: its freelist page was damaged under it), bbolt's writer
// lock stays held, so its Close would wait for ever. The store marks itself
// wedged, and Close releases the file lock by closing the descriptor.
func TestWedgedRollbackClosesWithoutWaiting(t *testing.T) {
	s, path := openTest(t, Options{NoSync: true})
	var freelist int
	err := s.db.View(func(tx *bolt.Tx) error {
		m, _, err := fileMeta(s.file, uint64(tx.Size()))
		freelist = int(m.freelist)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	if _, err := f.WriteAt(make([]byte, ps), int64(freelist*ps)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	err = s.update(func(*bolt.Tx) error { panic("boom") })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("update(panics) = %v, want ErrCorrupt", err)
	}
	if !s.wedged.Load() {
		t.Fatal("store not wedged after bbolt's rollback panicked")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() of a wedged store = %v", err)
	}
	// The file lock went with the descriptor: Open finds the damage, not
	// the lock.
	if _, err := Open(path, Options{Timeout: time.Millisecond}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open after closing a wedged store = %v, want ErrCorrupt", err)
	}
}

// TestOpenRefusesEmptyFile: a file of no bytes is not silently made into a
// new, empty store; a missing file still is.
func TestOpenRefusesEmptyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "flowbridge.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{})
	if _, ok := errors.AsType[*DamageError](err); !ok || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open(empty file) = %v, want a *DamageError", err)
	}
	for _, want := range []string{path, "empty (0 bytes)", "failed", "full", "backup", "move it aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(empty file) = %v, want it to say %q", err, want)
		}
	}
	if info, err := os.Stat(path); err != nil || info.Size() != 0 {
		t.Errorf("empty file after Open: %v, %v; want it left alone", info, err)
	}
	if err := CheckFile(path); !errors.Is(err, ErrCorrupt) {
		t.Errorf("CheckFile(empty file) = %v, want ErrCorrupt", err)
	}

	missing := filepath.Join(dir, "new.db")
	s, err := Open(missing, Options{})
	if err != nil {
		t.Fatalf("Open(missing file) = %v, want a new store", err)
	}
	_ = s.Close()
}

// zeroLeaf writes a copy of the store file at path with its page leaf
// zeroed: damage Open's check sees and bbolt's meta pages do not.
func zeroLeaf(t *testing.T, path string, leaf int) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	clear(data[leaf*ps : (leaf+1)*ps])
	damaged := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(damaged, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return damaged
}

// TestOpenChecksConsistency: Open refuses a file with a damaged page unless
// told not to check, and then Check finds the damage and marks the store.
func TestOpenChecksConsistency(t *testing.T) {
	t.Parallel()
	sound, _, leaf := realStore(t)
	path := zeroLeaf(t, sound, leaf)
	for _, mode := range []CheckMode{CheckFull} {
		_, err := Open(path, Options{Check: mode})
		d, ok := errors.AsType[*DamageError](err)
		if !ok || len(d.Problems) == 0 || d.Path != path {
			t.Fatalf("Open(mode %d) of a file with a zeroed page = %v, want a *DamageError", mode, err)
		}
	}
	s, err := Open(path, Options{Check: CheckOff})
	if err != nil {
		t.Fatalf("Open(CheckOff) = %v", err)
	}
	defer s.Close()
	if err := s.Health(); err != nil {
		t.Fatalf("Health() before any read of the damage = %v", err)
	}
	err = s.Check()
	if _, ok := errors.AsType[*DamageError](err); !ok {
		t.Fatalf("Check() = %v, want a *DamageError", err)
	}
	if !errors.Is(s.Health(), ErrCorrupt) {
		t.Errorf("Health() after Check found damage = %v, want ErrCorrupt", s.Health())
	}
}

// TestCheckFile: the check of the store check command reads a file without
// writing it or opening it for writing.
func TestCheckFile(t *testing.T) {
	t.Parallel()
	path, _, leaf := realStore(t)
	fixture, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sound := filepath.Join(dir, "sound.db")
	if err := os.WriteFile(sound, fixture, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(sound); err != nil {
		t.Errorf("CheckFile(sound, read-only file) = %v, want nil", err)
	}
	after, err := os.ReadFile(sound)
	if err != nil || !bytes.Equal(after, fixture) {
		t.Errorf("CheckFile changed the file (%v)", err)
	}

	damaged := zeroLeaf(t, sound, leaf)
	err = CheckFile(damaged)
	if d, ok := errors.AsType[*DamageError](err); !ok || len(d.Problems) == 0 || !strings.Contains(d.Problems[0], "page") {
		t.Errorf("CheckFile(damaged) = %v, want a *DamageError naming a page", err)
	}

	if err := CheckFile(filepath.Join(dir, "missing.db")); err == nil {
		t.Error("CheckFile(missing) = nil, want an error")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); err == nil {
		t.Error("CheckFile created the missing file")
	}

	s, path := openTest(t, Options{})
	if err := CheckFile(path); !errors.Is(err, ErrLocked) {
		t.Errorf("CheckFile of an open store = %v, want ErrLocked", err)
	}
	_ = s.Close()
	if err := CheckFile(path); err != nil {
		t.Errorf("CheckFile of a new store = %v, want nil", err)
	}
}

// TestCheckAcceptsSoundFiles: the checks find nothing in files bbolt wrote
// itself, whatever their shape: nested and inline buckets, values spanning
// pages, a freelist left by deletions; and in old-format stores before and
// after their upgrade. A false alarm would keep a sound store from opening.
func TestCheckAcceptsSoundFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 11))
	for n := range 5 {
		path := filepath.Join(dir, fmt.Sprintf("random%02d.db", n))
		writeRandomFile(t, path, rng)
		if err := CheckFile(path); err != nil {
			t.Errorf("CheckFile(%s) = %v, want nil", filepath.Base(path), err)
		}
	}
	for _, format := range []int{1, 2} {
		path := filepath.Join(dir, fmt.Sprintf("format%d.db", format))
		now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		var ids []string
		for i := range 500 {
			ids = append(ids, fmt.Sprintf("event-%d", i))
		}
		writeOldStore(t, path, format, Session{Key: "k", Agent: "a", SessionUUID: testUUID(1)}, AuditEntry{Time: now, Flow: "f"}, ids, now)
		if err := CheckFile(path); err != nil {
			t.Errorf("CheckFile(format %d) = %v, want nil", format, err)
		}
		s, err := Open(path, Options{Check: CheckFull})
		if err != nil {
			t.Fatalf("Open(format %d) = %v", format, err)
		}
		if err := s.Check(); err != nil {
			t.Errorf("Check() after upgrading format %d = %v", format, err)
		}
		_ = s.Close()
	}
}

// writeRandomFile writes a bbolt file of random buckets, nested buckets,
// keys and values (some spanning pages), then deletes some of it.
func writeRandomFile(t *testing.T, path string, rng *rand.Rand) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := func() []byte {
		n := rng.IntN(200)
		if rng.IntN(40) == 0 {
			n = 4096 + rng.IntN(9000)
		}
		return bytes.Repeat([]byte{byte(rng.Uint32())}, n)
	}
	var fill func(b *bolt.Bucket, depth int) error
	fill = func(b *bolt.Bucket, depth int) error {
		for range rng.IntN(150) {
			if err := b.Put(fmt.Appendf(nil, "k%08d", rng.IntN(1e6)), value()); err != nil {
				return err
			}
		}
		if depth < 2 {
			for i := range rng.IntN(4) {
				child, err := b.CreateBucketIfNotExists(fmt.Appendf(nil, "sub%d", i))
				if err != nil {
					return err
				}
				if err := fill(child, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for range 3 {
		err := db.Update(func(tx *bolt.Tx) error {
			for i := range 1 + rng.IntN(6) {
				b, err := tx.CreateBucketIfNotExists(fmt.Appendf(nil, "bucket%d", i))
				if err != nil {
					return err
				}
				if err := fill(b, 0); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if rng.IntN(3) == 0 {
				return tx.DeleteBucket(name)
			}
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if v != nil && rng.IntN(2) == 0 {
					if err := c.Delete(); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommitPanicFailsEveryWaiter: a panic inside a transaction that
// several writers share fails each of them with the damage (not "store
// write panicked", not a crash up one caller's goroutine), leaves no writer
// waiting and the committer free, and later writes fail at once.
func TestGroupCommitPanicFailsEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, path := openTest(t, Options{NoSync: true})
		// A first write holds the lead until the others have queued behind
		// it, so that they share the next transaction, where one panics.
		release := make(chan struct{})
		var wg sync.WaitGroup
		var firstErr error
		wg.Go(func() {
			firstErr = s.update(func(*bolt.Tx) error { <-release; return nil })
		})
		synctest.Wait()
		const writers = 8
		errs := make([]error, writers)
		for w := range writers {
			wg.Go(func() {
				if w == writers/2 {
					errs[w] = s.update(func(*bolt.Tx) error { panic("index out of range [4096] with length 4096") })
					return
				}
				errs[w] = s.PutSession(t.Context(), Session{Key: fmt.Sprintf("k%d", w), Agent: "a"})
			})
		}
		synctest.Wait() // every writer has queued behind the held commit
		close(release)
		wg.Wait()

		if firstErr != nil {
			t.Errorf("leading write = %v, want nil", firstErr)
		}
		var d *DamageError
		for w, err := range errs {
			got, ok := errors.AsType[*DamageError](err)
			if !ok || !strings.Contains(err.Error(), "index out of range") {
				t.Errorf("writer %d = %v, want the damage of the shared transaction", w, err)
				continue
			}
			if d == nil {
				d = got
			} else if got != d {
				t.Errorf("writer %d = %v, want the same damage as the others", w, got)
			}
		}
		// Later writes fail at once, concurrent ones included.
		for w := range writers {
			wg.Go(func() {
				if err := s.SetLastReply(t.Context(), fmt.Sprintf("k%d", w), "r"); !errors.Is(err, ErrCorrupt) {
					t.Errorf("write after the panic = %v, want ErrCorrupt", err)
				}
			})
		}
		wg.Wait()
		if err := s.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}

		// The shared transaction was rolled back whole.
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("reopen = %v", err)
		}
		defer s.Close()
		if got, err := s.ListSessions(t.Context(), ""); err != nil || len(got) != 0 {
			t.Errorf("sessions after the rolled-back batch = %d, %v; want none", len(got), err)
		}
	})
}
