package main

import (
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain checks that a run leaves no goroutine behind: the fakes, fronts
// and the bridge process are all stopped on every path. -floor starts this
// binary again as its relay; then it is the relay and runs no tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == relayCommand {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestResolveRate(t *testing.T) {
	for _, tc := range []struct {
		conversations int
		rate          float64
		think         time.Duration
		ack           time.Duration
		longFlows     int
	}{
		{1, 500, 0, time.Second, 0}, // one conversation cannot offer 500/s: closed loop
		{100, 500, 150 * time.Millisecond, time.Second, 0},
		{1000, 500, 1950 * time.Millisecond, 100 * time.Millisecond, 3},
		{10000, 500, 19950 * time.Millisecond, time.Second, 0},
	} {
		p := params{Conversations: tc.conversations, Rate: tc.rate, APILatency: 50 * time.Millisecond, Think: time.Second, LongFlows: tc.longFlows}
		p.resolve()
		if p.Think != tc.think || p.AckInterval != tc.ack {
			t.Errorf("%d conversations at %.0f/s: think %s, ack interval %s; want %s, %s", tc.conversations, tc.rate, p.Think, p.AckInterval, tc.think, tc.ack)
		}
	}
}
