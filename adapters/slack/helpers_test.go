package slack

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

var (
	_ Core         = (*bridge.Bridge)(nil)
	_ bridge.Store = (*sessionmap.Store)(nil)
)

// idleCore is a Core for tests that translate payloads without delivering
// them; a delivery fails the test.
type idleCore struct{ t *testing.T }

func (c idleCore) Receive(ev bridge.Event) *bridge.Receipt {
	c.t.Errorf("idleCore: unexpected event %+v", ev)
	return nil
}

func (idleCore) Attach(string, bridge.Platform) (int, int, error) { return 0, 0, nil }

func (idleCore) Refused(string) {}

// testFlows is the catalog of the tests' cores.
func testFlows() []bridge.Flow {
	return []bridge.Flow{
		{Name: "healthcheck", UUID: e2eFlow, Timeout: 30 * time.Second, Allow: []string{"everyone"},
			Params: []bridge.Param{{Name: "host", Required: true}, {Name: "service"}}},
		{Name: "publiccheck", UUID: e2eFlow, Public: true, Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "host", Required: true}}},
		{Name: "slow", UUID: e2eSlowFlow, Timeout: time.Second, Allow: []string{"everyone"},
			Params: []bridge.Param{{Name: "host", Required: true}}},
		{Name: "guarded", UUID: e2eFlow, Confirm: true, Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "host", Required: true}}},
	}
}

// testCore is the real core on the fake workspace and a bbolt store at path.
type testCore struct {
	*bridge.Bridge
	store *sessionmap.Store
	http  *http.Client

	mu      sync.Mutex
	refused map[string]int // what the adapter refused, by reason
}

func (c *testCore) Refused(reason string) {
	c.mu.Lock()
	c.refused[reason]++
	c.mu.Unlock()
	c.Bridge.Refused(reason)
}

// refusals returns how many refusals of reason the adapter reported.
func (c *testCore) refusals(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused[reason]
}

func newTestCore(t *testing.T, ws *workspacetest.Server, path string, log *zap.Logger) *testCore {
	t.Helper()
	return newTestCoreWith(t, ws, path, log, nil)
}

// newTestCoreWith is newTestCore with wrap, when set, between the core and
// its store (a store that fails as a full disk does).
func newTestCoreWith(t *testing.T, ws *workspacetest.Server, path string, log *zap.Logger, wrap func(*sessionmap.Store) bridge.Store, change ...func(*bridge.Config)) *testCore {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "s.db")
	}
	st, err := sessionmap.Open(path, sessionmap.Options{})
	if err != nil {
		t.Fatalf("sessionmap.Open() = %v", err)
	}
	// An own client, so close can end its idle connections.
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	wsc, err := workspace.New(workspace.Config{BaseURL: ws.URL, WorkspaceUUID: "ws-test", Token: "test-token", MaxRetries: -1, HTTPClient: hc})
	if err != nil {
		t.Fatalf("workspace.New() = %v", err)
	}
	var bst bridge.Store = st
	if wrap != nil {
		bst = wrap(st)
	}
	cfg := bridge.Config{Flows: testFlows(), Agents: []bridge.Agent{{Name: "helper", UUID: e2eAgent, Default: true}}}
	for _, c := range change {
		c(&cfg)
	}
	b, err := bridge.New(cfg, wsc, bst, log)
	if err != nil {
		t.Fatalf("bridge.New() = %v", err)
	}
	return &testCore{Bridge: b, store: st, http: hc, refused: make(map[string]int)}
}

// close shuts the core down and closes its store.
func (c *testCore) close(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Errorf("core Shutdown() = %v", err)
	}
	c.closeStore(t)
}

// closeNow shuts the core down cutting its work short (Shutdown's error
// says so, as meant), and closes its store.
func (c *testCore) closeNow(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.Shutdown(ctx)
	c.closeStore(t)
}

func (c *testCore) closeStore(t *testing.T) {
	t.Helper()
	c.Close()
	c.http.CloseIdleConnections()
	if err := c.store.Close(); err != nil {
		t.Errorf("store Close() = %v", err)
	}
}

// recordingCore is the real core that also keeps every event handed to it.
type recordingCore struct {
	*testCore
	emu    sync.Mutex
	events []bridge.Event
	got    chan bridge.Event
}

// newRecordingCore builds a recording core whose replies go nowhere: the
// tests that use it look at the events only.
func newRecordingCore(t *testing.T) *recordingCore {
	t.Helper()
	ws := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(ws.Close)
	ws.AddAgent(workspacetest.Agent{UUID: e2eAgent})
	ws.AddFlow(workspacetest.Flow{UUID: e2eFlow, Template: "Checked {host}"})
	c := &recordingCore{testCore: newTestCore(t, ws, "", zaptest.NewLogger(t).Named("core")), got: make(chan bridge.Event, 100)}
	// Its replies go nowhere, and would be retried for 12 s: its work is
	// cut short.
	t.Cleanup(func() { c.closeNow(t) })
	return c
}

func (c *recordingCore) Receive(ev bridge.Event) *bridge.Receipt {
	c.emu.Lock()
	c.events = append(c.events, ev)
	c.emu.Unlock()
	c.got <- ev
	return c.Bridge.Receive(ev)
}

func (c *recordingCore) recorded() []bridge.Event {
	c.emu.Lock()
	defer c.emu.Unlock()
	return append([]bridge.Event(nil), c.events...)
}
