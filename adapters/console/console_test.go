package console_test

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/adapters/console"
	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/bridge/workspace/workspacetest"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/sessionmap/bridgestore"
)

// newBridge is the real core on the fake API and a temporary store.
func newBridge(t *testing.T, flows []bridge.Flow, agentDelay time.Duration) *bridge.Bridge {
	t.Helper()
	fake := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: "a1", Delay: agentDelay})
	fake.AddFlow(workspacetest.Flow{UUID: "f1", Template: "ran on {host}"})
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sessionmap.Open(filepath.Join(t.TempDir(), "s.db"), sessionmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := bridge.New(bridge.Config{Flows: flows, Agents: []bridge.Agent{{Name: "helper", UUID: "a1", Default: true}}}, ws, bridgestore.New(st), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b
}

func runConsole(t *testing.T, b *bridge.Bridge, input string) string {
	t.Helper()
	var out bytes.Buffer
	a := console.New(console.Config{User: "u1", Name: "ann"}, b, console.Options{In: strings.NewReader(input), Out: &out}, zaptest.NewLogger(t))
	if err := a.Run(t.Context()); err != nil {
		t.Fatalf("Run = %v", err)
	}
	return out.String()
}

func TestTranscriptIsInOrder(t *testing.T) {
	flows := []bridge.Flow{{Name: "deploy", UUID: "f1", Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "host", Required: true}}}}
	out := runConsole(t, newBridge(t, flows, 0), "one\n\n/flow deploy host=h1\ntwo\n/agent status\n")
	// Flows do not wait behind chat in the core; the console still takes a
	// line only after the last one is answered, so the transcript reads in order.
	order := []string{"[turn 1] You said: one", "Running *deploy*", "ran on h1", "run by ann", "[turn 2] You said: two", "Agent: *helper*"}
	pos := 0
	for _, want := range order {
		i := strings.Index(out[pos:], want)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", want, out)
		}
		pos += i
	}
}

func TestConfirmAndShareByTyping(t *testing.T) {
	flows := []bridge.Flow{{Name: "deploy", UUID: "f1", Allow: []string{"everyone"}, Confirm: true, Params: []bridge.Param{{Name: "host"}}}}
	out := runConsole(t, newBridge(t, flows, 0), "/flow deploy host=h1\ny\n/share\n/flow deploy host=h2\nn\n")
	for _, want := range []string{"type y to run, n to cancel", "ran on h1", "type /share to share with channel", "shared by ann", "Cancelled: *deploy* was not run."} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ran on h2") {
		t.Errorf("cancelled flow ran:\n%s", out)
	}
}

func TestEndOfInputWaitsForReplies(t *testing.T) {
	// The agent takes a moment; Run must not return before the reply is written.
	out := runConsole(t, newBridge(t, nil, 50*time.Millisecond), "slow question")
	if !strings.Contains(out, "You said: slow question") {
		t.Errorf("reply missing at end of input:\n%s", out)
	}
}

func TestCancelStopsRun(t *testing.T) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	var out lockedBuffer
	a := console.New(console.Config{}, newBridge(t, nil, 0), console.Options{In: pr, Out: &out, Prompt: true}, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	if _, err := pw.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	if !strings.Contains(out.String(), "> ") {
		t.Errorf("no prompt shown: %q", out.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
