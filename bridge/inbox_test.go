package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// keyed is a chat event with a platform key, as the Slack and Discord
// adapters send them.
func keyed(conv, key, text string, rec bridge.Responder) bridge.Event {
	ev := bridge.Event{Kind: bridge.KindMessage, Platform: "test", Conversation: conv, Channel: "C1",
		User: bridge.User{ID: "U1", Name: "ann"}, Text: text, Key: key,
		Route: []byte(fmt.Sprintf(`{"to":%q}`, key))}
	if rec == nil {
		return ev
	}
	return via(ev, rec)
}

// receive hands ev to the bridge, waits for its receipt and then until the
// bridge is done with it (when it runs at all).
func (h *harness) receive(ev bridge.Event) error {
	h.t.Helper()
	rec := receive(h.b, ev)
	err := rec.Wait(h.t.Context())
	select {
	case <-rec.Finished():
	case <-time.After(30 * time.Second):
		h.t.Fatalf("event %q not finished", ev.Text)
	}
	return err
}

func TestRedeliveryAnsweredOnce(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	rec := newRecorder()
	if err := h.receive(keyed("c/1", "test/msg/1", "hello", rec)); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	if err := h.receive(keyed("c/1", "test/msg/1", "hello", rec)); !errors.Is(err, bridge.ErrDuplicate) {
		t.Fatalf("redelivery = %v, want ErrDuplicate", err)
	}
	// Of many concurrent deliveries of one key, exactly one is answered.
	burst := newRecorder()
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for range 16 {
		wg.Go(func() {
			if err := h.receive(keyed("c/2", "test/msg/burst", "burst", burst)); err == nil {
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if accepted != 1 || len(burst.all()) != 1 {
		t.Errorf("concurrent deliveries: accepted %d, replies %d; want 1 and 1", accepted, len(burst.all()))
	}
	// A restarted bridge on the same store knows them too.
	h.restart(defaultConfig())
	again := newRecorder()
	for _, key := range []string{"test/msg/1", "test/msg/burst"} {
		if err := h.receive(keyed("c/1", key, "again", again)); !errors.Is(err, bridge.ErrDuplicate) {
			t.Errorf("redelivery of %s after restart = %v, want ErrDuplicate", key, err)
		}
	}
	if n := len(again.all()); n != 0 {
		t.Errorf("replies to redeliveries after restart = %d, want 0", n)
	}
	if msgs := h.chatMessages(); len(msgs) != 2 {
		t.Errorf("messages the agent got = %q, want 2 (hello, burst)", msgs)
	}
}

// chatMessages returns every chat message the fake agent accepted.
func (h *harness) chatMessages() []string {
	var all []string
	for _, agent := range []string{agentUUID, agent2UUID} {
		for _, s := range h.fake.Sessions(agent) {
			all = append(all, h.fake.Messages(s)...)
		}
	}
	return all
}

func TestConversationOrderWithInbox(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.QueueSize = 64
	h := newHarness(t, cfg, func(s *workspacetest.Server) {
		// Replies that take a moment, so later messages queue behind earlier ones.
		s.AddAgent(workspacetest.Agent{UUID: agentUUID, Delay: time.Millisecond})
	})
	const n = 40
	rec := newRecorder()
	var receipts []*bridge.Receipt
	for i := range n {
		receipts = append(receipts, receive(h.b, keyed("c/order", fmt.Sprintf("test/msg/%d", i), fmt.Sprintf("m%02d", i), rec)))
	}
	for i, r := range receipts {
		if err := r.Wait(t.Context()); err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
	}
	for range n {
		<-rec.notify
	}
	got := h.chatMessages()
	for i := range n {
		if i >= len(got) || got[i] != fmt.Sprintf("m%02d", i) {
			t.Fatalf("agent got %q, want m00 … m%02d in order", got, n-1)
		}
	}
}

// restorer rebuilds responders after a restart from the test's Route.
type restorer struct {
	testPlatform
	mu   sync.Mutex
	recs map[string]*recorder // by key
	err  error
}

func (r *restorer) Responder(ev bridge.Event) (bridge.Responder, error) {
	if r.err != nil {
		return nil, r.err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !strings.Contains(string(ev.Route), ev.Key) {
		return nil, fmt.Errorf("route %s lost", ev.Route)
	}
	return r.recLocked(ev.Key), nil
}

// rec is the recorder of the event key, made by whichever comes first:
// its Restore, which the dispatcher calls when it runs the entry, after
// Attach has returned, or the test asking for it.
func (r *restorer) rec(key string) *recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.recLocked(key)
}

func (r *restorer) recLocked(key string) *recorder {
	rec := r.recs[key]
	if rec == nil {
		rec = newRecorder()
		r.recs[key] = rec
	}
	return rec
}

// crashedStore leaves, in a store file, what a process killed at a given
// moment leaves: entries recorded and never run, and entries whose request
// was sent.
func crashedStore(t *testing.T, st *sessionmap.Store, received, sent []bridge.Event) {
	t.Helper()
	for _, evs := range [][]bridge.Event{received, sent} {
		for _, ev := range evs {
			data := []byte(fmt.Sprintf(`{"kind":%d,"platform":%q,"conversation":%q,"channel":"C1","user":{"ID":"U1","Name":"ann"},"text":%q,"route":%s}`,
				ev.Kind, ev.Platform, ev.Conversation, ev.Text, ev.Route))
			fresh, err := st.Receive(t.Context(), store.InboxEntry{Key: ev.Key, Conversation: ev.Conversation, Event: data, Received: time.Now()})
			if err != nil || !fresh {
				t.Fatalf("Receive(%s) = %v, %v", ev.Key, fresh, err)
			}
		}
	}
	for _, ev := range sent {
		if err := st.MarkSent(t.Context(), ev.Key, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecoveryAfterCrash(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	received := []bridge.Event{keyed("c/r", "test/msg/r1", "first", nil), keyed("c/r", "test/msg/r2", "second", nil)}
	sent := []bridge.Event{keyed("c/s", "test/msg/s1", "in flight", nil)}
	flow := command("c/f", bridge.CommandFlow, "healthcheck host=web1", nil)
	flow.Key, flow.Route = "test/cmd/f1", []byte(`{"to":"test/cmd/f1"}`)
	sent = append(sent, flow)
	crashedStore(t, h.store, received, sent)

	h.restartBare(defaultConfig())
	r := &restorer{recs: map[string]*recorder{}}
	// Another platform's entries are not this adapter's to resume.
	if resumed, told, err := h.b.Attach("other", r); err != nil || resumed+told != 0 {
		t.Fatalf("Attach(other) = %d, %d, %v; want nothing", resumed, told, err)
	}
	resumed, told, err := h.b.Attach("test", r)
	if err != nil || resumed != 2 || told != 2 {
		t.Fatalf("Attach = %d resumed, %d told, %v; want 2, 2, nil", resumed, told, err)
	}
	for _, key := range []string{"test/msg/r1", "test/msg/r2", "test/msg/s1", "test/cmd/f1"} {
		<-r.rec(key).notify
	}
	wantContains(t, "resumed reply", r.rec("test/msg/r2").last(t).Text, "You said: second")
	wantContains(t, "chat notice", r.rec("test/msg/s1").last(t).Text, "restarted while it was answering")
	wantContains(t, "flow notice", r.rec("test/cmd/f1").last(t).Text, "restarted while *healthcheck* was running", "may or may not have run")
	// The chat notice stands in for a public answer, posted where it can be
	// found again; the flow's stays with its user, as its result would.
	if chat, flow := r.rec("test/msg/s1").last(t), r.rec("test/cmd/f1").last(t); chat.Ephemeral || !flow.Ephemeral || chat.Once != "test/msg/s1" {
		t.Errorf("chat notice ephemeral %v (named %q), flow notice ephemeral %v; want the chat's regular and named by its key, the flow's ephemeral", chat.Ephemeral, chat.Once, flow.Ephemeral)
	}
	if got := h.chatMessages(); strings.Join(got, ",") != "first,second" {
		t.Errorf("agent got %q; want first,second: a sent message is never sent again", got)
	}
	for _, req := range h.fake.Requests() {
		if strings.Contains(req.Path, "/run/sync") {
			t.Errorf("the interrupted flow was run again: %s", req.Path)
		}
	}
	// Shutdown waits for the notices' work, entries closed included.
	if err := h.b.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p, err := h.store.Pending(t.Context()); err != nil || len(p) != 0 {
		t.Errorf("Pending = %d entries, %v; want all closed", len(p), err)
	}
	entries, err := h.store.Audit(t.Context(), store.AuditFilter{Flow: "healthcheck"})
	if err != nil || len(entries) != 1 || entries[0].Outcome != bridge.OutcomeInterrupted {
		t.Errorf("audit = %+v, %v; want one interrupted entry", entries, err)
	}
	// A second Attach finds nothing more; a redelivery is a duplicate.
	h.restartBare(defaultConfig())
	if resumed, told, _ := h.b.Attach("test", r); resumed+told != 0 {
		t.Errorf("Attach after a clean restart = %d, %d; want 0, 0", resumed, told)
	}
	if err := h.receive(keyed("c/s", "test/msg/s1", "in flight", newRecorder())); !errors.Is(err, bridge.ErrDuplicate) {
		t.Errorf("redelivery of a told event = %v, want ErrDuplicate", err)
	}
}

func TestUnrestorableEntryIsDropped(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	crashedStore(t, h.store, []bridge.Event{keyed("c/x", "test/msg/x", "lost", nil)}, nil)
	h.restartBare(defaultConfig())
	// Attach finds the entry to run; its run finds it cannot be restored.
	if resumed, told, err := h.b.Attach("test", &restorer{err: errors.New("channel gone")}); err != nil || resumed != 1 || told != 0 {
		t.Fatalf("Attach = %d, %d, %v; want 1, 0, nil", resumed, told, err)
	}
	if err := h.b.Shutdown(t.Context()); err != nil { // waits for the attached work
		t.Fatal(err)
	}
	if p, err := h.store.Pending(t.Context()); err != nil || len(p) != 0 {
		t.Errorf("Pending = %d, %v; want the unrestorable entry closed", len(p), err)
	}
}

func TestQueueOverflowAnswersBusy(t *testing.T) {
	release := make(chan struct{})
	reg := prometheus.NewRegistry()
	metrics, err := bridge.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.QueueSize = 2
	cfg.Metrics = metrics
	asked := make(chan struct{}, 4)
	h := newHarness(t, cfg, func(s *workspacetest.Server) {
		s.AddAgent(workspacetest.Agent{UUID: agentUUID, Reply: func(_ int, msg string) string {
			asked <- struct{}{}
			<-release
			return "ok " + msg
		}})
	})
	rec := newRecorder()
	// One running and two waiting fill the conversation; the fourth is busy.
	var receipts []*bridge.Receipt
	for i := range 4 {
		receipts = append(receipts, receive(h.b, keyed("c/full", fmt.Sprintf("test/msg/f%d", i), fmt.Sprint("m", i), rec)))
		if i == 0 {
			<-asked // the first is with the agent, out of the queue
		}
	}
	if err := receipts[3].Wait(t.Context()); !errors.Is(err, bridge.ErrBusy) {
		t.Fatalf("overflowing event = %v, want ErrBusy", err)
	}
	<-rec.notify
	wantContains(t, "busy reply", rec.last(t).Text, "still working on your earlier messages")
	if got := counterValue(t, reg, "flowbridge_refusals_total", "reason", "queue_full"); got != 1 {
		t.Errorf("refusals{queue_full} = %v, want 1", got)
	}
	close(release)
	for range 3 {
		<-rec.notify
	}
	// The busy event was recorded: Slack's retry of it is not answered.
	if err := h.receive(keyed("c/full", "test/msg/f3", "m3", rec)); !errors.Is(err, bridge.ErrDuplicate) {
		t.Errorf("retry of the refused event = %v, want ErrDuplicate", err)
	}
}

// counterValue reads one labelled counter from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// failingStore refuses inbox writes, as a full disk does.
type failingStore struct {
	*sessionmap.Store
}

func (failingStore) Receive(context.Context, store.InboxEntry) (bool, error) {
	return false, errors.New("write: no space left on device")
}

// bridgeOnStore starts a bridge on a workspace fake with one agent and on
// wrap's store around a new bbolt store.
func bridgeOnStore(t *testing.T, wrap func(*sessionmap.Store) bridge.Store) (*bridge.Bridge, *workspacetest.Server) {
	t.Helper()
	fake := workspacetest.New(workspacetest.Options{})
	fake.AddAgent(workspacetest.Agent{UUID: agentUUID})
	fake.Start()
	t.Cleanup(fake.Close)
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t)
	b, err := bridge.New(defaultConfig(), ws, wrap(st), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	attachTest(t, b)
	return b, fake
}

func TestStoreFullRefusesAndTellsNothing(t *testing.T) {
	// An event the inbox cannot record is refused (the adapter then does
	// not acknowledge it, and the platform delivers it again): its user is
	// told nothing, since that retry may well be answered.
	b, fake := bridgeOnStore(t, func(st *sessionmap.Store) bridge.Store { return failingStore{st} })
	rec := newRecorder()
	if err := receive(b, keyed("c/1", "test/msg/1", "hello", rec)).Wait(t.Context()); !errors.Is(err, bridge.ErrNotSaved) {
		t.Fatalf("Receive on a full store = %v, want ErrNotSaved", err)
	}
	if err := b.StoreReady(); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("StoreReady = %v, want the write error", err)
	}
	b.Shutdown(context.Background())
	if got := rec.all(); len(got) != 0 {
		t.Errorf("replies = %+v, want none", got)
	}
	if n := len(fake.Sessions(agentUUID)); n != 0 {
		t.Errorf("sessions created = %d, want 0: nothing is created for a message that cannot be kept", n)
	}
}

// outageStore is a store on a database that is down for its first
// failures writes (MarkSent, MarkSentUnder and Finish) or while down is
// set: writes and probes fail.
type outageStore struct {
	bridge.Store
	failures *atomic.Int32
	down     *atomic.Bool
}

var errDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (s outageStore) isDown() bool { return s.down.Load() || s.failures.Load() > 0 }

func (s outageStore) fail() bool {
	if s.down.Load() {
		return true
	}
	return s.failures.Add(-1) >= 0
}

func (s outageStore) Receive(ctx context.Context, e store.InboxEntry) (bool, error) {
	if s.down.Load() {
		return false, errDown
	}
	return s.Store.Receive(ctx, e)
}

func (s outageStore) MarkSent(ctx context.Context, key string, now time.Time) error {
	if s.fail() {
		return errDown
	}
	return s.Store.MarkSent(ctx, key, now)
}

func (s outageStore) MarkSentUnder(ctx context.Context, key, name, holder string, now time.Time) error {
	if s.fail() {
		return errDown
	}
	return s.Store.MarkSentUnder(ctx, key, name, holder, now)
}

func (s outageStore) Finish(ctx context.Context, key, reply string, turn *store.Turn, now time.Time) error {
	if s.fail() {
		return errDown
	}
	return s.Store.Finish(ctx, key, reply, turn, now)
}

func (s outageStore) Ping(context.Context) error {
	if s.isDown() {
		return errDown
	}
	return nil
}

func TestStoreOutageWaitsAndTellsOnlyTheAnswer(t *testing.T) {
	// The database goes away between recording a message and marking it
	// sent, and again before its answer is recorded: the bridge waits for
	// it rather than tell the user "did not take this" (untrue: the
	// message is in the inbox, and answered once the database is back).
	var failures atomic.Int32
	var down atomic.Bool
	failures.Store(2)
	var db *sessionmap.Store
	b, fake := bridgeOnStore(t, func(st *sessionmap.Store) bridge.Store {
		db = st
		return outageStore{Store: st, failures: &failures, down: &down}
	})
	rec := newRecorder()
	done := make(chan struct{})
	ev := keyed("c/1", "test/msg/1", "hello", rec)
	ev = onDone(ev, func() { close(done) })
	if err := receive(b, ev).Wait(t.Context()); err != nil {
		t.Fatalf("Receive = %v", err)
	}
	<-done
	got := rec.all()
	if len(got) != 1 || got[0].Kind != bridge.ReplyAgent {
		t.Fatalf("replies = %+v, want the answer alone", got)
	}
	if n := len(fake.Sessions(agentUUID)); n != 1 {
		t.Errorf("sessions = %d, want 1", n)
	}
	failures.Store(1) // the answer's Finish fails once more
	done = make(chan struct{})
	ev = keyed("c/1", "test/msg/2", "again", rec)
	ev = onDone(ev, func() { close(done) })
	if err := receive(b, ev).Wait(t.Context()); err != nil {
		t.Fatalf("Receive = %v", err)
	}
	<-done
	b.Shutdown(context.Background())
	b.Close()
	if got := rec.all(); len(got) != 2 || got[1].Kind != bridge.ReplyAgent {
		t.Fatalf("replies = %+v, want two answers", got)
	}
	// Both entries are closed: a restart tells no one "restarted".
	pending, err := db.Pending(t.Context())
	if err != nil || len(pending) != 0 {
		t.Errorf("Pending() = %+v, %v; want none", pending, err)
	}
}

func TestStoreReadyRecoversWithoutTraffic(t *testing.T) {
	// A failed write makes the bridge not ready; once the database answers
	// again, it is ready again without waiting for an event to succeed.
	var failures atomic.Int32
	var down atomic.Bool
	down.Store(true)
	b, _ := bridgeOnStore(t, func(st *sessionmap.Store) bridge.Store {
		return outageStore{Store: st, failures: &failures, down: &down}
	})
	t.Cleanup(func() { b.Shutdown(context.Background()); b.Close() })
	recovered := make(chan struct{}, 1)
	b.OnStoreRecovered(func() { recovered <- struct{}{} })
	if err := receive(b, keyed("c/1", "test/msg/1", "hello", newRecorder())).Wait(t.Context()); !errors.Is(err, bridge.ErrNotSaved) {
		t.Fatalf("Receive while the database is down = %v, want ErrNotSaved", err)
	}
	if err := b.StoreReady(); err == nil {
		t.Fatal("StoreReady() = nil while writes fail")
	}
	down.Store(false)
	select {
	case <-recovered:
	case <-t.Context().Done():
		t.Fatal("store recovery never noticed")
	}
	if err := b.StoreReady(); err != nil {
		t.Errorf("StoreReady() = %v once the database answers, want nil", err)
	}
}

// lateStore is a store whose inbox write of key late commits, then
// reports its success only once release is closed (its goroutine slow to
// run on a busy machine); while full is set, every other write fails.
type lateStore struct {
	bridge.Store
	late      string
	committed chan struct{}
	release   chan struct{}
	full      *atomic.Bool
}

var errFull = errors.New("write: file too large")

func (s lateStore) Receive(ctx context.Context, e store.InboxEntry) (bool, error) {
	if e.Key != s.late && s.full.Load() {
		return false, errFull
	}
	fresh, err := s.Store.Receive(ctx, e)
	if e.Key == s.late {
		close(s.committed)
		<-s.release
	}
	return fresh, err
}

func (s lateStore) MarkSent(ctx context.Context, key string, now time.Time) error {
	if s.full.Load() {
		return errFull
	}
	return s.Store.MarkSent(ctx, key, now)
}

func (s lateStore) Ping(ctx context.Context) error {
	if s.full.Load() {
		return errFull
	}
	return s.Store.Ping(ctx)
}

func TestStoreReadyKeepsAFaultALateSuccessBegunBefore(t *testing.T) {
	// A write that began before the disk refused, and reports its success
	// after a later write has failed, says nothing of the disk now: the
	// bridge stays not ready (it was seen ready with writes failing, under
	// load, as concurrent writes end in any order). A write begun after
	// the failure, succeeding, makes it ready again.
	var full atomic.Bool
	late := lateStore{late: "test/msg/1", committed: make(chan struct{}), release: make(chan struct{}), full: &full}
	b, _ := bridgeOnStore(t, func(st *sessionmap.Store) bridge.Store {
		late.Store = st
		return late
	})
	t.Cleanup(func() { b.Shutdown(context.Background()); b.Close() })
	done := make(chan struct{})
	ev := keyed("c/1", "test/msg/1", "hello", newRecorder())
	ev = onDone(ev, func() { close(done) })
	first := receive(b, ev)
	<-late.committed
	full.Store(true)
	if err := receive(b, keyed("c/2", "test/msg/2", "refused", newRecorder())).Wait(t.Context()); !errors.Is(err, bridge.ErrNotSaved) {
		t.Fatalf("Receive on a full disk = %v, want ErrNotSaved", err)
	}
	close(late.release)
	if err := first.Wait(t.Context()); err != nil {
		t.Fatalf("Receive committed before the disk filled = %v, want nil", err)
	}
	if err := b.StoreReady(); err == nil || !strings.Contains(err.Error(), "file too large") {
		t.Errorf("StoreReady() = %v after a success begun before the failure, want the failure", err)
	}
	full.Store(false)
	select {
	case <-done:
	case <-t.Context().Done():
		t.Fatal("the first message was not answered once the disk took writes")
	}
	if err := b.StoreReady(); err != nil {
		t.Errorf("StoreReady() = %v after writes begun later succeeded, want nil", err)
	}
}

func TestPrepareDropsEventsNotForTheBot(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	rec := newRecorder()
	ev := keyed("c/1", "test/msg/p", "not for me", rec)
	ev = withPrepare(ev, func(context.Context, *bridge.Event) bool { return false })
	if err := h.receive(ev); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.all()); n != 0 {
		t.Errorf("replies = %d, want 0", n)
	}
	if p, _ := h.store.Pending(t.Context()); len(p) != 0 {
		t.Errorf("pending = %d, want the dropped event closed", len(p))
	}
	// Prepare completes the event before it runs, in order.
	ev = keyed("c/1", "test/msg/q", "for me", rec)
	ev = withPrepare(ev, func(_ context.Context, e *bridge.Event) bool { e.User.Name = "looked up"; e.Text += "!"; return true })
	if err := h.receive(ev); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "reply", rec.last(t).Text, "You said: for me!")
}

// ctxRecorder fails sends whose context has ended, as a platform call does.
type ctxRecorder struct{ *recorder }

func (r ctxRecorder) Send(ctx context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return r.recorder.Send(ctx, rep)
}

func TestShutdownTellsCutOffUsers(t *testing.T) {
	asked, hold := make(chan struct{}, 1), make(chan struct{})
	h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
		s.AddFlow(workspacetest.Flow{UUID: flowUUID, Delay: time.Hour})
		s.AddAgent(workspacetest.Agent{UUID: agentUUID, Reply: func(int, string) string {
			asked <- struct{}{}
			<-hold
			return "too late"
		}})
	})
	t.Cleanup(func() { close(hold) }) // runs before the fake closes
	chatRec, flowRec, queuedRec := ctxRecorder{newRecorder()}, ctxRecorder{newRecorder()}, ctxRecorder{newRecorder()}
	if err := receive(h.b, keyed("c/chat", "test/msg/slow", "slow question", chatRec)).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := receive(h.b, keyed("c/chat", "test/msg/queued", "after it", queuedRec)).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	flow := command("c/flow", bridge.CommandFlow, "healthcheck host=a", nil)
	flow.Key = "test/cmd/slow"
	flow = via(flow, flowRec)
	if err := receive(h.b, flow).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-flowRec.notify // "Running healthcheck…": the flow is on its way to the API
	<-asked          // the chat message is with the agent
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := h.b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the grace to run out", err)
	}
	wantContains(t, "chat notice", chatRec.last(t).Text, "cut off")
	wantContains(t, "flow notice", flowRec.last(t).Text, "cut off")
	if n := len(queuedRec.all()); n != 0 {
		t.Errorf("the queued message got %d replies; want none now: it stays for the next start", n)
	}
	pending, err := h.store.Pending(ctx)
	if err != nil || len(pending) != 1 || pending[0].Key != "test/msg/queued" || pending[0].State != store.Received {
		t.Errorf("Pending after shutdown = %+v, %v; want only the queued message, still received", pending, err)
	}
}

func TestConfirmationRechecksAccess(t *testing.T) {
	cfg := defaultConfig()
	f := healthcheck()
	f.Confirm = true
	cfg.Flows = []bridge.Flow{f}
	h := newHarness(t, cfg, nil)
	rec, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=web1")
	if len(r.Buttons) == 0 {
		t.Fatalf("no confirmation asked: %+v", r)
	}
	run := r.Buttons[0].Action
	for _, tc := range []struct {
		name  string
		flows []bridge.Flow
		want  string
	}{
		{"allow emptied", func() []bridge.Flow { g := f; g.Allow = []string{"user:U-other"}; return []bridge.Flow{g} }(), "You may not run"},
		{"flow deleted", nil, "no longer offered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, r = h.command("c/1", bridge.CommandFlow, "healthcheck host=web1")
			run = r.Buttons[0].Action
			if err := h.b.SetCatalog(tc.flows, cfg.Agents, cfg.Admins); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.b.SetCatalog(cfg.Flows, cfg.Agents, cfg.Admins) })
			press := event("c/1", bridge.KindAction, "", rec)
			press.Action = run
			if err := h.do(press); err != nil {
				t.Fatal(err)
			}
			wantContains(t, "reply to Run", rec.last(t).Text, tc.want)
			for _, req := range h.fake.Requests() {
				if strings.Contains(req.Path, "/run/sync") {
					t.Fatalf("the flow ran after its access was revoked")
				}
			}
		})
	}
}

func TestRepliesReadAsSentences(t *testing.T) {
	t.Run("rate limit says when", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Limits = bridge.Limits{ChatPerMinute: 1, Burst: 1}
		h := newHarness(t, cfg, nil)
		h.ask("c/1", "one")
		r := h.ask("c/1", "two")
		wantContains(t, "rate reply", r.Text, "Please try again in 1 minute")
	})
	t.Run("confirmation prompt", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Flows[0].Confirm = true
		h := newHarness(t, cfg, nil)
		_, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=prod1")
		want := "Run *healthcheck* with these parameters?\n• `host` = `prod1`\n\nThis request expires in 5 minutes."
		if r.Text != want {
			t.Errorf("prompt = %q, want %q", r.Text, want)
		}
	})
	t.Run("agent use", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Agents[1].Channels = []string{"C-elsewhere"}
		h := newHarness(t, cfg, nil)
		h.ask("c/1", "hello")
		admin := func(args string) bridge.Reply {
			rec := newRecorder()
			ev := command("c/1", bridge.CommandAgent, args, rec)
			ev.User.ID = "U-admin"
			if err := h.do(ev); err != nil {
				t.Fatal(err)
			}
			return rec.last(t)
		}
		wantContains(t, "use of a channel's forbidden agent", admin("use other").Text, "not available in this channel")
		wantContains(t, "use of the same agent", admin("use helper").Text, "already talks to *helper*")
		if n := len(h.fake.Sessions(agentUUID)); n != 1 {
			t.Fatalf("sessions = %d", n)
		}
		wantContains(t, "next answer keeps the session", h.ask("c/1", "again").Text, "[turn 2]")
	})
}

func TestFlowFailureShownAsFailure(t *testing.T) {
	h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
		s.AddFlow(workspacetest.Flow{UUID: flowUUID, Status: 200, Body: `{"meta":{"status":"FAILED","message":"disk full on web1"},"result":{"output":{"response":"all good"}}}`})
	})
	_, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=web1")
	if r.Kind != bridge.ReplyError || strings.Contains(r.Text, "all good") {
		t.Errorf("reply = %+v; want an error, not the output", r)
	}
	wantContains(t, "reply", r.Text, "failed", "disk full on web1")
	entries, _ := h.store.Audit(t.Context(), store.AuditFilter{Outcome: bridge.OutcomeFailed})
	if len(entries) != 1 {
		t.Errorf("audit entries with outcome failed = %d, want 1", len(entries))
	}
}

func TestFlowNeverSentIsReportedNotRun(t *testing.T) {
	ws, err := workspace.New(workspace.Config{BaseURL: "http://127.0.0.1:1", WorkspaceUUID: "ws-test", Token: "t", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t)
	b, err := bridge.New(defaultConfig(), ws, st, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	attachTest(t, b)
	rec := newRecorder()
	done := make(chan struct{})
	ev := command("c/1", bridge.CommandFlow, "healthcheck host=web1", rec)
	ev = onDone(ev, func() { close(done) })
	if err := handle(b, ev); err != nil {
		t.Fatal(err)
	}
	<-done
	r := rec.last(t)
	wantContains(t, "reply", r.Text, "was not run")
	if strings.Contains(r.Text, "may or may not") {
		t.Errorf("reply = %q; a refused connection proves the flow did not run", r.Text)
	}
}

func TestFlowRateLimitedSaysWhen(t *testing.T) {
	h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
		s.AddFlow(workspacetest.Flow{UUID: flowUUID, Status: 429, Header: map[string][]string{"Retry-After": {"90"}}})
	})
	_, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=web1")
	wantContains(t, "reply", r.Text, "was not run", "try again in 1 minute 30 seconds")
}

// TestAgentCommandsInThreadScope: slash commands arrive for the channel
// (Slack sends no thread with them), while conversations are threads.
func TestAgentCommandsInThreadScope(t *testing.T) {
	cfg := defaultConfig()
	cfg.Agents[1].DefaultChannels = []string{"C-other"}
	h := newHarness(t, cfg, nil)
	const channel = "slack/T1/C1"
	inThread := func(ts, user, text string) bridge.Reply {
		rec := newRecorder()
		ev := event(channel+"/"+ts, bridge.KindMessage, text, rec)
		ev.Parent, ev.User.ID = channel, user
		if err := h.do(ev); err != nil {
			t.Fatal(err)
		}
		return rec.last(t)
	}
	slash := func(user, args string) bridge.Reply {
		rec := newRecorder()
		ev := command(channel, bridge.CommandAgent, args, rec)
		ev.User.ID = user
		if err := h.do(ev); err != nil {
			t.Fatal(err)
		}
		return rec.last(t)
	}
	inThread("100.1", "U1", "first thread")
	inThread("100.2", "U2", "bob's thread")
	// /agent share in the channel shares the caller's own latest answer from its threads.
	wantContains(t, "share", slash("U1", "share").Text, "You said: first thread")
	wantContains(t, "share", slash("U2", "share").Text, "You said: bob's thread")

	// /agent use in the channel sets the agent of the channel's new threads.
	wantContains(t, "use", slash("U-admin", "use other").Text, "New threads here will use it too")
	wantContains(t, "status", slash("U1", "status").Text, "Agent: *other*")
	inThread("200.1", "U1", "a new thread")
	if n := len(h.fake.Sessions(agent2UUID)); n != 1 {
		t.Errorf("sessions of the channel's agent = %d, want 1: the new thread uses it", n)
	}
	// A configured channel default applies where nothing was chosen.
	rec := newRecorder()
	ev := event("slack/T1/C-other/1.1", bridge.KindMessage, "hi", rec)
	ev.Channel, ev.Parent = "C-other", "slack/T1/C-other"
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	if n := len(h.fake.Sessions(agent2UUID)); n != 2 {
		t.Errorf("sessions of other = %d, want 2: C-other defaults to it", n)
	}
}

// markTriedStore is an outageStore that says when MarkSent was first tried.
type markTriedStore struct {
	outageStore
	tried chan struct{}
	once  *sync.Once
}

func (s markTriedStore) MarkSent(ctx context.Context, key string, now time.Time) error {
	err := s.outageStore.MarkSent(ctx, key, now)
	s.once.Do(func() { close(s.tried) })
	return err
}

func (s markTriedStore) MarkSentUnder(ctx context.Context, key, name, holder string, now time.Time) error {
	err := s.outageStore.MarkSentUnder(ctx, key, name, holder, now)
	s.once.Do(func() { close(s.tried) })
	return err
}

func TestStoreDownThroughShutdownTellsNothingUntrue(t *testing.T) {
	// The database goes away after a message is recorded, before it is
	// marked sent, and stays away until the shutdown grace is over. The
	// message is in the inbox, and the next start answers it: telling its
	// user "did not take this, try again" would be untrue.
	var failures atomic.Int32
	var down atomic.Bool
	failures.Store(1 << 30)
	tried := make(chan struct{})
	var db *sessionmap.Store
	b, fake := bridgeOnStore(t, func(st *sessionmap.Store) bridge.Store {
		db = st
		return markTriedStore{outageStore{Store: st, failures: &failures, down: &down}, tried, new(sync.Once)}
	})
	rec := newRecorder()
	done := make(chan struct{})
	ev := keyed("c/1", "test/msg/1", "hello", rec)
	ev = onDone(ev, func() { close(done) })
	if err := receive(b, ev).Wait(t.Context()); err != nil {
		t.Fatalf("Receive = %v", err)
	}
	<-tried
	over, cancel := context.WithCancel(context.Background())
	cancel() // SIGTERM, and the grace is over at once
	b.Shutdown(over)
	<-done
	b.Close()
	if got := rec.all(); len(got) != 0 {
		t.Errorf("replies = %+v, want none: the message is kept for the next start", got)
	}
	if n := len(fake.Sessions(agentUUID)); n != 0 {
		t.Errorf("sessions = %d, want 0: nothing was sent", n)
	}
	pending, err := db.Pending(t.Context())
	if err != nil || len(pending) != 1 || pending[0].Key != "test/msg/1" || pending[0].State != store.Received {
		t.Errorf("Pending() = %+v, %v; want test/msg/1 still received, for the next start", pending, err)
	}
}
