package workspacetest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

const (
	flowPath    = "/api/v1/workspaces/ws-test/prompts/healthcheck/run/sync"
	sessionPath = "/api/v1/workspaces/ws-test/agents/agent-1/sessions"
	token       = "test-token"
)

func newFake(t *testing.T, opts workspacetest.Options) *workspacetest.Server {
	t.Helper()
	s := workspacetest.New(opts)
	t.Cleanup(s.Close)
	s.AddFlow(workspacetest.Flow{UUID: "healthcheck", Template: "Checked {host}, service {service}"})
	s.AddAgent(workspacetest.Agent{UUID: "agent-1"})
	return s
}

// post sends a request to the fake; auth is the Authorization header, none
// when empty. It reports errors with t.Errorf, so goroutines may call it.
func post(t *testing.T, ctx context.Context, s *workspacetest.Server, path, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Errorf("NewRequest: %v", err)
		return 0, ""
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", path, err)
		return 0, ""
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("read body: %v", err)
	}
	return resp.StatusCode, string(data)
}

// createSession returns a new session of agent-1.
func createSession(t *testing.T, s *workspacetest.Server) string {
	t.Helper()
	status, body := post(t, t.Context(), s, sessionPath, "Bearer "+token, "{}")
	if status != 200 {
		t.Fatalf("create session = %d %s, want 200", status, body)
	}
	var resp struct {
		Result struct {
			SessionUUID string `json:"session_uuid"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Result.SessionUUID == "" {
		t.Fatalf("create session body %s: %v, want result.session_uuid", body, err)
	}
	return resp.Result.SessionUUID
}

func TestAuth(t *testing.T) {
	s := newFake(t, workspacetest.Options{})
	s.AddSession("agent-1", "s1")
	chatPath := sessionPath + "/s1/chat"
	tests := []struct {
		name string
		path string
		auth string
		body string
		want int
	}{
		{"flow header", flowPath, "Bearer " + token, "{}", 200},
		{"flow header lower-case scheme", flowPath, "bearer " + token, "{}", 200},
		{"flow query token", flowPath + "?token=" + token, "", "{}", 200},
		{"flow query token with timeout", flowPath + "?timeout=5&token=" + token, "", "{}", 200},
		{"flow wrong header, right query", flowPath + "?token=" + token, "Bearer nope", "{}", 200},
		{"flow no token", flowPath, "", "{}", 401},
		{"flow wrong token", flowPath, "Bearer nope", "{}", 401},
		{"flow wrong query token", flowPath + "?token=nope", "", "{}", 401},
		{"flow basic auth", flowPath, "Basic " + token, "{}", 401},
		{"flow empty bearer", flowPath, "Bearer ", "{}", 401},
		{"chat header", chatPath, "Bearer " + token, `{"message":"hi"}`, 200},
		{"chat query token", chatPath + "?token=" + token, "", `{"message":"hi"}`, 401},
		{"chat wrong token", chatPath, "Bearer nope", `{"message":"hi"}`, 401},
		{"session header", sessionPath, "Bearer " + token, `{}`, 200},
		{"session query token", sessionPath + "?token=" + token, "", `{}`, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, body := post(t, t.Context(), s, tt.path, tt.auth, tt.body); got != tt.want {
				t.Errorf("POST %s with %q = %d %s, want %d", tt.path, tt.auth, got, body, tt.want)
			}
		})
	}
}

func TestRunFlow(t *testing.T) {
	s := newFake(t, workspacetest.Options{})
	s.AddFlow(workspacetest.Flow{UUID: "json", Output: []int{1, 2}})
	s.AddFlow(workspacetest.Flow{UUID: "fn", Template: "unused", Reply: func(p map[string]string) string { return "got " + p["host"] }})
	tests := []struct {
		name   string
		path   string
		body   string
		status int
		want   string
	}{
		{"filled", flowPath, `{"host":"web1","service":"nginx"}`, 200, `{"meta":{"status":"SUCCESS"},"result":{"output":{"response":"Checked web1, service nginx"}}}`},
		{"missing placeholder", flowPath, `{"host":"web1"}`, 200, `{"meta":{"status":"SUCCESS"},"result":{"output":{"response":"Checked web1, service "}}}`},
		{"extra key ignored", flowPath, `{"host":"a","other":"b"}`, 200, `"response":"Checked a, service "`},
		{"empty body", flowPath, ``, 200, `"response":"Checked , service "`},
		{"output", "/api/v1/workspaces/ws-test/prompts/json/run/sync", `{}`, 200, `{"meta":{"status":"SUCCESS"},"result":{"output":[1,2]}}`},
		{"reply func", "/api/v1/workspaces/ws-test/prompts/fn/run/sync", `{"host":"h9"}`, 200, `{"meta":{"status":"SUCCESS"},"result":{"output":{"response":"got h9"}}}`},
		{"non-string value", flowPath, `{"host":1}`, 400, `"error"`},
		{"array body", flowPath, `["web1"]`, 400, `"error"`},
		{"null body", flowPath, `null`, 400, `"error"`},
		{"broken body", flowPath, `{"host":`, 400, `"error"`},
		{"timeout not integer", flowPath + "?timeout=1.5", `{}`, 400, `timeout`},
		{"timeout negative", flowPath + "?timeout=-1", `{}`, 400, `timeout`},
		{"timeout word", flowPath + "?timeout=soon", `{}`, 400, `timeout`},
		{"unknown flow", "/api/v1/workspaces/ws-test/prompts/nosuch/run/sync", `{}`, 404, `flow not found`},
		{"unknown workspace", "/api/v1/workspaces/other/prompts/healthcheck/run/sync", `{}`, 404, `workspace not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, t.Context(), s, tt.path, "Bearer "+token, tt.body)
			if status != tt.status || !strings.Contains(body, tt.want) {
				t.Errorf("POST %s %s = %d %s, want %d containing %s", tt.path, tt.body, status, body, tt.status, tt.want)
			}
		})
	}
}

func TestRunFlowTimeout(t *testing.T) {
	tests := []struct {
		name   string
		delay  time.Duration
		query  string
		status int
		took   time.Duration
	}{
		{"within default", 59 * time.Second, "", 200, 59 * time.Second},
		{"beyond default", 61 * time.Second, "", 408, 60 * time.Second},
		{"equal to timeout", 5 * time.Second, "?timeout=5", 200, 5 * time.Second},
		{"beyond timeout", 6 * time.Second, "?timeout=5", 408, 5 * time.Second},
		{"zero timeout", time.Second, "?timeout=0", 408, 0},
		{"long timeout", 10 * time.Minute, "?timeout=600", 200, 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newFake(t, workspacetest.Options{})
				s.AddFlow(workspacetest.Flow{UUID: "healthcheck", Template: "ok", Delay: tt.delay})
				start := time.Now()
				status, body := post(t, t.Context(), s, flowPath+tt.query, "Bearer "+token, "{}")
				if status != tt.status {
					t.Errorf("flow with delay %v%s = %d %s, want %d", tt.delay, tt.query, status, body, tt.status)
				}
				if got := time.Since(start); got != tt.took {
					t.Errorf("answered after %v, want %v", got, tt.took)
				}
			})
		})
	}
}

func TestRunFlowCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFake(t, workspacetest.Options{})
		s.AddFlow(workspacetest.Flow{UUID: "healthcheck", Delay: time.Hour})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+flowPath+"?timeout=3600", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		_, err := s.Client().Do(req)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Do = %v, want DeadlineExceeded", err)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("handler returned after %v, want 1s: it must stop when the request ends", got)
		}
	})
}

func TestChat(t *testing.T) {
	s := newFake(t, workspacetest.Options{StartAt: func() int64 { return 1716212345123456789 }})
	a, b := createSession(t, s), createSession(t, s)
	auth := "Bearer " + token
	for _, step := range []struct {
		session, message, want string
	}{
		{a, "hello", `{"meta":{"agent_uuid":"agent-1","message":"Message sent","start_at":1716212345123456789,"status":"SUBMITTED"},"result":{"output":"[turn 1] You said: hello"}}`},
		{a, "again", `"output":"[turn 2] You said: again"`},
		{b, "other", `"output":"[turn 1] You said: other"`},
		{a, "third", `"output":"[turn 3] You said: third"`},
	} {
		status, body := post(t, t.Context(), s, sessionPath+"/"+step.session+"/chat", auth, `{"message":"`+step.message+`"}`)
		if status != 200 || !strings.Contains(body, step.want) {
			t.Errorf("chat %q = %d %s, want 200 containing %s", step.message, status, body, step.want)
		}
	}
	if got := s.Messages(a); strings.Join(got, ",") != "hello,again,third" {
		t.Errorf("Messages(a) = %q, want hello, again, third", got)
	}
	if got := s.Sessions("agent-1"); len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("Sessions = %q, want [%s %s]", got, a, b)
	}

	s.ExpireSession(a)
	if status, body := post(t, t.Context(), s, sessionPath+"/"+a+"/chat", auth, `{"message":"hi"}`); status != 404 {
		t.Errorf("chat on an expired session = %d %s, want 404", status, body)
	}
	if got := s.Sessions("agent-1"); len(got) != 1 || got[0] != b {
		t.Errorf("Sessions after expiry = %q, want [%s]", got, b)
	}
	if got := s.Messages(a); got != nil {
		t.Errorf("Messages(expired) = %q, want nil", got)
	}
}

func TestChatErrors(t *testing.T) {
	s := newFake(t, workspacetest.Options{})
	s.AddAgent(workspacetest.Agent{UUID: "agent-2"})
	s.AddSession("agent-1", "s1")
	s.AddSession("agent-2", "s2")
	tests := []struct {
		name, path, body string
		want             int
	}{
		{"no body", sessionPath + "/s1/chat", ``, 400},
		{"no message", sessionPath + "/s1/chat", `{}`, 400},
		{"message not a string", sessionPath + "/s1/chat", `{"message":1}`, 400},
		{"message null", sessionPath + "/s1/chat", `{"message":null}`, 400},
		{"broken JSON", sessionPath + "/s1/chat", `{"message":"hi`, 400},
		{"empty message accepted", sessionPath + "/s1/chat", `{"message":""}`, 200},
		{"unknown session", sessionPath + "/nosuch/chat", `{"message":"hi"}`, 404},
		{"unknown agent", "/api/v1/workspaces/ws-test/agents/nobody/sessions/s1/chat", `{"message":"hi"}`, 404},
		{"another agent's session", sessionPath + "/s2/chat", `{"message":"hi"}`, 404},
		{"unknown workspace", "/api/v1/workspaces/other/agents/agent-1/sessions/s1/chat", `{"message":"hi"}`, 404},
		{"create for unknown agent", "/api/v1/workspaces/ws-test/agents/nobody/sessions", `{}`, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, body := post(t, t.Context(), s, tt.path, "Bearer "+token, tt.body); got != tt.want {
				t.Errorf("POST %s %s = %d %s, want %d", tt.path, tt.body, got, body, tt.want)
			}
		})
	}
	if got := s.Messages("s1"); len(got) != 1 {
		t.Errorf("Messages(s1) = %q, want only the accepted empty message", got)
	}
}

func TestForcedStatus(t *testing.T) {
	s := newFake(t, workspacetest.Options{})
	s.AddFlow(workspacetest.Flow{UUID: "healthcheck", Template: "ok", Status: 503, Body: "busy", Header: http.Header{"Retry-After": {"1"}}, StatusCount: 2})
	s.AddAgent(workspacetest.Agent{UUID: "agent-1", Status: 500, Body: "agent down", StatusCount: 1})
	s.AddSession("agent-1", "s1")
	auth := "Bearer " + token
	for i, want := range []int{503, 503, 200, 200} {
		if got, body := post(t, t.Context(), s, flowPath, auth, "{}"); got != want {
			t.Errorf("flow run %d = %d %s, want %d", i+1, got, body, want)
		}
	}
	if got, body := post(t, t.Context(), s, sessionPath+"/s1/chat", auth, `{"message":"a"}`); got != 500 || body != "agent down" {
		t.Errorf("first chat = %d %q, want 500 agent down", got, body)
	}
	// The forced failure did not count as a turn.
	if got, body := post(t, t.Context(), s, sessionPath+"/s1/chat", auth, `{"message":"b"}`); got != 200 || !strings.Contains(body, "[turn 1] You said: b") {
		t.Errorf("second chat = %d %s, want turn 1", got, body)
	}

	s.AddAgent(workspacetest.Agent{UUID: "agent-1", SessionStatus: 429, Body: "slow down", SessionStatusCount: 2})
	for i := range 2 {
		if got, body := post(t, t.Context(), s, sessionPath, auth, "{}"); got != 429 || body != "slow down" {
			t.Errorf("create session %d = %d %q, want 429 slow down", i+1, got, body)
		}
	}
	if got := s.Sessions("agent-1"); len(got) != 1 {
		t.Errorf("Sessions after a failed create = %q, want only s1", got)
	}
	if got, body := post(t, t.Context(), s, sessionPath, auth, "{}"); got != 200 {
		t.Errorf("third create session = %d %q, want 200 once SessionStatusCount is spent", got, body)
	}
	if got := s.Sessions("agent-1"); len(got) != 2 {
		t.Errorf("Sessions after a successful create = %q, want two", got)
	}
}

// TestDrip: with Drip the headers come at once and the body one byte per
// Drip, in memory as over loopback; a client that gives up ends the handler.
func TestDrip(t *testing.T) {
	const body = `{"error":"busy"}`
	synctest.Test(t, func(t *testing.T) {
		s := newFake(t, workspacetest.Options{})
		s.AddFlow(workspacetest.Flow{UUID: "healthcheck", Status: 503, Body: body, Drip: time.Second})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+flowPath, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		if got := time.Since(start); got != 0 || resp.StatusCode != 503 {
			t.Errorf("headers = %d after %v, want 503 at once", resp.StatusCode, got)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(data) != body {
			t.Errorf("body = %q, %v, want %q", data, err, body)
		}
		if got, want := time.Since(start), time.Duration(len(body))*time.Second; got != want {
			t.Errorf("body complete after %v, want %v", got, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s := newFake(t, workspacetest.Options{})
		s.AddAgent(workspacetest.Agent{UUID: "agent-1", Drip: time.Second})
		s.AddSession("agent-1", "s1")
		ctx, cancel := context.WithTimeout(t.Context(), 3500*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+sessionPath+"/s1/chat", strings.NewReader(`{"message":"hi"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		data, err := io.ReadAll(resp.Body)
		if !errors.Is(err, context.DeadlineExceeded) || len(data) != 3 {
			t.Errorf("read = %q, %v, want 3 bytes and DeadlineExceeded", data, err)
		}
		resp.Body.Close() // returns once the handler has
	})

	s := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(s.Close)
	s.AddFlow(workspacetest.Flow{UUID: "healthcheck", Template: "up", Drip: 10 * time.Millisecond})
	status, got := post(t, t.Context(), s, flowPath, "Bearer "+token, "{}")
	if status != 200 || !strings.Contains(got, `"response":"up"`) {
		t.Errorf("dripped flow over loopback = %d %s, want 200 up", status, got)
	}
}

func TestCreateSession(t *testing.T) {
	uuidV4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	s := newFake(t, workspacetest.Options{})
	seen := map[string]bool{}
	for range 20 {
		id := createSession(t, s)
		if !uuidV4.MatchString(id) || seen[id] {
			t.Fatalf("session UUID %q is not a new version 4 UUID", id)
		}
		seen[id] = true
	}

	for field, want := range map[string]string{
		"result.uuid":  `{"result":{"uuid":"`,
		"session_uuid": `{"session_uuid":"`,
		"uuid":         `{"uuid":"`,
	} {
		s := newFake(t, workspacetest.Options{SessionField: field})
		if status, body := post(t, t.Context(), s, sessionPath, "Bearer "+token, ""); status != 200 || !strings.HasPrefix(body, want) {
			t.Errorf("SessionField %q: create session = %d %s, want a body starting %s", field, status, body, want)
		}
	}
}

func TestRequests(t *testing.T) {
	s := newFake(t, workspacetest.Options{})
	post(t, t.Context(), s, flowPath+"?timeout=5", "Bearer "+token, `{"host":"a"}`)
	post(t, t.Context(), s, "/api/v1/workspaces/ws-test/prompts/a%2Fb/run/sync", "", `{}`)
	got := s.Requests()
	if len(got) != 2 {
		t.Fatalf("Requests() has %d entries, want 2", len(got))
	}
	r := got[0]
	if r.Method != "POST" || r.Path != flowPath || r.Query.Get("timeout") != "5" || string(r.Body) != `{"host":"a"}` ||
		r.Header.Get("Authorization") != "Bearer "+token || r.At.IsZero() {
		t.Errorf("Requests()[0] = %+v, want the flow run as sent", r)
	}
	if want := "/api/v1/workspaces/ws-test/prompts/a%2Fb/run/sync"; got[1].Path != want {
		t.Errorf("Requests()[1].Path = %s, want the escaped path %s", got[1].Path, want)
	}

	quiet := newFake(t, workspacetest.Options{NoRecord: true})
	if status, _ := post(t, t.Context(), quiet, flowPath, "Bearer "+token, `{"host":"a"}`); status != 200 {
		t.Errorf("flow run without recording = %d, want 200", status)
	}
	if got := quiet.Requests(); len(got) != 0 {
		t.Errorf("Requests() with NoRecord = %d entries, want none", len(got))
	}
}

func TestConcurrentChats(t *testing.T) {
	s := newFake(t, workspacetest.Options{})
	id := createSession(t, s)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			post(t, t.Context(), s, sessionPath+"/"+id+"/chat", "Bearer "+token, `{"message":"x"}`)
		})
	}
	wg.Wait()
	status, body := post(t, t.Context(), s, sessionPath+"/"+id+"/chat", "Bearer "+token, `{"message":"last"}`)
	if status != 200 || !strings.Contains(body, "[turn 21]") {
		t.Errorf("21st chat = %d %s, want turn 21", status, body)
	}
}

func TestLoopback(t *testing.T) {
	s := workspacetest.NewServer(workspacetest.Options{})
	s.AddFlow(workspacetest.Flow{UUID: "healthcheck", Template: "up"})
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %s, want a loopback address", s.URL)
	}
	status, body := post(t, t.Context(), s, flowPath, "Bearer "+token, "{}")
	if status != 200 || !strings.Contains(body, `"response":"up"`) {
		t.Errorf("flow over loopback = %d %s, want 200 up", status, body)
	}
	s.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+flowPath, strings.NewReader("{}"))
	if _, err := s.Client().Do(req); err == nil {
		t.Error("request after Close succeeded, want a refused connection")
	}
}

func TestTransportAfterClose(t *testing.T) {
	s := newFake(t, workspacetest.Options{})
	s.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+flowPath, strings.NewReader("{}"))
	_, err := s.Transport().RoundTrip(req)
	if opErr, ok := errors.AsType[*net.OpError](err); !ok || opErr.Op != "dial" {
		t.Errorf("RoundTrip after Close = %v, want a dial *net.OpError", err)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("fake recorded %d requests after Close, want 0", n)
	}
}
