package sessionmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/storetest"
)

var _ store.Outbox = (*Store)(nil)

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		chunk  int
		noSync bool
	}{
		{"default chunks", defaultChunk, false},
		// Every scan and bulk delete crosses transactions. What is tested
		// is the chunking, not the disk: the commits need not wait for it.
		{"chunks of 3", 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each store in a directory of its own
			storetest.Run(t, storetest.Opener{
				Open: func(t *testing.T) store.Store {
					s, _ := openTest(t, Options{NoSync: tt.noSync})
					s.chunk = tt.chunk
					return s
				},
				Reopen: func(t *testing.T, st store.Store) store.Store {
					old := st.(*Store)
					if err := old.Close(); err != nil {
						t.Fatalf("Close() = %v", err)
					}
					s, err := Open(old.Path(), Options{NoSync: tt.noSync})
					if err != nil {
						t.Fatalf("reopen %s: %v", old.Path(), err)
					}
					t.Cleanup(func() { _ = s.Close() })
					s.chunk = tt.chunk
					return s
				},
			})
		})
	}
}

// putRawInbox writes the record v of key straight into the inbox and its
// pending index under seq, bypassing Receive and the counter.
func putRawInbox(t testing.TB, s *Store, key string, seq uint64, v []byte) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		inbox := tx.Bucket(bucketInbox)
		if err := inbox.Put([]byte(key), v); err != nil {
			return err
		}
		if err := inbox.SetSequence(max(inbox.Sequence(), seq)); err != nil {
			return err
		}
		return tx.Bucket(bucketInboxSeq).Put(seqKey(seq), []byte(key))
	})
	if err != nil {
		t.Fatal(err)
	}
	reindex(t, s)
}

// reindex builds the conversation index afresh from the file, as Open does:
// for a test that wrote the inbox behind the Store's back.
func reindex(t testing.TB, s *Store) {
	t.Helper()
	if err := s.db.View(func(tx *bolt.Tx) error { s.pending.set(indexPending(tx)); return nil }); err != nil {
		t.Fatal(err)
	}
}

// checkConvIndex fails t unless the Store's conversation index holds
// exactly the entries in flight the file holds, as Open would build it.
func checkConvIndex(t testing.TB, s *Store) {
	t.Helper()
	var want map[string][]convRef
	if err := s.db.View(func(tx *bolt.Tx) error { want = indexPending(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	s.pending.mu.Lock()
	got := maps.Clone(s.pending.m)
	s.pending.mu.Unlock()
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("conversation index = %v, want %v (from inbox_seq)", got, want)
	}
}

// inboxLayout checks the inbox's invariants: every entry is in exactly one
// index, the one of its state, under its seq (and, answered, its Updated
// time); no index entry names a missing entry; the counter is the number
// of entries; answered entries keep no event; the conversation index in
// memory holds the entries in flight. It returns the entries.
func inboxLayout(t testing.TB, s *Store) map[string]store.InboxEntry {
	t.Helper()
	entries := map[string]store.InboxEntry{}
	err := s.db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketInbox).ForEach(func(k, v []byte) error {
			e, err := decodeInbox(v)
			if err != nil {
				return err
			}
			e.Key = string(k)
			entries[e.Key] = e
			return nil
		})
		if err != nil {
			return err
		}
		indexed := map[string]int{}
		err = tx.Bucket(bucketInboxSeq).ForEach(func(k, v []byte) error {
			e, ok := entries[string(v)]
			switch {
			case !ok:
				return fmt.Errorf("inbox_seq %x names missing %q", k, v)
			case e.State == store.Answered || binary.BigEndian.Uint64(k) != e.Seq:
				return fmt.Errorf("inbox_seq %x names %+v", k, e)
			}
			indexed[e.Key]++
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketInboxDone).ForEach(func(k, v []byte) error {
			e, ok := entries[string(v)]
			tk := timeKey(e.Updated)
			switch {
			case !ok:
				return fmt.Errorf("inbox_done %x names missing %q", k, v)
			case e.State != store.Answered || !bytes.Equal(k, binary.BigEndian.AppendUint64(tk[:], e.Seq)):
				return fmt.Errorf("inbox_done %x names %+v", k, e)
			case e.Event != nil:
				return fmt.Errorf("answered %q keeps %d event bytes", e.Key, len(e.Event))
			}
			indexed[e.Key]++
			return nil
		})
		if err != nil {
			return err
		}
		for key := range entries {
			if indexed[key] != 1 {
				return fmt.Errorf("%q is in %d indexes, want 1", key, indexed[key])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("inbox layout: %v", err)
	}
	if got := s.Stats().Inbox; got != int64(len(entries)) {
		t.Errorf("Stats().Inbox = %d, but the inbox holds %d entries", got, len(entries))
	}
	checkConvIndex(t, s)
	return entries
}

func TestInboxLayout(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	s.chunk = 4
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	key := func(i int) string { return fmt.Sprintf("slack/msg/C1/%d", i) }
	// Entry i: received; sent if i%3 > 0; answered at t0+i s if i%3 == 2.
	const n = 30
	for i := range n {
		if _, err := s.Receive(t.Context(), store.InboxEntry{Key: key(i), Conversation: "c", Event: []byte("event"), Received: t0}); err != nil {
			t.Fatal(err)
		}
		if i%3 > 0 {
			if err := s.MarkSent(t.Context(), key(i), t0); err != nil {
				t.Fatal(err)
			}
		}
		if i%3 == 2 {
			if err := s.Finish(t.Context(), key(i), "ref", nil, t0.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		inboxLayout(t, s)
	}
	for _, tt := range []struct {
		before   time.Time
		wantGone int
		wantLeft int
	}{
		{t0, 0, n},
		{t0.Add(15 * time.Second), 5, n - 5}, // answered: 2, 5, 8, 11, 14
		{t0.Add(time.Hour), 5, n - 10},
	} {
		if gone, err := s.ExpireInbox(t.Context(), tt.before); err != nil || gone != tt.wantGone {
			t.Errorf("ExpireInbox(%v) = %d, %v, want %d", tt.before, gone, err, tt.wantGone)
		}
		if got := inboxLayout(t, s); len(got) != tt.wantLeft {
			t.Errorf("after ExpireInbox(%v) the inbox holds %d, want %d", tt.before, len(got), tt.wantLeft)
		}
	}
}

func TestReceiveKeys(t *testing.T) {
	s, _ := openTest(t, Options{})
	tests := []struct {
		name    string
		key     string
		wantErr string
	}{
		{"empty", "", "empty inbox key"},
		{"longest", strings.Repeat("k", bolt.MaxKeySize), ""},
		{"too long", strings.Repeat("k", bolt.MaxKeySize+1), fmt.Sprintf("inbox key of %d bytes exceeds %d", bolt.MaxKeySize+1, bolt.MaxKeySize)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := s.Receive(t.Context(), store.InboxEntry{Key: tt.key, Event: []byte("e"), Received: time.Now()})
			switch {
			case tt.wantErr == "" && (err != nil || !ok):
				t.Errorf("Receive(%d-byte key) = %v, %v, want true, nil", len(tt.key), ok, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Receive(%d-byte key) = %v, %v, want an error saying %q", len(tt.key), ok, err, tt.wantErr)
			}
		})
	}
	inboxLayout(t, s)
}

func TestInboxTimes(t *testing.T) {
	s, _ := openTest(t, Options{})
	late := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.Receive(t.Context(), store.InboxEntry{Key: "k", Received: late}); err == nil {
		t.Errorf("Receive at %v = nil error, want out of range", late)
	}
	if _, err := s.Receive(t.Context(), store.InboxEntry{Key: "k"}); !errors.Is(err, store.ErrNoTime) {
		t.Errorf("Receive with a zero time = %v, want ErrNoTime: the caller's clock gives it", err)
	}
	at := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	if ok, err := s.Receive(t.Context(), store.InboxEntry{Key: "k", Received: at}); err != nil || !ok {
		t.Fatalf("Receive = %v, %v", ok, err)
	}
	p, err := s.Pending(t.Context())
	if err != nil || len(p) != 1 || !p[0].Received.Equal(at) || !p[0].Updated.Equal(at) {
		t.Errorf("Pending() = %+v, %v, want an entry received and updated at %v", p, err, at)
	}
	for name, err := range map[string]error{
		"MarkSent": s.MarkSent(t.Context(), "k", late),
		"Finish":   s.Finish(t.Context(), "k", "r", nil, late),
	} {
		if err == nil {
			t.Errorf("%s at %v = nil, want out of range", name, late)
		}
	}
	if err := s.Finish(t.Context(), "k", "r", nil, time.Now()); err != nil {
		t.Errorf("Finish with a zero time = %v", err)
	}
	if gone, err := s.ExpireInbox(t.Context(), late); err != nil || gone != 1 {
		t.Errorf("ExpireInbox(%v) = %d, %v, want 1", late, gone, err)
	}
}

func TestInboxCounterRebuilt(t *testing.T) {
	s, path := openTest(t, Options{})
	for i := range 5 {
		if _, err := s.Receive(t.Context(), store.InboxEntry{Key: fmt.Sprint(i), Received: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(t.Context(), "0", "", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	s = reopenWithoutCounter(t, s, path, metaInbox)
	if got := s.Stats().Inbox; got != 5 {
		t.Errorf("Stats().Inbox after rebuild = %d, want 5", got)
	}
}

// TestExpireSkipsDamage: an index entry naming a missing or unanswered
// entry is dropped by expiry without touching that entry, so damage never
// stalls expiry.
func TestExpireSkipsDamage(t *testing.T) {
	s, _ := openTest(t, Options{})
	old := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, err := s.Receive(t.Context(), store.InboxEntry{Key: "live", Event: []byte("e"), Received: time.Now()}); err != nil {
		t.Fatal(err)
	}
	tk := timeKey(old)
	err := s.db.Update(func(tx *bolt.Tx) error {
		done := tx.Bucket(bucketInboxDone)
		for _, kv := range [][2][]byte{
			{binary.BigEndian.AppendUint64(tk[:], 1), []byte("live")}, // not answered
			{binary.BigEndian.AppendUint64(tk[:], 2), []byte("gone")}, // missing
			{tk[:4], []byte("short")},                                 // malformed
		} {
			if err := done.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if gone, err := s.ExpireInbox(t.Context(), old.Add(time.Hour)); err != nil || gone != 0 {
		t.Errorf("ExpireInbox over damage = %d, %v, want 0, nil", gone, err)
	}
	if p, err := s.Pending(t.Context()); err != nil || len(p) != 1 || string(p[0].Event) != "e" {
		t.Errorf("Pending() after expiry over damage = %+v, %v, want the live entry", p, err)
	}
	inboxLayout(t, s)
}

func TestPendingDamage(t *testing.T) {
	tests := []struct {
		name string
		put  func(tx *bolt.Tx) error
		want string
	}{
		{"missing entry", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketInboxSeq).Put(seqKey(7), []byte("ghost"))
		}, `"ghost", which is missing`},
		{"short seq key", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketInboxSeq).Put([]byte{1}, []byte("x"))
		}, "seq key of 1 bytes"},
		{"seq mismatch", func(tx *bolt.Tx) error {
			v, err := appendInbox(nil, store.InboxEntry{Key: "k", Seq: 3, State: store.Received, Received: time.Unix(1, 0), Updated: time.Unix(1, 0)})
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketInbox).Put([]byte("k"), v); err != nil {
				return err
			}
			return tx.Bucket(bucketInboxSeq).Put(seqKey(4), []byte("k"))
		}, "of seq 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openTest(t, Options{})
			if err := s.db.Update(tt.put); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Pending(t.Context()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Pending() = %v, want ErrCorrupt saying %q", err, tt.want)
			}
		})
	}
}

func TestDecodeInboxErrors(t *testing.T) {
	valid, err := appendInbox(nil, store.InboxEntry{Conversation: "c", Reply: "r", State: store.Sent, Received: time.Unix(1, 0), Updated: time.Unix(2, 0), Event: []byte("ev")})
	if err != nil {
		t.Fatal(err)
	}
	// Times of one varint byte each.
	tiny, err := appendInbox(nil, store.InboxEntry{State: store.Received, Received: time.Unix(0, 1), Updated: time.Unix(0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		v    []byte
	}{
		{"empty", nil},
		{"version only", []byte{inboxV1}},
		{"unknown version", append([]byte{inboxV4 + 1}, valid[1:]...)},
		{"a byte of the event changed", func() []byte { v := bytes.Clone(valid); v[len(v)-inboxSumLen-1] ^= 1; return v }()},
		{"checksum cut short", valid[:len(valid)-1]},
		{"order missing", tiny[:len(tiny)-1]},
		{"state zero", append([]byte{inboxV1, 0}, valid[2:]...)},
		{"state past answered", append([]byte{inboxV1, byte(store.Answered) + 1}, valid[2:]...)},
		{"seq cut short", valid[:5]},
		{"times missing", valid[:inboxSeqAt+8]},
		{"conversation past end", append(bytes.Clone(tiny[:inboxSeqAt+8+2]), 50, 'c')},
		{"reply length bad", append(bytes.Clone(tiny[:inboxSeqAt+8+2]), 0, 0xff)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeInbox(tt.v)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("decodeInbox(%x) = %+v, %v, want ErrCorrupt", tt.v, got, err)
			}
		})
	}
}

// TestInboxRecordV1: an entry recorded before the store kept Order (record
// version 1) still reads, with Order 0, moves through its states, and is
// left out of LastOrders; a record of the current version keeps Order
// through them.
func TestInboxRecordV1(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Options{NoSync: true})
	now := time.Now()
	ns := binary.AppendVarint(nil, now.UnixNano())
	// version, state, seq, received, updated, conversation, reply, event
	v1 := slices.Concat([]byte{inboxV1, byte(store.Received)}, seqKey(1), ns, ns, []byte{1, 'c', 0}, []byte("ev"))
	putRawInbox(t, s, "discord/msg/1", 1, v1)
	if err := s.db.Update(func(tx *bolt.Tx) error { return addCounter(tx, metaInbox, 1) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(t.Context(), store.InboxEntry{Key: "discord/msg/2", Conversation: "c", Order: 2, Event: []byte("ev"), Received: now}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Pending(t.Context())
	if err != nil || len(got) != 2 {
		t.Fatalf("Pending() = %+v, %v, want 2 entries", got, err)
	}
	if e := got[0]; e.Key != "discord/msg/1" || e.Order != 0 || e.Conversation != "c" || string(e.Event) != "ev" || !e.Received.Equal(now) {
		t.Errorf("version 1 entry = %+v", e)
	}
	for _, key := range []string{"discord/msg/1", "discord/msg/2"} {
		if err := s.MarkSent(t.Context(), key, now); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(t.Context(), key, "ref", nil, now); err != nil {
			t.Fatal(err)
		}
	}
	if e := inboxLayout(t, s)["discord/msg/2"]; e.Order != 2 || e.State != store.Answered {
		t.Errorf("answered version 2 entry = %+v, want Order 2", e)
	}
	last, err := s.LastOrders(t.Context(), "discord/msg/", now)
	if err != nil || len(last) != 1 || last["c"] != 2 {
		t.Errorf("LastOrders = %v, %v, want c: 2", last, err)
	}
}

func FuzzDecodeInbox(f *testing.F) {
	for _, e := range []store.InboxEntry{
		{State: store.Received, Seq: 1, Received: time.Unix(1716212345, 100), Updated: time.Unix(1716212345, 100), Conversation: "slack/T/C/1.2", Event: []byte(`{"text":"hi"}`)},
		{State: store.Answered, Seq: 1 << 40, Received: time.Unix(-5, 0), Updated: time.Unix(7, 0), Reply: "msg-ref", Order: 1 << 62},
		{State: store.Sent, Seq: 3, Received: time.Unix(1716212345, 0), Updated: time.Unix(1716212346, 0), Conversation: "c", StoppedBy: "U0ALICE", Event: []byte("ev")},
	} {
		v, err := appendInbox(nil, e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v)
	}
	f.Add([]byte{inboxV1, byte(store.Sent), 0, 0, 0, 0, 0, 0, 0, 1, 0x80})
	f.Fuzz(func(t *testing.T, v []byte) {
		e, err := decodeInbox(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeInbox(%x) = %v, want an ErrCorrupt", v, err)
			}
			return
		}
		again, err := appendInbox(nil, e)
		if err != nil {
			t.Fatalf("appendInbox(decodeInbox(%x) = %+v) = %v", v, e, err)
		}
		e2, err := decodeInbox(again)
		if err != nil || e2.State != e.State || e2.Seq != e.Seq || !e2.Received.Equal(e.Received) || !e2.Updated.Equal(e.Updated) ||
			e2.Conversation != e.Conversation || e2.Reply != e.Reply || e2.Order != e.Order || e2.StoppedBy != e.StoppedBy || !bytes.Equal(e2.Event, e.Event) {
			t.Fatalf("decodeInbox(appendInbox(%+v)) = %+v, %v", e, e2, err)
		}
		if state, seq, ok := peekInbox(v); !ok || state != e.State || seq != e.Seq {
			t.Fatalf("peekInbox(%x) = %v, %d, %v, want %v, %d", v, state, seq, ok, e.State, e.Seq)
		}
	})
}

// TestInboxChangesAreInTheFile is what the journal's crash and power-cut
// tests were, now that bbolt holds every change: when Receive, MarkSent and
// Finish (with its turn) return, the change is committed to the file, so a
// copy of the file taken then (what a SIGKILL leaves) holds all of it, and
// bbolt has synced it (the store never sets NoSync by default; bbolt syncs
// the data pages and then the meta page that makes them live before a
// commit returns, which is its own power-cut promise).
func TestInboxChangesAreInTheFile(t *testing.T) {
	s, path := openTest(t, Options{})
	if s.db.NoSync {
		t.Fatal("the store opened with bbolt's NoSync: nothing would be durable when acknowledged")
	}
	t0 := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	const uuid = "7f0c9a52-3b9e-4d43-9d6e-0c0a3e6c1b11"
	sess := store.Session{Key: "conv", Agent: "a", SessionUUID: uuid, Created: t0, LastUsed: t0}
	if err := s.PutSession(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"k-received", "k-sent", "k-answered"} {
		if ok, err := s.Receive(t.Context(), store.InboxEntry{Key: key, Conversation: "conv", Event: []byte("event " + key), Received: t0}); err != nil || !ok {
			t.Fatalf("Receive(%s) = %v, %v", key, ok, err)
		}
		if i >= 1 {
			if err := s.MarkSent(t.Context(), key, t0.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	later := sess
	later.LastUsed = t0.Add(time.Minute)
	if err := s.Finish(t.Context(), "k-answered", "ref-1", &store.Turn{Session: later, Reply: "the answer", Also: []string{"conv/u1"}}, t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}

	cp := filepath.Join(t.TempDir(), "copy.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(cp, Options{Check: CheckFull})
	if err != nil {
		t.Fatalf("Open(copy) = %v", err)
	}
	defer c.Close()
	pending, err := c.Pending(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 || pending[0].Key != "k-received" || pending[0].State != store.Received ||
		pending[1].Key != "k-sent" || pending[1].State != store.Sent || string(pending[1].Event) != "event k-sent" {
		t.Errorf("Pending of the copy = %+v, want k-received (received), k-sent (sent)", pending)
	}
	if ok, err := c.Receive(t.Context(), store.InboxEntry{Key: "k-answered", Event: []byte("retry"), Received: time.Now()}); err != nil || ok {
		t.Errorf("Receive(answered key) on the copy = %v, %v, want a duplicate", ok, err)
	}
	if got, ok, err := c.Session(t.Context(), "conv"); err != nil || !ok || !got.LastUsed.Equal(later.LastUsed) {
		t.Errorf("Session of the copy = %+v, %v, %v; want the turn's LastUsed", got, ok, err)
	}
	for _, k := range []string{"conv", "conv/u1"} {
		if text, ok, err := c.LastReply(t.Context(), k); err != nil || !ok || text != "the answer" {
			t.Errorf("LastReply(%s) of the copy = %q, %v, %v", k, text, ok, err)
		}
	}
	if ok, err := c.Receive(t.Context(), store.InboxEntry{Key: "k-new", Event: []byte("e"), Received: time.Now()}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	pending, _ = c.Pending(t.Context())
	if last := pending[len(pending)-1]; last.Key != "k-new" || last.Seq <= pending[1].Seq {
		t.Errorf("new entry on the copy = %+v, want the highest seq", last)
	}
}

// TestOpenRefusesUnappliedJournal: journal segments the flowbridge before
// this one left beside the file (it stopped without applying them) stop
// Open with a message naming them and what to do, rather than start
// without the acknowledged events they hold.
func TestOpenRefusesUnappliedJournal(t *testing.T) {
	s, path := openTest(t, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := path + ".journal.000003"
	if err := os.WriteFile(seg, []byte("frames"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{})
	if !errors.Is(err, ErrUnappliedJournal) || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), "SIGTERM") {
		t.Fatalf("Open beside a journal = %v, want ErrUnappliedJournal naming %s and what to do", err, seg)
	}
	if err := os.Remove(seg); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("Open once the journal is gone = %v", err)
	}
	_ = s.Close()
}

// TestOpenFindsChangedEvent: a changed byte in the event of an entry
// waiting to be answered passes bbolt's page check and the inbox's
// cross-check with its indexes; the record's checksum refuses the store.
// (Served, an event that no longer decodes is dropped, and its user, whose
// message was acknowledged, never told: flowbridge-load -damage saw it.)
func TestOpenFindsChangedEvent(t *testing.T) {
	s, path := openTest(t, Options{})
	const key = "slack/msg/C1/1.000001"
	event := []byte(`{"channel":"C1","text":"hello"}`)
	if _, err := s.Receive(t.Context(), store.InboxEntry{Key: key, Event: event, Received: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketInbox)
		v := bytes.Clone(b.Get([]byte(key)))
		i := bytes.Index(v, event)
		if i < 0 {
			return fmt.Errorf("event not found in the record %q", v)
		}
		v[i+len(`{"channel"`)] ^= 0x20 // the quote closing the name
		return b.Put([]byte(key), v)
	})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	const want = "checksum mismatch"
	if s, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
		t.Errorf("Open with a byte of a waiting event changed = %v, want ErrCorrupt saying %s", err, want)
		if err == nil {
			s.Close()
		}
	}
	if err := CheckFile(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckFile with a byte of a waiting event changed = %v, want ErrCorrupt saying %s", err, want)
	}
}

// TestOpenChecksALargeStoreInFull: a store file past 64 MiB is checked in
// full at Open, as a small one is: a changed byte in the event of an entry
// waiting to be answered is refused. (Past 64 MiB only a walk of the page
// tree ran, and a flipped inbox byte was served: 3–5 acknowledged messages
// a restart were never answered nor their users told, with /readyz 200.)
// The file is made large the cheap way, as bbolt itself grows a file ahead
// of its pages and as expiry leaves one (freed pages are never given back):
// what the check covers must not depend on how much of the file is data.
func TestOpenChecksALargeStoreInFull(t *testing.T) {
	t.Parallel()
	s, path := openTest(t, Options{})
	const key = "slack/msg/C1/1.000001"
	event := []byte(`{"channel":"C1","text":"still waiting"}`)
	if _, err := s.Receive(t.Context(), store.InboxEntry{Key: key, Event: event, Received: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// One bit of the waiting event changes on disk (in every copy of it in
	// the file, the live page's included).
	flipped := 0
	for i := bytes.Index(data, event); i >= 0; i = bytes.Index(data, event) {
		data[i+len(`{"channel":"C1","text":"still`)] ^= 0x01
		flipped++
	}
	if flipped == 0 {
		t.Fatal("the waiting event is not in the file")
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	const size = 70 << 20
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	const want = "checksum mismatch"
	if s, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
		t.Errorf("Open of a %d MiB store with a byte of a waiting event changed = %v, want ErrCorrupt saying %s", size>>20, err, want)
		if err == nil {
			s.Close()
		}
	}
	if err := CheckFile(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckFile of it = %v, want ErrCorrupt saying %s", err, want)
	}
}

// TestOpenFindsInboxDamage: bbolt keeps no checksums, so a changed byte in
// an inbox key passes its page check; Open's inbox check still refuses the
// store, since the entry's key no longer matches its index entry's. (Served,
// the answered entry's redelivery would be taken for a new event.)
func TestOpenFindsInboxDamage(t *testing.T) {
	s, path := openTest(t, Options{})
	for _, k := range []string{"slack/msg/C1/1.000001", "slack/msg/C1/1.000002"} {
		if _, err := s.Receive(t.Context(), store.InboxEntry{Key: k, Event: []byte("e"), Received: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(t.Context(), "slack/msg/C1/1.000001", "r", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ key, changed, want string }{
		{"slack/msg/C1/1.000001", "slack/msg/C1/1.000011", `inbox_done seq 1 names entry "slack/msg/C1/1.000001", which is missing`},
		{"slack/msg/C1/1.000002", "slack/msg/C1/1.000012", `inbox_seq seq 2 names entry "slack/msg/C1/1.000002", which is missing`},
	} {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketInbox)
			v := bytes.Clone(b.Get([]byte(c.key)))
			if err := b.Delete([]byte(c.key)); err != nil {
				return err
			}
			return b.Put([]byte(c.changed), v)
		})
		if cerr := db.Close(); err != nil || cerr != nil {
			t.Fatal(err, cerr)
		}
		if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open with %q changed to %q = %v, want ErrCorrupt saying %s", c.key, c.changed, err, c.want)
		}
		if err := CheckFile(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckFile with %q changed = %v, want ErrCorrupt saying %s", c.key, err, c.want)
		}
	}
}
