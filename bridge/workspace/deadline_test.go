package workspace_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// checkDeadlineError checks err is the client's own deadline, not the caller's.
func checkDeadlineError(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, workspace.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want ErrUnreachable and DeadlineExceeded", err)
	}
	if err != nil && !strings.Contains(err.Error(), "no complete response within") {
		t.Errorf("error %q does not say the response did not complete in time", err)
	}
}

// TestDeadlineDrippingBody is finding 3: a response whose headers come at
// once but whose body drips a byte every 500 ms ends the call at the flow's
// timeout plus MaxFlowMargin, or at ChatTimeout, and is not sent again.
func TestDeadlineDrippingBody(t *testing.T) {
	t.Run("flow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{})
			fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "done", Drip: 500 * time.Millisecond})
			c := newClient(t, fake, nil)
			start := time.Now()
			_, err := c.RunFlowSync(t.Context(), flowUUID, nil, 3*time.Second)
			if got, want := time.Since(start), 3*time.Second+workspace.MaxFlowMargin; got != want {
				t.Errorf("RunFlowSync with a dripping body gave up after %v, want %v", got, want)
			}
			checkDeadlineError(t, err)
			if n := countRequests(fake, "/run/sync"); n != 1 {
				t.Errorf("fake received %d flow runs, want 1", n)
			}
		})
	})
	t.Run("flow error body", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{})
			fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Status: 500, Body: strings.Repeat("x", 1000), Drip: 500 * time.Millisecond})
			c := newClient(t, fake, nil)
			start := time.Now()
			_, err := c.RunFlowSync(t.Context(), flowUUID, nil, 3*time.Second)
			if got, want := time.Since(start), 3*time.Second+workspace.MaxFlowMargin; got != want {
				t.Errorf("RunFlowSync with a dripping error body gave up after %v, want %v", got, want)
			}
			if apiErr, ok := errors.AsType[*workspace.APIError](err); !ok || apiErr.Status != 500 {
				t.Errorf("error = %v, want the APIError 500 with what arrived of its body", err)
			}
		})
	})
	t.Run("chat", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{})
			fake.AddAgent(workspacetest.Agent{UUID: agentUUID, Drip: 500 * time.Millisecond})
			fake.AddSession(agentUUID, "s")
			c := newClient(t, fake, func(cfg *workspace.Config) { cfg.ChatTimeout = 4 * time.Second })
			start := time.Now()
			_, err := c.Chat(t.Context(), agentUUID, "s", "hi")
			if got := time.Since(start); got != 4*time.Second {
				t.Errorf("Chat with a dripping body gave up after %v, want 4s", got)
			}
			checkDeadlineError(t, err)
			if n := countRequests(fake, "/chat"); n != 1 {
				t.Errorf("fake received %d chat messages, want 1", n)
			}
		})
	})
}

// TestDeadlineDrippingBodyLoopback is finding 3 over real sockets and the
// standard transport. It runs on the real clock, so it only bounds the time
// from above, generously.
func TestDeadlineDrippingBodyLoopback(t *testing.T) {
	t.Parallel()
	fake := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(fake.Close)
	fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "done", Drip: 500 * time.Millisecond})
	fake.AddAgent(workspacetest.Agent{UUID: agentUUID, Drip: 500 * time.Millisecond})
	fake.AddSession(agentUUID, "s")
	c := newClient(t, fake, func(cfg *workspace.Config) {
		cfg.ChatTimeout = 300 * time.Millisecond
		cfg.FlowMargin = 200 * time.Millisecond
	})

	start := time.Now()
	_, err := c.Chat(t.Context(), agentUUID, "s", "hi")
	if got := time.Since(start); got < 300*time.Millisecond || got > 5*time.Second {
		t.Errorf("Chat with a dripping body gave up after %v, want about 300ms", got)
	}
	checkDeadlineError(t, err)

	start = time.Now()
	_, err = c.RunFlowSync(t.Context(), flowUUID, nil, time.Second)
	if got := time.Since(start); got < 1200*time.Millisecond || got > 6*time.Second {
		t.Errorf("RunFlowSync with a dripping body gave up after %v, want about 1.2s", got)
	}
	checkDeadlineError(t, err)
}

// stubbornBody yields a byte every 500 ms and ignores the request's
// context; only Close stops it.
type stubbornBody struct {
	left   int
	closed chan struct{}
	once   sync.Once
}

func (b *stubbornBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	t := time.NewTimer(500 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-b.closed:
		return 0, errors.New("read on closed body")
	}
	p[0] = ' '
	b.left--
	return 1, nil
}

func (b *stubbornBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestDeadlineBodyIgnoringContext is finding 3 for the body read: even a
// transport whose body does not watch the request's context cannot keep a
// call past its deadline.
func TestDeadlineBodyIgnoringContext(t *testing.T) {
	tests := []struct {
		name   string
		status int
		edit   func(*workspace.Config)
		call   func(context.Context, *workspace.Client) error
		want   time.Duration
	}{
		{
			name:   "flow",
			status: 200,
			call: func(ctx context.Context, c *workspace.Client) error {
				_, err := c.RunFlowSync(ctx, flowUUID, nil, 3*time.Second)
				return err
			},
			want: 3*time.Second + workspace.MaxFlowMargin,
		},
		{
			name:   "flow error",
			status: 503,
			call: func(ctx context.Context, c *workspace.Client) error {
				_, err := c.RunFlowSync(ctx, flowUUID, nil, 3*time.Second)
				return err
			},
			want: 3*time.Second + workspace.MaxFlowMargin,
		},
		{
			name:   "chat",
			status: 200,
			edit:   func(cfg *workspace.Config) { cfg.ChatTimeout = 4 * time.Second },
			call: func(ctx context.Context, c *workspace.Client) error {
				_, err := c.Chat(ctx, agentUUID, "s", "hi")
				return err
			},
			want: 4 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var body *stubbornBody
				transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					r.Body.Close()
					body = &stubbornBody{left: 200, closed: make(chan struct{})}
					return &http.Response{StatusCode: tt.status, Header: http.Header{}, Body: body, Request: r}, nil
				})
				cfg := workspace.Config{BaseURL: "http://ws.test", WorkspaceUUID: "w", HTTPClient: &http.Client{Transport: transport}}
				if tt.edit != nil {
					tt.edit(&cfg)
				}
				c, err := workspace.New(cfg)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				start := time.Now()
				err = tt.call(t.Context(), c)
				if got := time.Since(start); got != tt.want {
					t.Errorf("gave up after %v, want %v", got, tt.want)
				}
				if tt.status == 200 {
					checkDeadlineError(t, err)
				} else if !errors.Is(err, workspace.ErrUnavailable) {
					t.Errorf("error = %v, want the 503 with what arrived of its body", err)
				}
				select {
				case <-body.closed:
				default:
					t.Error("the response body was not closed")
				}
			})
		})
	}
}

// TestFlowMarginBounded: FlowMargin cannot stretch the deadline of a flow
// beyond its timeout plus MaxFlowMargin.
func TestFlowMarginBounded(t *testing.T) {
	_, err := workspace.New(workspace.Config{BaseURL: "https://ws.example.com", WorkspaceUUID: "w", FlowMargin: workspace.MaxFlowMargin + time.Second})
	if err == nil || !strings.Contains(err.Error(), "flow margin") {
		t.Errorf("New with FlowMargin above MaxFlowMargin = %v, want an error about the flow margin", err)
	}
	if _, err := workspace.New(workspace.Config{BaseURL: "https://ws.example.com", WorkspaceUUID: "w", FlowMargin: workspace.MaxFlowMargin}); err != nil {
		t.Errorf("New with FlowMargin = MaxFlowMargin: %v", err)
	}
}
