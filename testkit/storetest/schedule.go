package storetest

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func claim(t *testing.T, s store.Store, name string, n int, want bool) {
	t.Helper()
	got, err := s.ClaimRun(t.Context(), name, at(n))
	if err != nil || got != want {
		t.Fatalf("ClaimRun(%s, t0+%dµs) = %v, %v, want %v", name, n, got, err, want)
	}
}

func lastRun(t *testing.T, s store.Store, name string, want int) {
	t.Helper()
	got, ok, err := s.LastRun(t.Context(), name)
	if want < 0 {
		if err != nil || ok {
			t.Fatalf("LastRun(%s) = %v, %v, %v, want none", name, got, ok, err)
		}
		return
	}
	if err != nil || !ok || !got.Equal(at(want)) {
		t.Fatalf("LastRun(%s) = %v, %v, %v, want %v", name, got, ok, err, at(want))
	}
}

func testSchedules(t *testing.T, o Opener) {
	t.Run("ClaimOnceMovingForward", func(t *testing.T) {
		s := o.Open(t)
		lastRun(t, s, "nightly", -1)
		claim(t, s, "nightly", 100, true)
		lastRun(t, s, "nightly", 100)
		claim(t, s, "nightly", 100, false) // the same run: another replica's
		claim(t, s, "nightly", 50, false)  // an older run
		lastRun(t, s, "nightly", 100)
		claim(t, s, "nightly", 200, true)
		lastRun(t, s, "nightly", 200)
		// Schedules are apart.
		lastRun(t, s, "hourly", -1)
		claim(t, s, "hourly", 100, true)
		lastRun(t, s, "nightly", 200)
	})

	t.Run("ConcurrentClaimsOneWins", func(t *testing.T) {
		s := o.Open(t)
		var wins atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() {
				ok, err := s.ClaimRun(t.Context(), "race", at(7))
				if err != nil {
					errs <- err
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("ClaimRun: %v", err)
		}
		if n := wins.Load(); n != 1 {
			t.Errorf("%d of 16 concurrent claims of one run won, want 1", n)
		}
	})

	t.Run("Reopen", func(t *testing.T) {
		if o.Reopen == nil {
			t.Skip("Opener.Reopen is nil")
		}
		s := o.Open(t)
		claim(t, s, "nightly", 300, true)
		s = o.Reopen(t, s)
		lastRun(t, s, "nightly", 300)
		claim(t, s, "nightly", 300, false)
	})
}
