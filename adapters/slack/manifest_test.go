package slack

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	slackgo "github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// manifestAgents give the manifest its suggested prompts.
var manifestAgents = []bridge.Agent{{Name: "other"}, {Name: "helper", Default: true, SuggestedPrompts: e2ePrompts}}

func TestManifest(t *testing.T) {
	flows := []bridge.Flow{{Name: "healthcheck", Description: "Check a host's health"}, {Name: "deploy"}}
	tests := []struct {
		name string
		cfg  Config
		bot  string
	}{
		{"socket", Config{}, "flowbridge"},
		{"http", Config{Mode: ModeHTTP, PublicURL: "https://bot.example.com/", FlowCommand: "/run", UserGroups: true, WorkingIndicator: IndicatorReaction}, "Ops \"Bot\": #1"},
		{"assistant", Config{Assistant: true}, "flowbridge"},
		{"agent view", Config{AgentView: true}, "flowbridge"},
		{"agent view http", Config{AgentView: true, Mode: ModeHTTP, PublicURL: "https://bot.example.com", AgentDescription: "Answers questions about prod"}, "Ops"},
		{"flow forms", Config{FlowForms: true}, "flowbridge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js, err := Manifest(tt.cfg, flows, manifestAgents, tt.bot, "json")
			if err != nil {
				t.Fatalf("Manifest(json) = %v", err)
			}
			ym, err := Manifest(tt.cfg, flows, manifestAgents, tt.bot, "yaml")
			if err != nil {
				t.Fatalf("Manifest(yaml) = %v", err)
			}
			name := strings.ReplaceAll(tt.name, " ", "_")
			golden(t, "manifest/"+name+".json", js)
			golden(t, "manifest/"+name+".yaml", ym)

			var fromJSON map[string]any
			if err := json.Unmarshal(js, &fromJSON); err != nil {
				t.Fatalf("manifest JSON does not decode: %v", err)
			}
			fromYAML, err := parseYAMLSubset(string(ym))
			if err != nil {
				t.Fatalf("manifest YAML does not parse: %v\n%s", err, ym)
			}
			if !reflect.DeepEqual(fromJSON, fromYAML) {
				t.Errorf("YAML and JSON manifests differ:\njson: %v\nyaml: %v", fromJSON, fromYAML)
			}
			checkManifest(t, tt.cfg.withDefaults(), fromJSON)
			checkManifestSchema(t, js)
		})
	}
	// An HTTP-mode manifest without public_url would send Slack nowhere.
	if _, err := Manifest(Config{Mode: ModeHTTP}, flows, nil, "", "yaml"); err == nil || !strings.Contains(err.Error(), "slack.public_url: required in http mode") {
		t.Errorf("Manifest(http mode without public_url) = %v, want public_url required", err)
	}
	if _, err := Manifest(Config{}, nil, nil, "", "toml"); err == nil {
		t.Error(`Manifest(format "toml") = nil error, want one`)
	}
}

// TestManifestDeclaresAgentSessions installs the generated manifest on the
// fake Slack, which holds agent sessions to Slack's documented rules: with
// agent_view the app is an agent, setStatus gives no warning and a user can
// press Stop and rename; without it, sessions are refused.
func TestManifestDeclaresAgentSessions(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{{AgentView: true}, {AgentView: true, Mode: ModeHTTP, PublicURL: "https://bot.example.com"}, {}} {
		t.Run(fmt.Sprintf("agent_view=%v/%s", cfg.AgentView, cfg.withDefaults().Mode), func(t *testing.T) {
			t.Parallel()
			js, err := Manifest(cfg, nil, nil, "", "json")
			if err != nil {
				t.Fatal(err)
			}
			var m slackgo.Manifest
			if err := json.Unmarshal(js, &m); err != nil {
				t.Fatal(err)
			}
			srv := slacktest.New(slacktest.Options{
				// The Agents & AI Apps feature (agent_view or assistant_view) is the declaration.
				Agent:     m.Features.AgentView != nil || m.Features.AssistantView != nil,
				BotEvents: m.Settings.EventSubscriptions.BotEvents,
				Scopes:    m.OAuthConfig.Scopes.Bot,
				Channels:  []slacktest.Channel{{ID: "D1", IsIM: true, User: "U1"}},
			})
			t.Cleanup(srv.Close)
			api := slackgo.New(srv.BotToken(), slackgo.OptionAPIURL(srv.APIURL()), slackgo.OptionHTTPClient(srv.Client()))
			const thread = "1784744767.192879"
			res, err := api.SetAgentSessionStatusContext(t.Context(), slackgo.AgentSessionSetStatusParameters{
				Status: slackgo.AgentSessionStatusProcessing, ChannelID: "D1", ThreadTS: thread, Title: "Deploy"})
			if !cfg.AgentView {
				if err == nil || err.Error() != "not_authorized" {
					t.Errorf("SetAgentSessionStatus() without agent_view = %v, want not_authorized", err)
				}
				return
			}
			if err != nil || res.Warning != "" {
				t.Fatalf("SetAgentSessionStatus() = %+v, %v; want no error, no warning", res, err)
			}
			if _, _, err := srv.PressStopBody(slacktest.StopPress{Channel: "D1", ThreadTS: thread, User: "U1"}); err != nil {
				t.Errorf("PressStopBody() = %v, want a Stop button", err)
			}
			body, _, err := srv.RenameSessionBody(slacktest.SessionRename{Channel: "D1", ThreadTS: thread, User: "U1", Title: "Deploy api"})
			if err != nil || body == nil {
				t.Errorf("RenameSessionBody() = %s, %v, want the event", body, err)
			}
		})
	}
}

func TestRequirementsNameAgentSessionEvents(t *testing.T) {
	t.Parallel()
	reqs := strings.Join(Requirements(Config{AgentView: true}), "\n")
	for _, e := range AgentSessionEvents {
		if !strings.Contains(reqs, e) {
			t.Errorf("Requirements(agent_view) = %q, want %s named", reqs, e)
		}
	}
	if reqs := strings.Join(Requirements(Config{Assistant: true}), "\n"); strings.Contains(reqs, "agent_session") {
		t.Errorf("Requirements(assistant) = %q, want no agent session events", reqs)
	}
}

func checkManifest(t *testing.T, cfg Config, m map[string]any) {
	t.Helper()
	get := func(path ...string) any {
		var v any = m
		for _, p := range path {
			mm, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = mm[p]
		}
		return v
	}
	http := cfg.Mode == ModeHTTP
	if got := get("settings", "socket_mode_enabled"); got != !http {
		t.Errorf("socket_mode_enabled = %v, want %v", got, !http)
	}
	var cmds []string
	for _, c := range get("features", "slash_commands").([]any) {
		cmd := c.(map[string]any)
		cmds = append(cmds, cmd["command"].(string))
		if _, hasURL := cmd["url"]; hasURL != http {
			t.Errorf("command %v has url = %v, want %v", cmd["command"], hasURL, http)
		}
	}
	if want := []string{cfg.FlowCommand, cfg.AgentCommand}; !slices.Equal(cmds, want) {
		t.Errorf("commands = %v, want %v", cmds, want)
	}
	var scopes []string
	for _, s := range get("oauth_config", "scopes", "bot").([]any) {
		scopes = append(scopes, s.(string))
	}
	for _, want := range []string{"app_mentions:read", "chat:write", "commands", "im:history", "channels:history", "users:read"} {
		if !slices.Contains(scopes, want) {
			t.Errorf("scopes %v lack %s", scopes, want)
		}
	}
	if slices.Contains(scopes, "usergroups:read") != cfg.UserGroups {
		t.Errorf("usergroups:read in %v, want %v", scopes, cfg.UserGroups)
	}
	if slices.Contains(scopes, "reactions:write") != (cfg.WorkingIndicator == IndicatorReaction) {
		t.Errorf("reactions:write in %v, want %v", scopes, cfg.WorkingIndicator == IndicatorReaction)
	}
	if slices.Contains(scopes, AssistantScope) != (cfg.Assistant || cfg.AgentView) {
		t.Errorf("%s in %v, want %v", AssistantScope, scopes, cfg.Assistant || cfg.AgentView)
	}
	if got := get("features", "agent_view") != nil; got != cfg.AgentView {
		t.Errorf("agent_view present = %v, want %v", got, cfg.AgentView)
	}
	if cfg.AgentView {
		av := get("features", "agent_view").(map[string]any)
		if av["agent_description"] != cfg.AgentDescription {
			t.Errorf("agent_description = %v, want %q", av["agent_description"], cfg.AgentDescription)
		}
		if ps, _ := av["suggested_prompts"].([]any); len(ps) != len(e2ePrompts) || ps[0].(map[string]any)["title"] != e2ePrompts[0].Title {
			t.Errorf("suggested_prompts = %v, want the default agent's %v", ps, e2ePrompts)
		}
		if as, _ := av["actions"].([]any); len(as) != 2 || as[0].(map[string]any)["name"] != "healthcheck" || as[0].(map[string]any)["description"] != "Check a host's health" {
			t.Errorf("actions = %v, want one per flow", as)
		}
	}
	if got := get("features", "assistant_view") != nil; got != cfg.Assistant {
		t.Errorf("assistant_view present = %v, want %v", got, cfg.Assistant)
	}
	var events []string
	for _, e := range get("settings", "event_subscriptions", "bot_events").([]any) {
		events = append(events, e.(string))
	}
	for _, e := range []string{"assistant_thread_started", "assistant_thread_context_changed"} {
		if slices.Contains(events, e) != cfg.Assistant {
			t.Errorf("bot event %s in %v, want %v", e, events, cfg.Assistant)
		}
	}
	for _, e := range []string{"app_home_opened", "app_context_changed", "agent_session_stopped", "agent_session_title_changed"} {
		if slices.Contains(events, e) != cfg.AgentView {
			t.Errorf("bot event %s in %v, want %v", e, events, cfg.AgentView)
		}
	}
	var shortcuts []string
	if list, ok := get("features", "shortcuts").([]any); ok {
		for _, s := range list {
			sc := s.(map[string]any)
			if sc["type"] != "message" || sc["name"] == "" {
				t.Errorf("shortcut %v, want a named message shortcut", sc)
			}
			shortcuts = append(shortcuts, sc["callback_id"].(string))
		}
	}
	if got := slices.Equal(shortcuts, []string{ShortcutCallback}); got != cfg.FlowForms {
		t.Errorf("shortcuts = %v with flow forms %v", shortcuts, cfg.FlowForms)
	}
	if got := Scopes(cfg); !slices.Equal(got, scopes) {
		t.Errorf("Scopes() = %v, want the manifest's %v", got, scopes)
	}
	if url, _ := get("settings", "event_subscriptions", "request_url").(string); http && !strings.HasSuffix(url, "/slack/events") {
		t.Errorf("event request_url = %q, want …/slack/events", url)
	}
	if get("settings", "interactivity", "is_enabled") != true {
		t.Error("interactivity is not enabled")
	}
}

// parseYAMLSubset reads the YAML the manifest emitter writes: block
// mappings with bare keys, block sequences ("- " items, mappings allowed),
// JSON-quoted strings, booleans and []/{}. It rejects anything else, so the
// test catches an emitter that drifts from what it promises.
func parseYAMLSubset(src string) (map[string]any, error) {
	type line struct {
		indent int
		text   string
		no     int
	}
	var lines []line
	for i, l := range strings.Split(src, "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		trimmed := strings.TrimLeft(l, " ")
		lines = append(lines, line{len(l) - len(trimmed), trimmed, i + 1})
	}
	pos := 0
	var parseBlock func(indent int) (any, error)
	scalar := func(s string, no int) (any, error) {
		switch {
		case s == "true":
			return true, nil
		case s == "false":
			return false, nil
		case s == "[]":
			return []any{}, nil
		case s == "{}":
			return map[string]any{}, nil
		case strings.HasPrefix(s, `"`):
			var v string
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				return nil, fmt.Errorf("line %d: bad string %s: %w", no, s, err)
			}
			return v, nil
		}
		return nil, fmt.Errorf("line %d: unexpected scalar %q", no, s)
	}
	// mappingFrom parses "key: value" entries at indent, the first of which
	// may already have been cut from a "- " line.
	var mappingFrom func(indent int, first *line) (map[string]any, error)
	mappingFrom = func(indent int, first *line) (map[string]any, error) {
		m := map[string]any{}
		for {
			var l line
			if first != nil {
				l, first = *first, nil
			} else {
				if pos >= len(lines) || lines[pos].indent < indent {
					return m, nil
				}
				l = lines[pos]
				if l.indent != indent || strings.HasPrefix(l.text, "- ") {
					return nil, fmt.Errorf("line %d: bad indentation", l.no)
				}
				pos++
			}
			key, rest, ok := strings.Cut(l.text, ":")
			if !ok || strings.ContainsAny(key, " \"'") {
				return nil, fmt.Errorf("line %d: not a key: %q", l.no, l.text)
			}
			if _, dup := m[key]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %s", l.no, key)
			}
			rest = strings.TrimSpace(rest)
			if rest == "" {
				if pos >= len(lines) || lines[pos].indent <= indent {
					return nil, fmt.Errorf("line %d: key %s without value", l.no, key)
				}
				v, err := parseBlock(lines[pos].indent)
				if err != nil {
					return nil, err
				}
				m[key] = v
				continue
			}
			v, err := scalar(rest, l.no)
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
	}
	parseBlock = func(indent int) (any, error) {
		if !strings.HasPrefix(lines[pos].text, "- ") {
			return mappingFrom(indent, nil)
		}
		var seq []any
		for pos < len(lines) && lines[pos].indent == indent && strings.HasPrefix(lines[pos].text, "- ") {
			l := lines[pos]
			pos++
			item := strings.TrimPrefix(l.text, "- ")
			if strings.HasPrefix(item, `"`) || item == "true" || item == "false" {
				v, err := scalar(item, l.no)
				if err != nil {
					return nil, err
				}
				seq = append(seq, v)
				continue
			}
			first := line{indent + 2, item, l.no}
			m, err := mappingFrom(indent+2, &first)
			if err != nil {
				return nil, err
			}
			seq = append(seq, m)
		}
		return seq, nil
	}
	top, err := mappingFrom(0, nil)
	if err != nil {
		return nil, err
	}
	if pos != len(lines) {
		return nil, fmt.Errorf("line %d: unparsed (indent %s)", lines[pos].no, strconv.Itoa(lines[pos].indent))
	}
	return top, nil
}
