package sessionmap

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// pendingKeys returns the keys PendingOf returns for conversation.
func pendingKeys(t testing.TB, s *Store, conversation string) []string {
	t.Helper()
	got, err := s.PendingOf(t.Context(), conversation)
	if err != nil {
		t.Fatalf("PendingOf(%s) = %v", conversation, err)
	}
	var keys []string
	for _, e := range got {
		keys = append(keys, e.Key)
	}
	return keys
}

// TestConversationIndexBuiltForAnOldStore: a store written before the
// conversation index (no inbox_conv bucket), or by a flowbridge that kept
// it in the file (inbox_conv, here stale: it names an answered entry and
// misses one in flight), is served from an index Open builds from the
// entries in flight; answered entries are not in it. Open deletes
// inbox_conv, so that an older flowbridge, which builds it again when it is
// missing, never trusts a stale copy after a downgrade.
func TestConversationIndexBuiltForAnOldStore(t *testing.T) {
	for _, tt := range []struct {
		name string
		old  func(tx *bolt.Tx) error
	}{
		{"before the index", func(*bolt.Tx) error { return nil }},
		{"index kept in the file", func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketInboxConv)
			if err != nil {
				return err
			}
			// conversation, 0, seq -> key: k/3 (answered) is still in it,
			// k/2 (in flight) is not.
			if err := b.Put(append([]byte("c/a\x00"), seqKey(1)...), []byte("k/1")); err != nil {
				return err
			}
			return b.Put(append([]byte("c/a\x00"), seqKey(3)...), []byte("k/3"))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, path := openTest(t, Options{})
			ctx := t.Context()
			now := time.Now()
			for _, e := range []store.InboxEntry{
				{Key: "k/1", Conversation: "c/a", Event: []byte("e1"), Received: now},
				{Key: "k/2", Conversation: "c/b", Event: []byte("e2"), Received: now},
				{Key: "k/3", Conversation: "c/a", Event: []byte("e3"), Received: now},
			} {
				if _, err := s.Receive(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Finish(ctx, "k/3", "", nil, now); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// The store as the older build left it.
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(tt.old); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			for conv, want := range map[string][]string{"c/a": {"k/1"}, "c/b": {"k/2"}} {
				if got := pendingKeys(t, s, conv); !slices.Equal(got, want) {
					t.Errorf("PendingOf(%s) = %v, want %v", conv, got, want)
				}
			}
			inboxLayout(t, s)
			if err := s.db.View(func(tx *bolt.Tx) error {
				if tx.Bucket(bucketInboxConv) != nil {
					return errors.New("inbox_conv is still in the file after Open")
				}
				return nil
			}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestConversationIndexFollowsARetriedBatch: a batch whose transaction is
// run again without a request that failed in it runs the others' writes
// twice; the conversation index takes each committed change once, and
// none of the run rolled back.
func TestConversationIndexFollowsARetriedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTest(t, Options{NoSync: true})
		ctx := t.Context()
		now := time.Now()
		if _, err := s.Receive(ctx, store.InboxEntry{Key: "k/old", Conversation: "c", Event: []byte("e"), Received: now}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		release := make(chan struct{})
		// A commit held open, so that the calls below queue behind it and
		// share the next batch, in the order they are started.
		wg.Go(func() {
			if err := s.update(func(*bolt.Tx) error { <-release; return nil }); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		receive := func(key string) {
			wg.Go(func() {
				if ok, err := s.Receive(ctx, store.InboxEntry{Key: key, Conversation: "c", Event: []byte("e"), Received: now}); err != nil || !ok {
					t.Errorf("Receive(%s) = %v, %v", key, ok, err)
				}
			})
			synctest.Wait()
		}
		receive("k/new1")
		wg.Go(func() {
			if err := s.Finish(ctx, "k/old", "ref", nil, now); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		var ranAfterOthers bool
		refused := errors.New("refused")
		wg.Go(func() {
			err := s.update(func(tx *bolt.Tx) error {
				ranAfterOthers = tx.Bucket(bucketInbox).Get([]byte("k/new1")) != nil
				return refused
			})
			if !errors.Is(err, refused) {
				t.Errorf("the failing request = %v, want its own error", err)
			}
		})
		synctest.Wait()
		receive("k/new2")
		close(release)
		wg.Wait()
		if !ranAfterOthers {
			t.Fatal("the failing request did not share a transaction with the writes before it; the test proves nothing")
		}
		if got, want := pendingKeys(t, s, "c"), []string{"k/new1", "k/new2"}; !slices.Equal(got, want) {
			t.Errorf("PendingOf(c) = %v, want %v", got, want)
		}
		inboxLayout(t, s) // the index against the file
	})
}

// TestPendingOfIdleConversationReadsNothing: PendingOf of a conversation
// with nothing in flight, most of the dispatcher's looks, opens no read
// transaction; one with an entry in flight does.
func TestPendingOfIdleConversationReadsNothing(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	ctx := t.Context()
	now := time.Now()
	reads := func() int { return s.db.Stats().TxN }
	before := reads()
	if got := pendingKeys(t, s, "c"); len(got) != 0 {
		t.Fatalf("PendingOf(c) of an empty store = %v", got)
	}
	if n := reads() - before; n != 0 {
		t.Errorf("PendingOf of a conversation never seen opened %d read transactions, want 0", n)
	}
	if _, err := s.Receive(ctx, store.InboxEntry{Key: "k/1", Conversation: "c", Event: []byte("e"), Received: now}); err != nil {
		t.Fatal(err)
	}
	before = reads()
	if got := pendingKeys(t, s, "c"); !slices.Equal(got, []string{"k/1"}) {
		t.Fatalf("PendingOf(c) = %v, want [k/1]", got)
	}
	if n := reads() - before; n != 1 {
		t.Errorf("PendingOf of a conversation with an entry in flight opened %d read transactions, want 1", n)
	}
	if err := s.Finish(ctx, "k/1", "ref", nil, now); err != nil {
		t.Fatal(err)
	}
	before = reads()
	if got := pendingKeys(t, s, "c"); len(got) != 0 {
		t.Fatalf("PendingOf(c) after Finish = %v, want none", got)
	}
	if n := reads() - before; n != 0 {
		t.Errorf("PendingOf of a conversation whose entries are answered opened %d read transactions, want 0", n)
	}
}

// TestPendingOfSkipsChangesNotYetIndexed: between a commit and its change
// to the index, the index may still name an entry answered, gone
// (expired), or whose key now holds another entry; PendingOf leaves each
// out, without an error, as a read after that commit would.
func TestPendingOfSkipsChangesNotYetIndexed(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	ctx := t.Context()
	now := time.Now()
	for _, key := range []string{"k/answered", "k/live", "k/again"} {
		if _, err := s.Receive(ctx, store.InboxEntry{Key: key, Conversation: "c", Event: []byte("e"), Received: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(ctx, "k/answered", "ref", nil, now); err != nil {
		t.Fatal(err)
	}
	// As the index stood before the changes were applied: k/answered still
	// in flight, k/gone never expired, k/again of an older seq.
	s.pending.add("c", 1, "k/answered")
	s.pending.add("c", 99, "k/gone")
	s.pending.add("c", 0, "k/again")
	if got, want := pendingKeys(t, s, "c"), []string{"k/live", "k/again"}; !slices.Equal(got, want) {
		t.Errorf("PendingOf(c) = %v, want %v", got, want)
	}
}

// TestListenerFindsTheEntryItHears: Receive tells the listeners only after
// the conversation index has the entry, so a listener's look at once (the
// dispatcher's kick) finds it.
func TestListenerFindsTheEntryItHears(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	ctx, cancel := context.WithCancel(t.Context())
	var (
		mu    sync.Mutex
		found [][]string
	)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func(conv string) {
			if conv == "" {
				close(ready)
				return
			}
			got := pendingKeys(t, s, conv)
			mu.Lock()
			found = append(found, got)
			mu.Unlock()
		})
	}()
	<-ready
	if _, err := s.Receive(t.Context(), store.InboxEntry{Key: "k/1", Conversation: "c", Event: []byte("e"), Received: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(found) != 1 || !slices.Equal(found[0], []string{"k/1"}) {
		t.Errorf("the listener's looks found %v, want [[k/1]]", found)
	}
}
