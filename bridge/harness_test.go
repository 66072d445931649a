package bridge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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
// store and API, as a process restart would.
func (h *harness) restart(cfg bridge.Config) {
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

// event builds an event in conversation conv from user U1.
func event(conv string, kind bridge.Kind, text string, rec *recorder) bridge.Event {
	return bridge.Event{Kind: kind, Platform: "test", Conversation: conv, Channel: "C1", User: bridge.User{ID: "U1", Name: "ann"}, Text: text, Reply: rec}
}

func command(conv, cmd, args string, rec *recorder) bridge.Event {
	ev := event(conv, bridge.KindCommand, args, rec)
	ev.Command = cmd
	return ev
}

// do hands ev to the bridge and waits until the bridge is done with it.
func (h *harness) do(ev bridge.Event) error {
	h.t.Helper()
	done := make(chan struct{})
	ev.Done = sync.OnceFunc(func() { close(done) })
	err := h.b.Handle(ev)
	select {
	case <-done:
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
