package bridge_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// flakyOutbox is a store whose outbox writes fail while fails is above
// zero (each failure counts down) or down is set, its other writes and its
// probe answering: the store gives no sign of an outage to wait out.
type flakyOutbox struct {
	bridge.Store
	fails *atomic.Int32
	down  *atomic.Bool
}

func (s flakyOutbox) PutReply(ctx context.Context, key string, reply []byte, turn *store.Turn, now time.Time) error {
	if s.down.Load() || s.fails.Add(-1) >= 0 {
		return errors.New("write: input/output error")
	}
	return s.Store.PutReply(ctx, key, reply, turn, now)
}

// keptResponder checks, as each answer is posted, that its store keeps it
// in the outbox: posted before, a crash would lose it or tell it twice.
type keptResponder struct {
	st    bridge.Store
	mu    sync.Mutex
	sends []bridge.Reply
	kept  []bool
}

func (r *keptResponder) Send(ctx context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	pending, _ := r.st.Pending(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sends = append(r.sends, rep)
	r.kept = append(r.kept, len(pending) == 1 && pending[0].Outbox != nil)
	return "posted", nil
}

func (r *keptResponder) posted() ([]bridge.Reply, []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sends), slices.Clone(r.kept)
}

// outboxBubble is a bridge in the test's bubble on a store whose outbox
// writes fail as fails and down say; logs go to the observer too.
func outboxBubble(t *testing.T, fails int32, down bool) (*bridge.Bridge, *keptResponder, *observer.ObservedLogs) {
	t.Helper()
	fake := workspacetest.New(workspacetest.Options{})
	fake.AddAgent(workspacetest.Agent{UUID: agentUUID})
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token", HTTPClient: fake.Client()})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t)
	f := flakyOutbox{Store: st, fails: new(atomic.Int32), down: new(atomic.Bool)}
	f.fails.Store(fails)
	f.down.Store(down)
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))
	b, err := bridge.New(defaultConfig(), ws, f, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	attachTest(t, b)
	return b, &keptResponder{st: st}, logs
}

// TestOutboxWriteWaitsForTheStore: an answer whose outbox write fails is
// not posted without it, however the store fails (here its probe answers,
// so it shows no outage): the write is retried until the store takes it,
// then the answer is posted, kept meanwhile, once.
func TestOutboxWriteWaitsForTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, r, _ := outboxBubble(t, 8, false)
		done := make(chan struct{})
		ev := keyed("c/1", "test/msg/1", "hello", r)
		ev = onDone(ev, func() { close(done) })
		if err := receive(b, ev).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-done
		sends, kept := r.posted()
		if len(sends) != 1 || sends[0].Kind != bridge.ReplyAgent || !kept[0] {
			t.Errorf("posted %+v, kept in the outbox as it was posted: %v; want the answer once, kept", sends, kept)
		}
	})
}

// TestOutboxWriteLastResortAtShutdown: while the store does not take the
// outbox write, the answer waits (it is not posted unkept); when the
// shutdown grace ends with the store still failing, it is posted all the
// same, the log saying its user may also be told after the restart.
func TestOutboxWriteLastResortAtShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, r, logs := outboxBubble(t, 0, true)
		if err := receive(b, keyed("c/1", "test/msg/1", "hello", r)).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // the bubble's clock: a minute of a failing store
		if sends, _ := r.posted(); len(sends) != 0 {
			t.Fatalf("posted %+v while the store did not keep it, want it waiting", sends)
		}
		grace, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := b.Shutdown(grace); err == nil {
			t.Error("Shutdown = nil, want the grace's end: the answer waited for the store")
		}
		sends, kept := r.posted()
		if len(sends) != 1 || sends[0].Kind != bridge.ReplyAgent || kept[0] {
			t.Errorf("posted %+v (kept %v), want the answer once, as the last resort", sends, kept)
		}
		if n := logs.FilterMessageSnippet("may also be told after the restart").Len(); n != 1 {
			t.Errorf("%d log lines say the user may also be told after the restart, want 1", n)
		}
	})
}
