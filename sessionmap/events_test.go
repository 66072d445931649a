package sessionmap

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMarkEvent(t *testing.T) {
	s, _ := openTest(t, Options{})
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ttl := 10 * time.Minute
	steps := []struct {
		name string
		id   string
		at   time.Time
		want bool
	}{
		{"first delivery", "Ev1", t0, true},
		{"retry", "Ev1", t0.Add(time.Second), false},
		{"other event", "Ev2", t0.Add(time.Second), true},
		{"just before expiry", "Ev1", t0.Add(ttl - time.Nanosecond), false},
		{"at expiry", "Ev1", t0.Add(ttl), true},
		{"renewed by the expired delivery", "Ev1", t0.Add(ttl + time.Minute), false},
		{"clock behind", "Ev2", t0.Add(-time.Hour), false},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			got, err := s.MarkEvent(st.id, ttl, st.at)
			if err != nil || got != st.want {
				t.Errorf("MarkEvent(%q, %v, %v) = %v, %v, want %v, nil", st.id, ttl, st.at, got, err, st.want)
			}
		})
	}
	if got := s.Stats().Events; got != 2 {
		t.Errorf("Stats().Events = %d, want 2", got)
	}

	for _, tt := range []struct {
		name string
		id   string
		ttl  time.Duration
	}{{"empty id", "", time.Minute}, {"zero ttl", "x", 0}, {"negative ttl", "x", -time.Second}} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := s.MarkEvent(tt.id, tt.ttl, t0); err == nil {
				t.Errorf("MarkEvent(%q, %v) = %v, nil, want an error", tt.id, tt.ttl, got)
			}
		})
	}
}

func TestMarkEventConcurrentDeliveries(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	now := time.Now()
	var firsts atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			first, err := s.MarkEvent("Ev-dup", time.Minute, now)
			if err != nil {
				t.Error(err)
			}
			if first {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	if got := firsts.Load(); got != 1 {
		t.Errorf("16 concurrent MarkEvent of one id gave %d firsts, want 1", got)
	}
}

func TestPurgeEvents(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// More entries than one purge transaction handles; event i expires at
	// t0 + i seconds.
	s.chunk = 6
	const n = 6*6 + 5 // several purge transactions
	for i := range n {
		if _, err := s.MarkEvent(fmt.Sprintf("Ev%05d", i), time.Duration(i+1)*time.Second, t0.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// Renewing an entry moves its expiry: the purge must follow.
	if first, err := s.MarkEvent("Ev00000", time.Hour, t0.Add(time.Second)); err != nil || !first {
		t.Fatalf("MarkEvent(renew) = %v, %v, want true, nil", first, err)
	}

	// Event i expires at t0 + i seconds (Ev00000 at t0 + 1h + 1s).
	steps := []struct {
		at        time.Time
		wantGone  int
		wantLeft  int64
		liveID    string
		expiredID string
	}{
		{t0.Add(-time.Hour), 0, n, "Ev00001", ""},
		{t0.Add(20 * time.Second), 20, n - 20, "Ev00021", "Ev00019"},
		{t0.Add(20 * time.Second), 0, n - 20, "Ev00040", ""},
		{t0.Add(2 * time.Hour), n - 20, 0, "", "Ev00000"},
	}
	for _, st := range steps {
		gone, err := s.PurgeEvents(st.at)
		if err != nil || gone != st.wantGone {
			t.Fatalf("PurgeEvents(%v) = %d, %v, want %d, nil", st.at, gone, err, st.wantGone)
		}
		if got := s.Stats().Events; got != st.wantLeft {
			t.Errorf("Stats().Events after PurgeEvents(%v) = %d, want %d", st.at, got, st.wantLeft)
		}
		// A purged id is new again; a live one is still a duplicate.
		if st.liveID != "" {
			if first, err := s.MarkEvent(st.liveID, time.Nanosecond, st.at); err != nil || first {
				t.Errorf("MarkEvent(%q) after purge at %v = %v, %v, want false (still live)", st.liveID, st.at, first, err)
			}
		}
		if st.expiredID != "" {
			if first, err := s.MarkEvent(st.expiredID, time.Nanosecond, st.at.Add(-time.Hour)); err != nil || !first {
				t.Errorf("MarkEvent(%q) after purge at %v = %v, %v, want true (purged)", st.expiredID, st.at, first, err)
			}
			// Leave the store as it was: remove the entry just made.
			if _, err := s.PurgeEvents(st.at); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestMarkEventsAndEventSeen(t *testing.T) {
	s, _ := openTest(t, Options{})
	now := time.Unix(1700000000, 0)
	if err := s.MarkEvents([]string{"a", "b", "a"}, time.Minute, now); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		at   time.Time
		want bool
	}{
		{"a", now, true},
		{"b", now.Add(59 * time.Second), true},
		{"b", now.Add(time.Minute), false},
		{"c", now, false},
	} {
		if got, err := s.EventSeen(tc.id, tc.at); err != nil || got != tc.want {
			t.Errorf("EventSeen(%q, +%v) = %v, %v; want %v", tc.id, tc.at.Sub(now), got, err, tc.want)
		}
	}
	if st := s.Stats(); st.Events != 2 {
		t.Errorf("Stats().Events = %d, want 2", st.Events)
	}
	if first, err := s.MarkEvent("a", time.Minute, now); err != nil || first {
		t.Errorf("MarkEvent after MarkEvents = %v, %v; want a repeat", first, err)
	}
	if err := s.MarkEvents([]string{""}, time.Minute, now); err == nil {
		t.Error("MarkEvents accepted an empty id")
	}
}
