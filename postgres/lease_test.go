package postgres

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func TestClaim(t *testing.T) {
	t.Parallel()
	s, dsn := openEmpty(t, Options{})
	ctx := t.Context()
	const conv = "slack/T1/C1/1.2"
	claim := func(holder string, want bool) {
		t.Helper()
		if got, err := s.Claim(ctx, conv, holder, time.Minute); err != nil || got != want {
			t.Errorf("Claim(%q, %q) = %v, %v, want %v, nil", conv, holder, got, err, want)
		}
	}
	claim("a", true)  // free
	claim("b", false) // a's
	claim("a", true)  // renewed
	if err := s.Release(ctx, conv, "b"); err != nil {
		t.Errorf("Release by a non-holder = %v, want nil", err)
	}
	claim("b", false) // still a's
	if err := s.Release(ctx, conv, "a"); err != nil {
		t.Fatalf("Release = %v", err)
	}
	claim("b", true) // free again
	if got, err := s.Claim(ctx, "slack/T1/C2", "a", time.Minute); err != nil || !got {
		t.Errorf("Claim of another conversation = %v, %v, want true: leases are per conversation", got, err)
	}

	// An expired lease is taken over, and its old holder cannot renew it.
	exec(t, dsn, `UPDATE leases SET expires_at = now() - interval '1 second' WHERE conversation = $1`, conv)
	claim("a", true)
	claim("b", false)

	// A renewal moves the expiry on, measured by the database's clock.
	if got, err := s.Claim(ctx, conv, "a", time.Microsecond); err != nil || !got {
		t.Fatalf("Claim with a short ttl = %v, %v", got, err)
	}
	var left time.Duration
	if err := s.pool.QueryRow(ctx, `SELECT extract(epoch FROM expires_at - now()) * 1e9 FROM leases WHERE conversation = $1`, conv).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left > 0 {
		t.Errorf("lease of a microsecond has %v left on a later statement, want it expired", left)
	}
	claim("b", true)

	for _, bad := range []struct {
		conv, holder string
		ttl          time.Duration
	}{{"", "a", time.Second}, {conv, "", time.Second}, {conv, "a", 0}, {conv, "a", -time.Second}, {conv, "a", time.Nanosecond}} {
		if _, err := s.Claim(ctx, bad.conv, bad.holder, bad.ttl); err == nil {
			t.Errorf("Claim(%q, %q, %v) = nil error, want one", bad.conv, bad.holder, bad.ttl)
		}
	}
}

func TestClaimContention(t *testing.T) {
	// Two holders (two replicas: two Stores over one schema) take turns on
	// one conversation: never both at once, and each gets it.
	t.Parallel()
	s1, dsn := openEmpty(t, Options{})
	s2 := openDSN(t, dsn, Options{})
	const conv, rounds = "discord/g/c", 50
	var inside atomic.Int32
	var taken [2]atomic.Int32
	var wg sync.WaitGroup
	for i, s := range []*Store{s1, s2} {
		holder := fmt.Sprintf("replica-%d", i)
		wg.Go(func() {
			ctx := t.Context()
			for range rounds {
				for {
					ok, err := s.Claim(ctx, conv, holder, time.Minute)
					if err != nil {
						t.Errorf("Claim(%q) = %v", holder, err)
						return
					}
					if ok {
						break
					}
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%s holds the lease with %d others", holder, n-1)
				}
				// Renewing while holding keeps it ours.
				if ok, err := s.Claim(ctx, conv, holder, time.Minute); err != nil || !ok {
					t.Errorf("renewal by %s = %v, %v, want true", holder, ok, err)
				}
				taken[i].Add(1)
				inside.Add(-1)
				if err := s.Release(ctx, conv, holder); err != nil {
					t.Errorf("Release(%q) = %v", holder, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range taken {
		if got := taken[i].Load(); got != rounds {
			t.Errorf("replica-%d held the lease %d times, want %d", i, got, rounds)
		}
	}
}

// TestMarkSentUnder: an entry is marked sent under a lease only while the
// lease is its holder's and live; otherwise nothing changes and the error
// says the lease was lost, so a replica that stalled past its lease does
// not send what the lease's next holder will.
func TestMarkSentUnder(t *testing.T) {
	t.Parallel()
	s, dsn := openEmpty(t, Options{})
	ctx := t.Context()
	const conv = "slack/T1/C1/1.2"
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, err := s.Receive(ctx, store.InboxEntry{Key: k, Conversation: conv, Event: []byte("e"), Received: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	state := func(key string) store.InboxState {
		t.Helper()
		var v int16
		if err := s.pool.QueryRow(ctx, `SELECT state FROM inbox WHERE key = $1`, key).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return store.InboxState(v)
	}
	lost := func(key, holder string) {
		t.Helper()
		if err := s.MarkSentUnder(ctx, key, conv, holder, time.Now()); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("MarkSentUnder(%s) by %s = %v, want ErrLeaseLost", key, holder, err)
		}
		if got := state(key); got != store.Received {
			t.Errorf("%s is %v after a MarkSentUnder refused, want received", key, got)
		}
	}

	lost("k1", "a") // no lease at all
	if ok, err := s.Claim(ctx, conv, "a", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := s.MarkSentUnder(ctx, "k1", conv, "a", time.Now()); err != nil {
		t.Fatalf("MarkSentUnder by the holder = %v", err)
	}
	if got := state("k1"); got != store.Sent {
		t.Fatalf("k1 is %v, want sent", got)
	}
	if err := s.MarkSentUnder(ctx, "k1", conv, "a", time.Now()); !errors.Is(err, store.ErrAlreadySent) {
		t.Errorf("MarkSentUnder of a sent entry = %v, want ErrAlreadySent", err)
	}
	lost("k2", "b") // a's lease, not b's

	// a stalls past its lease, and b takes the conversation over.
	exec(t, dsn, `UPDATE leases SET expires_at = now() - interval '1 second' WHERE conversation = $1`, conv)
	lost("k2", "a") // lapsed
	if ok, err := s.Claim(ctx, conv, "b", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	lost("k2", "a") // another's
	if err := s.MarkSentUnder(ctx, "k2", conv, "b", time.Now()); err != nil {
		t.Errorf("MarkSentUnder by the new holder = %v", err)
	}
	if err := s.MarkSentUnder(ctx, "missing", conv, "b", time.Now()); !errors.Is(err, store.ErrUnknownEntry) {
		t.Errorf("MarkSentUnder of an unknown key = %v, want ErrUnknownEntry", err)
	}
	if err := s.Finish(ctx, "k3", "", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkSentUnder(ctx, "k3", conv, "b", time.Now()); !errors.Is(err, store.ErrAlreadySent) {
		t.Errorf("MarkSentUnder of an answered entry = %v, want ErrAlreadySent", err)
	}
}
