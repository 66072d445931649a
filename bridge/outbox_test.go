package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// stuckResponder is a platform that accepts no reply until the context
// ends, as an adapter waiting out a long Retry-After does; it reports each
// reply it is given. Its error says whether the reply may have been posted
// (a request cut off) or certainly was not (a 429: bridge.ErrNotPosted).
type stuckResponder struct {
	sent    chan bridge.Reply
	refused bool
}

func (r stuckResponder) Send(ctx context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	r.sent <- rep
	<-ctx.Done()
	if r.refused {
		return "", fmt.Errorf("%w: rate limited; gave up waiting: %w", bridge.ErrNotPosted, ctx.Err())
	}
	return "", fmt.Errorf("cut off: %w", ctx.Err())
}

// TestOutboxKeepsAnswersAcrossShutdown: answers the platform has not
// accepted when the shutdown grace ends stay in the outbox; the next start
// posts each once, named by its event's key, without asking the agent
// again. It asks the responder to look for an earlier post first (Again)
// unless every attempt was refused outright.
func TestOutboxKeepsAnswersAcrossShutdown(t *testing.T) {
	t.Parallel()
	for _, refused := range []bool{false, true} {
		name := "cut off"
		if refused {
			name = "refused"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forEachSharedStore(t, func(t *testing.T, open func() sharedStore) {
				keepsAnswersAcrossShutdown(t, open(), refused)
			})
		})
	}
}

func keepsAnswersAcrossShutdown(t *testing.T, st store.Store, refused bool) {
	fake := newReplicaFake(t, workspacetest.Agent{})
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := bridge.New(defaultConfig(), ws, st, zaptest.NewLogger(t).Named("first"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	stuck := stuckResponder{sent: make(chan bridge.Reply, n), refused: refused}
	p := newChatPlatform()
	attach(t, first, p)
	for i := range n {
		ev := p.event(fmt.Sprintf("c/%d", i), fmt.Sprintf("test/msg/%d", i), fmt.Sprintf("q%d", i))
		ev = via(ev, stuck)
		if err := receive(first, ev).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		<-stuck.sent // each answer is being posted
	}
	over, cancel := context.WithCancel(context.Background())
	cancel() // the grace is over at once
	if err := first.Shutdown(over); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want the grace's end", err)
	}
	first.Close()
	pending, err := st.Pending(t.Context())
	if err != nil || len(pending) != n {
		t.Fatalf("Pending() after shutdown = %d entries, %v, want %d", len(pending), err, n)
	}
	for _, e := range pending {
		if e.State != store.Sent || !strings.Contains(string(e.Outbox), "You said") {
			t.Errorf("entry %s after shutdown: %v with outbox %q, want Sent with its answer kept", e.Key, e.State, e.Outbox)
		}
	}

	next, err := bridge.New(defaultConfig(), ws, st, zaptest.NewLogger(t).Named("next"))
	if err != nil {
		t.Fatal(err)
	}
	resumed, told, err := next.Attach("test", p)
	if err != nil || resumed != n || told != 0 {
		t.Fatalf("Attach = %d resumed, %d told, %v; want %d, 0", resumed, told, err, n)
	}
	var keys []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("test/msg/%d", i))
	}
	p.waitReplies(t, keys...)
	if err := next.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	next.Close()
	for i, key := range keys {
		got := p.repliesTo(key)
		if len(got) != 1 || got[0].Text != fmt.Sprintf("[turn 1] You said: q%d", i) || got[0].Once != key || got[0].Again == refused {
			t.Errorf("replies to %s = %+v, want the kept answer once, named %q, Again %v", key, got, key, !refused)
		}
	}
	for conv, msgs := range convMessages(t, fake) {
		if len(msgs) != 1 {
			t.Errorf("agent got %q in %s, want each message once", msgs, conv)
		}
	}
	if pending, err := st.Pending(t.Context()); err != nil || len(pending) != 0 {
		t.Errorf("Pending() after the restart = %d entries, %v, want none", len(pending), err)
	}
}

// TestOutboxPostedByAnotherReplica: a replica that dies while its answer
// waits on the platform leaves it in the outbox under the conversation's
// lease; once the lease lapses another replica posts it, once, and the
// agent was asked once.
func TestOutboxPostedByAnotherReplica(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, outboxPostedByAnotherReplica)
}

func outboxPostedByAnotherReplica(t *testing.T, open func() sharedStore) {
	fake := newReplicaFake(t, workspacetest.Agent{})
	p := newChatPlatform()
	rc := bridge.ReplicaConfig{LeaseTTL: 300 * time.Millisecond, SweepEvery: 50 * time.Millisecond, ClaimGrace: 50 * time.Millisecond}
	rc.Holder = "dying"
	dying := newReplica(t, open(), fake, p, rc)
	stuck := stuckResponder{sent: make(chan bridge.Reply, 1)}
	ev := p.event("c/1", "test/msg/1", "q1")
	ev = via(ev, stuck)
	if err := receive(dying.b, ev).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-stuck.sent
	// Killed: its connections are gone, its leases lapse.
	dying.st.Close()
	rc.Holder = "other"
	newReplica(t, open(), fake, p, rc)
	p.waitReplies(t, "test/msg/1")
	if got := p.repliesTo("test/msg/1"); len(got) != 1 || got[0].Text != "[turn 1] You said: q1" || !got[0].Again {
		t.Errorf("replies = %+v, want the kept answer once, marked Again", got)
	}
	if got := convMessages(t, fake)["q1"]; len(got) != 1 {
		t.Errorf("agent got %q, want the message once", got)
	}
}
