package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/adapters/console"
)

// testConfig is a valid config with the console on; flow is added to its one
// [[flows]] entry and rest after everything (new sections).
func testConfig(flow, rest string) string {
	return `
[workspace]
base_url = "https://ws.example.com"
workspace_uuid = "ws"
api_token = "token"
[[agents]]
name = "helper"
uuid = "agent-1"
[[flows]]
name = "healthcheck"
uuid = "flow-1"
allow = ["everyone"]
` + flow + `
[console]
enabled = true
` + rest
}

// discordOn enables Discord with everything it needs.
const discordOn = `
[discord]
enabled = true
token = "abc.def.ghi"
application_id = "900000000000000001"
`

// inWorkspace is testConfig with line added to [workspace].
func inWorkspace(line string) string {
	return strings.Replace(testConfig("", ""), `api_token = "token"`, "api_token = \"token\"\n"+line, 1)
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flowbridge.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustParse(t *testing.T, text string) *Config {
	t.Helper()
	cfg, err := parseConfig([]byte(text), mapEnv(nil))
	if err != nil {
		t.Fatalf("parseConfig = %v\n%s", err, text)
	}
	return cfg
}

// goTerms are what a user must never have to read in a config error.
var goTerms = regexp.MustCompile(`main\.|struct field|cannot decode|of type|time\.Duration|int64`)

func TestConfigDurationsMustBeStrings(t *testing.T) {
	tests := []struct {
		name, text   string
		key, example string
	}{
		{"shutdown_grace", testConfig("", "[bridge]\nshutdown_grace = 30\n"), "bridge.shutdown_grace", `shutdown_grace = "30s"`},
		{"flow timeout", testConfig("timeout = 20\n", ""), "flows[0].timeout", `timeout = "20s"`},
		{"chat_timeout as a float", inWorkspace("chat_timeout = 1.5"), "workspace.chat_timeout", `"30s"`},
		{"audit_retention as a boolean", testConfig("", "[store]\naudit_retention = true\n"), "store.audit_retention", `"30s"`},
		{"open_timeout of a disabled section", testConfig("", "[discord]\nopen_timeout = 5\n"), "discord.open_timeout", `open_timeout = "5s"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tt.text), mapEnv(nil))
			if err == nil {
				t.Fatalf("parseConfig(%s) = nil, want an error: a bare number is not a duration", tt.name)
			}
			for _, want := range []string{tt.key + ": expected a duration such as \"30s\"", tt.example} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("parseConfig(%s) = %v, want it to contain %q", tt.name, err, want)
				}
			}
			if goTerms.MatchString(err.Error()) {
				t.Errorf("parseConfig(%s) = %v, in Go's terms", tt.name, err)
			}
		})
	}
	// Written as strings they decode, and the flow's timeout is what the API gets.
	cfg := mustParse(t, testConfig("timeout = \"20s\"\n", "[bridge]\nshutdown_grace = \"30s\"\n"))
	if cfg.Bridge.ShutdownGrace.D() != 30*time.Second {
		t.Errorf("shutdown_grace = %v, want 30s", cfg.Bridge.ShutdownGrace.D())
	}
	if flows, _ := cfg.catalog(); flows[0].Timeout != 20*time.Second {
		t.Errorf("flow timeout = %v, want 20s", flows[0].Timeout)
	}
}

func TestConfigRanges(t *testing.T) {
	tests := []struct {
		flow, rest string
		want       string // "" means accepted
	}{
		{"", "[bridge]\ndedupe_ttl = \"1ns\"\n", "bridge.dedupe_ttl: 1ns is out of range: allowed 1m to 168h"},
		{"", "[bridge]\ndedupe_ttl = \"169h\"\n", "bridge.dedupe_ttl: 169h is out of range: allowed 1m to 168h"},
		{"", "[bridge]\ndedupe_ttl = \"1m\"\n", ""},
		{"", "[bridge]\ndedupe_ttl = \"168h\"\n", ""},
		{"", "[bridge]\ndefault_flow_timeout = \"-5s\"\n", "bridge.default_flow_timeout: -5s is out of range: allowed 1s to 1h"},
		{"", "[bridge]\ndefault_flow_timeout = \"0s\"\n", "bridge.default_flow_timeout: 0s is out of range: allowed 1s to 1h"},
		{"", "[bridge]\ndefault_flow_timeout = \"1h\"\n", ""},
		{"", "[bridge]\nshutdown_grace = \"11m\"\n", "bridge.shutdown_grace: 11m is out of range: allowed 0s to 10m"},
		{"", "[bridge]\nshutdown_grace = \"0s\"\n", ""},
		{"", "[bridge]\nworking_indicator_delay = \"-1s\"\n", "bridge.working_indicator_delay: cannot be negative: allowed 0s to 10s"},
		{"", "[bridge]\nworking_indicator_delay = \"11s\"\n", "bridge.working_indicator_delay: 11s is out of range: allowed 0s to 10s"},
		{"", "[bridge]\nworking_indicator_delay = \"0s\"\n", ""},
		{"", "[store]\naudit_retention = \"30m\"\n", "store.audit_retention: 30m is out of range: allowed 0s (keep forever) or 1h to 87600h"},
		{"", "[store]\naudit_retention = \"0s\"\n", ""},
		{"", "[store]\nlease_ttl = \"500ms\"\n", "store.lease_ttl: 500ms is out of range: allowed 1s to 5m"},
		{"", "[store]\nlease_ttl = \"0s\"\n", "store.lease_ttl: 0s is out of range: allowed 1s to 5m"},
		{"", "[store]\nlease_ttl = \"1s\"\n", ""},
		{"", "[store]\nsync_interval = \"10ms\"\n", "store.sync_interval: was removed: every store change is now synced before it is acknowledged"},
		{"", "[store]\nsync_interval = \"0s\"\n", ""},
		{"timeout = \"2h\"\n", "", "flows[0].timeout: 2h is out of range: allowed 0s (bridge.default_flow_timeout) or 1s to 1h"},
		{"timeout = \"500ms\"\n", "", "flows[0].timeout: 500ms is out of range"},
		{"timeout = \"0s\"\n", "", ""},
		{"timeout = \"1h\"\n", "", ""},
		{"", "[bridge]\nqueue_size = 0\n", "bridge.queue_size: 0 is out of range: allowed 1 to 10000"},
		{"", "[bridge]\nqueue_size = 10000\n", ""},
		{"", "[bridge]\nmax_in_flight = 100001\n", "bridge.max_in_flight: 100001 is out of range: allowed 1 to 100000"},
		{"", "[bridge]\nmax_message_bytes = 0\n", "bridge.max_message_bytes: 0 is out of range: allowed 1 to 1000000"},
		{"", "[bridge]\nmax_params = 101\n", "bridge.max_params: 101 is out of range: allowed 1 to 100"},
		{"", "[bridge]\nmax_value_bytes = -1\n", "bridge.max_value_bytes: -1 is out of range: allowed 1 to 100000"},
		{"", "[bridge]\nchat_per_minute = -1\n", "bridge.chat_per_minute: -1 is out of range: allowed 0 (unlimited) to 6000"},
		{"", "[bridge]\nflows_per_minute = 6001.5\n", "bridge.flows_per_minute: 6001.5 is out of range"},
		{"", "[bridge]\nchat_per_minute = 6000\n", ""},
		{"", "[bridge]\nrate_burst = 0\n", "bridge.rate_burst: 0 is out of range: allowed 1 to 1000"},
	}
	for _, tt := range tests {
		_, err := parseConfig([]byte(testConfig(tt.flow, tt.rest)), mapEnv(nil))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("parseConfig(%q%q) = %v, want it accepted", tt.flow, tt.rest, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("parseConfig(%q%q) = %v, want %q", tt.flow, tt.rest, err, tt.want)
		}
	}
	for _, tt := range []struct{ line, want string }{
		{`chat_timeout = "0s"`, "workspace.chat_timeout: 0s is out of range: allowed 1s to 30m"},
		{`chat_timeout = "31m"`, "workspace.chat_timeout: 31m is out of range"},
		{`chat_timeout = "30m"`, ""},
		{`max_retries = 11`, "workspace.max_retries: 11 is out of range: allowed 0 to 10"},
		{`max_retries = -2`, "workspace.max_retries: -2 is out of range"},
		{`max_retries = 0`, ""},
		{`max_retries = -1`, ""},
	} {
		_, err := parseConfig([]byte(inWorkspace(tt.line)), mapEnv(nil))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("parseConfig(%s) = %v, want it accepted", tt.line, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("parseConfig(%s) = %v, want %q", tt.line, err, tt.want)
		}
	}
}

func TestConfigMaxRetriesZeroMeansNone(t *testing.T) {
	// The workspace client reads 0 as its default (2) and negative as none.
	for _, tt := range []struct {
		line string
		want int
	}{{"max_retries = 0", -1}, {"max_retries = -1", -1}, {"max_retries = 3", 3}, {"", 2}} {
		if got := mustParse(t, inWorkspace(tt.line)).Workspace.clientConfig().MaxRetries; got != tt.want {
			t.Errorf("parseConfig(%q): the client's MaxRetries = %d, want %d", tt.line, got, tt.want)
		}
	}
}

// TestConfigReportsEveryDecodeProblem: go-toml stops at the first value of
// the wrong type; every one must be reported, with its line and key, in the
// file's terms.
func TestConfigReportsEveryDecodeProblem(t *testing.T) {
	text := `[workspace]
base_url = "https://ws.example.com"
bogus = 1
[bridge]
queue_size = "many"
shutdown_grace = 30
admins = "U1"
dedupe_ttl = "ten minutes"
[[agents]]
name = 7
[[flows]]
name = "x"
allow = ["everyone", 3]
  [[flows.params]]
  name = "host"
  descripton = "typo"
[slack]
enabled = "yes"
`
	_, err := parseConfig([]byte(text), mapEnv(nil))
	if err == nil {
		t.Fatal("parseConfig = nil, want every problem")
	}
	want := []string{
		"14 problems:",
		"line 3: workspace.bogus: unknown key",
		"line 5: bridge.queue_size: expected a whole number, got a string",
		`line 6: bridge.shutdown_grace: expected a duration such as "30s", got the number 30`,
		`line 7: bridge.admins: expected a list of strings, got a string: write ["U1"]`,
		`line 8: bridge.dedupe_ttl: "ten minutes" is not a duration`,
		"line 10: agents[0].name: expected a string, got the number 7",
		"line 13: flows[0].allow[1]: expected a string, got the number 3",
		"line 16: flows[0].params[0].descripton: unknown key (did you mean description?)",
		"line 18: slack.enabled: expected true or false, got a string",
		// and, in the same pass, what validation finds in the rest
		"workspace.workspace_uuid: required",
		"agents[0].uuid: required",
		"flows[0].uuid: required",
		"no adapter is enabled",
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("parseConfig = %v\nwant it to contain %q", err, w)
		}
	}
	if goTerms.MatchString(err.Error()) {
		t.Errorf("parseConfig = %v, in Go's terms", err)
	}
	// A refused value is not reported again for what refusing it left.
	if strings.Contains(err.Error(), "agents[0].name: required") {
		t.Errorf("parseConfig = %v: agents[0].name is reported twice", err)
	}
	// In the order of the file.
	if i, j := strings.Index(err.Error(), "line 3:"), strings.Index(err.Error(), "line 18:"); i < 0 || j < i {
		t.Errorf("problems out of file order:\n%v", err)
	}
}

func TestConfigUnknownKeys(t *testing.T) {
	tests := []struct{ text, want string }{
		{testConfig("", "[bridge]\nqueue_sise = 3\n"), "bridge.queue_sise: unknown key (did you mean queue_size?)"},
		{testConfig("", "[log]\nverbosity = 3\n"), "log.verbosity: unknown key; the keys here are file, format, level"},
		{testConfig("", "[sentry]\ndsn = \"x\"\n"), "sentry: unknown key"},
		{testConfig("", "[slack]\nenabled = false\ntoken = \"x\"\n"), "slack.token: unknown key"},
		{strings.Replace(testConfig("", ""), "[[flows]]", "[[flow]]", 1), "flow: unknown key (did you mean flows?)"},
	}
	for _, tt := range tests {
		_, err := parseConfig([]byte(tt.text), mapEnv(nil))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseConfig = %v, want %q", err, tt.want)
		}
	}
}

// TestCheckConfigRefusesWhatRunRefuses: check-config and run load a config
// through the same function, and it refuses what the workspace client would.
func TestCheckConfigRefusesWhatRunRefuses(t *testing.T) {
	tests := []struct{ baseURL, want string }{
		{"https://user:pw@ws.example.com", "workspace.base_url: must not carry a user name or password"},
		{"https://ws.example.com/?x=1", "must not have a query or fragment"},
		{"https://ws.example.com/api/v1", "must not end in /api/v1"},
		{"ftp://ws.example.com", "is not an http(s) URL"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		text := strings.Replace(testConfig("", ""), "https://ws.example.com", tt.baseURL, 1) +
			"[store]\npath = \"" + filepath.Join(dir, "store.db") + "\"\n"
		path := writeFile(t, text)
		for _, cmd := range []string{"check-config", "run"} {
			_, _, err := runCmd(t, nil, "", cmd, "-config", path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s with base_url %s = %v, want %q", cmd, tt.baseURL, err, tt.want)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "store.db")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("run opened the store before refusing base_url %s", tt.baseURL)
		}
	}
	// What Validate accepts, the workspace client accepts.
	for _, u := range []string{"https://ws.example.com", "https://ws.example.com/", "http://127.0.0.1:8080/prefix"} {
		text := strings.Replace(testConfig("", ""), "https://ws.example.com", u, 1)
		if _, err := parseConfig([]byte(text), mapEnv(nil)); err != nil {
			t.Errorf("base_url %s: %v, want it accepted", u, err)
		}
	}
}

func TestCheckConfigNoAdapter(t *testing.T) {
	dir := t.TempDir()
	text := strings.Replace(testConfig("", ""), "enabled = true", "enabled = false", 1) +
		"[store]\npath = \"" + filepath.Join(dir, "store.db") + "\"\n"
	path := writeFile(t, text)
	for _, cmd := range []string{"check-config", "run"} {
		_, _, err := runCmd(t, nil, "", cmd, "-config", path)
		if err == nil || !strings.Contains(err.Error(), "no adapter is enabled") {
			t.Errorf("%s without adapters = %v, want \"no adapter is enabled\"", cmd, err)
		}
	}
}

// TestCheckConfigExampleWithOnlyAPIToken: a newcomer copies the example, sets
// the one variable its workspace section needs, and check-config passes; what
// passes also runs, so run does not then say no adapter is enabled.
func TestCheckConfigExampleWithOnlyAPIToken(t *testing.T) {
	env := map[string]string{"FLOWBRIDGE_API_TOKEN": "x"}
	out, errOut, err := runCmd(t, env, "", "check-config", "-config", examplePath)
	if err != nil {
		t.Fatalf("check-config -config config.example.toml = %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{"config.example.toml: OK", "adapters: console"} {
		if !strings.Contains(out, want) {
			t.Errorf("check-config output lacks %q:\n%s", want, out)
		}
	}
	cfg, err := loadConfig(examplePath, mapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	if len(enabledAdapters(cfg)) == 0 {
		t.Error("the example enables no adapter: run would stop at once")
	}
}

// TestConfigDisabledSectionNeedsNothing: the ${VAR}s of a section with
// enabled = false are not resolved, so they need not be set.
func TestConfigDisabledSectionNeedsNothing(t *testing.T) {
	sections := `
[slack]
enabled = %s
bot_token = "${TEST_SLACK_BOT}"
app_token = "${TEST_SLACK_APP}"
[discord]
enabled = %s
token = "${TEST_DISCORD}"
application_id = "900000000000000001"
`
	off := strings.NewReplacer("%s", "false").Replace(sections)
	text := strings.Replace(testConfig("", off), "[console]\nenabled = true", "[console]\nenabled = true\nuser = \"${TEST_CONSOLE_USER}\"", 1)
	// The console is enabled, so its variable is needed; the others are not.
	_, err := parseConfig([]byte(text), mapEnv(nil))
	if err == nil || !strings.Contains(err.Error(), "console.user: environment variable TEST_CONSOLE_USER is not set") {
		t.Fatalf("parseConfig = %v, want console.user's variable", err)
	}
	if strings.Contains(err.Error(), "TEST_SLACK") || strings.Contains(err.Error(), "TEST_DISCORD") {
		t.Errorf("parseConfig = %v, asks for variables of disabled sections", err)
	}
	if _, err := parseConfig([]byte(text), mapEnv(map[string]string{"TEST_CONSOLE_USER": "me"})); err != nil {
		t.Errorf("parseConfig with [slack] and [discord] disabled = %v, want nil", err)
	}
	// Enabled, each unset variable is one problem, not also "required".
	on := strings.NewReplacer("%s", "true").Replace(sections)
	_, err = parseConfig([]byte(testConfig("", on)), mapEnv(nil))
	for _, want := range []string{"slack.bot_token: environment variable TEST_SLACK_BOT is not set", "slack.app_token: environment variable TEST_SLACK_APP is not set", "discord.token: environment variable TEST_DISCORD is not set"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseConfig with both enabled = %v, want %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "required") {
		t.Errorf("parseConfig = %v: an unset variable is also reported as a missing value", err)
	}
}

func TestSlackManifestNeedsNoSecrets(t *testing.T) {
	text := strings.Replace(testConfig("", `
[slack]
enabled = true
bot_token = "${SLACK_BOT_TOKEN}"
app_token = "${SLACK_APP_TOKEN}"
flow_command = "/run"
`), `api_token = "token"`, `api_token = "${FLOWBRIDGE_API_TOKEN}"`, 1)
	path := writeFile(t, text)
	out, errOut, err := runCmd(t, nil, "", "slack-manifest", "-config", path)
	if err != nil {
		t.Fatalf("slack-manifest with no token set = %v\n%s", err, errOut)
	}
	for _, want := range []string{`command: "/run"`, `"healthcheck key=value …"`} {
		if !strings.Contains(out, want) {
			t.Errorf("manifest lacks %q:\n%s", want, out)
		}
	}
	// With agent_view, the default agent's prompts and the flows are in it.
	agent := writeFile(t, strings.Replace(text, `flow_command = "/run"`, "flow_command = \"/run\"\nagent_view = true", 1)+
		"\n[[agents.suggested_prompts]]\ntitle = \"Status\"\nmessage = \"What is the status of prod?\"\n")
	out, errOut, err = runCmd(t, nil, "", "slack-manifest", "-config", agent, "-format", "json")
	if err != nil {
		t.Fatalf("slack-manifest with agent_view = %v\n%s", err, errOut)
	}
	for _, want := range []string{`"agent_view": {`, `"title": "Status"`, `"name": "healthcheck"`, `"app_context_changed"`} {
		if !strings.Contains(out, want) {
			t.Errorf("agent_view manifest lacks %q:\n%s", want, out)
		}
	}
	// What the manifest is made from is still checked.
	bad := writeFile(t, strings.Replace(text, `flow_command = "/run"`, `flow_command = "run"`, 1))
	if _, _, err := runCmd(t, nil, "", "slack-manifest", "-config", bad); err == nil || !strings.Contains(err.Error(), "slack.flow_command") {
		t.Errorf("slack-manifest with flow_command = \"run\" = %v, want slack.flow_command", err)
	}
	bad = writeFile(t, strings.Replace(text, `name = "healthcheck"`, `name = "Health Check"`, 1))
	if _, _, err := runCmd(t, nil, "", "slack-manifest", "-config", bad); err == nil || !strings.Contains(err.Error(), "flows[0].name") {
		t.Errorf("slack-manifest with a bad flow name = %v, want flows[0].name", err)
	}
}

func TestDiscordInviteNeedsNoSecrets(t *testing.T) {
	text := strings.Replace(testConfig("", `
[discord]
enabled = true
token = "${DISCORD_BOT_TOKEN}"
application_id = "${DISCORD_APP_ID}"
start_threads = %s
`), `api_token = "token"`, `api_token = "${FLOWBRIDGE_API_TOKEN}"`, 1)
	env := map[string]string{"DISCORD_APP_ID": "900000000000000001"}
	for _, tt := range []struct {
		threads, permissions string
	}{{"false", "permissions=274877991936"}, {"true", "permissions=309237730304"}} {
		path := writeFile(t, strings.Replace(text, "%s", tt.threads, 1))
		out, errOut, err := runCmd(t, env, "", "discord-invite", "-config", path)
		if err != nil {
			t.Fatalf("discord-invite with no token set = %v\n%s", err, errOut)
		}
		if !strings.Contains(out, "client_id=900000000000000001") || !strings.Contains(out, tt.permissions) {
			t.Errorf("discord-invite with start_threads = %s = %q, want the application ID and %s", tt.threads, out, tt.permissions)
		}
	}
	// The application ID is still needed.
	path := writeFile(t, strings.Replace(text, "%s", "false", 1))
	if _, _, err := runCmd(t, nil, "", "discord-invite", "-config", path); err == nil || !strings.Contains(err.Error(), "discord.application_id: environment variable DISCORD_APP_ID is not set") {
		t.Errorf("discord-invite without DISCORD_APP_ID = %v, want it named", err)
	}
}

// TestManifestAndInviteOutputFile: -o writes the file only when the command
// succeeds, whole; a failure leaves no file, and an old one as it was.
func TestManifestAndInviteOutputFile(t *testing.T) {
	path := writeFile(t, testConfig("", "[discord]\napplication_id = \"42\"\n"))
	dir := t.TempDir()
	manifest := filepath.Join(dir, "slack-manifest.yaml")
	stdout, _, err := runCmd(t, nil, "", "slack-manifest", "-config", path)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCmd(t, nil, "", "slack-manifest", "-config", path, "-o", manifest); err != nil || out != "" {
		t.Fatalf("slack-manifest -o = %v, stdout %q", err, out)
	}
	if got, err := os.ReadFile(manifest); err != nil || string(got) != stdout {
		t.Errorf("slack-manifest -o wrote %q (%v), want what it prints: %q", got, err, stdout)
	}

	failing := filepath.Join(dir, "new.yaml")
	if _, _, err := runCmd(t, nil, "", "slack-manifest", "-config", path, "-format", "toml", "-o", failing); err == nil {
		t.Fatal("slack-manifest -format toml succeeded")
	}
	if _, err := os.Stat(failing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed slack-manifest left %s behind (stat: %v)", failing, err)
	}
	if _, _, err := runCmd(t, nil, "", "slack-manifest", "-config", path, "-format", "toml", "-o", manifest); err == nil {
		t.Fatal("slack-manifest -format toml succeeded")
	}
	if got, _ := os.ReadFile(manifest); string(got) != stdout {
		t.Errorf("a failed slack-manifest changed the existing file to %q", got)
	}

	invite := filepath.Join(dir, "invite.txt")
	if _, _, err := runCmd(t, nil, "", "discord-invite", "-config", path, "-o", invite); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(invite); !bytes.HasPrefix(got, []byte("https://discord.com/oauth2/authorize?")) {
		t.Errorf("discord-invite -o wrote %q", got)
	}
	noApp := writeFile(t, testConfig("", ""))
	failing = filepath.Join(dir, "invite2.txt")
	if _, _, err := runCmd(t, nil, "", "discord-invite", "-config", noApp, "-o", failing); err == nil {
		t.Fatal("discord-invite without application_id succeeded")
	}
	if _, err := os.Stat(failing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed discord-invite left %s behind", failing)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestConfigProblemsArePreciseAndOnce: a name too long is told its length,
// not its characters, and Discord's check of the same name does not repeat it.
func TestConfigProblemsArePreciseAndOnce(t *testing.T) {
	long := strings.Repeat("a", 34)
	tests := []struct {
		name, want, not string
	}{
		{long, `flows[0].name: "` + long + `" is 34 characters long; the limit is 32`, "lower"},
		{"Bad Name", `flows[0].name: "Bad Name" must be lower case and may hold only letters, digits, - and _, not ' '`, "characters long"},
		{"-x", `flows[0].name: "-x" must start with a letter or digit`, "lower"},
	}
	for _, tt := range tests {
		text := strings.Replace(testConfig("", discordOn), `name = "healthcheck"`, `name = "`+tt.name+`"`, 1)
		_, err := parseConfig([]byte(text), mapEnv(nil))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("flow name %q: %v, want %q", tt.name, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), tt.not) {
			t.Errorf("flow name %q: %v, should not say %q", tt.name, err, tt.not)
		}
		if n := strings.Count(err.Error(), tt.name); n != 1 {
			t.Errorf("flow name %q is reported %d times, want once:\n%v", tt.name, n, err)
		}
	}
	// A parameter name only Discord refuses is reported by Discord, once.
	text := testConfig("  [[flows.params]]\n  name = \"Host\"\n", discordOn)
	_, err := parseConfig([]byte(text), mapEnv(nil))
	if err == nil || strings.Count(err.Error(), `"Host"`) != 1 || !strings.Contains(err.Error(), "on Discord") {
		t.Errorf("parameter Host with Discord enabled = %v, want one Discord problem", err)
	}
}

func TestConfigAllowRules(t *testing.T) {
	c := &Config{Console: console.Config{User: "operator"}}
	accepted := []string{"everyone", "Everyone", "U0123ABC", "W0123ABC", "S0123ABC", "123456789012345678", "operator",
		"user:U1", "group:S1", "role:42", "channel:C1", "Channel:C1", "user:local"}
	for _, rule := range accepted {
		if msg := c.allowProblem(rule); msg != "" {
			t.Errorf("allowProblem(%q) = %q, want it accepted", rule, msg)
		}
	}
	refused := []struct{ rule, want string }{
		{"evryone", `"evryone" is not a rule (did you mean "everyone"?)`},
		{"all", `"all" is not a rule`},
		{"local", `"local" is not a rule`}, // the console's user is "operator" here
		{"team:x", `"team:x": unknown kind "team"`},
		{"user:", `"user:" needs an ID after "user:"`},
		{"group:S1 S2", `needs an ID after "group:", without spaces`},
		{"", `"" is not a rule`},
	}
	for _, tt := range refused {
		msg := c.allowProblem(tt.rule)
		if !strings.Contains(msg, tt.want) {
			t.Errorf("allowProblem(%q) = %q, want %q", tt.rule, msg, tt.want)
		}
		for _, form := range []string{`"everyone"`, `"user:ID"`, `"group:ID"`, `"role:ID"`, `"channel:ID"`} {
			if tt.rule != "user:" && tt.rule != "group:S1 S2" && !strings.Contains(msg, form) {
				t.Errorf("allowProblem(%q) = %q, does not name the form %s", tt.rule, msg, form)
			}
		}
	}
	// The console's default user is "local".
	if msg := (&Config{}).allowProblem("local"); msg != "" {
		t.Errorf("allowProblem(local) with the default console user = %q", msg)
	}
	text := strings.Replace(testConfig("", ""), `allow = ["everyone"]`, `allow = ["evryone"]`, 1)
	if _, err := parseConfig([]byte(text), mapEnv(nil)); err == nil || !strings.Contains(err.Error(), `flows[0].allow[0]: "evryone" is not a rule`) {
		t.Errorf(`parseConfig with allow = ["evryone"] = %v, want flows[0].allow[0] refused`, err)
	}
}

// TestConfigApprovers: a flow's approvers and approval_timeout are read,
// checked with every problem named at its key, and passed to the core.
func TestConfigApprovers(t *testing.T) {
	with := func(keys string) string {
		return strings.Replace(testConfig("", ""), `allow = ["everyone"]`, `allow = ["everyone"]`+"\n"+keys, 1)
	}
	cfg, err := parseConfig([]byte(with(`confirm = true
approvers = ["U0BOSS", "group:S0OPS", "role:123456789012345678"]
approval_timeout = "4h"`)), mapEnv(nil))
	if err != nil {
		t.Fatalf("parseConfig(valid approvers) = %v", err)
	}
	flows, _ := cfg.catalog()
	if f := flows[0]; len(f.Approvers) != 3 || f.ApprovalTimeout != 4*time.Hour || !f.Confirm {
		t.Errorf("catalog flow = %+v, want the approvers and 4h", f)
	}
	for _, tt := range []struct{ keys, want string }{
		{`approvers = ["U0BOSS"]`, "flows[0].approvers: set, but confirm is not"},
		{"confirm = true\napprovers = [\"everyone\"]", `flows[0].approvers[0]: "everyone" cannot approve`},
		{"confirm = true\napprovers = [\"channel:C0GENERAL\"]", `flows[0].approvers[0]: "channel:C0GENERAL": an approver is a user ID`},
		{"confirm = true\napprovers = [\"evryone\"]", `flows[0].approvers[0]: "evryone" is not a rule`},
		{"confirm = true\napproval_timeout = \"1h\"", "flows[0].approval_timeout: set, but approvers is not"},
		{"confirm = true\napprovers = [\"U0BOSS\"]\napproval_timeout = \"1m\"", "flows[0].approval_timeout: 1m is out of range: allowed 0s (24h) or 5m to 720h"},
	} {
		if _, err := parseConfig([]byte(with(tt.keys)), mapEnv(nil)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseConfig(%q) = %v, want %q", tt.keys, err, tt.want)
		}
	}
}

func TestCheckConfigDiscordLongFlowWarning(t *testing.T) {
	tests := []struct {
		name, flow, rest string
		warn             bool
	}{
		{"20m on Discord", "timeout = \"20m\"\n", discordOn, true},
		{"14m on Discord", "timeout = \"14m\"\n", discordOn, false},
		{"default 30m on Discord", "", discordOn + "[bridge]\ndefault_flow_timeout = \"30m\"\n", true},
		{"20m without Discord", "timeout = \"20m\"\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, testConfig(tt.flow, tt.rest))
			out, _, err := runCmd(t, nil, "", "check-config", "-config", path)
			if err != nil {
				t.Fatalf("check-config = %v, want a warning at most", err)
			}
			got := strings.Contains(out, "warning: flows[0] (healthcheck): timeout") && strings.Contains(out, "interaction token lasts 15 minutes")
			if got != tt.warn {
				t.Errorf("check-config warned %v, want %v:\n%s", got, tt.warn, out)
			}
		})
	}
}

func TestSessionsBindRefusesNonUUID(t *testing.T) {
	path := writeConfig(t, "http://127.0.0.1:1", "")
	env := map[string]string{"TEST_TOKEN": "x"}
	for _, id := range []string{"not-a-uuid", "{11111111-2222-3333-4444-555555555555}", "urn:uuid:11111111-2222-3333-4444-555555555555", "11111111222233334444555555555555", ""} {
		_, _, err := runCmd(t, env, "", "sessions", "bind", "console/local", id, "-config", path)
		if err == nil || !strings.Contains(err.Error(), "is not a session UUID") {
			t.Errorf("sessions bind console/local %q = %v, want it refused", id, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "store.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused bind opened the store (stat: %v)", err)
	}
	if err := checkSessionUUID("11111111-2222-3333-4444-555555555555"); err != nil {
		t.Errorf("checkSessionUUID(a UUID) = %v", err)
	}
}

// TestConfigExampleShowsRanges: config.example.toml states each numeric key's
// range next to it, as Validate applies it.
func TestConfigExampleShowsRanges(t *testing.T) {
	lines := strings.Split(string(readExample(t)), "\n")
	for key, r := range rangesByKey() {
		section, name, _ := strings.Cut(key, ".")
		text, ok := exampleEntry(lines, section, name)
		if !ok {
			t.Errorf("config.example.toml does not set %s", key)
			continue
		}
		if !strings.Contains(text, r) {
			t.Errorf("config.example.toml's %s does not say its range %q:\n%s", key, r, text)
		}
	}
}

func rangesByKey() map[string]string {
	out := map[string]string{"discord.open_timeout": "0s (30s) or 1s to 5m"}
	for key, b := range bounds {
		out[key] = b.String()
	}
	return out
}

// exampleEntry returns the line of the example that sets name in section,
// with the comment lines just above it.
func exampleEntry(lines []string, section, name string) (string, bool) {
	in := false
	setter := regexp.MustCompile(`^\s*` + name + `\s*=`)
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") {
			in = trimmed == "["+section+"]" || trimmed == "[["+section+"]]"
			continue
		}
		if !in || !setter.MatchString(line) {
			continue
		}
		j := i
		for j > 0 && strings.HasPrefix(strings.TrimSpace(lines[j-1]), "#") {
			j--
		}
		return strings.Join(lines[j:i+1], "\n"), true
	}
	return "", false
}

// TestConfigAgentDefaultChannels: a channel's default agent is configured on
// the agent; one agent per channel, within the agent's own channels.
func TestConfigAgentDefaultChannels(t *testing.T) {
	c := defaultConfig()
	c.Agents = []AgentConfig{
		{Name: "helper", UUID: "a1", Default: true, DefaultChannels: []string{"C1"}},
		{Name: "other", UUID: "a2", Channels: []string{"C2"}, DefaultChannels: []string{"C1", "C3", "C2"}},
	}
	var ps problems
	c.checkAgents(&ps)
	got := fmt.Sprint(ps)
	for _, want := range []string{
		`agents[1].default_channels[0]: channel C1 is already the default of agent "helper"`,
		`agents[1].default_channels[1]: channel C3 is not one of the agent's channels`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems = %s, want %q", got, want)
		}
	}
	if strings.Contains(got, "default_channels[2]") {
		t.Errorf("problems = %s; C2 is one of other's channels and nobody's default yet", got)
	}
	_, agents := c.catalog()
	if !slices.Equal(agents[1].DefaultChannels, []string{"C1", "C3", "C2"}) {
		t.Errorf("catalog agent = %+v, want its default channels passed to the core", agents[1])
	}
}

func TestLeaseTTLReachesTheBridge(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rest string
		want time.Duration
	}{
		{"", 15 * time.Second},
		{"[store]\nlease_ttl = \"4s\"\n", 4 * time.Second},
	} {
		cfg, err := parseConfig([]byte(testConfig("", tt.rest)), func(string) string { return "" })
		if err != nil {
			t.Fatalf("parseConfig(%q) = %v", tt.rest, err)
		}
		if got := cfg.bridgeConfig().Replicas.LeaseTTL; got != tt.want {
			t.Errorf("lease TTL of %q = %v, want %v", tt.rest, got, tt.want)
		}
	}
}

func TestOrderHoldReachesTheBridge(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rest string
		want time.Duration
	}{
		{"[store]\ndriver = \"postgres\"\ndsn = \"postgres://x/y\"\n", 250 * time.Millisecond},
		{"[store]\ndriver = \"postgres\"\ndsn = \"postgres://x/y\"\norder_hold = \"0s\"\n", 0},
		{"[store]\ndriver = \"postgres\"\ndsn = \"postgres://x/y\"\norder_hold = \"300ms\"\n", 300 * time.Millisecond},
		// The same on bbolt: the core pays it only while another replica
		// is live, which on bbolt none is (bridge: TestProcessAloneHoldsNothingBack).
		{"", 250 * time.Millisecond},
		{"[store]\norder_hold = \"300ms\"\n", 300 * time.Millisecond},
	} {
		cfg, err := parseConfig([]byte(testConfig("", tt.rest)), func(string) string { return "" })
		if err != nil {
			t.Fatalf("parseConfig(%q) = %v", tt.rest, err)
		}
		if got := cfg.bridgeConfig().Replicas.OrderHold; got != tt.want {
			t.Errorf("order hold of %q = %v, want %v", tt.rest, got, tt.want)
		}
	}
}

// TestConfigDiscordCatchUpAge: discord.catch_up_age is 10m by default, or
// bridge.dedupe_ttl when that is shorter and the file leaves it out; set,
// it is range-checked, and refused beyond dedupe_ttl (catch-up would then
// answer again what the inbox forgot answering); it reaches the adapter.
func TestConfigDiscordCatchUpAge(t *testing.T) {
	for _, tt := range []struct {
		name, discord, bridge string
		want                  time.Duration
		err                   string
	}{
		{name: "default", want: 10 * time.Minute},
		{name: "follows a shorter dedupe_ttl", bridge: `dedupe_ttl = "5m"`, want: 5 * time.Minute},
		{name: "not a longer one", bridge: `dedupe_ttl = "1h"`, want: 10 * time.Minute},
		{name: "set", discord: `catch_up_age = "3m"`, want: 3 * time.Minute},
		{name: "set up to dedupe_ttl", discord: `catch_up_age = "1h"`, bridge: `dedupe_ttl = "1h"`, want: time.Hour},
		{name: "beyond dedupe_ttl", discord: `catch_up_age = "20m"`,
			err: "discord.catch_up_age: 20m is longer than bridge.dedupe_ttl (10m): catch-up could read a message the inbox has forgotten answering"},
		{name: "too short", discord: `catch_up_age = "30s"`, err: "discord.catch_up_age: 30s is out of range: allowed 1m to 168h"},
		{name: "zero", discord: `catch_up_age = "0s"`, err: "discord.catch_up_age: 0s is out of range"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := testConfig("", discordOn+tt.discord+"\n[bridge]\n"+tt.bridge+"\n")
			cfg, err := parseConfig([]byte(text), mapEnv(nil))
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("parseConfig() = %v, want %q", err, tt.err)
				}
			case err != nil:
				t.Fatalf("parseConfig() = %v\n%s", err, text)
			case time.Duration(cfg.Discord.CatchUpAge) != tt.want:
				t.Errorf("discord.catch_up_age = %s, want %s", time.Duration(cfg.Discord.CatchUpAge), tt.want)
			}
		})
	}
}
