package slack

import (
	"strings"
	"testing"
)

func TestThreadTitle(t *testing.T) {
	long := strings.Repeat("word ", 30)
	tests := []struct{ in, want string }{
		{"How do I restart nginx?", "How do I restart nginx?"},
		{"  two\nlines\there ", "two lines here"},
		{long, strings.TrimSpace(strings.Repeat("word ", 15)) + "…"},
		{strings.Repeat("x", 100), strings.Repeat("x", maxTitle-1) + "…"},
		{"", ""},
	}
	for _, tt := range tests {
		got := threadTitle(tt.in)
		if got != tt.want {
			t.Errorf("threadTitle(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if runes(got) > maxTitle {
			t.Errorf("threadTitle(%q) has %d characters, over %d", tt.in, runes(got), maxTitle)
		}
	}
}

func TestAssistantConfig(t *testing.T) {
	base := Config{Enabled: true, BotToken: "xoxb-1", AppToken: "xapp-1", Assistant: true}
	if err := base.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	for _, status := range []string{strings.Repeat("s", MaxStatusLength+1), "two\nlines"} {
		c := base
		c.AssistantStatus = status
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "slack.assistant_status") {
			t.Errorf("Validate(assistant_status %q) = %v, want a slack.assistant_status problem", status, err)
		}
	}
	reqs := strings.Join(Requirements(base), "\n")
	if !strings.Contains(reqs, AssistantScope) || !strings.Contains(reqs, "assistant_view") {
		t.Errorf("Requirements() = %q, want the scope and feature assistant threads need", reqs)
	}
	if reqs := Requirements(DefaultConfig()); len(reqs) != 0 {
		t.Errorf("Requirements(defaults) = %q, want none", reqs)
	}
}
