package sessionmap

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// TestFinishRidesWithNextCommit: a Finish starts no commit of its own while
// another write comes within finishLag: it returns once that write's commit
// has carried it (one commit for both, the Finish first); alone, it commits
// once finishLag has passed. Either way it is committed when it returns.
func TestFinishRidesWithNextCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		s, _ := openTest(t, Options{NoSync: true})
		txid := func() int {
			var id int
			if err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
				t.Fatal(err)
			}
			return id
		}
		now := time.Unix(1_700_000_000, 0)
		sent := func(key string) {
			t.Helper()
			if _, err := s.Receive(ctx, store.InboxEntry{Key: key, Conversation: "slack/T/C/1", Event: []byte(`{}`), Received: now}); err != nil {
				t.Fatal(err)
			}
			if err := s.MarkSent(ctx, key, now); err != nil {
				t.Fatal(err)
			}
		}
		sent("slack/msg/C1/1.000001")

		before := txid()
		var wg sync.WaitGroup
		var finished time.Duration
		start := time.Now()
		wg.Go(func() {
			if err := s.Finish(ctx, "slack/msg/C1/1.000001", "ref-1", nil, now); err != nil {
				t.Errorf("Finish = %v", err)
			}
			finished = time.Since(start)
		})
		synctest.Wait() // the Finish waits for company
		if got := txid(); got != before {
			t.Fatalf("a Finish within its lag committed on its own (txid %d, was %d)", got, before)
		}
		time.Sleep(finishLag / 2)
		if _, err := s.Receive(ctx, store.InboxEntry{Key: "slack/msg/C1/1.000002", Conversation: "slack/T/C/1", Event: []byte(`{}`), Received: now}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if got := txid(); got != before+1 || finished != finishLag/2 {
			t.Fatalf("Finish and Receive took %d commits, the Finish returning after %v; want 1 commit, after %v", got-before, finished, finishLag/2)
		}
		if e := inboxLayout(t, s)["slack/msg/C1/1.000001"]; e.State != store.Answered || e.Reply != "ref-1" {
			t.Fatalf("entry after Finish = %+v, want Answered with ref-1", e)
		}

		if err := s.MarkSent(ctx, "slack/msg/C1/1.000002", now); err != nil {
			t.Fatal(err)
		}
		before, start = txid(), time.Now()
		if err := s.Finish(ctx, "slack/msg/C1/1.000002", "ref-2", nil, now); err != nil {
			t.Fatal(err)
		}
		if waited, got := time.Since(start), txid(); waited != finishLag || got != before+1 {
			t.Fatalf("a lone Finish returned after %v and %d commits, want %v and 1", waited, got-before, finishLag)
		}
		if pending, err := s.Pending(ctx); err != nil || len(pending) != 0 {
			t.Fatalf("Pending() after both Finishes = %v, %v; want none", pending, err)
		}
	})
}
