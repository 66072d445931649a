package postgres

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
