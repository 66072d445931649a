package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
)

const slackOn = `
[slack]
enabled = true
bot_token = "xoxb-1"
app_token = "xapp-1"
`

// withAgentLines is testConfig with lines added to the agent.
func withAgentLines(lines, rest string) string {
	return strings.Replace(testConfig("", rest), `uuid = "agent-1"`, "uuid = \"agent-1\"\n"+lines, 1)
}

func TestCheckConfigNamesTheAssistantScope(t *testing.T) {
	for _, tt := range []struct {
		name, rest string
		want, not  []string
	}{
		{"assistant on", slackOn + "assistant = true\n", []string{"assistant:write", "needs: slack.assistant needs the assistant:write scope", "assistant_view", "update the app"}, nil},
		{"assistant off", slackOn, []string{"slack scopes: app_mentions:read"}, []string{"assistant:write", "needs:"}},
		{"slack off", "", nil, []string{"slack scopes", "assistant"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t, nil, "", "check-config", "-config", writeFile(t, testConfig("", tt.rest)))
			if err != nil {
				t.Fatalf("check-config = %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("check-config output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("check-config output has %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestSuggestedPromptsConfig(t *testing.T) {
	cfg := mustParse(t, withAgentLines(`greeting = "Hello there"
suggested_prompts = [{ title = "Status", message = "What is the status?" }, { title = "Help", message = "What can you do?" }]`, ""))
	_, agents := cfg.catalog()
	want := []bridge.Prompt{{Title: "Status", Message: "What is the status?"}, {Title: "Help", Message: "What can you do?"}}
	if len(agents) != 1 || agents[0].Greeting != "Hello there" || !slices.Equal(agents[0].SuggestedPrompts, want) {
		t.Errorf("catalog agents = %+v, want the greeting and prompts %v", agents, want)
	}

	five := strings.Repeat(`{ title = "t", message = "m" }, `, 5)
	for _, tt := range []struct{ name, lines, want string }{
		{"five prompts", "suggested_prompts = [" + five + "]", "agents[0].suggested_prompts: 5 prompts; Slack shows at most 4"},
		{"no message", `suggested_prompts = [{ title = "t" }]`, "agents[0].suggested_prompts[0].message: required"},
		{"long title", `suggested_prompts = [{ title = "` + strings.Repeat("x", 76) + `", message = "m" }]`, "agents[0].suggested_prompts[0].title: 76 characters; Slack takes at most 75"},
		{"long greeting", `greeting = "` + strings.Repeat("x", 3001) + `"`, "agents[0].greeting: 3001 characters"},
		{"long status", "", "slack.assistant_status"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rest := ""
			if tt.lines == "" {
				rest = slackOn + `assistant_status = "` + strings.Repeat("s", 51) + `"` + "\n"
			}
			_, err := parseConfig([]byte(withAgentLines(tt.lines, rest)), mapEnv(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseConfig = %v, want a problem %q", err, tt.want)
			}
		})
	}
}
