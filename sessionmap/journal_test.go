package sessionmap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// crashCopy copies the store file and its journal segments as they are on
// disk now, into a new directory, and returns the copy's path: what a
// process killed at this moment leaves behind (its writes are in the
// kernel's cache, which the copy reads).
func crashCopy(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	names, err := filepath.Glob(path + "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		copyFile(t, name, dst+name[len(path):])
	}
	return dst
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// syncedOf returns how far j's current segment is synced, and its end.
func syncedOf(j *journal) (synced, end int64) {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.syncedOff, j.off
}

// noCheckpoints keeps every change in the journal for the test's length.
var noCheckpoints = Options{CheckpointEvery: time.Hour}

const journalUUID = "7f0c9a52-3b9e-4d43-9d6e-0c0a3e6c1b11"

// TestJournalSurvivesACrash changes entries and turns, copies the files as a
// SIGKILL would leave them (nothing checkpointed), and opens the copy: every
// change is there, in the file, and the journal is gone.
func TestJournalSurvivesACrash(t *testing.T) {
	s, path := openTest(t, noCheckpoints)
	t0 := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	sess := store.Session{Key: "conv", Agent: "a", SessionUUID: journalUUID, Created: t0, LastUsed: t0}
	if err := s.PutSession(sess); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"k-received", "k-sent", "k-answered"} {
		if ok, err := s.Receive(store.InboxEntry{Key: key, Conversation: "conv", Event: []byte("event " + key), Received: t0}); err != nil || !ok {
			t.Fatalf("Receive(%s) = %v, %v", key, ok, err)
		}
		if i >= 1 {
			if err := s.MarkSent(key, t0.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	later := sess
	later.LastUsed = t0.Add(time.Minute)
	if err := s.Finish("k-answered", "ref-1", &store.Turn{Session: later, Reply: "the answer", Also: []string{"conv/u1"}}, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Seen at once, before any checkpoint.
	if got, ok, err := s.Session("conv"); err != nil || !ok || !got.LastUsed.Equal(later.LastUsed) {
		t.Errorf("Session before a checkpoint = %+v, %v, %v; want LastUsed %v", got, ok, err, later.LastUsed)
	}
	if segs, _ := segments(path); len(segs) == 0 {
		t.Fatal("no journal segment beside the file")
	}

	c, err := Open(crashCopy(t, path), Options{})
	if err != nil {
		t.Fatalf("Open after the crash: %v", err)
	}
	defer c.Close()
	pending, err := c.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 || pending[0].Key != "k-received" || pending[0].State != store.Received ||
		pending[1].Key != "k-sent" || pending[1].State != store.Sent || string(pending[1].Event) != "event k-sent" {
		t.Errorf("Pending after the crash = %+v, want k-received (received), k-sent (sent)", pending)
	}
	if pending[0].Seq >= pending[1].Seq {
		t.Errorf("seqs after the crash = %d, %d, want increasing", pending[0].Seq, pending[1].Seq)
	}
	if ok, err := c.Receive(store.InboxEntry{Key: "k-answered", Event: []byte("retry")}); err != nil || ok {
		t.Errorf("Receive(answered key) after the crash = %v, %v, want a duplicate", ok, err)
	}
	if err := c.MarkSent("k-answered", time.Time{}); !errors.Is(err, store.ErrAlreadySent) {
		t.Errorf("MarkSent(answered) after the crash = %v, want ErrAlreadySent", err)
	}
	if got, ok, err := c.Session("conv"); err != nil || !ok || !got.LastUsed.Equal(later.LastUsed) {
		t.Errorf("Session after the crash = %+v, %v, %v; want the turn's LastUsed", got, ok, err)
	}
	for _, k := range []string{"conv", "conv/u1"} {
		if text, ok, err := c.LastReply(k); err != nil || !ok || text != "the answer" {
			t.Errorf("LastReply(%s) after the crash = %q, %v, %v", k, text, ok, err)
		}
	}
	// A new entry continues the sequence.
	if ok, err := c.Receive(store.InboxEntry{Key: "k-new", Event: []byte("e")}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	pending, _ = c.Pending()
	if last := pending[len(pending)-1]; last.Key != "k-new" || last.Seq <= pending[1].Seq {
		t.Errorf("new entry after the crash = %+v, want the highest seq", last)
	}
	if st := c.Stats(); st.Inbox != 4 {
		t.Errorf("Stats().Inbox after the crash = %d, want 4", st.Inbox)
	}
	// The replayed segments are gone; only the one being written remains.
	if segs, _ := segments(c.Path()); len(segs) != 1 {
		t.Errorf("segments after replay = %v, want the current one only", segs)
	}
}

// TestJournalTornTail cuts the last frame short, as a crash in the middle of
// a write does: the frames before it are replayed, the torn one is not.
func TestJournalTornTail(t *testing.T) {
	s, path := openTest(t, noCheckpoints)
	for i := range 3 {
		if _, err := s.Receive(store.InboxEntry{Key: fmt.Sprintf("k%d", i), Event: []byte("event")}); err != nil {
			t.Fatal(err)
		}
	}
	cp := crashCopy(t, path)
	segs, err := segments(cp)
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments = %v, %v", segs, err)
	}
	// The segment is allocated ahead: its frames end before its size.
	var end int64
	if err := readSegment(cp, segs[0], func(p []byte) error { end += frameHeader + int64(len(p)); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segmentPath(cp, segs[0]), end-3); err != nil {
		t.Fatal(err)
	}
	c, err := Open(cp, Options{})
	if err != nil {
		t.Fatalf("Open with a torn journal: %v", err)
	}
	defer c.Close()
	pending, err := c.Pending()
	if err != nil || len(pending) != 2 || pending[0].Key != "k0" || pending[1].Key != "k1" {
		t.Errorf("Pending after a torn tail = %+v, %v; want k0, k1", pending, err)
	}
	if ok, err := c.Receive(store.InboxEntry{Key: "k2", Event: []byte("again")}); err != nil || !ok {
		t.Errorf("Receive(torn key) = %v, %v; want new: its frame never completed", ok, err)
	}
}

// TestJournalCheckpoint applies the journal to the file while changes keep
// coming: each change is in the file once checkpointed, and segments do not
// pile up.
func TestJournalCheckpoint(t *testing.T) {
	s, path := openTest(t, noCheckpoints)
	for i := range 50 {
		key := fmt.Sprintf("k%02d", i)
		if _, err := s.Receive(store.InboxEntry{Key: key, Event: []byte("e")}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := s.Finish(key, "r", nil, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		if i%10 == 9 {
			if err := s.checkpoint(); err != nil {
				t.Fatal(err)
			}
			got := inboxLayout(t, s)
			if len(got) != i+1 {
				t.Fatalf("file holds %d entries after %d, want all", len(got), i+1)
			}
			if segs, _ := segments(path); len(segs) != 1 {
				t.Fatalf("segments after a checkpoint = %v, want one", segs)
			}
		}
	}
	s.hot.mu.Lock()
	n := len(s.hot.entries)
	s.hot.mu.Unlock()
	if n != 0 {
		t.Errorf("%d entries still hot after the last checkpoint", n)
	}
}

// TestJournalWriteFails breaks the journal's file under it: the change is
// refused and undone (not held, not pending), and nothing later is
// accepted on top of a segment whose end is unknown.
func TestJournalWriteFails(t *testing.T) {
	s, _ := openTest(t, noCheckpoints)
	if _, err := s.Receive(store.InboxEntry{Key: "before", Event: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	// The writer goroutine owns the file; closing it makes its next write
	// and truncate fail, as a vanished disk would.
	s.jrn.mu.Lock()
	_ = s.jrn.f.Close()
	s.jrn.mu.Unlock()
	if ok, err := s.Receive(store.InboxEntry{Key: "lost", Event: []byte("e")}); err == nil || ok {
		t.Fatalf("Receive on a broken journal = %v, %v; want an error", ok, err)
	}
	if err := s.MarkSent("before", time.Time{}); err == nil {
		t.Error("MarkSent on a broken journal succeeded")
	}
	s.hot.mu.Lock()
	lost, before := s.hot.entries["lost"], s.hot.entries["before"]
	s.hot.mu.Unlock()
	if lost != nil {
		t.Error("the refused entry is still hot")
	}
	if before == nil || before.e.State != store.Received {
		t.Errorf("entry after a refused MarkSent = %+v, want still received", before)
	}
	if ok, err := s.Receive(store.InboxEntry{Key: "lost", Event: []byte("e")}); err == nil {
		t.Errorf("second Receive on a broken journal = %v, nil; want an error", ok)
	}
}

// TestJournalTurnOrder keeps PutTurns' rule across the journal: a turn in
// the journal does not bring back a session replaced or reset after it.
func TestJournalTurnOrder(t *testing.T) {
	s, _ := openTest(t, noCheckpoints)
	t0 := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	old := store.Session{Key: "conv", Agent: "a", SessionUUID: journalUUID, Created: t0, LastUsed: t0}
	if err := s.PutSession(old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(store.InboxEntry{Key: "k", Event: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	turn := old
	turn.LastUsed = t0.Add(time.Hour)
	if err := s.Finish("k", "r", &store.Turn{Session: turn, Reply: "old reply"}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	newer := store.Session{Key: "conv", Agent: "b", SessionUUID: "0e3f2a6b-1c4d-4e5f-8a9b-0c1d2e3f4a5b", Created: t0, LastUsed: t0}
	if err := s.PutSession(newer); err != nil {
		t.Fatal(err)
	}
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Session("conv")
	if err != nil || !ok || got.SessionUUID != newer.SessionUUID || !got.LastUsed.Equal(t0) {
		t.Errorf("Session = %+v, %v, %v; want the newer session untouched by the older turn", got, ok, err)
	}
	if text, _, _ := s.LastReply("conv"); text != "old reply" {
		t.Errorf("LastReply = %q, want the turn's reply, written before the new session", text)
	}
}

// TestJournalLazySync: an answer's frame is written when Finish returns and
// synced within lazySync with nobody asking; a Receive's is synced before
// Receive returns.
func TestJournalLazySync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTest(t, noCheckpoints)
		if _, err := s.Receive(store.InboxEntry{Key: "k", Event: []byte("e")}); err != nil {
			t.Fatal(err)
		}
		synced := func() (int64, int64) { return syncedOf(s.jrn) }
		if got, end := synced(); got != end {
			t.Fatalf("after Receive: synced to %d of %d", got, end)
		}
		if err := s.Finish("k", "r", nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if got, end := synced(); got == end {
			t.Fatalf("after Finish: synced to %d of %d at once, want it left to the timer", got, end)
		}
		time.Sleep(lazySync)
		synctest.Wait()
		if got, end := synced(); got != end {
			t.Errorf("lazySync after Finish: synced to %d of %d", got, end)
		}
	})
}

// TestJournalSyncInterval: with Options.SyncInterval every change returns
// once written, and is synced within the interval.
func TestJournalSyncInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTest(t, Options{CheckpointEvery: time.Hour, SyncInterval: 20 * time.Millisecond})
		if _, err := s.Receive(store.InboxEntry{Key: "k", Event: []byte("e")}); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkSent("k", time.Time{}); err != nil {
			t.Fatal(err)
		}
		synced := func() (int64, int64) { return syncedOf(s.jrn) }
		if got, end := synced(); got == end {
			t.Fatalf("after Receive and MarkSent: synced to %d of %d at once, want it left to the interval", got, end)
		}
		time.Sleep(19 * time.Millisecond)
		synctest.Wait()
		if got, end := synced(); got == end {
			t.Fatalf("synced before the interval ended")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got, end := synced(); got != end {
			t.Errorf("after the interval: synced to %d of %d", got, end)
		}
	})
}

// TestJournalStagedReceive: ReceiveStaged returns once the entry is written
// (a later call sees it) without syncing; the entry's MarkSent then syncs
// both frames, so durable returns without a sync of its own; and an entry
// with no later change is synced by the lazy timer.
func TestJournalStagedReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTest(t, noCheckpoints)
		synced := func() (int64, int64) { return syncedOf(s.jrn) }
		fresh, durable, err := s.ReceiveStaged(store.InboxEntry{Key: "k", Event: []byte("e")})
		if err != nil || !fresh {
			t.Fatalf("ReceiveStaged = %v, %v", fresh, err)
		}
		if again, _, err := s.ReceiveStaged(store.InboxEntry{Key: "k", Event: []byte("e")}); err != nil || again {
			t.Fatalf("second ReceiveStaged = %v, %v; want a duplicate", again, err)
		}
		if got, end := synced(); got == end {
			t.Fatalf("after ReceiveStaged: synced to %d of %d at once, want it left to the next change", got, end)
		}
		done := make(chan error, 1)
		go func() { done <- durable() }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("durable returned %v before any sync", err)
		default:
		}
		if err := s.MarkSent("k", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("durable after MarkSent = %v", err)
		}
		if got, end := synced(); got != end {
			t.Fatalf("after MarkSent: synced to %d of %d", got, end)
		}

		// Alone, an entry is synced by the lazy timer.
		_, durable, err = s.ReceiveStaged(store.InboxEntry{Key: "k2", Event: []byte("e")})
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- durable() }()
		time.Sleep(lazySync - time.Millisecond)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("durable returned %v before the lazy timer", err)
		default:
		}
		time.Sleep(time.Millisecond)
		if err := <-done; err != nil {
			t.Fatalf("durable after the lazy timer = %v", err)
		}
		if got, end := synced(); got != end {
			t.Errorf("after the lazy timer: synced to %d of %d", got, end)
		}
	})
}

// TestJournalStagedReceiveSyncFails: when the sync that should cover a
// staged entry fails, durable says so and the entry is gone, as a failed
// Receive leaves it.
func TestJournalStagedReceiveSyncFails(t *testing.T) {
	s, _ := openTest(t, noCheckpoints)
	_, durable, err := s.ReceiveStaged(store.InboxEntry{Key: "k", Event: []byte("e")})
	if err != nil {
		t.Fatal(err)
	}
	s.jrn.mu.Lock()
	f := s.jrn.f
	s.jrn.mu.Unlock()
	f.Close() // the next fdatasync fails, as on a failing disk
	if err := s.MarkSent("k", time.Time{}); err == nil {
		t.Fatal("MarkSent on a failing journal = nil")
	}
	if err := durable(); !errors.Is(err, errJournalBroken) {
		t.Fatalf("durable = %v, want errJournalBroken", err)
	}
	s.hot.mu.Lock()
	_, held := s.hot.entries["k"]
	s.hot.mu.Unlock()
	if held {
		t.Error("the unsynced entry is still held")
	}
}

// TestJournalLazyTimerSkipsCoveredFrames: a lazy frame that a durable
// change's sync covered before its time is up costs no sync of its own;
// one written after that sync still gets synced in time.
func TestJournalLazyTimerSkipsCoveredFrames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTest(t, noCheckpoints)
		syncs := func() int {
			s.jrn.syncMu.Lock()
			defer s.jrn.syncMu.Unlock()
			return s.jrn.syncs
		}
		for _, k := range []string{"a", "b"} {
			if _, err := s.Receive(store.InboxEntry{Key: k, Event: []byte("e")}); err != nil {
				t.Fatal(err)
			}
		}
		before := syncs()
		if err := s.Finish("a", "r", nil, time.Time{}); err != nil { // lazy, due at lazySync
			t.Fatal(err)
		}
		time.Sleep(lazySync / 2)
		if err := s.MarkSent("b", time.Time{}); err != nil { // durable: covers a's answer
			t.Fatal(err)
		}
		if err := s.Finish("b", "r", nil, time.Time{}); err != nil { // lazy, due at 1.5 lazySync
			t.Fatal(err)
		}
		time.Sleep(lazySync / 2)
		synctest.Wait()
		if got := syncs() - before; got != 1 {
			t.Fatalf("syncs when a's time was up = %d, want 1 (MarkSent's): a was covered", got)
		}
		time.Sleep(lazySync / 2)
		synctest.Wait()
		if got := syncs() - before; got != 2 {
			t.Fatalf("syncs when b's time was up = %d, want 2", got)
		}
		if synced, end := syncedOf(s.jrn); synced != end {
			t.Errorf("synced to %d of %d", synced, end)
		}
	})
}

// TestInboxSizeIsRecordLength: the size Receive and Finish check before
// writing is the length of the record the checkpoint encodes later.
func TestInboxSizeIsRecordLength(t *testing.T) {
	now := time.Now()
	for _, e := range []store.InboxEntry{
		{Key: "k", Received: now, Updated: now},
		{Key: "k", Conversation: "slack/T1/C1", Event: []byte(`{"text":"hi"}`), Received: now, Updated: now, Seq: 1 << 40},
		{Key: "k", Conversation: string(make([]byte, 300)), Reply: string(make([]byte, 200)), Received: now.Add(-time.Hour), Updated: now, State: store.Answered},
	} {
		rec, err := appendInbox(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		if got := inboxSize(e); got != len(rec) {
			t.Errorf("inboxSize = %d, record is %d bytes", got, len(rec))
		}
	}
}

// TestJournalConcurrentSyncs: with many writers syncing at once (one of
// them leading each sync), others only waiting for a sync, and rotations
// in between, every wait returns only once its frame is synced, and every
// frame is in the segments afterwards.
func TestJournalConcurrentSyncs(t *testing.T) {
	base := filepath.Join(t.TempDir(), "j.db")
	j, err := openJournal(base, 1, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 20
	covered := func(seg int, end int64) bool {
		j.syncMu.Lock()
		defer j.syncMu.Unlock()
		return j.syncedLocked(seg, end)
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*each+1)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				staged := w%4 == 0 // waits for another's sync or the timer's
				seg, end, err := j.append(frame(fmt.Appendf(nil, "w%d-%d", w, i)), staged)
				if err == nil && staged {
					err = j.awaitSync(seg, end)
				} else if err == nil {
					err = j.syncTo(seg, end)
				}
				if err == nil && !covered(seg, end) {
					err = fmt.Errorf("frame %d-%d returned unsynced (segment %d, end %d)", w, i, seg, end)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 3 {
			if err := j.rotate(); err != nil {
				errs <- err
				return
			}
		}
	})
	reportErrs(t, &wg, errs)
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	segs, err := segments(base)
	if err != nil {
		t.Fatal(err)
	}
	frames := 0
	for _, seg := range segs {
		if err := readSegment(base, seg, func([]byte) error { frames++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if frames != writers*each {
		t.Errorf("segments hold %d frames, want %d", frames, writers*each)
	}
}

// TestCheckpointSyncHoldsNoLock: a checkpoint syncs the segment it closed
// without holding hot's lock or the journal's, so that inbox changes go on
// while the disk works (under load one sync took up to 41 ms here).
func TestCheckpointSyncHoldsNoLock(t *testing.T) {
	s, _ := openTest(t, noCheckpoints)
	if _, err := s.Receive(store.InboxEntry{Key: "k", Event: []byte("e")}); err != nil {
		t.Fatal(err)
	}
	var held []string
	s.jrn.sync = func(f *os.File) error {
		if !s.hot.mu.TryLock() {
			held = append(held, "hot.mu")
		} else {
			s.hot.mu.Unlock()
		}
		if !s.jrn.mu.TryLock() {
			held = append(held, "journal.mu")
		} else {
			s.jrn.mu.Unlock()
		}
		return fdatasync(f)
	}
	defer func() { s.jrn.sync = fdatasync }()
	if err := s.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if len(held) > 0 {
		t.Fatalf("the checkpoint synced its old segment holding %v: every inbox change waited for the disk", held)
	}
	if got := inboxLayout(t, s); got["k"].State != store.Received {
		t.Fatalf("after the checkpoint the file holds %+v", got["k"])
	}
}

// TestJournalSurvivesAPowerCut: after a power cut the disk holds what was
// synced and no more. Opened from that, every change whose call returned
// durable is there: a Receive (the platform was acknowledged), a MarkSent
// (the workspace may have been called, so it is never called again), and a
// staged receipt once its durable returned. What no one waited for, an
// answer and a staged receipt not yet durable, may be gone: the first's
// user is told the bridge restarted, the second's platform was never
// acknowledged and delivers it again.
func TestJournalSurvivesAPowerCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the lazy timer fires only when the test waits
		s, path := openTest(t, noCheckpoints)
		var mu sync.Mutex
		synced := map[string][]byte{} // a segment's content at its last sync
		s.jrn.sync = func(f *os.File) error {
			if err := fdatasync(f); err != nil {
				return err
			}
			b, err := os.ReadFile(f.Name())
			mu.Lock()
			synced[f.Name()] = b
			mu.Unlock()
			return err
		}
		// powerCut writes what the disk holds now: the store file as bbolt
		// committed it (nothing has changed it since Open), each segment as
		// last synced.
		powerCut := func() string {
			cut := filepath.Join(t.TempDir(), filepath.Base(path))
			copyFile(t, path, cut)
			segs, err := segments(path)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, seg := range segs {
				if err := os.WriteFile(segmentPath(cut, seg), synced[segmentPath(path, seg)], 0o600); err != nil {
					t.Fatal(err)
				}
			}
			return cut
		}
		ev := func(k string) store.InboxEntry {
			return store.InboxEntry{Key: k, Conversation: "conv", Event: []byte("event " + k)}
		}
		_, durableC, err := s.ReceiveStaged(ev("c"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MarkSent("c", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := durableC(); err != nil {
			t.Fatal(err)
		}
		_, durableE, err := s.ReceiveStaged(ev("e")) // nothing follows: the lazy timer syncs it
		if err != nil {
			t.Fatal(err)
		}
		if err := durableE(); err != nil {
			t.Fatal(err)
		}
		afterStaged := powerCut()
		if _, err := s.Receive(ev("a")); err != nil {
			t.Fatal(err)
		}
		afterReceive := powerCut()
		if err := s.MarkSent("a", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish("a", "ref-a", nil, time.Time{}); err != nil { // synced lazily
			t.Fatal(err)
		}
		if _, _, err := s.ReceiveStaged(ev("b")); err != nil { // its durable is never called
			t.Fatal(err)
		}
		atEnd := powerCut()

		for _, c := range []struct {
			cut  string
			want []string
		}{
			{afterStaged, []string{"c sent", "e received"}},
			{afterReceive, []string{"c sent", "e received", "a received"}},
			{atEnd, []string{"c sent", "e received", "a sent"}},
		} {
			st, err := Open(c.cut, Options{})
			if err != nil {
				t.Fatalf("Open after the power cut: %v", err)
			}
			pending, err := st.Pending()
			_ = st.Close()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range pending {
				got = append(got, e.Key+" "+e.State.String())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("pending after the power cut = %q, want %q", got, c.want)
			}
		}
	})
}
