package bridge_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// refusingResponder refuses the agent's answers, as an adapter does once
// it gave up on them, and takes everything else.
type refusingResponder struct {
	mu      sync.Mutex
	refused int
	notices []string
	// down refuses the notices too, as a platform that cannot be reached.
	down bool
}

func (r *refusingResponder) Send(_ context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rep.Kind == bridge.ReplyAgent {
		r.refused++
		return "", errors.New("the platform keeps failing")
	}
	if r.down {
		return "", errors.New("the platform cannot be reached")
	}
	r.notices = append(r.notices, rep.Text)
	return "notice", nil
}

// TestOutboxToldAfterRetryBudget: an answer the platform keeps refusing is
// tried three times, 2 s then 10 s apart; then its user is told it could
// not be posted and its entry is closed.
func TestOutboxToldAfterRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _, st := newBubbleBridgeStore(t, defaultConfig(), workspacetest.Agent{})
		r := &refusingResponder{}
		done := make(chan struct{})
		ev := keyed("c/1", "test/msg/1", "hello", r)
		ev = onDone(ev, func() { close(done) })
		start := time.Now()
		if err := receive(b, ev).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-done
		if took := time.Since(start); took < 12*time.Second || took > 13*time.Second {
			t.Errorf("given up after %s, want the 2 s and 10 s between three attempts", took)
		}
		if r.refused != 3 || len(r.notices) != 1 || !strings.Contains(r.notices[0], "could not post the answer") {
			t.Errorf("%d attempts, notices %q; want 3 attempts, then one notice that the answer could not be posted", r.refused, r.notices)
		}
		if pending, err := st.Pending(t.Context()); err != nil || len(pending) != 0 {
			t.Errorf("Pending() = %d entries, %v; want the entry closed", len(pending), err)
		}
	})
}

// TestOutboxKeptWhenNotToldEither: when the notice that the answer could not
// be posted fails too, the user is neither answered nor told, so the entry
// is not closed: its answer stays kept for the next start.
func TestOutboxKeptWhenNotToldEither(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _, st := newBubbleBridgeStore(t, defaultConfig(), workspacetest.Agent{})
		r := &refusingResponder{down: true}
		done := make(chan struct{})
		ev := keyed("c/1", "test/msg/1", "hello", r)
		ev = onDone(ev, func() { close(done) })
		if err := receive(b, ev).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-done
		pending, err := st.Pending(t.Context())
		if err != nil || len(pending) != 1 || pending[0].Outbox == nil {
			t.Errorf("Pending() = %+v, %v; want the entry still open with its answer kept", pending, err)
		}
	})
}
