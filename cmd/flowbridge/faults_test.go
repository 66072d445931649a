package main

import (
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// TestReadyzFollowsSlack: /readyz answers 503 naming Slack while its socket
// cannot connect, 200 once it has, and 503 again when Slack goes away; the
// bridge keeps running throughout and /healthz stays 200.
func TestReadyzFollowsSlack(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{slack: true})
	// auth.test works, but no socket can be opened.
	s.slack.InjectFault("apps.connections.open", -1, slacktest.Fault{Error: "internal_error"})
	r := s.start(t)
	r.errOut.waitFor(t, "socket mode connection failed", r.done)

	readyz := func(wantCode int, wantSlack string) {
		t.Helper()
		code, body := adminGet(t, s.admin, "/readyz", "")
		var status map[string]string
		if err := json.Unmarshal([]byte(body), &status); err != nil {
			t.Fatalf("/readyz body %q: %v", body, err)
		}
		if code != wantCode || !strings.Contains(status["slack"], wantSlack) || status["console"] != "ok" || status["store"] != "ok" {
			t.Errorf("/readyz = %d %v, want %d with slack %q, console and store ok", code, status, wantCode, wantSlack)
		}
	}
	readyz(http.StatusServiceUnavailable, "not connected")
	if code, _ := adminGet(t, s.admin, "/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz = %d while Slack is down, want 200: the process is alive", code)
	}
	_, _, err := runCmd(t, s.env, "", "health", "-ready", "-config", s.path)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("health -ready = %v, want an error with 503", err)
	}
	if out, _, err := runCmd(t, s.env, "", "health", "-config", s.path); err != nil || out != "ok\n" {
		t.Errorf("health = %q, %v; want ok", out, err)
	}

	s.slack.ClearFaults()
	r.errOut.waitFor(t, "socket mode ready", r.done)
	readyz(http.StatusOK, "ok")
	if out, _, err := runCmd(t, s.env, "", "health", "-ready", "-config", s.path); err != nil || out != "ok\n" {
		t.Errorf("health -ready = %q, %v; want ok", out, err)
	}

	failures := strings.Count(r.errOut.String(), "socket mode connection failed")
	s.slack.Close()
	waitCount(t, r.errOut, "socket mode connection failed", failures+1, r.done)
	readyz(http.StatusServiceUnavailable, "not connected")
	if code, _ := adminGet(t, s.admin, "/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if err := r.stop(t); err != nil {
		t.Errorf("run = %v, want nil: an unreachable Slack is retried, not fatal", err)
	}
}

// TestAdminToken: with admin.token set, everything but the health checks
// needs it as a bearer token, and the CLI sends it.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{adminToken: true})
	r := s.start(t)
	r.send(t, "hello")
	r.out.waitFor(t, "You said: hello", r.done)

	cases := []struct {
		path  string
		token string
		want  int
	}{
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "wrong-" + secretAdminToken, http.StatusUnauthorized},
		{"/metrics", secretAdminToken[:len(secretAdminToken)-1], http.StatusUnauthorized},
		{"/metrics", secretAdminToken, http.StatusOK},
		{"/backup", "", http.StatusUnauthorized},
		{"/backup", "wrong", http.StatusUnauthorized},
		{"/backup", secretAdminToken, http.StatusOK},
		{"/api/sessions", "", http.StatusUnauthorized},
		{"/api/audit", "", http.StatusUnauthorized},
		{"/api/sessions", secretAdminToken, http.StatusOK},
	}
	for _, tc := range cases {
		code, body := adminGet(t, s.admin, tc.path, tc.token)
		if code != tc.want {
			t.Errorf("GET %s with token %q = %d, want %d", tc.path, tc.token, code, tc.want)
		}
		if code == http.StatusUnauthorized && (strings.Contains(body, "console/local") || strings.Contains(body, "flowbridge_")) {
			t.Errorf("GET %s without the token shows data: %q", tc.path, body)
		}
		if tc.path == "/backup" && code == http.StatusOK && len(body) < 4096 {
			t.Errorf("/backup = %d bytes, want a bbolt file", len(body))
		}
	}
	// The CLI reaches the locked store through the admin API with the token.
	out, errOut, err := runCmd(t, s.env, "", "sessions", "list", "-config", s.path)
	if err != nil || !strings.Contains(out, "console/local") {
		t.Errorf("sessions list = %v\n%s%s", err, out, errOut)
	}
	// A CLI with the wrong token is refused, and says so.
	env := secretEnv()
	env["FB_ADMIN"] = "not-the-token"
	_, _, err = runCmd(t, env, "", "sessions", "list", "-config", s.path)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("sessions list with a wrong token = %v, want a 401 error", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestAdminTokenRequiredBeyondLoopback: listening beyond loopback without a
// token is a config error, found by check-config before anything starts.
func TestAdminTokenRequiredBeyondLoopback(t *testing.T) {
	base := func(admin string) string {
		return `
[workspace]
base_url = "http://127.0.0.1:1"
workspace_uuid = "w"
api_token = "t"
[admin]
` + admin + `
[[agents]]
name = "a"
uuid = "u"
[console]
enabled = true
`
	}
	cases := []struct {
		admin   string
		wantErr bool
	}{
		{`listen = "0.0.0.0:9090"`, true},
		{`listen = ":9090"`, true},
		{`listen = "[::]:9090"`, true},
		{`listen = "192.0.2.10:9090"`, true},
		{`listen = "0.0.0.0:9090"` + "\ntoken = \"s3cret\"", false},
		{`listen = "127.0.0.1:9090"`, false},
		{`listen = "[::1]:9090"`, false},
		{`listen = "localhost:9090"`, false},
		{`listen = "off"`, false},
		{``, false},
	}
	for _, tc := range cases {
		_, err := parseConfig([]byte(base(tc.admin)), mapEnv(nil))
		if tc.wantErr != (err != nil) {
			t.Errorf("parseConfig with [admin] %s = %v, want error %v", tc.admin, err, tc.wantErr)
			continue
		}
		if tc.wantErr && !strings.Contains(err.Error(), "admin.token: required") {
			t.Errorf("parseConfig with [admin] %s = %v, want it to name admin.token", tc.admin, err)
		}
	}
	// check-config reports it, and run refuses to start (before opening the store).
	dir := t.TempDir()
	path := filepath.Join(dir, "flowbridge.toml")
	cfg := base(`listen = "0.0.0.0:0"`) + "[store]\npath = \"" + filepath.Join(dir, "store.db") + "\"\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"check-config", "run"} {
		_, _, err := runCmd(t, nil, "", cmd, "-config", path)
		if err == nil || !strings.Contains(err.Error(), "admin.token: required") {
			t.Errorf("%s = %v, want the admin.token error", cmd, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "store.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run created the store before rejecting the config (stat: %v)", err)
	}
}

// auditFixture writes audit entries of known times into the stack's store.
func auditFixture(t *testing.T, s *stack) {
	t.Helper()
	st, err := sessionmap.Open(filepath.Join(s.dir, "store.db"), sessionmap.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	entries := []sessionmap.AuditEntry{
		{Time: now.Add(-72 * time.Hour), Platform: "slack", User: "U1", Channel: "C1", Flow: "healthcheck", Params: map[string]string{"host": "old"}, Outcome: "ok", Duration: time.Second},
		{Time: now.Add(-2 * time.Hour), Platform: "discord", User: "42", Channel: "10", Flow: "healthcheck", Params: map[string]string{"host": "web1", "service": "nginx proxy"}, Outcome: "error", Duration: 1500 * time.Millisecond},
		{Time: now.Add(-time.Hour), Platform: "slack", User: "U2", Channel: "C1", Flow: "deploy", Params: map[string]string{"env": "prod"}, Outcome: "refused", Detail: "allow: group:S1"},
		{Time: now.Add(-time.Minute), Platform: "console", User: "local", Channel: "console", Flow: "healthcheck", Params: map[string]string{"host": "x\n2026-01-01T00:00:00Z  slack  U-admin  C9  deploy  ok"}, Outcome: "ok", Duration: 20 * time.Millisecond},
	}
	for _, e := range entries {
		if err := st.AppendAudit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAuditCommand checks the filters and both outputs of flowbridge audit,
// on the store file and, while a bridge holds it, through the admin API.
func TestAuditCommand(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{adminToken: true})
	auditFixture(t, s)

	cases := []struct {
		name  string
		args  []string
		hosts []string // the host parameter of each entry listed, in order
	}{
		{"all", nil, []string{"old", "web1", "", "x\n"}},
		{"since a duration", []string{"-since", "24h"}, []string{"web1", "", "x\n"}},
		{"since a date", []string{"-since", time.Now().Add(-48 * time.Hour).UTC().Format("2006-01-02T15:04:05Z07:00")}, []string{"web1", "", "x\n"}},
		{"flow", []string{"-flow", "healthcheck"}, []string{"old", "web1", "x\n"}},
		{"outcome", []string{"-outcome", "refused"}, []string{""}},
		{"flow and outcome and since", []string{"-flow", "healthcheck", "-outcome", "ok", "-since", "24h"}, []string{"x\n"}},
		{"user", []string{"-user", "42"}, []string{"web1"}},
		{"limit", []string{"-limit", "2"}, []string{"old", "web1"}},
		{"nothing", []string{"-outcome", "cancelled"}, nil},
	}
	check := func(t *testing.T, via string) {
		for _, tc := range cases {
			t.Run(via+"/"+tc.name, func(t *testing.T) {
				args := append([]string{"audit", "-config", s.path, "-json"}, tc.args...)
				out, errOut, err := runCmd(t, s.env, "", args...)
				if err != nil {
					t.Fatalf("audit %v: %v\n%s", tc.args, err, errOut)
				}
				var hosts []string
				dec := json.NewDecoder(strings.NewReader(out))
				for dec.More() {
					var e sessionmap.AuditEntry
					if err := dec.Decode(&e); err != nil {
						t.Fatalf("audit -json line: %v\n%s", err, out)
					}
					h := e.Params["host"]
					if strings.HasPrefix(h, "x\n") {
						h = "x\n"
					}
					hosts = append(hosts, h)
				}
				if strings.Join(hosts, "|") != strings.Join(tc.hosts, "|") {
					t.Errorf("audit %v lists hosts %q, want %q", tc.args, hosts, tc.hosts)
				}
			})
		}
		t.Run(via+"/table", func(t *testing.T) {
			out, _, err := runCmd(t, s.env, "", "audit", "-config", s.path, "-since", "24h")
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != 4 {
				t.Fatalf("table has %d lines, want a header and 3 rows (a parameter's newline must not make a row):\n%s", len(lines), out)
			}
			for _, col := range []string{"TIME", "PLATFORM", "USER", "CHANNEL", "FLOW", "OUTCOME", "DURATION", "PARAMETERS"} {
				if !strings.Contains(lines[0], col) {
					t.Errorf("header %q lacks %s", lines[0], col)
				}
			}
			for i, want := range [][]string{
				{"discord", "42", "10", "healthcheck", "error", "1.5s", `host=web1 service="nginx proxy"`},
				{"slack", "U2", "C1", "deploy", "refused", "env=prod"},
				{"console", "local", "healthcheck", "ok", "20ms", `host="x\n2026-01-01T00:00:00Z  slack  U-admin  C9  deploy  ok"`},
			} {
				for _, w := range want {
					if !strings.Contains(lines[i+1], w) {
						t.Errorf("row %d = %q, want it to contain %q", i+1, lines[i+1], w)
					}
				}
			}
		})
	}
	check(t, "file")

	// A bridge now holds the store: the same answers come through the admin API.
	r := s.start(t)
	check(t, "admin API")
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	for _, bad := range [][]string{{"-since", "yesterday"}, {"-until", "soon"}, {"-limit", "-1"}} {
		_, _, err := runCmd(t, s.env, "", append([]string{"audit", "-config", s.path}, bad...)...)
		var ue *usageError
		if !errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
			t.Errorf("audit %v = %v, want a usage error", bad, err)
		}
	}
}

// TestHealthCommand: flowbridge health asks the running bridge's /healthz
// and fails clearly when none runs or the listener is off.
func TestHealthCommand(t *testing.T) {
	s := newStack(t, stackOptions{})
	if _, _, err := runCmd(t, s.env, "", "health", "-config", s.path); err == nil || !strings.Contains(err.Error(), "/healthz") {
		t.Errorf("health with no bridge running = %v, want an error naming /healthz", err)
	}
	r := s.start(t)
	for _, args := range [][]string{{"health"}, {"health", "-ready"}} {
		out, _, err := runCmd(t, s.env, "", append(args, "-config", s.path)...)
		if err != nil || out != "ok\n" {
			t.Errorf("%v = %q, %v; want ok", args, out, err)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	off := filepath.Join(t.TempDir(), "off.toml")
	cfg, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(off, []byte(strings.Replace(string(cfg), "listen = \""+s.admin+"\"", `listen = "off"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCmd(t, s.env, "", "health", "-config", off); err == nil || !strings.Contains(err.Error(), "admin.listen is off") {
		t.Errorf("health with the listener off = %v, want an error saying so", err)
	}
}

// TestConsoleEndingLeavesOthersRunning: the end of the console's input (or
// an over-long line before it) does not stop Slack, and says so in the log
// and /readyz.
func TestConsoleEndingLeavesOthersRunning(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{slack: true})
	r := s.start(t)
	ctx := waitCtx(t)
	if err := s.slack.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.send(t, strings.Repeat("x", 2<<20)) // over the console's line limit
	r.out.waitFor(t, "That line is too long", r.done)
	r.stdin.Close()
	r.errOut.waitFor(t, "adapter stopped; the others keep running", r.done)
	code, body := adminGet(t, s.admin, "/readyz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"console":"stopped"`) {
		t.Errorf("/readyz = %d %s, want 503 naming the stopped console", code, body)
	}
	if _, err := s.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: "D0ALICE", ChannelType: "im", User: slackUser, Text: "still there?"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "You said: still there?") }); err != nil {
		t.Errorf("Slack no longer answered after the console ended: %v", err)
	}
}
