package bridge_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// typist is a recorder with a working indicator: it notes when the indicator
// started and stopped relative to the replies.
type typist struct {
	*recorder
	mu     sync.Mutex
	starts []time.Time
	stops  []time.Time
	sends  []time.Time
}

func (t *typist) Typing(context.Context) func() {
	t.mu.Lock()
	t.starts = append(t.starts, time.Now())
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		t.stops = append(t.stops, time.Now())
		t.mu.Unlock()
	}
}

func (t *typist) Send(ctx context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	t.mu.Lock()
	t.sends = append(t.sends, time.Now())
	t.mu.Unlock()
	return t.recorder.Send(ctx, rep)
}

// TestWorkingIndicatorWaitsForSlowAnswers: with a delay configured, an answer
// faster than the delay comes without any indicator, and a slower one shows
// the indicator from the delay until just before the reply.
func TestWorkingIndicatorWaitsForSlowAnswers(t *testing.T) {
	const delay = 500 * time.Millisecond
	for _, tc := range []struct {
		name      string
		cfgDelay  time.Duration
		answer    time.Duration
		wantStart time.Duration // after the message; -1: no indicator
	}{
		{"fast answer, delayed indicator", delay, 100 * time.Millisecond, -1},
		{"slow answer, delayed indicator", delay, 3 * time.Second, delay},
		{"fast answer, indicator at once", 0, 100 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := defaultConfig()
				cfg.IndicatorDelay = tc.cfgDelay
				b, _ := newBubbleBridge(t, cfg, workspacetest.Agent{Delay: tc.answer})

				// A first message creates the session, so the measured one
				// waits only for the agent's answer.
				for i, text := range []string{"warm up", "hello"} {
					ty := &typist{recorder: newRecorder()}
					done := make(chan struct{})
					ev := event("c/1", bridge.KindMessage, text, ty.recorder)
					ev = via(ev, ty)
					ev = onDone(ev, func() { close(done) })
					start := time.Now()
					if err := handle(b, ev); err != nil {
						t.Fatal(err)
					}
					<-done
					if i == 0 {
						continue
					}
					wantContains(t, "reply", ty.last(t).Text, "You said: hello")
					ty.mu.Lock()
					defer ty.mu.Unlock()
					if tc.wantStart < 0 {
						if len(ty.starts) != 0 {
							t.Errorf("an answer within %s showed the indicator %d times", tc.cfgDelay, len(ty.starts))
						}
						return
					}
					if len(ty.starts) != 1 || len(ty.stops) != 1 || len(ty.sends) != 1 {
						t.Fatalf("indicator started %d, stopped %d times, %d replies; want once each", len(ty.starts), len(ty.stops), len(ty.sends))
					}
					if got := ty.starts[0].Sub(start); got != tc.wantStart {
						t.Errorf("indicator started %s after the message, want %s", got, tc.wantStart)
					}
					if ty.stops[0].After(ty.sends[0]) {
						t.Error("the indicator stopped after the reply was sent")
					}
				}
			})
		})
	}
}
