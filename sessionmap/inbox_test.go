package sessionmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/bridge/store/storetest"
)

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
}

// inboxLayout checks the inbox's invariants: every entry is in exactly one
// index, the one of its state, under its seq (and, answered, its Updated
// time); no index entry names a missing entry; the counter is the number
// of entries; answered entries keep no event. It returns the entries.
func inboxLayout(t testing.TB, s *Store) map[string]store.InboxEntry {
	t.Helper()
	if err := s.checkpoint(); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
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
		if _, err := s.Receive(store.InboxEntry{Key: key(i), Conversation: "c", Event: []byte("event"), Received: t0}); err != nil {
			t.Fatal(err)
		}
		if i%3 > 0 {
			if err := s.MarkSent(key(i), t0); err != nil {
				t.Fatal(err)
			}
		}
		if i%3 == 2 {
			if err := s.Finish(key(i), "ref", nil, t0.Add(time.Duration(i)*time.Second)); err != nil {
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
		if gone, err := s.ExpireInbox(tt.before); err != nil || gone != tt.wantGone {
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
			ok, err := s.Receive(store.InboxEntry{Key: tt.key, Event: []byte("e")})
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
	if _, err := s.Receive(store.InboxEntry{Key: "k", Received: late}); err == nil {
		t.Errorf("Receive at %v = nil error, want out of range", late)
	}
	before := time.Now()
	if ok, err := s.Receive(store.InboxEntry{Key: "k"}); err != nil || !ok {
		t.Fatalf("Receive with a zero time = %v, %v", ok, err)
	}
	p, err := s.Pending()
	if err != nil || len(p) != 1 || p[0].Received.Before(before) || !p[0].Updated.Equal(p[0].Received) {
		t.Errorf("Pending() = %+v, %v, want an entry received now", p, err)
	}
	for name, err := range map[string]error{
		"MarkSent": s.MarkSent("k", late),
		"Finish":   s.Finish("k", "r", nil, late),
	} {
		if err == nil {
			t.Errorf("%s at %v = nil, want out of range", name, late)
		}
	}
	if err := s.Finish("k", "r", nil, time.Time{}); err != nil {
		t.Errorf("Finish with a zero time = %v", err)
	}
	if gone, err := s.ExpireInbox(late); err != nil || gone != 1 {
		t.Errorf("ExpireInbox(%v) = %d, %v, want 1", late, gone, err)
	}
}

func TestInboxCounterRebuilt(t *testing.T) {
	s, path := openTest(t, Options{})
	for i := range 5 {
		if _, err := s.Receive(store.InboxEntry{Key: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish("0", "", nil, time.Now()); err != nil {
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
	if _, err := s.Receive(store.InboxEntry{Key: "live", Event: []byte("e")}); err != nil {
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
	if gone, err := s.ExpireInbox(old.Add(time.Hour)); err != nil || gone != 0 {
		t.Errorf("ExpireInbox over damage = %d, %v, want 0, nil", gone, err)
	}
	if p, err := s.Pending(); err != nil || len(p) != 1 || string(p[0].Event) != "e" {
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
			if _, err := s.Pending(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
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
		{"unknown version", append([]byte{2}, valid[1:]...)},
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

func FuzzDecodeInbox(f *testing.F) {
	for _, e := range []store.InboxEntry{
		{State: store.Received, Seq: 1, Received: time.Unix(1716212345, 100), Updated: time.Unix(1716212345, 100), Conversation: "slack/T/C/1.2", Event: []byte(`{"text":"hi"}`)},
		{State: store.Answered, Seq: 1 << 40, Received: time.Unix(-5, 0), Updated: time.Unix(7, 0), Reply: "msg-ref"},
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
			e2.Conversation != e.Conversation || e2.Reply != e.Reply || !bytes.Equal(e2.Event, e.Event) {
			t.Fatalf("decodeInbox(appendInbox(%+v)) = %+v, %v", e, e2, err)
		}
		if state, seq, ok := peekInbox(v); !ok || state != e.State || seq != e.Seq {
			t.Fatalf("peekInbox(%x) = %v, %d, %v, want %v, %d", v, state, seq, ok, e.State, e.Seq)
		}
	})
}

// TestCheckpointEntryChangedMeanwhile: an entry that changes while a
// checkpoint writes its earlier state is one the file holds from then on,
// so the next checkpoint moves it from the pending index to the answered
// one and counts it once.
func TestCheckpointEntryChangedMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTest(t, noCheckpoints)
		for _, k := range []string{"a", "b"} {
			if _, err := s.Receive(store.InboxEntry{Key: k, Event: []byte("e")}); err != nil {
				t.Fatal(err)
			}
		}
		// Hold bbolt's writer, so that the checkpoint takes its snapshot
		// and then waits for its transaction.
		release := make(chan struct{})
		go func() {
			_ = s.update(func(*bolt.Tx) error { <-release; return nil })
		}()
		synctest.Wait()
		done := make(chan error, 1)
		go func() { done <- s.checkpoint() }()
		synctest.Wait()
		if err := s.Finish("a", "r", nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := inboxLayout(t, s) // checkpoints again, and checks the indexes
		if got["a"].State != store.Answered || got["b"].State != store.Received {
			t.Fatalf("file holds a %v, b %v; want answered, received", got["a"].State, got["b"].State)
		}
		if n := s.Stats().Inbox; n != 2 {
			t.Errorf("Stats().Inbox = %d, want 2", n)
		}
	})
}
