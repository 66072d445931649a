package workspace_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/testkit/testaddr"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// countRequests returns how many requests the fake received on paths
// ending in suffix.
func countRequests(fake *workspacetest.Server, suffix string) int {
	n := 0
	for _, r := range fake.Requests() {
		if strings.HasSuffix(r.Path, suffix) {
			n++
		}
	}
	return n
}

// retryAfterHeader returns a Retry-After header; "date+5s" is an HTTP date
// 5 s ahead, "" none.
func retryAfterHeader(v string) http.Header {
	header := http.Header{}
	switch v {
	case "":
	case "date+5s":
		header.Set("Retry-After", time.Now().Add(5*time.Second).UTC().Format(http.TimeFormat))
	default:
		header.Set("Retry-After", v)
	}
	return header
}

// TestFlowRunNeverResent is finding 1 for flows: a flow run answered 429 or
// 503 is not sent again, whatever its Retry-After and MaxRetries; the caller
// gets at once an APIError matching ErrRateLimited or ErrUnavailable, with
// the Retry-After as a delay.
func TestFlowRunNeverResent(t *testing.T) {
	tests := []struct {
		name           string
		status         int
		retryAfter     string
		maxRetries     int
		want, notWant  error
		wantRetryAfter time.Duration
	}{
		{name: "503 seconds", status: 503, retryAfter: "2", want: workspace.ErrUnavailable, notWant: workspace.ErrRateLimited, wantRetryAfter: 2 * time.Second},
		{name: "503 zero", status: 503, retryAfter: "0", want: workspace.ErrUnavailable, notWant: workspace.ErrRateLimited},
		{name: "503 without Retry-After", status: 503, want: workspace.ErrUnavailable, notWant: workspace.ErrRateLimited},
		{name: "503 with more retries configured", status: 503, retryAfter: "1", maxRetries: 5, want: workspace.ErrUnavailable, notWant: workspace.ErrRateLimited, wantRetryAfter: time.Second},
		{name: "429 seconds", status: 429, retryAfter: "1", want: workspace.ErrRateLimited, notWant: workspace.ErrUnavailable, wantRetryAfter: time.Second},
		{name: "429 date", status: 429, retryAfter: "date+5s", want: workspace.ErrRateLimited, notWant: workspace.ErrUnavailable, wantRetryAfter: 5 * time.Second},
		{name: "429 beyond the cap", status: 429, retryAfter: "120", want: workspace.ErrRateLimited, notWant: workspace.ErrUnavailable, wantRetryAfter: 2 * time.Minute},
		{name: "429 garbage Retry-After", status: 429, retryAfter: "soon", want: workspace.ErrRateLimited, notWant: workspace.ErrUnavailable},
		{name: "429 with more retries configured", status: 429, retryAfter: "1", maxRetries: 5, want: workspace.ErrRateLimited, notWant: workspace.ErrUnavailable, wantRetryAfter: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFake(t, workspacetest.Options{})
				// Only the first run is refused: a second one would succeed.
				fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "done", Status: tt.status, Header: retryAfterHeader(tt.retryAfter), Body: "busy", StatusCount: 1})
				c := newClient(t, fake, func(cfg *workspace.Config) { cfg.MaxRetries = tt.maxRetries })
				start := time.Now()
				run, err := c.RunFlowSync(t.Context(), flowUUID, nil, time.Minute)
				if n := countRequests(fake, "/run/sync"); n != 1 {
					t.Errorf("fake received %d flow runs, want exactly 1", n)
				}
				if got := time.Since(start); got != 0 {
					t.Errorf("RunFlowSync returned after %v, want at once", got)
				}
				if !errors.Is(err, tt.want) || errors.Is(err, tt.notWant) {
					t.Fatalf("RunFlowSync = %v, %v, want an error matching %v only", run, err, tt.want)
				}
				apiErr, ok := errors.AsType[*workspace.APIError](err)
				if !ok || apiErr.Status != tt.status || apiErr.RetryAfter != tt.wantRetryAfter || apiErr.Op != workspace.OpRunFlow {
					t.Errorf("RunFlowSync = %#v, want an APIError %d with RetryAfter %v", apiErr, tt.status, tt.wantRetryAfter)
				}
			})
		})
	}
}

// TestChatResentOnlyAfter429 is finding 1 for chat messages and Create
// Session: they are sent again only after a 429 whose Retry-After is within
// the cap and the call's deadline, after waiting it; never after a 503 or
// another status.
func TestChatResentOnlyAfter429(t *testing.T) {
	tests := []struct {
		name        string
		create      bool // CreateSession, else Chat
		status      int
		retryAfter  string
		times       int // forced answers before success; 0 = always
		maxRetries  int
		chatTimeout time.Duration
		wantSends   int
		wantWait    time.Duration
		ok          bool  // success after re-sending
		want        error // else an APIError with status, matching want when set
	}{
		{name: "429 then 200", status: 429, retryAfter: "1", times: 1, wantSends: 2, wantWait: time.Second, ok: true},
		{name: "429 date then 200", status: 429, retryAfter: "date+5s", times: 1, wantSends: 2, wantWait: 5 * time.Second, ok: true},
		{name: "429 zero then 200", status: 429, retryAfter: "0", times: 1, wantSends: 2, ok: true},
		{name: "429 twice then 200", status: 429, retryAfter: "1", times: 2, wantSends: 3, wantWait: 2 * time.Second, ok: true},
		{name: "429 bounded by default", status: 429, retryAfter: "1", wantSends: 3, wantWait: 2 * time.Second, want: workspace.ErrRateLimited},
		{name: "429 bounded by config", status: 429, retryAfter: "1", maxRetries: 4, wantSends: 5, wantWait: 4 * time.Second, want: workspace.ErrRateLimited},
		{name: "429 retries off", status: 429, retryAfter: "1", times: 1, maxRetries: -1, wantSends: 1, want: workspace.ErrRateLimited},
		{name: "429 without Retry-After", status: 429, times: 1, wantSends: 1, want: workspace.ErrRateLimited},
		{name: "429 beyond the cap", status: 429, retryAfter: "31", times: 1, wantSends: 1, want: workspace.ErrRateLimited},
		{name: "429 garbage Retry-After", status: 429, retryAfter: "soon", times: 1, wantSends: 1, want: workspace.ErrRateLimited},
		{name: "429 beyond the chat timeout", status: 429, retryAfter: "20", times: 1, chatTimeout: 10 * time.Second, wantSends: 1, want: workspace.ErrRateLimited},
		{name: "503", status: 503, retryAfter: "1", times: 1, wantSends: 1, want: workspace.ErrUnavailable},
		{name: "503 without Retry-After", status: 503, times: 1, wantSends: 1, want: workspace.ErrUnavailable},
		{name: "500 with Retry-After", status: 500, retryAfter: "1", times: 1, wantSends: 1},
		{name: "create session 429 then 200", create: true, status: 429, retryAfter: "1", times: 1, wantSends: 2, wantWait: time.Second, ok: true},
		{name: "create session 503", create: true, status: 503, retryAfter: "1", times: 1, wantSends: 1, want: workspace.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFake(t, workspacetest.Options{})
				if tt.create {
					fake.AddAgent(workspacetest.Agent{UUID: agentUUID, SessionStatus: tt.status, Header: retryAfterHeader(tt.retryAfter), SessionStatusCount: tt.times})
				} else {
					fake.AddAgent(workspacetest.Agent{UUID: agentUUID, Status: tt.status, Header: retryAfterHeader(tt.retryAfter), StatusCount: tt.times})
				}
				fake.AddSession(agentUUID, "s")
				c := newClient(t, fake, func(cfg *workspace.Config) {
					cfg.MaxRetries = tt.maxRetries
					cfg.ChatTimeout = tt.chatTimeout
				})
				start := time.Now()
				var err error
				suffix := "/chat"
				if tt.create {
					suffix = "/sessions"
					_, err = c.CreateSession(t.Context(), agentUUID)
				} else {
					_, err = c.Chat(t.Context(), agentUUID, "s", "hi")
				}
				if n := countRequests(fake, suffix); n != tt.wantSends {
					t.Errorf("fake received %d requests, want %d", n, tt.wantSends)
				}
				if got := time.Since(start); got != tt.wantWait {
					t.Errorf("took %v, want %v", got, tt.wantWait)
				}
				apiErr, isAPI := errors.AsType[*workspace.APIError](err)
				switch {
				case tt.ok:
					if err != nil {
						t.Errorf("error = %v, want success after re-sending", err)
					}
				case !isAPI || apiErr.Status != tt.status:
					t.Errorf("error = %v, want the APIError %d", err, tt.status)
				case tt.want != nil && !errors.Is(err, tt.want):
					t.Errorf("error = %v, want errors.Is %v", err, tt.want)
				}
				if !tt.create {
					wantMessages := 0
					if err == nil {
						wantMessages = 1
					}
					if got := fake.Messages("s"); len(got) != wantMessages {
						t.Errorf("session accepted %q, want %d message", got, wantMessages)
					}
				}
			})
		})
	}
}

func TestRetryWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFake(t, workspacetest.Options{})
		fake.AddAgent(workspacetest.Agent{UUID: agentUUID, Status: 429, Header: http.Header{"Retry-After": {"20"}}})
		fake.AddSession(agentUUID, "s")
		c := newClient(t, fake, nil)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(3*time.Second, cancel)
		start := time.Now()
		_, err := c.Chat(ctx, agentUUID, "s", "hi")
		if !errors.Is(err, context.Canceled) || errors.Is(err, workspace.ErrUnreachable) {
			t.Errorf("Chat cancelled while waiting = %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("cancelled after %v, want 3s", got)
		}
		if n := len(fake.Requests()); n != 1 {
			t.Errorf("fake received %d requests, want 1", n)
		}
	})
}

// failFirst answers its first n requests with err and passes the rest on.
type failFirst struct {
	n     int
	err   error
	calls atomic.Int32
	next  http.RoundTripper
}

func (f *failFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if int(f.calls.Add(1)) <= f.n {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, f.err
	}
	return f.next.RoundTrip(r)
}

func TestTransportErrors(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name      string
		err       error
		fail      int
		wantCalls int // transport calls
		wantSent  int // requests the fake handled
		wantWait  time.Duration
		wantErr   bool
	}{
		{name: "dial refused once", err: refused, fail: 1, wantCalls: 2, wantSent: 1, wantWait: 100 * time.Millisecond},
		{name: "dial refused twice", err: refused, fail: 2, wantCalls: 3, wantSent: 1, wantWait: 300 * time.Millisecond},
		{name: "dial refused always", err: refused, fail: 99, wantCalls: 3, wantWait: 300 * time.Millisecond, wantErr: true},
		{name: "dns temporary", err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "server misbehaving", Name: "ws", IsTemporary: true}}, fail: 1, wantCalls: 2, wantSent: 1, wantWait: 100 * time.Millisecond},
		{name: "dns not found", err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "ws", IsNotFound: true}}, fail: 1, wantCalls: 1, wantErr: true},
		{name: "reset", err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, fail: 1, wantCalls: 1, wantErr: true},
		{name: "eof", err: io.ErrUnexpectedEOF, fail: 1, wantCalls: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFake(t, workspacetest.Options{})
				ft := &failFirst{n: tt.fail, err: tt.err, next: fake.Transport()}
				c := newClient(t, fake, func(cfg *workspace.Config) { cfg.HTTPClient = &http.Client{Transport: ft} })
				start := time.Now()
				_, err := c.RunFlowSync(t.Context(), flowUUID, nil, time.Minute)
				if got := int(ft.calls.Load()); got != tt.wantCalls {
					t.Errorf("transport called %d times, want %d", got, tt.wantCalls)
				}
				if got := len(fake.Requests()); got != tt.wantSent {
					t.Errorf("fake received %d requests, want %d", got, tt.wantSent)
				}
				if got := time.Since(start); got != tt.wantWait {
					t.Errorf("took %v, want %v", got, tt.wantWait)
				}
				if !tt.wantErr {
					if err != nil {
						t.Errorf("RunFlowSync = %v, want success", err)
					}
					return
				}
				if !errors.Is(err, workspace.ErrUnreachable) || !errors.Is(err, tt.err) {
					t.Errorf("RunFlowSync = %v, want ErrUnreachable wrapping %v", err, tt.err)
				}
			})
		})
	}
}

func TestDialClosedPort(t *testing.T) {
	addr := testaddr.Refusing(t)

	var attempts atomic.Int32
	c, err := workspace.New(workspace.Config{
		BaseURL:       "http://" + addr,
		WorkspaceUUID: "ws-test",
		Token:         "test-token",
		MaxRetries:    1,
		Observe: func(op string, status int, _ time.Duration) {
			if status != 0 {
				t.Errorf("Observe(%s, %d), want status 0 for a refused dial", op, status)
			}
			attempts.Add(1)
		},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = c.Chat(t.Context(), agentUUID, "s", "hi")
	if !errors.Is(err, workspace.ErrUnreachable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Chat to a closed port = %v, want ErrUnreachable wrapping ECONNREFUSED", err)
	}
	if opErr, ok := errors.AsType[*net.OpError](err); !ok || opErr.Op != "dial" {
		t.Errorf("Chat to a closed port = %v, want a wrapped dial *net.OpError", err)
	}
	if got := attempts.Load(); got != 2 {
		t.Errorf("%d attempts, want 2 (MaxRetries 1)", got)
	}
}

// TestResetAfterReceiptNotRetried: a connection that breaks once the
// request was received ends the call, for every operation: the request may
// have been acted on.
func TestResetAfterReceiptNotRetried(t *testing.T) {
	calls := map[string]func(context.Context, *workspace.Client) error{
		"flow": func(ctx context.Context, c *workspace.Client) error {
			_, err := c.RunFlowSync(ctx, flowUUID, map[string]string{"host": "web1"}, time.Minute)
			return err
		},
		"chat": func(ctx context.Context, c *workspace.Client) error {
			_, err := c.Chat(ctx, agentUUID, "s", "hi")
			return err
		},
		"create session": func(ctx context.Context, c *workspace.Client) error {
			_, err := c.CreateSession(ctx, agentUUID)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var received atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				received.Add(1)
				io.Copy(io.Discard, r.Body)
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				conn.Close()
			}))
			t.Cleanup(srv.Close)
			c, err := workspace.New(workspace.Config{BaseURL: srv.URL, WorkspaceUUID: "ws-test", HTTPClient: srv.Client()})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := call(t.Context(), c); !errors.Is(err, workspace.ErrUnreachable) {
				t.Errorf("%s with the connection dropped = %v, want ErrUnreachable", name, err)
			}
			if got := received.Load(); got != 1 {
				t.Errorf("server received %d requests, want 1: a request that may have been acted on is never sent again", got)
			}
		})
	}
}

func TestClientDeadline(t *testing.T) {
	tests := []struct {
		name string
		edit func(*workspace.Config)
		call func(context.Context, *workspace.Client) error
		want time.Duration
	}{
		{
			name: "flow timeout plus default margin",
			call: func(ctx context.Context, c *workspace.Client) error {
				_, err := c.RunFlowSync(ctx, flowUUID, nil, 30*time.Second)
				return err
			},
			want: 31 * time.Second,
		},
		{
			name: "flow timeout plus margin, not rounded",
			edit: func(cfg *workspace.Config) { cfg.FlowMargin = 500 * time.Millisecond },
			call: func(ctx context.Context, c *workspace.Client) error {
				_, err := c.RunFlowSync(ctx, flowUUID, nil, 1500*time.Millisecond)
				return err
			},
			want: 2 * time.Second,
		},
		{
			name: "flow default timeout",
			call: func(ctx context.Context, c *workspace.Client) error {
				_, err := c.RunFlowSync(ctx, flowUUID, nil, 0)
				return err
			},
			want: 61 * time.Second,
		},
		{
			name: "chat default",
			call: func(ctx context.Context, c *workspace.Client) error {
				_, err := c.Chat(ctx, agentUUID, "s", "hi")
				return err
			},
			want: 120 * time.Second,
		},
		{
			name: "create session configured",
			edit: func(cfg *workspace.Config) { cfg.ChatTimeout = 5 * time.Second },
			call: func(ctx context.Context, c *workspace.Client) error {
				_, err := c.CreateSession(ctx, agentUUID)
				return err
			},
			want: 5 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				hang := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					calls.Add(1)
					<-r.Context().Done()
					return nil, r.Context().Err()
				})
				cfg := workspace.Config{BaseURL: "http://ws.test", WorkspaceUUID: "w", HTTPClient: &http.Client{Transport: hang}}
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
				if !errors.Is(err, workspace.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					t.Errorf("error = %v, want ErrUnreachable and DeadlineExceeded", err)
				}
				if got := calls.Load(); got != 1 {
					t.Errorf("%d attempts, want 1: a request that may have been processed is not retried", got)
				}
			})
		})
	}
}

func TestCallerContext(t *testing.T) {
	cause := errors.New("shutting down")
	tests := []struct {
		name string
		ctx  func(*testing.T) context.Context
		want []error
	}{
		{
			name: "cancel",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(time.Second, cancel)
				return ctx
			},
			want: []error{context.Canceled},
		},
		{
			name: "cancel with cause",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancelCause(t.Context())
				time.AfterFunc(time.Second, func() { cancel(cause) })
				return ctx
			},
			want: []error{context.Canceled, cause},
		},
		{
			name: "caller deadline",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				t.Cleanup(cancel)
				return ctx
			},
			want: []error{context.DeadlineExceeded},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFake(t, workspacetest.Options{})
				fake.AddAgent(workspacetest.Agent{UUID: agentUUID, Delay: time.Hour})
				fake.AddSession(agentUUID, "s")
				c := newClient(t, fake, nil)
				_, err := c.Chat(tt.ctx(t), agentUUID, "s", "hi")
				for _, want := range tt.want {
					if !errors.Is(err, want) {
						t.Errorf("Chat = %v, want errors.Is %v", err, want)
					}
				}
				if errors.Is(err, workspace.ErrUnreachable) {
					t.Errorf("Chat = %v: the caller's own cancellation is not ErrUnreachable", err)
				}
				if got := fake.Messages("s"); len(got) != 0 {
					t.Errorf("session accepted %q, want nothing", got)
				}
			})
		})
	}
}
