package workspace_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

const (
	agentUUID = "agent-1"
	flowUUID  = "healthcheck"
)

// newFake returns an in-memory fake with one agent and one flow.
func newFake(t *testing.T, opts workspacetest.Options) *workspacetest.Server {
	t.Helper()
	fake := workspacetest.New(opts)
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: agentUUID})
	fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "Checked {host}, service {service}"})
	return fake
}

// newClient returns a client of fake; edit, when set, changes the config first.
func newClient(t *testing.T, fake *workspacetest.Server, edit func(*workspace.Config)) *workspace.Client {
	t.Helper()
	cfg := workspace.Config{
		BaseURL:       fake.URL,
		WorkspaceUUID: "ws-test",
		Token:         "test-token",
		UserAgent:     "flowbridge/test",
		HTTPClient:    fake.Client(),
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := workspace.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func TestRunFlowSync(t *testing.T) {
	fake := newFake(t, workspacetest.Options{})
	c := newClient(t, fake, nil)

	run, err := c.RunFlowSync(t.Context(), flowUUID, map[string]string{"host": "web1", "service": "nginx"}, 30*time.Second)
	if err != nil {
		t.Fatalf("RunFlowSync: %v", err)
	}
	if run.Status != "SUCCESS" {
		t.Errorf("Status = %q, want SUCCESS", run.Status)
	}
	got, ok := run.Response()
	if want := "Checked web1, service nginx"; !ok || got != want {
		t.Errorf("Response() = %q, %v, want %q, true", got, ok, want)
	}

	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("fake received %d requests, want 1", len(reqs))
	}
	req := reqs[0]
	if want := "/api/v1/workspaces/ws-test/prompts/healthcheck/run/sync"; req.Method != http.MethodPost || req.Path != want {
		t.Errorf("request = %s %s, want POST %s", req.Method, req.Path, want)
	}
	if got := req.Query.Encode(); got != "timeout=30" {
		t.Errorf("query = %q, want timeout=30 and no token", got)
	}
	var params map[string]string
	if err := json.Unmarshal(req.Body, &params); err != nil || params["host"] != "web1" || params["service"] != "nginx" {
		t.Errorf("body = %s (%v), want host and service", req.Body, err)
	}
	checkHeaders(t, req)
}

// checkHeaders checks the headers every request carries.
func checkHeaders(t *testing.T, req workspacetest.Request) {
	t.Helper()
	for name, want := range map[string]string{
		"Authorization": "Bearer test-token",
		"Content-Type":  "application/json",
		"Accept":        "application/json",
		"User-Agent":    "flowbridge/test",
	} {
		if got := req.Header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if strings.Contains(req.Path, "test-token") || req.Query.Has("token") {
		t.Errorf("token in URL: %s?%s", req.Path, req.Query.Encode())
	}
}

func TestRunFlowSyncNonStringOutput(t *testing.T) {
	fake := newFake(t, workspacetest.Options{})
	fake.AddFlow(workspacetest.Flow{UUID: "disk", Output: map[string]any{"hosts": []string{"a", "b"}, "free": 12}})
	c := newClient(t, fake, nil)

	run, err := c.RunFlowSync(t.Context(), "disk", nil, 0)
	if err != nil {
		t.Fatalf("RunFlowSync: %v", err)
	}
	if got, ok := run.Response(); ok {
		t.Errorf("Response() = %q, true, want false", got)
	}
	if want := `{"free":12,"hosts":["a","b"]}`; string(run.Output) != want {
		t.Errorf("Output = %s, want %s", run.Output, want)
	}
	if got := string(fake.Requests()[0].Body); got != "{}" {
		t.Errorf("body for nil params = %q, want {}", got)
	}
}

func TestRunFlowSyncTimeoutQuery(t *testing.T) {
	tests := []struct {
		timeout time.Duration
		want    string // "" means no parameter
	}{
		{time.Nanosecond, "1"},
		{time.Second, "1"},
		{1500 * time.Millisecond, "2"},
		{2*time.Second + time.Nanosecond, "3"},
		{60 * time.Second, "60"},
		{10 * time.Minute, "600"},
		{0, ""},
		{-time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.timeout.String(), func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{})
			c := newClient(t, fake, nil)
			if _, err := c.RunFlowSync(t.Context(), flowUUID, nil, tt.timeout); err != nil {
				t.Fatalf("RunFlowSync: %v", err)
			}
			q := fake.Requests()[0].Query
			if got := q.Get("timeout"); got != tt.want || q.Has("timeout") != (tt.want != "") {
				t.Errorf("RunFlowSync(timeout %v) sent timeout=%q, want %q", tt.timeout, got, tt.want)
			}
		})
	}
}

func TestChat(t *testing.T) {
	const startAt = 1716212345123456789 // beyond 2^53: a float64 would change it
	fake := newFake(t, workspacetest.Options{StartAt: func() int64 { return startAt }})
	c := newClient(t, fake, nil)

	session, err := c.CreateSession(t.Context(), agentUUID)
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	for turn, msg := range []string{"hello", "how are you"} {
		reply, err := c.Chat(t.Context(), agentUUID, session, msg)
		if err != nil {
			t.Fatalf("Chat(%q): %v", msg, err)
		}
		want := workspace.ChatReply{
			AgentUUID: agentUUID,
			Message:   "Message sent",
			Status:    "SUBMITTED",
			StartAt:   startAt,
			Output:    "[turn " + string(rune('1'+turn)) + "] You said: " + msg,
		}
		if *reply != want {
			t.Errorf("Chat(%q) = %+v, want %+v", msg, *reply, want)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("fake received %d requests, want 3", len(reqs))
	}
	if want := "/api/v1/workspaces/ws-test/agents/agent-1/sessions"; reqs[0].Path != want || string(reqs[0].Body) != "{}" {
		t.Errorf("create session request = %s %s, want %s {}", reqs[0].Path, reqs[0].Body, want)
	}
	if want := "/api/v1/workspaces/ws-test/agents/agent-1/sessions/" + session + "/chat"; reqs[1].Path != want {
		t.Errorf("chat path = %s, want %s", reqs[1].Path, want)
	}
	if got := string(reqs[1].Body); got != `{"message":"hello"}` {
		t.Errorf("chat body = %s, want {\"message\":\"hello\"}", got)
	}
	for _, req := range reqs {
		checkHeaders(t, req)
	}
}

func TestStatusCodes(t *testing.T) {
	type call func(context.Context, *workspace.Client, string) error
	runFlow := func(flow string, timeout time.Duration) call {
		return func(ctx context.Context, c *workspace.Client, _ string) error {
			_, err := c.RunFlowSync(ctx, flow, nil, timeout)
			return err
		}
	}
	chat := func(agent string, session func(string) string) call {
		return func(ctx context.Context, c *workspace.Client, live string) error {
			_, err := c.Chat(ctx, agent, session(live), "hi")
			return err
		}
	}
	live := func(s string) string { return s }
	tests := []struct {
		name   string
		token  string // "" keeps the valid token, "none" sends none
		setup  func(*workspacetest.Server)
		call   call
		status int
		want   error
		text   string // in the error message
	}{
		{name: "flow bad token", token: "wrong", call: runFlow(flowUUID, time.Minute), status: 401, want: workspace.ErrUnauthorized, text: "run flow healthcheck: "},
		{name: "flow no token", token: "none", call: runFlow(flowUUID, time.Minute), status: 401, want: workspace.ErrUnauthorized},
		{name: "flow unknown", call: runFlow("nosuch", time.Minute), status: 404, want: workspace.ErrNotFound, text: "run flow nosuch: "},
		{
			name:   "flow timeout",
			setup:  func(f *workspacetest.Server) { f.AddFlow(workspacetest.Flow{UUID: "slow", Delay: 90 * time.Second}) },
			call:   runFlow("slow", 5*time.Second),
			status: 408, want: workspace.ErrTimeout, text: "408 Request Timeout",
		},
		{
			name: "flow forced 400",
			setup: func(f *workspacetest.Server) {
				f.AddFlow(workspacetest.Flow{UUID: "bad", Status: 400, Body: `{"error":"no"}`})
			},
			call:   runFlow("bad", time.Minute),
			status: 400, want: workspace.ErrBadRequest, text: `{"error":"no"}`,
		},
		{name: "chat bad token", token: "wrong", call: chat(agentUUID, live), status: 401, want: workspace.ErrUnauthorized},
		{name: "chat unknown session", call: chat(agentUUID, func(string) string { return "nosuch" }), status: 404, want: workspace.ErrNotFound, text: "chat nosuch: "},
		{name: "chat unknown agent", call: chat("nobody", live), status: 404, want: workspace.ErrNotFound},
		{
			name:   "chat expired session",
			call:   chat(agentUUID, live),
			setup:  nil, // the session is expired below
			status: 404, want: workspace.ErrNotFound,
		},
		{
			name: "chat forced 400",
			setup: func(f *workspacetest.Server) {
				f.AddAgent(workspacetest.Agent{UUID: agentUUID, Status: 400, Body: "bad body"})
			},
			call:   chat(agentUUID, live),
			status: 400, want: workspace.ErrBadRequest, text: "bad body",
		},
		{
			name: "create session 401",
			call: func(ctx context.Context, c *workspace.Client, _ string) error {
				_, err := c.CreateSession(ctx, agentUUID)
				return err
			},
			token:  "wrong",
			status: 401, want: workspace.ErrUnauthorized, text: "create session for agent agent-1: ",
		},
		{
			name: "create session unknown agent",
			call: func(ctx context.Context, c *workspace.Client, _ string) error {
				_, err := c.CreateSession(ctx, "nobody")
				return err
			},
			status: 404, want: workspace.ErrNotFound,
		},
		{
			name: "redirect not followed",
			setup: func(f *workspacetest.Server) {
				f.AddFlow(workspacetest.Flow{UUID: "moved", Status: 307, Header: http.Header{"Location": {"https://elsewhere.example/"}}})
			},
			call:   runFlow("moved", time.Minute),
			status: 307, text: "307 Temporary Redirect",
		},
		{
			name:   "500 matches no sentinel",
			setup:  func(f *workspacetest.Server) { f.AddFlow(workspacetest.Flow{UUID: "boom", Status: 500, Body: "oops"}) },
			call:   runFlow("boom", time.Minute),
			status: 500, text: "500 Internal Server Error: oops",
		},
	}
	sentinels := []error{workspace.ErrBadRequest, workspace.ErrUnauthorized, workspace.ErrNotFound, workspace.ErrTimeout, workspace.ErrUnreachable, workspace.ErrBadResponse}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFake(t, workspacetest.Options{})
				fake.AddSession(agentUUID, "session-1")
				if tt.name == "chat expired session" {
					fake.ExpireSession("session-1")
				}
				if tt.setup != nil {
					tt.setup(fake)
				}
				c := newClient(t, fake, func(cfg *workspace.Config) {
					switch tt.token {
					case "":
					case "none":
						cfg.Token = ""
					default:
						cfg.Token = tt.token
					}
				})
				err := tt.call(t.Context(), c, "session-1")
				apiErr, ok := errors.AsType[*workspace.APIError](err)
				if !ok || apiErr.Status != tt.status {
					t.Fatalf("error = %v, want an APIError with status %d", err, tt.status)
				}
				for _, s := range sentinels {
					if got, want := errors.Is(err, s), s == tt.want; got != want {
						t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, want)
					}
				}
				if !strings.Contains(err.Error(), tt.text) {
					t.Errorf("error %q does not contain %q", err, tt.text)
				}
				if n := len(fake.Requests()); n != 1 {
					t.Errorf("fake received %d requests, want 1 (no retry)", n)
				}
			})
		})
	}
}

func TestFlowTimeoutArrivesBeforeClientDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFake(t, workspacetest.Options{})
		fake.AddFlow(workspacetest.Flow{UUID: "slow", Delay: time.Hour})
		c := newClient(t, fake, nil)
		start := time.Now()
		_, err := c.RunFlowSync(t.Context(), "slow", nil, 90*time.Second)
		if !errors.Is(err, workspace.ErrTimeout) {
			t.Fatalf("RunFlowSync(slow) = %v, want ErrTimeout", err)
		}
		if got := time.Since(start); got != 90*time.Second {
			t.Errorf("408 after %v, want 90s", got)
		}
	})
}

func TestCreateSessionShapes(t *testing.T) {
	for _, field := range []string{"result.session_uuid", "result.uuid", "session_uuid", "uuid"} {
		t.Run(field, func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{SessionField: field})
			c := newClient(t, fake, nil)
			id, err := c.CreateSession(t.Context(), agentUUID)
			if err != nil {
				t.Fatalf("CreateSession: %v", err)
			}
			if sessions := fake.Sessions(agentUUID); len(sessions) != 1 || sessions[0] != id {
				t.Errorf("CreateSession = %q, fake has sessions %q", id, sessions)
			}
		})
	}

	const (
		a = "0a0a0a0a-0000-4000-8000-00000000000a"
		b = "0b0b0b0b-0000-4000-8000-00000000000b"
		c = "0c0c0c0c-0000-4000-8000-00000000000c"
		d = "0d0d0d0d-0000-4000-8000-00000000000d"
		e = "0e0e0e0e-0000-4000-8000-00000000000e"
	)
	bodies := map[string]string{
		`{"result":{"session_uuid":"` + a + `"},"uuid":"` + b + `"}`:                    a,
		`{"result":{"session_uuid":"","uuid":"` + b + `"}}`:                             b,
		`{"result":"text","session_uuid":"` + c + `"}`:                                  c,
		`{"result":{"session_uuid":7},"uuid":"` + d + `"}`:                              d,
		`{"result":{"uuid":"` + e + `"},"session_uuid":"` + a + `","uuid":"` + b + `"}`: e,
	}
	for body, want := range bodies {
		t.Run(body, func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{})
			fake.AddAgent(workspacetest.Agent{UUID: agentUUID, SessionStatus: 201, Body: body})
			c := newClient(t, fake, nil)
			if got, err := c.CreateSession(t.Context(), agentUUID); err != nil || got != want {
				t.Errorf("CreateSession with body %s = %q, %v, want %q", body, got, err, want)
			}
		})
	}

	for _, body := range []string{`{"id":"x"}`, `{"result":{}}`, `{}`, `null`, `[]`, `<html>`} {
		t.Run("bad "+body, func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{})
			fake.AddAgent(workspacetest.Agent{UUID: agentUUID, SessionStatus: 200, Body: body})
			c := newClient(t, fake, nil)
			if got, err := c.CreateSession(t.Context(), agentUUID); !errors.Is(err, workspace.ErrBadResponse) {
				t.Errorf("CreateSession with body %s = %q, %v, want ErrBadResponse", body, got, err)
			}
		})
	}
}

func TestCreateSessionPath(t *testing.T) {
	var got string
	c, err := workspace.New(workspace.Config{
		BaseURL:           "https://ws.example.com/prefix/",
		WorkspaceUUID:     "w/1",
		CreateSessionPath: "/api/v2/{workspace_uuid}/sessions?agent={agent_uuid}",
		HTTPClient: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = r.URL.String()
			return jsonResponse(200, `{"uuid":"0a0a0a0a-0000-4000-8000-00000000000a"}`), nil
		})},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := c.CreateSession(t.Context(), "a b"); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if want := "https://ws.example.com/prefix/api/v2/w%2F1/sessions?agent=a%20b"; got != want {
		t.Errorf("CreateSession URL = %s, want %s", got, want)
	}
}

func TestPathEscaping(t *testing.T) {
	const (
		flow    = "flow/1 ?#%"
		agent   = "agent/../x"
		session = "s 1/2"
	)
	fake := newFake(t, workspacetest.Options{WorkspaceUUID: "ws 1"})
	fake.AddFlow(workspacetest.Flow{UUID: flow, Template: "ok"})
	fake.AddAgent(workspacetest.Agent{UUID: agent})
	fake.AddSession(agent, session)
	c := newClient(t, fake, func(cfg *workspace.Config) { cfg.WorkspaceUUID = "ws 1" })

	if _, err := c.RunFlowSync(t.Context(), flow, nil, time.Second); err != nil {
		t.Fatalf("RunFlowSync: %v", err)
	}
	if _, err := c.Chat(t.Context(), agent, session, "hi"); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if _, err := c.CreateSession(t.Context(), agent); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	want := []string{
		"/api/v1/workspaces/ws%201/prompts/flow%2F1%20%3F%23%25/run/sync",
		"/api/v1/workspaces/ws%201/agents/agent%2F..%2Fx/sessions/s%201%2F2/chat",
		"/api/v1/workspaces/ws%201/agents/agent%2F..%2Fx/sessions",
	}
	for i, req := range fake.Requests() {
		if req.Path != want[i] {
			t.Errorf("request %d path = %s, want %s", i, req.Path, want[i])
		}
	}
}

func TestBadResponses(t *testing.T) {
	t.Parallel()
	huge := `{"meta":{"status":"SUCCESS"},"result":{"output":{"response":"` + strings.Repeat("x", workspace.MaxResponseSize) + `"}}}`
	tests := []struct {
		name string
		flow bool // else chat
		body string
		ct   string
		text string
	}{
		{name: "oversized flow", flow: true, body: huge, text: "larger than 8 MiB"},
		{name: "oversized chat", body: `{"result":{"output":"` + strings.Repeat("y", workspace.MaxResponseSize) + `"}}`, text: "larger than 8 MiB"},
		{name: "html", flow: true, body: "<html><body>502 Bad Gateway</body></html>", ct: "text/html", text: `"<html><body>502 Bad Gateway`},
		{name: "truncated", flow: true, body: `{"meta":{"status":"SUCC`, text: "unexpected end of JSON input"},
		{name: "empty", flow: true, body: ``, text: "unexpected end of JSON input"},
		{name: "array", flow: true, body: `[1,2]`, text: "cannot unmarshal array"},
		{name: "no result", flow: true, body: `{"meta":{"status":"SUCCESS"}}`, text: "no result.output"},
		{name: "null", flow: true, body: `null`, text: "no result.output"},
		{name: "trailing garbage", flow: true, body: `{"result":{"output":1}} x`, text: "invalid character"},
		{name: "chat html", body: "<!doctype html>", ct: "text/html", text: `"<!doctype html>"`},
		{name: "chat output not string", body: `{"meta":{},"result":{"output":{"a":1}}}`, text: "cannot unmarshal object"},
		{name: "chat output null", body: `{"meta":{},"result":{"output":null}}`, text: "no string result.output"},
		{name: "chat no result", body: `{"meta":{"status":"SUBMITTED"}}`, text: "no string result.output"},
		{name: "chat start_at not a number", body: `{"meta":{"start_at":"soon"},"result":{"output":"x"}}`, text: "invalid number literal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{})
			header := http.Header{}
			if tt.ct != "" {
				header.Set("Content-Type", tt.ct)
			}
			fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Status: 200, Body: tt.body, Header: header})
			fake.AddAgent(workspacetest.Agent{UUID: agentUUID, Status: 200, Body: tt.body, Header: header})
			fake.AddSession(agentUUID, "s")
			c := newClient(t, fake, nil)
			var err error
			if tt.flow {
				_, err = c.RunFlowSync(t.Context(), flowUUID, nil, time.Second)
			} else {
				_, err = c.Chat(t.Context(), agentUUID, "s", "hi")
			}
			if !errors.Is(err, workspace.ErrBadResponse) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("error = %.300v, want ErrBadResponse containing %q", err, tt.text)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error message is %d bytes long, want a short snippet", len(err.Error()))
			}
		})
	}
}

func TestChatLenientStartAt(t *testing.T) {
	tests := map[string]int64{
		`{"meta":{"start_at":1716212345123456789},"result":{"output":"x"}}`:   1716212345123456789,
		`{"meta":{"start_at":"1716212345123456789"},"result":{"output":"x"}}`: 1716212345123456789,
		`{"meta":{"start_at":1.5e18},"result":{"output":"x"}}`:                0,
		`{"meta":{},"result":{"output":"x"}}`:                                 0,
		`{"result":{"output":"x"}}`:                                           0,
	}
	for body, want := range tests {
		t.Run(body, func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{})
			fake.AddAgent(workspacetest.Agent{UUID: agentUUID, Status: 200, Body: body})
			fake.AddSession(agentUUID, "s")
			reply, err := newClient(t, fake, nil).Chat(t.Context(), agentUUID, "s", "hi")
			if err != nil || reply.StartAt != want || reply.Output != "x" {
				t.Errorf("Chat with body %s = %+v, %v, want StartAt %d", body, reply, err, want)
			}
		})
	}
}

func TestAPIErrorBodyTruncated(t *testing.T) {
	fake := newFake(t, workspacetest.Options{})
	fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Status: 502, Body: strings.Repeat("é", 2000)})
	_, err := newClient(t, fake, nil).RunFlowSync(t.Context(), flowUUID, nil, time.Second)
	apiErr, ok := errors.AsType[*workspace.APIError](err)
	if !ok {
		t.Fatalf("RunFlowSync = %v, want an APIError", err)
	}
	if n := len(apiErr.Body); n > 520 || !strings.HasSuffix(apiErr.Body, "é…") {
		t.Errorf("APIError.Body is %d bytes ending %q, want at most ~512 bytes of whole runes and a cut mark", n, apiErr.Body[max(0, n-8):])
	}
	if apiErr.Op != workspace.OpRunFlow {
		t.Errorf("APIError.Op = %q, want %q", apiErr.Op, workspace.OpRunFlow)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  workspace.Config
		want string // "" means valid
	}{
		{name: "valid", cfg: workspace.Config{BaseURL: "https://ws.example.com", WorkspaceUUID: "w"}},
		{name: "valid prefix", cfg: workspace.Config{BaseURL: "http://127.0.0.1:8080/proxy/", WorkspaceUUID: "w"}},
		{name: "empty", cfg: workspace.Config{}, want: "base URL is empty"},
		{name: "no workspace", cfg: workspace.Config{BaseURL: "https://ws.example.com"}, want: "workspace UUID is empty"},
		{name: "relative", cfg: workspace.Config{BaseURL: "ws.example.com", WorkspaceUUID: "w"}, want: "scheme must be http or https"},
		{name: "ftp", cfg: workspace.Config{BaseURL: "ftp://ws.example.com", WorkspaceUUID: "w"}, want: "scheme must be http or https"},
		{name: "no host", cfg: workspace.Config{BaseURL: "https:///x", WorkspaceUUID: "w"}, want: "has no host"},
		{name: "credentials", cfg: workspace.Config{BaseURL: "https://u:secret@ws.example.com", WorkspaceUUID: "w"}, want: "must not carry credentials"},
		{name: "query", cfg: workspace.Config{BaseURL: "https://ws.example.com?token=x", WorkspaceUUID: "w"}, want: "query or fragment"},
		{name: "api suffix", cfg: workspace.Config{BaseURL: "https://ws.example.com/api/v1/", WorkspaceUUID: "w"}, want: "must not end in /api/v1"},
		{name: "session path", cfg: workspace.Config{BaseURL: "https://ws.example.com", WorkspaceUUID: "w", CreateSessionPath: "sessions"}, want: "{agent_uuid}"},
		{name: "negative", cfg: workspace.Config{BaseURL: "https://ws.example.com", WorkspaceUUID: "w", ChatTimeout: -1}, want: "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workspace.New(tt.cfg)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New(%+v) = %v, want no error", tt.cfg, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("New(%+v) = %v, want an error containing %q", tt.cfg, err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("New error %q shows the URL's password", err)
			}
		})
	}
	_, err := workspace.New(workspace.Config{BaseURL: "nope"})
	if err == nil || !strings.Contains(err.Error(), "scheme") || !strings.Contains(err.Error(), "workspace UUID") {
		t.Errorf("New with two problems = %v, want both reported", err)
	}
}

func TestObserve(t *testing.T) {
	type call struct {
		op     string
		status int
	}
	var calls []call
	fake := newFake(t, workspacetest.Options{})
	c := newClient(t, fake, func(cfg *workspace.Config) {
		cfg.Observe = func(op string, status int, elapsed time.Duration) {
			if elapsed < 0 {
				t.Errorf("Observe(%s) elapsed %v < 0", op, elapsed)
			}
			calls = append(calls, call{op, status})
		}
	})
	session, _ := c.CreateSession(t.Context(), agentUUID)
	c.Chat(t.Context(), agentUUID, session, "hi")
	c.Chat(t.Context(), agentUUID, "gone", "hi")
	c.RunFlowSync(t.Context(), flowUUID, nil, time.Second)
	want := []call{{workspace.OpCreateSession, 200}, {workspace.OpChat, 200}, {workspace.OpChat, 404}, {workspace.OpRunFlow, 200}}
	if len(calls) != len(want) {
		t.Fatalf("Observe calls = %v, want %v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("Observe call %d = %v, want %v", i, calls[i], want[i])
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func jsonResponse(status int, body string) *http.Response {
	return &http.Response{
		StatusCode: status,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

// TestFailureShownAsSuccess is finding 2: an HTTP 200 whose meta.status is
// present and not SUCCESS (flows) or SUBMITTED (chat) is an error carrying
// the status and the body's own words; an absent status is success.
func TestFailureShownAsSuccess(t *testing.T) {
	long := strings.Repeat("é", 1000)
	tests := []struct {
		name        string
		chat        bool
		body        string
		wantStatus  string // "" means success
		wantMessage string
	}{
		{name: "flow FAILED with meta.message", body: `{"meta":{"status":"FAILED","message":"disk full"},"result":{"output":{"response":"all good"}}}`, wantStatus: "FAILED", wantMessage: "disk full"},
		{name: "flow ERROR with result.error", body: `{"meta":{"status":"ERROR"},"result":{"error":"step 2 crashed","output":null}}`, wantStatus: "ERROR", wantMessage: "step 2 crashed"},
		{name: "flow CANCELLED with error", body: `{"meta":{"status":"CANCELLED"},"error":"cancelled by admin","message":"later"}`, wantStatus: "CANCELLED", wantMessage: "cancelled by admin"},
		{name: "flow with message", body: `{"meta":{"status":"FAILED","message":""},"message":"top-level text"}`, wantStatus: "FAILED", wantMessage: "top-level text"},
		{name: "flow error object", body: `{"meta":{"status":"FAILED"},"error":{"code": 5, "text":"quota"}}`, wantStatus: "FAILED", wantMessage: `{"code":5,"text":"quota"}`},
		{name: "flow no text", body: `{"meta":{"status":"TIMEOUT"},"result":{"output":{"response":"ok"}}}`, wantStatus: "TIMEOUT"},
		{name: "flow result of another shape", body: `{"meta":{"status":"ERROR"},"result":"boom"}`, wantStatus: "ERROR"},
		{name: "flow long message cut", body: `{"meta":{"status":"FAILED","message":"` + long + `"}}`, wantStatus: "FAILED", wantMessage: strings.Repeat("é", 248) + "…"},
		{name: "flow huge status cut", body: `{"meta":{"status":"` + strings.Repeat("F", 100_000) + `"}}`, wantStatus: strings.Repeat("F", 97) + "…"},
		{name: "flow SUBMITTED is not success", body: `{"meta":{"status":"SUBMITTED"},"result":{"output":{"response":"ok"}}}`, wantStatus: "SUBMITTED"},
		{name: "flow SUCCESS", body: `{"meta":{"status":"SUCCESS"},"result":{"output":{"response":"ok"}}}`},
		{name: "flow success in lower case", body: `{"meta":{"status":"success"},"result":{"output":{"response":"ok"}}}`},
		{name: "flow status absent", body: `{"result":{"output":{"response":"ok"}}}`},
		{name: "flow status null", body: `{"meta":{"status":null},"result":{"output":{"response":"ok"}}}`},
		{name: "flow status blank", body: `{"meta":{"status":" "},"result":{"output":{"response":"ok"}}}`},
		{name: "chat FAILED", chat: true, body: `{"meta":{"status":"FAILED","message":"agent offline"},"result":{"output":"partial"}}`, wantStatus: "FAILED", wantMessage: "agent offline"},
		{name: "chat REJECTED without output", chat: true, body: `{"meta":{"status":"REJECTED"},"error":"too long"}`, wantStatus: "REJECTED", wantMessage: "too long"},
		{name: "chat SUCCESS is not SUBMITTED", chat: true, body: `{"meta":{"status":"SUCCESS"},"result":{"output":"x"}}`, wantStatus: "SUCCESS"},
		{name: "chat SUBMITTED", chat: true, body: `{"meta":{"status":"SUBMITTED"},"result":{"output":"x"}}`},
		{name: "chat status absent", chat: true, body: `{"meta":{},"result":{"output":"x"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(t, workspacetest.Options{})
			fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Status: 200, Body: tt.body})
			fake.AddAgent(workspacetest.Agent{UUID: agentUUID, Status: 200, Body: tt.body})
			fake.AddSession(agentUUID, "s")
			c := newClient(t, fake, nil)
			var (
				err             error
				status, message string
				failed          bool
			)
			if tt.chat {
				_, err = c.Chat(t.Context(), agentUUID, "s", "hi")
				if fe, ok := errors.AsType[*workspace.ChatFailedError](err); ok {
					status, message, failed = fe.Status, fe.Message, true
				}
				if failed != errors.Is(err, workspace.ErrChatFailed) || errors.Is(err, workspace.ErrFlowFailed) {
					t.Errorf("Chat = %v: want ErrChatFailed exactly with a ChatFailedError", err)
				}
			} else {
				_, err = c.RunFlowSync(t.Context(), flowUUID, nil, time.Minute)
				if fe, ok := errors.AsType[*workspace.FlowFailedError](err); ok {
					status, message, failed = fe.Status, fe.Message, true
				}
				if failed != errors.Is(err, workspace.ErrFlowFailed) || errors.Is(err, workspace.ErrChatFailed) {
					t.Errorf("RunFlowSync = %v: want ErrFlowFailed exactly with a FlowFailedError", err)
				}
			}
			if tt.wantStatus == "" {
				if err != nil {
					t.Errorf("error = %v, want success", err)
				}
				return
			}
			if !failed || status != tt.wantStatus || message != tt.wantMessage {
				t.Errorf("error = %.300v, want status %.120q and message %.120q", err, tt.wantStatus, tt.wantMessage)
			}
			if errors.Is(err, workspace.ErrBadResponse) {
				t.Errorf("error = %.300v: a reported failure is not a bad response", err)
			}
			if len(err.Error()) > 800 {
				t.Errorf("error message is %d bytes long, want it bounded", len(err.Error()))
			}
		})
	}
}

// TestHostileSessionID is finding 4: Create Session accepts only a UUID in
// canonical form, returns it in lower case, and reports anything else as
// ErrBadResponse without quoting all of it.
func TestHostileSessionID(t *testing.T) {
	const valid = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	huge := strings.Repeat("a", 100<<10)
	tests := []struct {
		name string
		id   string
		want string // "" means rejected
	}{
		{name: "lower case", id: valid, want: valid},
		{name: "upper case", id: strings.ToUpper(valid), want: valid},
		{name: "mixed case", id: "6BA7b810-9DAD-11d1-80B4-00c04FD430C8", want: valid},
		{name: "100 KB", id: huge},
		{name: "100 KB starting with a UUID", id: valid + huge},
		{name: "word", id: "session-1"},
		{name: "braces", id: "{" + valid + "}"},
		{name: "urn", id: "urn:uuid:" + valid},
		{name: "no hyphens", id: strings.ReplaceAll(valid, "-", "")},
		{name: "space", id: valid + " "},
		{name: "not hex", id: "6ba7b810-9dad-11d1-80b4-00c04fd430cg"},
		{name: "hyphens misplaced", id: "6ba7b8109-dad-11d1-80b4-00c04fd430c8"},
		{name: "path", id: "../../../admin/00000000-0000-0000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"result": map[string]string{"session_uuid": tt.id}})
			fake := newFake(t, workspacetest.Options{})
			fake.AddAgent(workspacetest.Agent{UUID: agentUUID, SessionStatus: 200, Body: string(body)})
			c := newClient(t, fake, nil)
			got, err := c.CreateSession(t.Context(), agentUUID)
			if n := len(fake.Requests()); n != 1 {
				t.Errorf("fake received %d requests, want 1", n)
			}
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Errorf("CreateSession = %q, %v, want %q", got, err, tt.want)
				}
				return
			}
			if got != "" || !errors.Is(err, workspace.ErrBadResponse) || !strings.Contains(err.Error(), "session ID is not a UUID") {
				t.Fatalf("CreateSession = %.80q, %.300v, want ErrBadResponse saying the session ID is not a UUID", got, err)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error message is %d bytes long, want the session ID quoted short", len(err.Error()))
			}
		})
	}
}

func TestValidSessionID(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", true},
		{"6BA7B810-9DAD-11D1-80B4-00C04FD430C8", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", true},
		{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", true},
		{"", "", false},
		{"s", "", false},
		{"6ba7b8109dad11d180b400c04fd430c8", "", false},
		{"{6ba7b810-9dad-11d1-80b4-00c04fd430c8}", "", false},
		{"urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8", "", false},
		{" 6ba7b810-9dad-11d1-80b4-00c04fd430c8", "", false},
		{"6ba7b810-9dad-11d1-80b4-00c04fd430c", "", false},
		{"6ba7b810_9dad_11d1_80b4_00c04fd430c8", "", false},
		{"6ba7b810-9dad-11d1-80b4-00c04fd430c８", "", false},
	}
	for _, tt := range tests {
		if got, ok := workspace.ValidSessionID(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("ValidSessionID(%q) = %q, %v, want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
