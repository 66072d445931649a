package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// The scheduled run of the crash tests: its channel is C1, whose replies
// the chatPlatform keeps under "C1" whichever replica posts them.
var nightly = bridge.Scheduled{Name: "nightly", Flow: "healthcheck", Params: map[string]string{"host": "web7"}, Cron: "@daily", Platform: "test", Channel: "C1"}

func nightlyRun(at time.Time) bridge.ScheduledRun {
	return bridge.ScheduledRun{Scheduled: nightly, At: at, Conversation: "test/C1", Route: json.RawMessage(`{"to":"C1"}`)}
}

// answers returns the replies to key that are not working messages (a
// flow's "Running…", posted directly, not through the outbox).
func (p *chatPlatform) answers(key string) []bridge.Reply {
	var out []bridge.Reply
	for _, r := range p.repliesTo(key) {
		if r.Kind != bridge.ReplyProgress {
			out = append(out, r)
		}
	}
	return out
}

// waitAnswer waits until key has an answer (answers).
func (p *chatPlatform) waitAnswer(t *testing.T, key string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for len(p.answers(key)) == 0 {
		select {
		case <-p.notify:
		case <-timeout:
			t.Fatalf("no answer to %s; replies %+v", key, p.repliesTo(key))
		}
	}
}

// flowRuns counts the flow runs the fake API was asked for.
func flowRuns(fake *workspacetest.Server) int {
	n := 0
	for _, req := range fake.Requests() {
		if strings.Contains(req.Path, "/run/sync") {
			n++
		}
	}
	return n
}

func newBridgeOn(t *testing.T, st store.Store, fake *workspacetest.Server, name string) *bridge.Bridge {
	t.Helper()
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.New(defaultConfig(), ws, st, zaptest.NewLogger(t).Named(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b.Shutdown(ctx)
		b.Close()
	})
	return b
}

// stopBridge shuts b down and closes it, as a process that stops.
func stopBridge(t *testing.T, b *bridge.Bridge) {
	t.Helper()
	if err := b.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// answerAfterRestart is the next start on st: a bridge that takes up the
// one scheduled entry left (resumed, not told), posts through p in the
// channel, and stops.
func answerAfterRestart(t *testing.T, st store.Store, fake *workspacetest.Server, p *chatPlatform) {
	t.Helper()
	next := newBridgeOn(t, st, fake, "next")
	if resumed, told, err := next.Attach("test", p); err != nil || resumed != 1 || told != 0 {
		t.Fatalf("Attach = %d resumed, %d told, %v; want 1, 0", resumed, told, err)
	}
	p.waitAnswer(t, "C1")
	stopBridge(t, next)
}

// TestScheduledRunReceivedRunsOnceAfterRestart: a scheduled run recorded
// and not started (here its platform's adapter had not attached yet; a
// crash between the record and the run leaves the same) is in the inbox,
// received, before anything of it runs; the next start runs it, once,
// and posts its result in the channel, named by the run's key.
func TestScheduledRunReceivedRunsOnceAfterRestart(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, func(t *testing.T, open func() sharedStore) {
		fake := newReplicaFake(t, workspacetest.Agent{})
		st := open()
		first := newBridgeOn(t, st, fake, "first")
		run := nightlyRun(time.Date(2026, 11, 29, 6, 30, 0, 0, time.UTC))
		key := bridge.ScheduleKey(nightly.Name, run.At)
		if err := first.RunScheduled(t.Context(), run); err != nil {
			t.Fatal(err)
		}
		if state, ok, err := st.EntryState(t.Context(), key); err != nil || !ok || state != store.Received {
			t.Fatalf("inbox entry %s = %v, %v, %v; want received", key, state, ok, err)
		}
		if n := flowRuns(fake); n != 0 {
			t.Fatalf("%d flow runs before the run's platform was attached, want 0", n)
		}
		// Handed in again (a second replica's claim, were ClaimRun to
		// let one through): the inbox holds it once.
		if err := first.RunScheduled(t.Context(), run); err != nil {
			t.Fatal(err)
		}
		stopBridge(t, first)

		p := newChatPlatform()
		answerAfterRestart(t, st, fake, p)
		got := p.answers("C1")
		if len(got) != 1 || !strings.Contains(got[0].Text, "checked web7") || got[0].Ephemeral || got[0].Once != key {
			t.Errorf("answers in the channel = %+v, want the result once, public, named %q", got, key)
		}
		if n := flowRuns(fake); n != 1 {
			t.Errorf("%d flow runs, want 1", n)
		}
		if state, ok, err := st.EntryState(t.Context(), key); err != nil || !ok || state != store.Answered {
			t.Errorf("inbox entry %s = %v, %v, %v; want answered", key, state, ok, err)
		}
		ok, err := st.Audit(t.Context(), store.AuditFilter{User: "schedule:nightly", Outcome: store.OutcomeOK})
		if err != nil || len(ok) != 1 {
			t.Errorf("audit = %+v, %v; want one ok run by schedule:nightly", ok, err)
		}
	})
}

// TestScheduledRunSentToldOnceWhenItsReplicaDies: a replica dies (its
// store stops answering, its leases lapse) while a scheduled flow runs.
// The run was marked sent before the flow was called; the survivor does
// not run the flow again, and tells the channel once that flowbridge
// restarted while the schedule ran, audited as interrupted.
func TestScheduledRunSentToldOnceWhenItsReplicaDies(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, func(t *testing.T, open func() sharedStore) {
		started, unblock := make(chan string, 4), make(chan struct{})
		fake := newReplicaFakeWith(t, workspacetest.Agent{}, workspacetest.Flow{Reply: func(params map[string]string) string {
			started <- params["host"]
			<-unblock
			return "checked " + params["host"]
		}})
		p := newChatPlatform()
		var dead atomic.Bool
		fast := bridge.ReplicaConfig{LeaseTTL: 500 * time.Millisecond, SweepEvery: 50 * time.Millisecond, ClaimGrace: 50 * time.Millisecond}
		dying := fast
		dying.Holder = "dying"
		st := open()
		r1 := newReplicaOn(t, defaultConfig(), st, fake, mortal{p: p, dead: &dead}, dying)
		// Registered after r1's, so run before it: its shutdown does not
		// wait for the flow.
		t.Cleanup(func() { close(unblock) })
		run := nightlyRun(time.Date(2026, 11, 29, 6, 30, 0, 0, time.UTC))
		key := bridge.ScheduleKey(nightly.Name, run.At)
		go r1.RunScheduled(t.Context(), run)
		<-started
		if state, ok, err := st.EntryState(t.Context(), key); err != nil || !ok || state != store.Sent {
			t.Fatalf("inbox entry %s while its flow runs = %v, %v, %v; want sent", key, state, ok, err)
		}
		dead.Store(true)
		st.Close() // dies: no renewal, no release

		survivor := fast
		survivor.Holder = "survivor"
		other := open()
		r2 := newReplicaOn(t, defaultConfig(), other, fake, p, survivor)
		p.waitAnswer(t, "C1")
		if err := r2.Shutdown(t.Context()); err != nil { // waits for the notice's entry to close
			t.Fatal(err)
		}
		got := p.answers("C1")
		if len(got) != 1 || got[0].Ephemeral || got[0].Once != key {
			t.Fatalf("answers in the channel = %+v, want one public notice named %q", got, key)
		}
		wantContains(t, "notice", got[0].Text, "restarted while the schedule *nightly* was running *healthcheck*", "may or may not have run")
		if n := flowRuns(fake); n != 1 {
			t.Errorf("%d flow runs, want 1: a run sent is never sent again", n)
		}
		entries, err := other.Audit(t.Context(), store.AuditFilter{User: "schedule:nightly", Outcome: bridge.OutcomeInterrupted})
		if err != nil || len(entries) != 1 || entries[0].Flow != "healthcheck" {
			t.Errorf("audit = %+v, %v; want the run interrupted once", entries, err)
		}
		if state, ok, err := other.EntryState(t.Context(), key); err != nil || !ok || state != store.Answered {
			t.Errorf("inbox entry %s = %v, %v, %v; want answered", key, state, ok, err)
		}
	})
}

// resultStuck is a platform on which a flow's result does not get
// through: its post hangs until its context ends (the shutdown grace).
// Working messages are posted.
type resultStuck struct {
	*chatPlatform
	sent chan bridge.Reply
}

type resultStuckResponder struct {
	bridge.Responder
	sent chan bridge.Reply
}

func (p resultStuck) Responder(ev bridge.Event) (bridge.Responder, error) {
	r, err := p.chatPlatform.Responder(ev)
	if err != nil {
		return nil, err
	}
	return resultStuckResponder{r, p.sent}, nil
}

func (r resultStuckResponder) Send(ctx context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	if rep.Kind == bridge.ReplyProgress {
		return r.Responder.Send(ctx, rep)
	}
	r.sent <- rep
	<-ctx.Done()
	return "", fmt.Errorf("cut off: %w", ctx.Err())
}

// TestScheduledAnswerKeptPostedOnce: a scheduled run's result not yet
// posted when the shutdown grace ends is kept in the outbox; the next
// start posts it once, named by the run's key (looked for first), without
// running the flow again.
func TestScheduledAnswerKeptPostedOnce(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, func(t *testing.T, open func() sharedStore) {
		fake := newReplicaFake(t, workspacetest.Agent{})
		st := open()
		first := newBridgeOn(t, st, fake, "first")
		p := newChatPlatform()
		stuck := resultStuck{chatPlatform: p, sent: make(chan bridge.Reply, 1)}
		attach(t, first, stuck)
		run := nightlyRun(time.Date(2026, 11, 29, 6, 30, 0, 0, time.UTC))
		key := bridge.ScheduleKey(nightly.Name, run.At)
		done := make(chan error, 1)
		go func() { done <- first.RunScheduled(t.Context(), run) }()
		<-stuck.sent // the result is being posted
		over, cancel := context.WithCancel(context.Background())
		cancel() // the grace is over at once
		if err := first.Shutdown(over); !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown = %v, want the grace's end", err)
		}
		first.Close()
		if err := <-done; err != nil {
			t.Errorf("RunScheduled = %v", err)
		}
		pending, err := st.Pending(t.Context())
		if err != nil || len(pending) != 1 || pending[0].Key != key || pending[0].State != store.Sent || !strings.Contains(string(pending[0].Outbox), "checked web7") {
			t.Fatalf("Pending after the shutdown = %+v, %v; want the run sent with its result kept", pending, err)
		}

		answerAfterRestart(t, st, fake, p)
		got := p.answers("C1")
		if len(got) != 1 || !strings.Contains(got[0].Text, "checked web7") || got[0].Ephemeral || got[0].Once != key || !got[0].Again {
			t.Errorf("answers in the channel = %+v, want the kept result once, public, named %q, looked for first", got, key)
		}
		if n := flowRuns(fake); n != 1 {
			t.Errorf("%d flow runs, want 1", n)
		}
		if pending, err := st.Pending(t.Context()); err != nil || len(pending) != 0 {
			t.Errorf("Pending = %d entries, %v; want the run closed", len(pending), err)
		}
	})
}

// TestScheduledRunTakenUpLateIsToldNotRun: a scheduled run recorded and
// not started, taken up only after its next run was due (flowbridge was
// down past it), is not run late, as a missed run is not: the channel is
// told once, the flow is not called, and the audit says why.
func TestScheduledRunTakenUpLateIsToldNotRun(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, func(t *testing.T, open func() sharedStore) {
		fake := newReplicaFake(t, workspacetest.Agent{})
		st := open()
		first := newBridgeOn(t, st, fake, "first")
		run := nightlyRun(time.Date(2026, 11, 29, 6, 30, 0, 0, time.UTC))
		run.GiveUp = time.Now().Add(-time.Minute) // its next run is due already
		key := bridge.ScheduleKey(nightly.Name, run.At)
		if err := first.RunScheduled(t.Context(), run); err != nil {
			t.Fatal(err)
		}
		stopBridge(t, first)

		p := newChatPlatform()
		answerAfterRestart(t, st, fake, p)
		got := p.answers("C1")
		if len(got) != 1 || !strings.Contains(got[0].Text, "did not make its run of 2026-11-29 06:30") || got[0].Ephemeral || got[0].Once != key {
			t.Errorf("answers in the channel = %+v, want one public notice that the run was not made late, named %q", got, key)
		}
		if n := flowRuns(fake); n != 0 {
			t.Errorf("%d flow runs, want 0: a run is not made late", n)
		}
		if state, ok, err := st.EntryState(t.Context(), key); err != nil || !ok || state != store.Answered {
			t.Errorf("inbox entry %s = %v, %v, %v; want answered", key, state, ok, err)
		}
		refused, err := st.Audit(t.Context(), store.AuditFilter{User: "schedule:nightly", Outcome: store.OutcomeRefused})
		if err != nil || len(refused) != 1 || !strings.Contains(refused[0].Detail, "next run was due") {
			t.Errorf("audit = %+v, %v; want one refused run by schedule:nightly, saying why", refused, err)
		}
	})
}

// TestMissedRunsReportedOnceAcrossARestart: the report of runs missed
// while no flowbridge was up is an inbox entry like a run: recorded before
// it is posted (here its platform had not attached yet; a crash between
// the claim and the post leaves the same), posted once by the next start,
// named by its key, and recorded once however often it is handed in.
func TestMissedRunsReportedOnceAcrossARestart(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, func(t *testing.T, open func() sharedStore) {
		fake := newReplicaFake(t, workspacetest.Agent{})
		st := open()
		first := newBridgeOn(t, st, fake, "first")
		at := time.Date(2026, 11, 29, 0, 10, 0, 0, time.UTC)
		m := bridge.MissedRuns{Scheduled: nightly, First: at, More: 11, Claimed: at.Add(55 * time.Minute), Next: at.Add(time.Hour), Conversation: "test/C1", Route: json.RawMessage(`{"to":"C1"}`)}
		for range 2 {
			if err := first.ReportMissed(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		stopBridge(t, first)

		p := newChatPlatform()
		answerAfterRestart(t, st, fake, p)
		got := p.answers("C1")
		if len(got) != 1 || !strings.Contains(got[0].Text, "missed its run at 2026-11-29 00:10") || !strings.Contains(got[0].Text, "11 later run(s)") || got[0].Ephemeral || !strings.HasPrefix(got[0].Once, "schedule/nightly/missed/") {
			t.Errorf("answers in the channel = %+v, want the missed-run report once, public, named by its key", got)
		}
		if n := flowRuns(fake); n != 0 {
			t.Errorf("%d flow runs, want 0: missed runs are reported, not run", n)
		}
	})
}
