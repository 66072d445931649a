package bridge_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestFlowTimeoutHolds: a flow with a 3 s timeout is reported as timed out
// within a second past it, whether the API hangs past the timeout it was
// given or drips its answer a byte at a time.
func TestFlowTimeoutHolds(t *testing.T) {
	const timeout = 3 * time.Second
	for _, tt := range []struct {
		name string
		flow workspacetest.Flow
	}{
		{"hanging", workspacetest.Flow{Template: "late", Delay: time.Hour, IgnoreTimeout: true}},
		{"dripping", workspacetest.Flow{Template: "a result long enough to drip for a while", Drip: 500 * time.Millisecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := defaultConfig()
				cfg.Flows = []bridge.Flow{{Name: "slow", UUID: "flow-slow", Timeout: timeout, Allow: []string{"everyone"}}}
				b, fake := newBubbleBridge(t, cfg, workspacetest.Agent{})
				tt.flow.UUID = "flow-slow"
				fake.AddFlow(tt.flow)
				rec := newRecorder()
				done := make(chan struct{})
				ev := command("c/slow", bridge.CommandFlow, "slow", rec)
				ev = onDone(ev, func() { close(done) })
				start := time.Now()
				if err := handle(b, ev); err != nil {
					t.Fatal(err)
				}
				<-done
				if took := time.Since(start); took > timeout+time.Second {
					t.Errorf("the timeout was reported after %v, want within %v", took, timeout+time.Second)
				}
				wantContains(t, "reply", rec.last(t).Text, "did not finish within 3 seconds")
			})
		})
	}
}
