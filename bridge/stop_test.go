package bridge_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// stopPress is a Stop press by user in conv, for the entry target ("" for
// whatever runs there), answered through rec, or through its route when
// rec is nil.
func stopPress(conv, key, user, target string, rec *recorder) bridge.Event {
	var r bridge.Responder // a nil *recorder in it would be a responder that panics
	if rec != nil {
		r = rec
	}
	ev := keyed(conv, key, "", r)
	ev.Kind, ev.Action, ev.User.ID = bridge.KindAction, bridge.Action{ID: bridge.ActionStop, Value: target}, user
	return ev
}

// sessionRecorder is a recorder whose platform shows agent session statuses.
type sessionRecorder struct {
	*recorder
	smu sync.Mutex
	set []bridge.SessionStatus
}

func (s *sessionRecorder) SetSessionStatus(_ context.Context, st bridge.SessionStatus) {
	s.smu.Lock()
	defer s.smu.Unlock()
	s.set = append(s.set, st)
}

func (s *sessionRecorder) statuses() []bridge.SessionStatus {
	s.smu.Lock()
	defer s.smu.Unlock()
	return append([]bridge.SessionStatus(nil), s.set...)
}

func TestStopChatTurn(t *testing.T) {
	// A chat turn under way is stopped by its user: the user is told at
	// once, the agent's answer (which comes after) is not posted, the entry
	// is closed, and the conversation's next message is answered.
	agent, started, unblock := gatedAgent("slow")
	h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) { agent.UUID = agentUUID; s.AddAgent(agent) })
	t.Cleanup(func() { close(unblock) })
	turn := &sessionRecorder{recorder: newRecorder()}
	ask := keyed("c/1", "test/msg/1", "slow", turn)
	asked := receive(h.b, ask)
	if err := asked.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-started
	press := newRecorder()
	if err := h.receive(stopPress("c/1", "test/stop/1", "U1", "", press)); err != nil {
		t.Fatal(err)
	}
	got := press.last(t)
	wantContains(t, "stop notice", got.Text, "Stopped")
	if !got.Ephemeral {
		t.Error("the stop notice is not ephemeral")
	}
	select {
	case <-asked.Finished():
	case <-t.Context().Done():
		t.Fatal("the stopped turn did not end")
	}
	next := h.ask("c/1", "after")
	wantContains(t, "next answer", next.Text, "answer to after")
	for _, r := range turn.all() {
		if strings.Contains(r.Text, "answer to slow") {
			t.Errorf("the stopped turn's answer was posted: %q", r.Text)
		}
	}
	if st := turn.statuses(); len(st) != 2 || st[0] != bridge.SessionProcessing || st[1] != bridge.SessionActive {
		t.Errorf("session statuses = %v, want processing, active", st)
	}
	// A second press, and a press after the answer, change nothing.
	again := newRecorder()
	if err := h.receive(stopPress("c/1", "test/stop/2", "U1", "test/msg/1", again)); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "press after the end", again.last(t).Text, "finished already")
	if p, err := h.store.Pending(t.Context()); err != nil || len(p) != 0 {
		t.Errorf("pending = %d, %v; want every entry closed", len(p), err)
	}
}

func TestStopFlowByItsButton(t *testing.T) {
	// A flow stopped from the Stop button on its progress message: the
	// progress message says so, the result is never posted, the audit
	// records it stopped and by whom.
	release := make(chan struct{})
	h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
		s.AddFlow(workspacetest.Flow{UUID: flowUUID, Reply: func(map[string]string) string {
			<-release
			return "the result"
		}})
	})
	t.Cleanup(func() { close(release) })
	rec := newRecorder()
	run := command("c/f", bridge.CommandFlow, "healthcheck host=web1", rec)
	run.Key, run.Route = "test/cmd/1", []byte(`{"to":"test/cmd/1"}`)
	run = via(run, rec)
	running := receive(h.b, run)
	if err := running.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec.waitReplies(t, 1, "Running")
	progress := rec.all()[0]
	var stop *bridge.Button
	for i, b := range progress.Buttons {
		if b.Action.ID == bridge.ActionStop {
			stop = &progress.Buttons[i]
		}
	}
	if stop == nil || stop.Action.Value != "test/cmd/1" {
		t.Fatalf("progress message buttons = %+v, want Stop for test/cmd/1", progress.Buttons)
	}
	press := newRecorder()
	if err := h.receive(stopPress("c/f", "test/stop/f", "U1", stop.Action.Value, press)); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "stop notice", press.last(t).Text, "Stopped *healthcheck*", "result will not be posted")
	select {
	case <-running.Finished():
	case <-t.Context().Done():
		t.Fatal("the stopped flow did not end")
	}
	for _, r := range rec.all() {
		if strings.Contains(r.Text, "the result") {
			t.Errorf("the stopped flow's result was posted: %q", r.Text)
		}
	}
	wantContains(t, "progress message", rec.last(t).Text, "Stopped")
	entries, err := h.store.Audit(t.Context(), store.AuditFilter{Flow: "healthcheck"})
	if err != nil {
		t.Fatal(err)
	}
	var stopped bool
	for _, e := range entries {
		if e.Outcome == bridge.OutcomeStopped && strings.Contains(e.Detail, "U1") {
			stopped = true
		}
	}
	if !stopped {
		t.Errorf("audit = %+v, want the run stopped by U1", entries)
	}
}

func TestStopOfSomeoneElsesRun(t *testing.T) {
	// Another user's press is refused; an admin's stops it.
	agent, started, unblock := gatedAgent("slow")
	h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) { agent.UUID = agentUUID; s.AddAgent(agent) })
	t.Cleanup(func() { close(unblock) })
	asked := receive(h.b, keyed("c/1", "test/msg/1", "slow", newRecorder()))
	if err := asked.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-started
	other := newRecorder()
	if err := h.receive(stopPress("c/1", "test/stop/1", "U2", "test/msg/1", other)); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "other user's press", other.last(t).Text, "Only the person who asked")
	admin := newRecorder()
	if err := h.receive(stopPress("c/1", "test/stop/2", "U-admin", "test/msg/1", admin)); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "admin's press", admin.last(t).Text, "Stopped")
	<-asked.Finished()
}

func TestStopKeptAcrossRestart(t *testing.T) {
	// A Stop marked on an entry whose run a crash cut off: after the
	// restart nothing of it is posted, its user is not told it was lost,
	// and the flow's audit says it was stopped.
	h := newHarness(t, defaultConfig(), nil)
	chat := keyed("c/s", "test/msg/s1", "in flight", nil)
	flow := command("c/f", bridge.CommandFlow, "healthcheck host=web1", nil)
	flow.Key, flow.Route = "test/cmd/f1", []byte(`{"to":"test/cmd/f1"}`)
	crashedStore(t, h.store, nil, []bridge.Event{chat, flow})
	for _, key := range []string{"test/msg/s1", "test/cmd/f1"} {
		if ok, err := h.store.Stop(t.Context(), key, "U1", time.Now()); err != nil || !ok {
			t.Fatalf("Stop(%s) = %v, %v", key, ok, err)
		}
	}
	h.restartBare(defaultConfig())
	r := &restorer{recs: map[string]*recorder{}}
	if _, _, err := h.b.Attach("test", r); err != nil {
		t.Fatal(err)
	}
	if err := h.b.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"test/msg/s1", "test/cmd/f1"} {
		if got := r.rec(key).all(); len(got) != 0 {
			t.Errorf("%s: replies after the restart = %+v, want none", key, got)
		}
	}
	if p, err := h.store.Pending(t.Context()); err != nil || len(p) != 0 {
		t.Errorf("pending = %d, %v; want both closed", len(p), err)
	}
	entries, err := h.store.Audit(t.Context(), store.AuditFilter{Flow: "healthcheck"})
	if err != nil || len(entries) != 1 || entries[0].Outcome != bridge.OutcomeStopped {
		t.Errorf("audit = %+v, %v; want one stopped entry", entries, err)
	}
}

func TestResetClosesTheSession(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	rec := &sessionRecorder{recorder: newRecorder()}
	if err := h.do(via(command("c/1", bridge.CommandAgent, "reset", nil), rec)); err != nil {
		t.Fatal(err)
	}
	if st := rec.statuses(); len(st) != 1 || st[0] != bridge.SessionClosed {
		t.Errorf("statuses = %v, want closed", st)
	}
}

func TestTitleShownByStatus(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	title := keyed("c/1", "test/title/1", "Deploy  plans\nfor Q3", newRecorder())
	title.Kind = bridge.KindTitle
	if err := h.receive(title); err != nil {
		t.Fatal(err)
	}
	_, status := h.command("c/1", bridge.CommandAgent, "status")
	wantContains(t, "status", status.Text, "Title: Deploy plans for Q3")
}

func TestReplicaStopsWhatAnotherRuns(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, replicaStopsWhatAnotherRuns)
}

func replicaStopsWhatAnotherRuns(t *testing.T, open func() sharedStore) {
	// Stop pressed on replica r1 while r0 runs the turn: r0 stops it, and
	// nothing of its answer is posted.
	agent, started, unblock := gatedAgent("slow")
	fake := newReplicaFake(t, agent)
	t.Cleanup(func() { close(unblock) })
	p := newChatPlatform()
	r0 := newReplica(t, open(), fake, p, bridge.ReplicaConfig{Holder: "r0"})
	r1 := newReplica(t, open(), fake, p, bridge.ReplicaConfig{Holder: "r1"})
	asked := receive(r0.b, p.event("c/1", "test/msg/1", "slow"))
	if err := asked.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-started
	press := stopPress("c/1", "test/stop/1", "U1", "", nil)
	if err := receive(r1.b, press).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.waitReplies(t, "test/stop/1")
	wantContains(t, "stop notice", p.repliesTo("test/stop/1")[0].Text, "Stopped")
	select {
	case <-asked.Finished():
	case <-t.Context().Done():
		t.Fatal("r0 did not stop the turn")
	}
	if got := p.repliesTo("test/msg/1"); len(got) != 0 {
		t.Errorf("replies to the stopped turn = %+v, want none", got)
	}
	if pending, err := r0.st.PendingOf(t.Context(), "c/1"); err != nil || len(pending) != 0 {
		t.Errorf("pending = %+v, %v; want the stopped entry closed", pending, err)
	}
}
