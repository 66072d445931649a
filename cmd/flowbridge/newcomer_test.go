package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowbridge/flowbridge/testkit/pgtest"
)

// exampleWith is config.example.toml with the given keys set, each "section.key"
// to a TOML value (the line that sets it replaced, or added at the top of
// its section), written to a temporary directory whose store file it uses.
func exampleWith(t *testing.T, set map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	set["store.path"] = `"` + filepath.ToSlash(filepath.Join(dir, "flowbridge.db")) + `"`
	text := string(readExample(t))
	for key, value := range set {
		section, name, _ := strings.Cut(key, ".")
		head := regexp.MustCompile(`(?m)^\[` + section + `\]\n`)
		loc := head.FindStringIndex(text)
		if loc == nil {
			t.Fatalf("config.example.toml has no [%s]", section)
		}
		body := text[loc[1]:]
		end := regexp.MustCompile(`(?m)^\[`).FindStringIndex(body)
		if end != nil {
			body = body[:end[0]]
		}
		line := regexp.MustCompile(`(?m)^` + name + ` *=.*$`)
		if line.MatchString(body) {
			body = line.ReplaceAllLiteralString(body, name+" = "+value)
		} else {
			body = name + " = " + value + "\n" + body
		}
		rest := text[loc[1]:]
		if end != nil {
			rest = rest[end[0]:]
		} else {
			rest = ""
		}
		text = text[:loc[1]] + body + rest
	}
	path := filepath.Join(dir, "flowbridge.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSlackHTTPModeNeedsNoAppToken: a copy of the example switched to HTTP
// mode, as the README says, passes check-config without SLACK_APP_TOKEN,
// which HTTP mode does not use; Socket Mode still needs it.
func TestSlackHTTPModeNeedsNoAppToken(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FLOWBRIDGE_API_TOKEN": "t", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
	http := exampleWith(t, map[string]string{"slack.enabled": "true", "slack.mode": `"http"`,
		"slack.signing_secret": `"${SLACK_SIGNING_SECRET}"`, "slack.public_url": `"https://bot.example.com"`})
	if out, _, err := runCmd(t, env, "", "check-config", "-config", http); err != nil || !strings.Contains(out, "slack (http mode)") {
		t.Errorf("check-config in http mode without SLACK_APP_TOKEN = %v\n%s", err, out)
	}
	socket := exampleWith(t, map[string]string{"slack.enabled": "true"})
	if _, _, err := runCmd(t, env, "", "check-config", "-config", socket); err == nil || !strings.Contains(err.Error(), "slack.app_token: environment variable SLACK_APP_TOKEN is not set") {
		t.Errorf("check-config in socket mode without SLACK_APP_TOKEN = %v, want slack.app_token's variable missing", err)
	}
	// Socket Mode does not read signing_secret.
	socketEnv := map[string]string{"FLOWBRIDGE_API_TOKEN": "t", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
	socket = exampleWith(t, map[string]string{"slack.enabled": "true", "slack.signing_secret": `"${SLACK_SIGNING_SECRET}"`})
	if out, _, err := runCmd(t, socketEnv, "", "check-config", "-config", socket); err != nil {
		t.Errorf("check-config in socket mode without SLACK_SIGNING_SECRET = %v\n%s", err, out)
	}
}

// TestReadOnlyCommandsNeedNoSecrets: the commands that read only the store
// or ask the admin listener run with no variable set, on a config whose
// workspace and Slack sections reference theirs.
func TestReadOnlyCommandsNeedNoSecrets(t *testing.T) {
	t.Parallel()
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(admin.Close)
	path := exampleWith(t, map[string]string{"slack.enabled": "true", "admin.listen": `"` + admin.Listener.Addr().String() + `"`})
	if _, _, err := runCmd(t, nil, "", "check-config", "-config", path); err == nil {
		t.Fatal("check-config passed with no variable set; this test proves nothing")
	}
	for _, args := range [][]string{{"audit"}, {"feedback"}, {"sessions", "list"}, {"store", "check"}, {"health"}} {
		out, _, err := runCmd(t, nil, "", append(args, "-config", path)...)
		if err != nil {
			t.Errorf("flowbridge %s without any secret = %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// What they do use is still checked.
	bad := exampleWith(t, map[string]string{"store.driver": `"sqlite"`})
	if _, _, err := runCmd(t, nil, "", "audit", "-config", bad); err == nil || !strings.Contains(err.Error(), "store.driver") {
		t.Errorf("audit with store.driver = \"sqlite\" = %v, want it refused", err)
	}
}

// TestConfigErrorsPointAtTheirKey: each mistake is reported once, on the
// key that holds it.
func TestConfigErrorsPointAtTheirKey(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FLOWBRIDGE_API_TOKEN": "t", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "DISCORD_BOT_TOKEN": "a.b.c"}
	tests := []struct {
		name           string
		set            map[string]string
		replace, with  string // in the file
		want, wantNone []string
	}{
		{"bad time zone", map[string]string{"slack.enabled": "true"}, `timezone = "Europe/Berlin"`, `timezone = "Europe/Berlinn"`,
			[]string{`schedules[0].timezone: "Europe/Berlinn" is not a time zone`}, []string{"schedules[0].cron"}},
		{"a flow defined twice", map[string]string{"slack.enabled": "true"}, "\n[console]\n",
			"\n[[flows]]\nname = \"healthcheck\"\nuuid = \"33333333-3333-3333-3333-333333333333\"\nallow = [\"everyone\"]\n\n[console]\n",
			[]string{`flows[1].name: flow "healthcheck" is defined twice`}, []string{"has no parameter", "needs host"}},
		{"a short guild ID", map[string]string{"discord.enabled": "true", "discord.application_id": `"900000000000000001"`,
			"discord.token": `"${DISCORD_BOT_TOKEN}"`, "discord.guild_ids": `["42"]`}, "", "",
			[]string{`discord.guild_ids[0]: "42" is not a Discord server ID: those are 17 to 20 digits`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := exampleWith(t, tt.set)
			if tt.replace != "" {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(data), tt.replace) {
					t.Fatalf("the example no longer holds %q", tt.replace)
				}
				if err := os.WriteFile(path, []byte(strings.Replace(string(data), tt.replace, tt.with, 1)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := runCmd(t, env, "", "check-config", "-config", path)
			checkProblems(t, tt.name, err, tt.want, tt.wantNone)
		})
	}
}

func checkProblems(t *testing.T, what string, err error, want, wantNotIn []string) {
	t.Helper()
	if err == nil {
		t.Errorf("check-config with %s passed, want %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("check-config with %s = %v, want %q", what, err, w)
		}
	}
	for _, w := range wantNotIn {
		if strings.Contains(err.Error(), w) {
			t.Errorf("check-config with %s = %v, which says %q", what, err, w)
		}
	}
}

// TestSlackManifestHTTPNeedsPublicURL: an HTTP-mode manifest without
// public_url fails, naming the key, and writes no file.
func TestSlackManifestHTTPNeedsPublicURL(t *testing.T) {
	t.Parallel()
	path := exampleWith(t, map[string]string{"slack.enabled": "true", "slack.mode": `"http"`})
	out := filepath.Join(filepath.Dir(path), "slack-manifest.yaml")
	_, _, err := runCmd(t, nil, "", "slack-manifest", "-config", path, "-o", out)
	if err == nil || !strings.Contains(err.Error(), "slack.public_url: required in http mode") {
		t.Errorf("slack-manifest in http mode without public_url = %v, want public_url required", err)
	}
	if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("slack-manifest wrote %s although it failed (stat: %v)", out, serr)
	}
	path = exampleWith(t, map[string]string{"slack.enabled": "true", "slack.mode": `"http"`, "slack.public_url": `"https://bot.example.com"`})
	m, _, err := runCmd(t, nil, "", "slack-manifest", "-config", path)
	if err != nil || !strings.Contains(m, "https://bot.example.com/slack/events") {
		t.Errorf("slack-manifest in http mode = %v, want the request URLs under public_url:\n%s", err, m)
	}
}

// TestCheckConfigNeedsOnlyWhatApplies: Slack with its defaults (flow forms
// on) needs nothing beyond the manifest; a feature that needs more says so.
func TestCheckConfigNeedsOnlyWhatApplies(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FLOWBRIDGE_API_TOKEN": "t", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
	out, _, err := runCmd(t, env, "", "check-config", "-config", exampleWith(t, map[string]string{"slack.enabled": "true", "slack.agent_view": "false"}))
	if err != nil || strings.Contains(out, "needs:") {
		t.Errorf("check-config with Slack's defaults = %v, want no \"needs:\" line:\n%s", err, out)
	}
	out, _, err = runCmd(t, env, "", "check-config", "-config", exampleWith(t, map[string]string{"slack.enabled": "true", "slack.user_groups": "true"}))
	if err != nil || !strings.Contains(out, "needs: slack.user_groups needs the usergroups:read scope") {
		t.Errorf("check-config with slack.user_groups = %v, want its need:\n%s", err, out)
	}
}

// TestConsoleHelpSpeaksOfTheTerminal: /agent help in the terminal says how
// the terminal is used, not Slack's mentions, DMs and threads, and a flow's
// progress line has a label that says what it is.
func TestConsoleHelpSpeaksOfTheTerminal(t *testing.T) {
	t.Parallel()
	out, errOut, err := runCmd(t, nil, "/agent help\n/flow healthcheck host=web1\n", "dev")
	if err != nil {
		t.Fatalf("dev: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "this terminal is one conversation") {
		t.Errorf("/agent help in the console does not say how the terminal is used:\n%s", out)
	}
	for _, slackism := range []string{"Mention me", "DM me", "thread", "!agent"} {
		if strings.Contains(out, slackism) {
			t.Errorf("/agent help in the console speaks of %q:\n%s", slackism, out)
		}
	}
	if !regexp.MustCompile(`(?m)^working:\s+Running healthcheck…$`).MatchString(out) {
		t.Errorf("the flow's progress line is not labelled \"working:\":\n%s", out)
	}
}

// TestDevReplicas: dev -replicas 2 runs two replicas on PostgreSQL that
// share the conversation: the lines go to each in turn and the agent's
// turns count on across them; without PostgreSQL it says how to start one.
func TestDevReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t) // skips, or fails under CI=true, without PostgreSQL
	out, errOut, err := runCmd(t, nil, "one\ntwo\nthree\n", "dev", "-replicas", "2", "-database", dsn)
	if err != nil {
		t.Fatalf("dev -replicas 2: %v\n%s", err, errOut)
	}
	// Each line is answered once, in order, on the conversation's one
	// session, by whichever replica holds its lease then (the one path:
	// a line another replica took is restored from the shared inbox).
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	said := []string{"one", "two", "three"}
	if len(lines) != len(said) {
		t.Fatalf("dev -replicas 2 printed\n%s\nwant one answer for each of %q", out, said)
	}
	for i, line := range lines {
		want := fmt.Sprintf("] agent: [turn %d] You said: %s", i+1, said[i])
		if !(strings.HasPrefix(line, "[replica 1]") || strings.HasPrefix(line, "[replica 2]")) || !strings.HasSuffix(line, want) {
			t.Errorf("line %d = %q, want [replica 1 or 2]%s", i+1, line, want)
		}
	}
	_, _, err = runCmd(t, nil, "", "dev", "-replicas", "2", "-database", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), "docker run") {
		t.Errorf("dev -replicas 2 without PostgreSQL = %v, want how to start one", err)
	}
}

// TestAdminPortTakenByAnotherReplica: a second replica started from the
// same config does not fail on admin.listen's port: it takes the next free
// one and says so.
func TestAdminPortTakenByAnotherReplica(t *testing.T) {
	t.Parallel()
	first, err := startAdmin(AdminConfig{Listen: "127.0.0.1:0"}, func() string { return "starting" }, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.shutdown)
	core, logs := observer.New(zap.WarnLevel)
	second, err := startAdmin(AdminConfig{Listen: first.addr}, func() string { return "starting" }, zap.New(core))
	if err != nil {
		t.Fatalf("a second admin listener on %s = %v, want the next free port", first.addr, err)
	}
	t.Cleanup(second.shutdown)
	_, p1, _ := net.SplitHostPort(first.addr)
	_, p2, _ := net.SplitHostPort(second.addr)
	n1, _ := strconv.Atoi(p1)
	n2, _ := strconv.Atoi(p2)
	if n2 <= n1 || n2 >= n1+adminPorts {
		t.Errorf("the second listener took %s, want a port above %d and below %d", second.addr, n1, n1+adminPorts)
	}
	if logs.FilterField(zap.String("listen", second.addr)).Len() != 1 {
		t.Errorf("the port taken is not logged: %v", logs.All())
	}
}
