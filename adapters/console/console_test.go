package console_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/adapters/console"
	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
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
	b, err := bridge.New(bridge.Config{Flows: flows, Agents: []bridge.Agent{{Name: "helper", UUID: "a1", Default: true}}}, ws, st, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b
}

func runConsole(t *testing.T, core console.Core, input string) string {
	t.Helper()
	return runStyled(t, core, input, console.StyleAuto)
}

func runStyled(t *testing.T, core console.Core, input string, style console.Style) string {
	t.Helper()
	var out bytes.Buffer
	a := console.New(console.Config{User: "u1", Name: "ann"}, core, console.Options{In: strings.NewReader(input), Out: &out, Style: style}, zaptest.NewLogger(t))
	if err := a.Run(t.Context()); err != nil {
		t.Fatalf("Run = %v", err)
	}
	return out.String()
}

// scriptedCore stands in for the core: it records the events it is given,
// answers the texts in replies with those replies, refuses the texts in
// refuse as the core would (telling the user, then returning the error) and
// echoes anything else.
type scriptedCore struct {
	replies map[string][]bridge.Reply
	refuse  map[string]error

	mu       sync.Mutex
	got      []bridge.Event
	platform bridge.Platform
}

func (c *scriptedCore) Attach(_ string, p bridge.Platform) (int, int, error) {
	c.mu.Lock()
	c.platform = p
	c.mu.Unlock()
	return 0, 0, nil
}

func (c *scriptedCore) Receive(ev bridge.Event) *bridge.Receipt {
	c.mu.Lock()
	c.got = append(c.got, ev)
	p := c.platform
	c.mu.Unlock()
	ctx := context.Background()
	reply, err := p.Responder(ev)
	if err != nil {
		return bridge.SettledReceipt(err)
	}
	if err, ok := c.refuse[ev.Text]; ok {
		reply.Send(ctx, bridge.Reply{Kind: bridge.ReplyError, Text: fmt.Sprintf("refused %q: %v", ev.Text, err)})
		return bridge.SettledReceipt(err)
	}
	replies, ok := c.replies[ev.Text]
	if !ok {
		replies = []bridge.Reply{{Kind: bridge.ReplyAgent, Text: describe(ev)}}
	}
	for _, r := range replies {
		reply.Send(ctx, r)
	}
	return bridge.SettledReceipt(nil)
}

func (c *scriptedCore) events() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, ev := range c.got {
		out = append(out, describe(ev))
	}
	return out
}

func describe(ev bridge.Event) string {
	switch ev.Kind {
	case bridge.KindCommand:
		return fmt.Sprintf("command %s %q", ev.Command, ev.Text)
	case bridge.KindAction:
		return "action " + ev.Action.ID
	}
	return fmt.Sprintf("chat %q", ev.Text)
}

func TestTranscriptIsInOrder(t *testing.T) {
	flows := []bridge.Flow{{Name: "deploy", UUID: "f1", Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "host", Required: true}}}}
	out := runConsole(t, newBridge(t, flows, 0), "one\n\n/flow deploy host=h1\ntwo\n/agent status\n")
	// Flows do not wait behind chat in the core; the console still takes a
	// line only after the last one is answered, so the transcript reads in order.
	order := []string{"[turn 1] You said: one", "Running deploy", "ran on h1", "run by ann", "[turn 2] You said: two", "Agent: helper"}
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
	for _, want := range []string{"type y to run, n to cancel", "ran on h1", "type /share to share with channel", "shared by ann", "Cancelled by ann at ", ": deploy was not run."} {
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

// Item 1: an input line over the limit used to end the console (and, with
// Slack on, the whole bridge) with "bufio.Scanner: token too long".
func TestOverlongLineRefusedAndReadingGoesOn(t *testing.T) {
	const size = 3 << 20
	input := strings.Repeat("x", size) + "\nhello\n"
	out := runConsole(t, newBridge(t, nil, 0), input)
	want := fmt.Sprintf("error: That line is too long (%d bytes; the limit is %d). Please shorten it.\n", size, 1<<20)
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%.2000s", want, out)
	}
	if !strings.Contains(out, "You said: hello") {
		t.Errorf("the line after the long one was not answered:\n%.2000s", out)
	}
	if strings.Contains(out, "xxxx") {
		t.Errorf("the long line reached the output or the core:\n%.2000s", out)
	}
}

// Item 2: every error Handle returns has been told to the user; the console
// reads on.
func TestCoreRefusalsDoNotEndRun(t *testing.T) {
	core := &scriptedCore{refuse: map[string]error{
		"busy":      bridge.ErrBusy,
		"closed":    bridge.ErrClosed,
		"duplicate": bridge.ErrDuplicate,
		"not saved": bridge.ErrNotSaved,
		"strange":   errors.New("bridge: something new"),
	}}
	out := runConsole(t, core, "busy\nclosed\nduplicate\nnot saved\nstrange\nhello\n")
	for _, want := range []string{
		`refused "busy": bridge busy`,
		`refused "closed": bridge shutting down`,
		`refused "duplicate": event delivered before`,
		`refused "not saved": event not recorded`,
		"error: flowbridge could not take that line. Please try again; if it keeps happening, tell an admin.",
		`agent: chat "hello"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Item 2: the shut-down core tells each line it cannot take it; the console
// goes on to the end of its input.
func TestClosedBridgeKeepsReading(t *testing.T) {
	b := newBridge(t, nil, 0)
	if err := b.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	out := runConsole(t, b, "one\ntwo\n")
	if n := strings.Count(out, "flowbridge is restarting"); n != 2 {
		t.Errorf("%d shutdown notices, want 2:\n%s", n, out)
	}
}

// Item 2: a read error is the one thing that ends Run with an error.
func TestReadErrorEndsRun(t *testing.T) {
	errRead := errors.New("terminal gone")
	core := &scriptedCore{}
	var out bytes.Buffer
	in := io.MultiReader(strings.NewReader("hello\n"), iotest.ErrReader(errRead))
	a := console.New(console.Config{}, core, console.Options{In: in, Out: &out}, zaptest.NewLogger(t))
	if err := a.Run(t.Context()); !errors.Is(err, errRead) {
		t.Fatalf("Run = %v, want %v", err, errRead)
	}
	if !strings.Contains(out.String(), `agent: chat "hello"`) {
		t.Errorf("line before the error not answered:\n%s", out.String())
	}
}

// Item 4: commands the console does not know are answered here, never sent
// to the core; "//" escapes a leading slash.
func TestCommandsAnsweredLocally(t *testing.T) {
	tests := []struct {
		name, line string
		want       []string // in the output
		sent       []string // events the core got
	}{
		{"near miss", "/flwo healthcheck", []string{"error:\n  There is no command /flwo here. Did you mean /flow?\n", "Commands: /flow, /agent, /share, /stop and /help; answer a confirmation with y or n."}, nil},
		{"near miss, case", "/AGNET status", []string{"There is no command /AGNET here. Did you mean /agent?"}, nil},
		{"help typo", "/hlep", []string{"Did you mean /help?"}, nil},
		{"far off", "/confirm", []string{"There is no command /confirm here.\n", "To send a line that starts with / as chat, start it with //."}, nil},
		{"bare slash", "/", []string{"There is no command / here."}, nil},
		{"help", "/help", []string{"info:\n  Console commands\n", "  • /flow NAME key=value …: run a flow", `  • //text: send "/text" to the agent as chat`}, nil},
		{"share with nothing to share", "/share", []string{"error: There is nothing to share: /share shares the last result that offers it."}, nil},
		{"escaped slash", "//flow is a word", nil, []string{`chat "/flow is a word"`}},
		{"flow", "/flow deploy host=h1", nil, []string{`command flow "deploy host=h1"`}},
		{"agent, upper case, tab", "/AGENT\tstatus", nil, []string{`command agent "status"`}},
		{"y with nothing pending is chat", "y", nil, []string{`chat "y"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core := &scriptedCore{}
			out := runConsole(t, core, tt.line+"\n")
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("%q: output lacks %q:\n%s", tt.line, want, out)
				}
			}
			if got := core.events(); strings.Join(got, "\n") != strings.Join(tt.sent, "\n") {
				t.Errorf("%q: core got %q, want %q", tt.line, got, tt.sent)
			}
		})
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
