package main

import (
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

// TestMain checks that a run leaves no goroutine behind: the fakes, fronts
// and the bridge process are all stopped on every path. the floors start this
// binary again as their relay; then it is the relay and runs no tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == relayCommand {
		main()
		os.Exit(0)
	}
	// The relay is this binary; built with -race it would otherwise linger
	// a second at exit.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	goleak.VerifyTestMain(built.AndRemove(m))
}

// built is the flowbridge binary the tests that run one share, built once.
var built loadkit.BuildOnce

// flowbridgeBin returns flowbridge built as run builds it without
// -flowbridge (loadkit.Build), once for all the tests.
func flowbridgeBin(t *testing.T) string {
	t.Helper()
	return built.Bin(t)
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
