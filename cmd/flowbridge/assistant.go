package main

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/flowbridge/flowbridge/adapters/slack"
)

// maxGreeting bounds an agent's greeting: one Slack section's text.
const maxGreeting = 3000

// checkPrompts checks an agent's greeting and suggested prompts against
// Slack's limits, where they are shown.
func checkPrompts(ps *problems, key string, a AgentConfig) {
	if n := utf8.RuneCountInString(a.Greeting); n > maxGreeting {
		ps.add(key+".greeting", "%d characters; at most %d", n, maxGreeting)
	}
	if n := len(a.SuggestedPrompts); n > slack.MaxSuggestedPrompts {
		ps.add(key+".suggested_prompts", "%d prompts; Slack shows at most %d", n, slack.MaxSuggestedPrompts)
	}
	for i, p := range a.SuggestedPrompts {
		k := fmt.Sprintf("%s.suggested_prompts[%d]", key, i)
		for _, f := range []struct {
			name, v string
			max     int
		}{{"title", p.Title, slack.MaxPromptTitle}, {"message", p.Message, slack.MaxPromptMessage}} {
			switch n := utf8.RuneCountInString(f.v); {
			case strings.TrimSpace(f.v) == "":
				ps.add(k+"."+f.name, "required")
			case n > f.max:
				ps.add(k+"."+f.name, "%d characters; Slack takes at most %d", n, f.max)
			}
		}
	}
}

// slackNotes are check-config's lines on the Slack app: the bot scopes the
// configuration needs (what each turned-on feature adds is in needs).
func slackNotes(cfg *Config) []string {
	if !cfg.Slack.Enabled {
		return nil
	}
	return []string{"slack scopes: " + strings.Join(slack.Scopes(cfg.Slack), ", ")}
}
