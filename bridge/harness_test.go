package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

const (
	agentUUID  = "agent-1"
	agent2UUID = "agent-2"
	flowUUID   = "flow-hc"
)

// harness is a bridge on the real workspace client, the fake API and a real store.
type harness struct {
	t     *testing.T
	b     *bridge.Bridge
	fake  *workspacetest.Server
	store *sessionmap.Store
	path  string
}

func healthcheck() bridge.Flow {
	return bridge.Flow{Name: "healthcheck", UUID: flowUUID, Description: "check a service", Timeout: 30 * time.Second, Allow: []string{"everyone"},
		Params: []bridge.Param{{Name: "host", Required: true}, {Name: "service"}}}
}

func defaultConfig() bridge.Config {
	return bridge.Config{
		Flows:  []bridge.Flow{healthcheck()},
		Agents: []bridge.Agent{{Name: "helper", UUID: agentUUID, Default: true}, {Name: "other", UUID: agent2UUID}},
		Admins: []string{"U-admin"},
	}
}

func newHarness(t *testing.T, cfg bridge.Config, setup func(*workspacetest.Server)) *harness {
	t.Helper()
	return newHarnessWith(t, cfg, workspace.Config{MaxRetries: 1}, setup)
}

// openStore opens a store in the test's temporary directory and closes it
// when the test ends.
func openStore(t *testing.T) (*sessionmap.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := sessionmap.Open(path, sessionmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

// restart shuts the bridge down and starts a new one with cfg on the same
// store and API, as a process restart would, and attaches the test
// platform.
func (h *harness) restart(cfg bridge.Config) {
	h.t.Helper()
	h.restartBare(cfg)
	attachTest(h.t, h.b)
}

// restartBare is restart for a test that attaches a platform of its own.
func (h *harness) restartBare(cfg bridge.Config) {
	h.t.Helper()
	if err := h.b.Shutdown(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	ws, err := workspace.New(workspace.Config{BaseURL: h.fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := bridge.New(cfg, ws, h.store, zaptest.NewLogger(h.t))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { b.Shutdown(context.Background()) })
	h.b = b
}

// newBubbleBridge is a bridge on the in-memory fake API, for tests inside a
// synctest bubble, with agentUUID answering as agent says. The store is real;
// Shutdown and closing it are cleanups.
func newBubbleBridge(t *testing.T, cfg bridge.Config, agent workspacetest.Agent) (*bridge.Bridge, *workspacetest.Server) {
	t.Helper()
	b, fake, _ := newBubbleBridgeStore(t, cfg, agent)
	return b, fake
}

// newBubbleBridgeStore is newBubbleBridge that returns its store too, for
// tests that look at what the bridge left in it.
func newBubbleBridgeStore(t *testing.T, cfg bridge.Config, agent workspacetest.Agent) (*bridge.Bridge, *workspacetest.Server, *sessionmap.Store) {
	t.Helper()
	fake := workspacetest.New(workspacetest.Options{})
	agent.UUID = agentUUID
	fake.AddAgent(agent)
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token", HTTPClient: fake.Client()})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t)
	b, err := bridge.New(cfg, ws, st, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	attachTest(t, b)
	return b, fake, st
}

// recorder is a Responder that keeps every reply.
type recorder struct {
	mu      sync.Mutex
	replies []bridge.Reply
	updates int
	dismiss int
	notify  chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1000)} }

func (r *recorder) Send(_ context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	r.mu.Lock()
	r.replies = append(r.replies, rep)
	n := len(r.replies)
	r.mu.Unlock()
	r.notify <- struct{}{}
	return bridge.MessageRef(fmt.Sprint(n)), nil
}

// waitReplies returns once r has sent n replies containing substr: the
// answers a test must see before it shuts the bridge down, since a
// shutdown starts nothing new.
func (r *recorder) waitReplies(t *testing.T, n int, substr string) {
	t.Helper()
	for {
		r.mu.Lock()
		got := 0
		for _, rep := range r.replies {
			if strings.Contains(rep.Text, substr) {
				got++
			}
		}
		r.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-r.notify:
		case <-t.Context().Done():
			t.Fatalf("%d replies with %q, want %d", got, substr, n)
		}
	}
}

func (r *recorder) Update(ctx context.Context, _ bridge.MessageRef, rep bridge.Reply) error {
	r.mu.Lock()
	r.updates++
	r.mu.Unlock()
	_, err := r.Send(ctx, rep)
	return err
}

func (r *recorder) Dismiss(context.Context) error {
	r.mu.Lock()
	r.dismiss++
	r.mu.Unlock()
	return nil
}

func (r *recorder) all() []bridge.Reply {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bridge.Reply(nil), r.replies...)
}

func (r *recorder) last(t *testing.T) bridge.Reply {
	t.Helper()
	all := r.all()
	if len(all) == 0 {
		t.Fatal("no reply")
	}
	return all[len(all)-1]
}

// event builds an event in conversation conv from user U1, answered by rec.
func event(conv string, kind bridge.Kind, text string, rec *recorder) bridge.Event {
	ev := bridge.Event{Kind: kind, Platform: "test", Conversation: conv, Channel: "C1", User: bridge.User{ID: "U1", Name: "ann"}, Text: text}
	if rec == nil {
		return ev
	}
	return via(ev, rec)
}

// testPlatform is the tests' adapter for the platform "test": an event's
// route names what via registered for it (its responder, and the Prepare,
// Earlier and Acknowledge a test gives it), so that an event read back
// from the inbox finds the same ones, as a real adapter's route does.
type testPlatform struct{}

var _ bridge.Platform = testPlatform{}

// testRoute is what via registered for an event.
type testRoute struct {
	reply   bridge.Responder
	done    func() // called once the bridge has finished with the event (receive)
	prepare func(context.Context, *bridge.Event) bool
	earlier func(context.Context, int) ([]bridge.Earlier, error)
	ack     func(context.Context) error
	// bound says a platform bound the event to reply once already (see
	// chatPlatform.Responder).
	bound *atomic.Bool
}

var (
	testRoutes   sync.Map // route number → *testRoute
	testRouteSeq atomic.Int64
)

// via routes ev to r through the test platform, keeping what its route
// held already (a "to" a custom platform reads).
func via(ev bridge.Event, r bridge.Responder) bridge.Event {
	return update(ev, func(tr *testRoute) { tr.reply = r })
}

// update registers, for ev, what f makes of what was registered for it.
func update(ev bridge.Event, f func(*testRoute)) bridge.Event {
	fields := map[string]any{}
	if len(ev.Route) > 0 {
		if err := json.Unmarshal(ev.Route, &fields); err != nil {
			panic(err)
		}
	}
	var tr testRoute
	if old := routeOf(ev); old != nil {
		tr = *old
	}
	f(&tr)
	return register(ev, fields, &tr)
}

func register(ev bridge.Event, fields map[string]any, tr *testRoute) bridge.Event {
	n := testRouteSeq.Add(1)
	tr.bound = new(atomic.Bool)
	testRoutes.Store(n, tr)
	fields["test"] = n
	ev.Route, _ = json.Marshal(fields)
	return ev
}

// routeOf returns what via registered for ev, or nil.
func routeOf(ev bridge.Event) *testRoute {
	var f struct {
		Test int64 `json:"test"`
	}
	if json.Unmarshal(ev.Route, &f) != nil || f.Test == 0 {
		return nil
	}
	tr, ok := testRoutes.Load(f.Test)
	if !ok {
		return nil
	}
	return tr.(*testRoute)
}

// replyOf is the responder via gave ev.
func replyOf(ev bridge.Event) bridge.Responder {
	if tr := routeOf(ev); tr != nil {
		return tr.reply
	}
	return nil
}

// withPrepare gives a routed event a Prepare.
func withPrepare(ev bridge.Event, f func(context.Context, *bridge.Event) bool) bridge.Event {
	return update(ev, func(tr *testRoute) { tr.prepare = f })
}

// withEarlier gives a routed event what precedes it.
func withEarlier(ev bridge.Event, f func(context.Context, int) ([]bridge.Earlier, error)) bridge.Event {
	return update(ev, func(tr *testRoute) { tr.earlier = f })
}

func (testPlatform) Responder(ev bridge.Event) (bridge.Responder, error) {
	if tr := routeOf(ev); tr != nil && tr.reply != nil {
		return tr.reply, nil
	}
	return nil, fmt.Errorf("test route %s names no responder", ev.Route)
}

func (testPlatform) Acknowledge(ctx context.Context, ev bridge.Event) error {
	if tr := routeOf(ev); tr != nil && tr.ack != nil {
		return tr.ack(ctx)
	}
	return nil
}

func (testPlatform) Prepare(ctx context.Context, ev *bridge.Event) bool {
	if tr := routeOf(*ev); tr != nil && tr.prepare != nil {
		return tr.prepare(ctx, ev)
	}
	return true
}

func (testPlatform) Earlier(ctx context.Context, ev bridge.Event, max int) ([]bridge.Earlier, error) {
	if tr := routeOf(ev); tr != nil && tr.earlier != nil {
		return tr.earlier(ctx, max)
	}
	return nil, nil
}

// onDone has receive call done once the bridge has finished with ev.
func onDone(ev bridge.Event, done func()) bridge.Event {
	return update(ev, func(tr *testRoute) { tr.done = done })
}

// receive hands ev to b and, when the test gave ev a done (onDone), calls it
// once the receipt is finished.
func receive(b *bridge.Bridge, ev bridge.Event) *bridge.Receipt {
	rec := b.Receive(ev)
	if tr := routeOf(ev); tr != nil && tr.done != nil {
		go func() {
			<-rec.Finished()
			tr.done()
		}()
	}
	return rec
}

// handle is receive that waits for the receipt, as Bridge.Handle does.
func handle(b *bridge.Bridge, ev bridge.Event) error {
	return receive(b, ev).Wait(context.Background())
}

// attachTest attaches the test platform to b, as an adapter does at its
// start.
func attachTest(t testing.TB, b *bridge.Bridge) {
	t.Helper()
	attach(t, b, testPlatform{})
}

// attach attaches p as the platform "test" of b.
func attach(t testing.TB, b *bridge.Bridge, p bridge.Platform) {
	t.Helper()
	if _, _, err := b.Attach("test", p); err != nil {
		t.Fatal(err)
	}
}

func command(conv, cmd, args string, rec *recorder) bridge.Event {
	ev := event(conv, bridge.KindCommand, args, rec)
	ev.Command = cmd
	return ev
}

// do hands ev to the bridge and waits until the bridge is done with it.
func (h *harness) do(ev bridge.Event) error {
	h.t.Helper()
	rec := receive(h.b, ev)
	err := rec.Wait(context.Background())
	select {
	case <-rec.Finished():
	case <-time.After(30 * time.Second):
		h.t.Fatalf("event %q not finished", ev.Text)
	}
	return err
}

// ask sends a chat message and returns the reply text.
func (h *harness) ask(conv, text string) bridge.Reply {
	h.t.Helper()
	rec := newRecorder()
	if err := h.do(event(conv, bridge.KindMessage, text, rec)); err != nil {
		h.t.Fatalf("Handle(%q): %v", text, err)
	}
	return rec.last(h.t)
}

func (h *harness) command(conv, cmd, args string) (*recorder, bridge.Reply) {
	h.t.Helper()
	rec := newRecorder()
	if err := h.do(command(conv, cmd, args, rec)); err != nil {
		h.t.Fatalf("Handle(/%s %s): %v", cmd, args, err)
	}
	return rec, rec.last(h.t)
}

func wantContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s = %q, want it to contain %q", what, got, w)
		}
	}
}
