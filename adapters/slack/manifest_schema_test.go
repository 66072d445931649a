package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"
)

// checkManifestSchema holds a generated manifest to Slack's published
// manifest format as far as it can be had here. Slack's JSON schema
// (slackapi/manifest-schema) is published only in its GitHub repository:
// no npm package or Go module ships it, so neither tests nor CI can fetch
// it. The manifest is checked instead against
//   - slack-go's typed manifest (slack.Manifest, which mirrors the schema's
//     keys so that an export and update keeps them), decoded strictly: a key
//     Slack does not know is an error;
//   - the limits Slack's app manifest reference documents
//     (docs.slack.dev/reference/app-manifest), each named below.
func checkManifestSchema(t *testing.T, js []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var m slackgo.Manifest
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("manifest does not decode strictly into slack.Manifest: %v", err)
	}
	for _, p := range manifestProblems(m) {
		t.Error(p)
	}
}

// manifestProblems lists what breaks a documented limit of the manifest.
func manifestProblems(m slackgo.Manifest) []string {
	var out []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	n := utf8.RuneCountInString
	check(m.Display.Name != "" && n(m.Display.Name) <= 35, "display_information.name %q: required, at most 35 characters", m.Display.Name)
	check(n(m.Display.Description) <= 140, "display_information.description: at most 140 characters")
	check(m.Features.BotUser.DisplayName != "" && n(m.Features.BotUser.DisplayName) <= 80, "features.bot_user.display_name: required, at most 80 characters")
	for i, c := range m.Features.SlashCommands {
		check(strings.HasPrefix(c.Command, "/") && n(c.Command) <= 32, "slash_commands[%d].command %q: a / and at most 32 characters", i, c.Command)
		check(c.Description != "" && n(c.Description) <= 2000, "slash_commands[%d].description: required, at most 2,000 characters", i)
		check(n(c.UsageHint) <= 1000, "slash_commands[%d].usage_hint: at most 1,000 characters", i)
	}
	for i, s := range m.Features.Shortcuts {
		check(s.Name != "" && n(s.Name) <= 24, "shortcuts[%d].name %q: required, at most 24 characters", i, s.Name)
		check(s.CallbackID != "" && n(s.CallbackID) <= 255, "shortcuts[%d].callback_id: required, at most 255 characters", i)
		check(s.Description != "" && n(s.Description) <= 150, "shortcuts[%d].description: required, at most 150 characters", i)
		check(s.Type == slackgo.MessageShortcut || s.Type == slackgo.GlobalShortcut, "shortcuts[%d].type %q: message or global", i, s.Type)
	}
	if av := m.Features.AssistantView; av != nil {
		check(av.AssistantDescription != "", "assistant_view.assistant_description: required")
		check(m.Features.AgentView == nil, "assistant_view and agent_view together")
	}
	if av := m.Features.AgentView; av != nil {
		check(n(av.AgentDescription) <= 300, "agent_view.agent_description: at most 300 characters")
		check(len(av.SuggestedPrompts) <= 4, "agent_view.suggested_prompts: at most 4")
		for i, p := range av.SuggestedPrompts {
			check(p.Title != "" && p.Message != "", "agent_view.suggested_prompts[%d]: title and message required", i)
		}
		for i, a := range av.Actions {
			check(a.Name != "" && a.Description != "", "agent_view.actions[%d]: name and description required", i)
		}
	}
	es := m.Settings.EventSubscriptions
	check(es != nil && len(es.BotEvents) <= 100, "settings.event_subscriptions.bot_events: at most 100")
	check(m.Settings.Interactivity != nil, "settings.interactivity: is_enabled required")
	if m.Settings.SocketModeEnabled {
		check(es == nil || es.RequestUrl == "", "request_url with socket mode")
	} else {
		check(es != nil && strings.HasPrefix(es.RequestUrl, "https://"), "settings.event_subscriptions.request_url: an https URL without socket mode")
	}
	check(len(m.OAuthConfig.Scopes.Bot) <= 255, "oauth_config.scopes.bot: at most 255")
	return out
}

func TestManifestProblems(t *testing.T) {
	t.Parallel()
	bad := slackgo.Manifest{
		Display: slackgo.Display{Name: strings.Repeat("n", 36)},
		Features: slackgo.Features{
			AgentView: &slackgo.AgentView{
				AgentDescription: strings.Repeat("d", 301),
				SuggestedPrompts: make([]slackgo.ManifestSuggestedPrompt, 5),
				Actions:          []slackgo.ManifestAgentAction{{Name: "x"}},
			},
			AssistantView: &slackgo.AssistantView{},
		},
	}
	got := strings.Join(manifestProblems(bad), "\n")
	for _, want := range []string{"display_information.name", "agent_description", "suggested_prompts: at most 4", "suggested_prompts[0]", "actions[0]", "assistant_description", "together", "bot_user", "interactivity"} {
		if !strings.Contains(got, want) {
			t.Errorf("manifestProblems() = %s\nwant a problem with %s", got, want)
		}
	}
}
