package console_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/adapters/console"
	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// tickWriter is the terminal: it keeps what is written and closes seen the
// first time a write holds want.
type tickWriter struct {
	want string
	seen chan struct{}

	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
}

func (w *tickWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return w.buf.Write(p)
}

func (w *tickWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestProgressTicksWhileAFlowRuns: the terminal shows that a long flow is
// still running, as the chat platforms do through the core's progress
// updates. The flow does not finish until a tick has been printed.
func TestProgressTicksWhileAFlowRuns(t *testing.T) {
	t.Parallel()
	out := &tickWriter{want: "so far", seen: make(chan struct{})}
	fake := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(fake.Close)
	// Without a tick the flow would never end; released at the test's end
	// (before the fake closes), it fails the test instead of hanging it.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	fake.AddAgent(workspacetest.Agent{UUID: "a1"})
	fake.AddFlow(workspacetest.Flow{UUID: "f1", Reply: func(map[string]string) string {
		select {
		case <-out.seen:
			return "done after a while"
		case <-release:
			return "released without a tick"
		}
	}})
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sessionmap.Open(filepath.Join(t.TempDir(), "s.db"), sessionmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	flows := []bridge.Flow{{Name: "slow", UUID: "f1", Description: "takes a while", Allow: []string{"everyone"}, Timeout: 3 * time.Second}}
	b, err := bridge.New(bridge.Config{
		Flows: flows, Agents: []bridge.Agent{{Name: "helper", UUID: "a1", Default: true}},
		ProgressInterval: 10 * time.Millisecond,
	}, ws, st, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })

	a := console.New(console.Config{User: "u1"}, b, console.Options{In: strings.NewReader("/flow slow\n"), Out: out, Style: console.StylePlain}, zaptest.NewLogger(t))
	if err := a.Run(t.Context()); err != nil {
		t.Fatalf("Run = %v", err)
	}
	got := out.String()
	tick := strings.Index(got, "working: Running slow… ")
	result := strings.Index(got, "done after a while")
	if tick < 0 || result < tick {
		t.Fatalf("transcript = %q, want a progress tick (\"working: Running slow… … so far.\") before the result", got)
	}
	if line, _, _ := strings.Cut(got[tick:], "\n"); !strings.HasSuffix(line, "so far.") {
		t.Errorf("tick = %q, want one line ending \"so far.\"", line)
	}
}
