package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of logs and replies.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // closed and replaced on each write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrote != nil {
		close(s.wrote)
		s.wrote = nil
	}
	return s.b.Write(p)
}

// waitFor blocks until the buffer contains want or done delivers.
func (s *syncBuffer) waitFor(t *testing.T, want string, done <-chan error) {
	t.Helper()
	for {
		s.mu.Lock()
		if s.wrote == nil {
			s.wrote = make(chan struct{})
		}
		found, wrote := strings.Contains(s.b.String(), want), s.wrote
		s.mu.Unlock()
		if found {
			return
		}
		select {
		case <-wrote:
		case err := <-done:
			t.Fatalf("ended before %q was written: %v", want, err)
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func runCmd(t *testing.T, env map[string]string, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut syncBuffer
	err = run(t.Context(), args, mapEnv(env), strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestDevTranscript(t *testing.T) {
	t.Parallel()
	script := "hello\nhow are you\n/agent status\n/flow healthcheck host=web1 service=nginx\n/flow healthcheck\n/flow nosuch\n/agent reset\nagain\n"
	out, errOut, err := runCmd(t, nil, script, "dev")
	if err != nil {
		t.Fatalf("dev: %v\nstderr:\n%s", err, errOut)
	}
	turns := regexp.MustCompile(`\[turn (\d)\]`).FindAllStringSubmatch(out, -1)
	var got []string
	for _, m := range turns {
		got = append(got, m[1])
	}
	if strings.Join(got, ",") != "1,2,1" {
		t.Errorf("turns = %v, want 1,2,1\n%s", got, out)
	}
	for _, want := range []string{
		"Session: ",                 // the session UUID
		"of web1:", "service nginx", // the flow result, its Markdown rendered as plain text
		"needs host",                                     // missing parameter
		"no flow nosuch", "Available flows: healthcheck", // unknown flow, with the valid ones
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`Session: [0-9a-f]{8}-[0-9a-f]{4}-`).MatchString(out) {
		t.Errorf("no session UUID in status:\n%s", out)
	}
}

// TestDevStoreContinues: dev -store keeps the fake workspace's sessions
// beside the store, so a second run continues the conversation.
func TestDevStoreContinues(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dev.db")
	out, errOut, err := runCmd(t, nil, "hello\n", "dev", "-store", path)
	if err != nil || !strings.Contains(out, "[turn 1]") {
		t.Fatalf("first run: %v\n%s\n%s", err, out, errOut)
	}
	out, errOut, err = runCmd(t, nil, "again\n", "dev", "-store", path)
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "[turn 2]") || strings.Contains(out, "expired") {
		t.Errorf("second run = %q; want the conversation continued at turn 2", out)
	}
}

// writeConfig writes a config for a workspace at baseURL with the console on.
func writeConfig(t *testing.T, baseURL, extra string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
[workspace]
base_url = %q
workspace_uuid = "ws-test"
api_token = "${TEST_TOKEN}"
[store]
path = %q
[admin]
listen = "127.0.0.1:0"
[log]
level = "debug"
[[agents]]
name = "helper"
uuid = "agent-1"
default = true
[[flows]]
name = "healthcheck"
uuid = "flow-hc"
timeout = "1s"
allow = ["everyone"]
  [[flows.params]]
  name = "host"
  required = true
[[flows]]
name = "report"
uuid = "flow-json"
allow = ["everyone"]
[console]
enabled = true
%s`, baseURL, filepath.Join(dir, "store.db"), extra)
	path := filepath.Join(dir, "flowbridge.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunAgainstWorkspace(t *testing.T) {
	t.Parallel()
	fake := workspacetest.NewServer(workspacetest.Options{Token: "secret-token-123"})
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: "agent-1"})
	fake.AddFlow(workspacetest.Flow{UUID: "flow-hc", Delay: time.Hour})
	fake.AddFlow(workspacetest.Flow{UUID: "flow-json", Output: map[string]any{"ok": true}})
	path := writeConfig(t, fake.URL, "")
	env := map[string]string{"TEST_TOKEN": "secret-token-123"}

	// The first run makes a session; the workspace then forgets it.
	out, errOut, err := runCmd(t, env, "one\ntwo\n", "run", "-config", path)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "[turn 2] You said: two") {
		t.Fatalf("output:\n%s", out)
	}
	sessions := fake.Sessions("agent-1")
	if len(sessions) != 1 {
		t.Fatalf("sessions = %v, want 1", sessions)
	}
	// A restart reuses the stored session.
	out, _, err = runCmd(t, env, "three\n", "run", "-config", path)
	if err != nil || !strings.Contains(out, "[turn 3] You said: three") {
		t.Fatalf("after restart: %v\n%s", err, out)
	}
	fake.ExpireSession(sessions[0])
	out, errOut, err = runCmd(t, env, "four\n/flow healthcheck host=a\n/flow report\n", "run", "-config", path)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	for _, want := range []string{"new one was started", "[turn 1] You said: four", "did not finish within 1 second", `"ok": true`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The token is never logged, even at debug level.
	if strings.Contains(errOut, "secret-token-123") || strings.Contains(out, "secret-token-123") {
		t.Error("the API token appears in the output")
	}
	if !strings.Contains(errOut, `"text":"four"`) {
		t.Error("debug logging of message text is missing; the secret scan above proves nothing without it")
	}

	// sessions list shows the mapping; reset removes it; audit lists the runs.
	out, _, err = runCmd(t, env, "", "sessions", "list", "-config", path)
	if err != nil || !strings.Contains(out, "console/local") {
		t.Errorf("sessions list: %v\n%s", err, out)
	}
	out, _, err = runCmd(t, env, "", "audit", "-config", path, "-json")
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	var outcomes []string
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var e struct{ Flow, Outcome string }
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("audit JSON: %v\n%s", err, out)
		}
		outcomes = append(outcomes, e.Flow+":"+e.Outcome)
	}
	if strings.Join(outcomes, ",") != "healthcheck:started,healthcheck:timeout,report:started,report:ok" {
		t.Errorf("audit = %v", outcomes)
	}
	if _, _, err := runCmd(t, env, "", "sessions", "reset", "console/local", "-config", path); err != nil {
		t.Errorf("sessions reset: %v", err)
	}
	if _, _, err := runCmd(t, env, "", "sessions", "reset", "console/local", "-config", path); err == nil {
		t.Error("second reset succeeded; want an error saying nothing is mapped")
	}
	if _, _, err := runCmd(t, env, "", "sessions", "bind", "console/local", "11111111-2222-3333-4444-555555555555", "-config", path); err != nil {
		t.Errorf("sessions bind: %v", err)
	}
	fake.AddSession("agent-1", "11111111-2222-3333-4444-555555555555")
	out, _, err = runCmd(t, env, "/agent status\n", "run", "-config", path)
	if err != nil || !strings.Contains(out, "11111111-2222-3333-4444-555555555555") {
		t.Errorf("bound session not used: %v\n%s", err, out)
	}
}

func TestCheckConfig(t *testing.T) {
	path := writeConfig(t, "http://127.0.0.1:1", "")
	out, _, err := runCmd(t, map[string]string{"TEST_TOKEN": "x"}, "", "check-config", "-config", path)
	if err != nil || !strings.Contains(out, "OK") || !strings.Contains(out, "console") {
		t.Errorf("check-config: %v\n%s", err, out)
	}
	_, _, err = runCmd(t, nil, "", "check-config", "-config", path)
	if err == nil || !strings.Contains(err.Error(), "workspace.api_token: environment variable TEST_TOKEN is not set") {
		t.Errorf("missing env: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte("[workspace]\nbase_url = \"ftp://x\"\nbogus = 1\n[[flows]]\nname = \"Bad Name\"\n"), 0o600)
	_, _, err = runCmd(t, nil, "", "check-config", "-config", bad)
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "workspace.bogus") {
		t.Errorf("unknown key: %v", err)
	}
	os.WriteFile(bad, []byte("[workspace]\nbase_url = \"ftp://x\"\n[bridge]\nworking_indicator_delay = \"-1s\"\n[[flows]]\nname = \"Bad Name\"\n"), 0o600)
	_, _, err = runCmd(t, nil, "", "check-config", "-config", bad)
	for _, want := range []string{"bridge.working_indicator_delay: cannot be negative", "workspace.base_url", "workspace.workspace_uuid: required", "workspace.api_token", "agents:", "flows[0].name", "flows[0].uuid: required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check-config error %v lacks %q", err, want)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestUsage(t *testing.T) {
	if _, _, err := runCmd(t, nil, "", "frobnicate"); err == nil {
		t.Error("unknown command accepted")
	}
	out, _, err := runCmd(t, nil, "", "version")
	if err != nil || !strings.HasPrefix(out, "flowbridge ") {
		t.Errorf("version: %q %v", out, err)
	}
}

func TestAdminEndpoints(t *testing.T) {
	t.Parallel()
	fake := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: "agent-1"})
	path := writeConfig(t, fake.URL, "")
	// The CLI must find the admin API at the configured address, so fix a port.
	port := freePort(t)
	cfgText, _ := os.ReadFile(path)
	os.WriteFile(path, bytes.Replace(cfgText, []byte(`listen = "127.0.0.1:0"`), []byte(`listen = "`+port+`"`), 1), 0o600)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	addr := make(chan string, 1)
	var out, errOut syncBuffer
	env := &environment{getenv: mapEnv(map[string]string{"TEST_TOKEN": "test-token"}), stdin: pr, stdout: &out, stderr: &errOut,
		onServe: func(i serveInfo) { addr <- i.AdminAddr }}
	done := make(chan error, 1)
	go func() { done <- cmdRun(ctx, env, []string{"-config", path}) }()
	base := "http://" + <-addr
	get := func(p string) (int, string) {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"console":"ok"`) {
		t.Errorf("/readyz = %d %q", code, body)
	}
	pw.Write([]byte("hello\n"))
	// Wait for the reply, then the metrics show the event and the API calls.
	out.waitFor(t, "You said: hello", done)
	_, metrics := get("/metrics")
	for _, want := range []string{`flowbridge_events_total{kind="message",platform="console"} 1`, `flowbridge_api_calls_total{operation="chat",status="200"} 1`, "flowbridge_api_call_duration_seconds_bucket", "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	code, backup := get("/backup")
	if code != 200 || len(backup) < 4096 {
		t.Errorf("/backup = %d, %d bytes", code, len(backup))
	}
	// While the bridge holds the store, the CLI goes through the admin API.
	listOut, _, err := runCmd(t, map[string]string{"TEST_TOKEN": "test-token"}, "", "sessions", "list", "-config", path)
	if err != nil || !strings.Contains(listOut, "console/local") {
		t.Errorf("sessions list through the admin API: %v\n%s", err, listOut)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestCheckConfigRefusesAgentViewWithAssistant(t *testing.T) {
	slackOn := "[slack]\nenabled = true\nbot_token = \"xoxb-1\"\napp_token = \"xapp-1\"\nagent_view = true\n"
	env := map[string]string{"TEST_TOKEN": "x"}
	if out, _, err := runCmd(t, env, "", "check-config", "-config", writeConfig(t, "http://127.0.0.1:1", slackOn)); err != nil || !strings.Contains(out, "slack.agent_view needs") {
		t.Errorf("check-config with agent_view = %v\n%s\nwant OK and what the app needs", err, out)
	}
	_, _, err := runCmd(t, env, "", "check-config", "-config", writeConfig(t, "http://127.0.0.1:1", slackOn+"assistant = true\n"))
	if err == nil || !strings.Contains(err.Error(), "slack.agent_view: cannot be used with slack.assistant") {
		t.Errorf("check-config with agent_view and assistant = %v, want the pair refused", err)
	}
}
