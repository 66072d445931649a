package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func TestRenew(t *testing.T) {
	t.Parallel()
	s, dsn := openEmpty(t, Options{})
	ctx := t.Context()
	for _, c := range []string{"c/1", "c/2"} {
		if ok, err := s.Claim(ctx, c, "a", time.Minute); err != nil || !ok {
			t.Fatalf("Claim(%s) = %v, %v", c, ok, err)
		}
	}
	if ok, err := s.Claim(ctx, "c/3", "b", time.Minute); err != nil || !ok {
		t.Fatalf("Claim(c/3) = %v, %v", ok, err)
	}
	// c/2 expired and was taken over by b: it is not a's to renew.
	exec(t, dsn, `UPDATE leases SET expires_at = now() - interval '1 second' WHERE conversation = 'c/2'`)
	if ok, err := s.Claim(ctx, "c/2", "b", time.Minute); err != nil || !ok {
		t.Fatalf("takeover of c/2 = %v, %v", ok, err)
	}
	exec(t, dsn, `UPDATE leases SET expires_at = now() + interval '1 second' WHERE conversation = 'c/1'`)
	got, err := s.Renew(ctx, "a", []string{"c/1", "c/2", "c/3", "c/none"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"c/1"}) {
		t.Errorf("Renew = %q, want only c/1, a's own", got)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var left float64
	if err := conn.QueryRow(ctx, `SELECT extract(epoch FROM expires_at - now()) FROM leases WHERE conversation = 'c/1'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left < 59*60 {
		t.Errorf("renewed lease runs %vs more, want about an hour", left)
	}
	if got, err := s.Renew(ctx, "a", nil, time.Hour); err != nil || len(got) != 0 {
		t.Errorf("Renew of nothing = %v, %v", got, err)
	}
}

func TestUnleased(t *testing.T) {
	t.Parallel()
	s, _ := openEmpty(t, Options{})
	ctx := t.Context()
	old := time.Now().Add(-time.Minute)
	for _, e := range []store.InboxEntry{
		{Key: "k/free", Conversation: "c/free", Received: old},          // no lease: unleased
		{Key: "k/held", Conversation: "c/held", Received: old},          // its conversation is leased
		{Key: "k/alone", Conversation: "c/alone", Received: old},        // its own entry is leased
		{Key: "k/young", Conversation: "c/young", Received: time.Now()}, // just received
		{Key: "k/done", Conversation: "c/done", Received: old},          // answered
		{Key: "k/expired", Conversation: "c/expired", Received: old},    // its lease expired
	} {
		if _, err := s.Receive(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(ctx, "k/done", "", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	for name, ttl := range map[string]time.Duration{"c/held": time.Minute, store.EntryLease("k/alone"): time.Minute, "c/expired": time.Microsecond} {
		if ok, err := s.Claim(ctx, name, "r", ttl); err != nil || !ok {
			t.Fatalf("Claim(%s) = %v, %v", name, ok, err)
		}
	}
	got, err := s.Unleased(ctx, time.Second, 100)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"c/expired", "c/free"}; !slices.Equal(got, want) {
		t.Errorf("Unleased = %q, want %q", got, want)
	}
	if got, err := s.Unleased(ctx, time.Second, 1); err != nil || len(got) != 1 {
		t.Errorf("Unleased with limit 1 = %q, %v", got, err)
	}
}

func TestListen(t *testing.T) {
	// A replica listening hears of every entry recorded, by any replica on
	// its schema, and of none on another schema.
	t.Parallel()
	s1, dsn := openEmpty(t, Options{})
	s2 := openDSN(t, dsn, Options{})
	other, _ := openEmpty(t, Options{})
	got := make(chan string, 100)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel) // first: cleanups run last-in, first-out
	wg.Go(func() {
		done <- s1.Listen(ctx, func(conv string) {
			select {
			case got <- conv:
			case <-ctx.Done():
			}
		})
	})
	if c := <-got; c != "" {
		t.Fatalf("first call = %q, want \"\" (listening)", c)
	}
	if _, err := other.Receive(ctx, store.InboxEntry{Key: "k/other", Conversation: "c/other", Received: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*Store{s2, s1} {
		if _, err := s.Receive(ctx, store.InboxEntry{Key: fmt.Sprintf("k/%d", i), Conversation: fmt.Sprintf("c/%d", i), Received: time.Now()}); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-got:
			if want := fmt.Sprintf("c/%d", i); c != want {
				t.Errorf("notified of %q, want %q", c, want)
			}
		case err := <-done:
			t.Fatalf("Listen ended: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification of c/%d", i)
		}
	}
	// A duplicate records nothing, so it is not announced.
	if fresh, err := s2.Receive(ctx, store.InboxEntry{Key: "k/0", Conversation: "c/dup", Received: time.Now()}); err != nil || fresh {
		t.Fatalf("duplicate Receive = %v, %v", fresh, err)
	}
	if _, err := s2.Receive(ctx, store.InboxEntry{Key: "k/last", Conversation: "c/last", Received: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if c := <-got; c != "c/last" {
		t.Errorf("notified of %q, want c/last (no duplicate, no other schema)", c)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Listen after its context ended = %v, want nil", err)
	}
	s1.Close()
	if err := s1.Listen(t.Context(), func(string) {}); err == nil {
		t.Error("Listen on a closed store = nil, want an error")
	}
}

// TestReceiveCommitsInSeqOrder: while another replica's insert into a
// conversation is uncommitted, a Receive of the same conversation waits for
// it, so entries of one conversation commit in seq order and a holder never
// sees a later entry without the earlier ones.
func TestReceiveCommitsInSeqOrder(t *testing.T) {
	t.Parallel()
	s, dsn := openEmpty(t, Options{})
	ctx := t.Context()
	// Advisory locks are the database's, not a schema's: a name no other
	// test uses.
	conv := "c/seq-order"
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, lockConversations, []string{conv}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO inbox (key, conversation, event, received, updated, state) VALUES ('k/first', $1, 'x', now(), now(), 1)`, conv); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Receive(ctx, store.InboxEntry{Key: "k/second", Conversation: conv, Event: []byte("y"), Received: time.Now()})
		done <- err
	}()
	// Wait until the Receive waits on the conversation's lock; returning
	// first would mean it did not take it.
	for {
		select {
		case err := <-done:
			t.Fatalf("Receive returned (%v) while an insert of its conversation was uncommitted", err)
		default:
		}
		var waiting int
		err := other.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`, conv).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := s.PendingOf(ctx, conv)
	if err != nil || len(got) != 2 || got[0].Key != "k/first" || got[1].Key != "k/second" || got[0].Seq >= got[1].Seq {
		t.Errorf("PendingOf(c/1) = %+v, %v; want k/first then k/second, in seq order", got, err)
	}
}
