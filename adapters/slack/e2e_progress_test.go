package slack

import (
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

const e2eLongFlow = "flow-long"

// progressFakes are the fakes with a slow agent and a long flow, and the
// core set to show progress every interval.
func progressOptions(t *testing.T, interval time.Duration) e2eOptions {
	t.Helper()
	s := slacktest.NewServer(slacktest.Options{})
	t.Cleanup(s.Close)
	ws := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(ws.Close)
	ws.AddAgent(workspacetest.Agent{UUID: e2eAgent, Delay: 1500 * time.Millisecond})
	ws.AddFlow(workspacetest.Flow{UUID: e2eLongFlow, Template: "Long check of {host} done", Delay: 1500 * time.Millisecond})
	return e2eOptions{slack: s, ws: ws, core: func(c *bridge.Config) {
		c.ProgressInterval = interval
		c.Flows = append(c.Flows, bridge.Flow{Name: "longcheck", UUID: e2eLongFlow, Description: "Checks every service of a host", Timeout: time.Minute,
			Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "host", Required: true}}})
	}}
}

// TestE2ESlowAnswerPlaceholderShowsProgress: a slow answer's "Thinking…"
// placeholder is rewritten with the time elapsed, never more often than the
// fake's chat.update limits allow (a refusal is skipped, not waited out), and
// the answer then takes its place.
func TestE2ESlowAnswerPlaceholderShowsProgress(t *testing.T) {
	t.Parallel()
	e := startE2E(t, progressOptions(t, 200*time.Millisecond))
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "take your time"})))
	answer := e.reply(ctx, e2eDM, "You said: take your time")
	var progress []slacktest.Message
	for _, m := range e.slack.MessageLog() {
		if m.Channel == e2eDM && m.Op == "chat.update" && strings.Contains(m.Text, "so far") {
			progress = append(progress, m)
		}
	}
	if len(progress) == 0 {
		t.Fatalf("no progress on the placeholder; messages: %+v", e.slack.MessageLog())
	}
	for _, m := range progress {
		if m.TS != answer.TS || !strings.Contains(m.Text, "Thinking") {
			t.Errorf("progress %q on message %s, want \"Thinking… N so far\" on the placeholder %s that the answer replaced", m.Text, m.TS, answer.TS)
		}
	}
	// The core asks every 200 ms for 1.5 s; the adapter rewrites a message
	// at most once a second, far below the fake's limit of five in 5 s, so
	// the answer never waits behind a refusal.
	if n := len(progress); n > 2 {
		t.Errorf("%d progress updates in 1.5 s, want at most 2 (one a second)", n)
	}
	for _, c := range e.slack.Calls() {
		if c.Method == "chat.update" && c.Status == 429 {
			t.Errorf("chat.update refused %+v: progress went past Slack's limit", c)
		}
	}
	final, _ := e.slack.Message(e2eDM, answer.TS)
	if !strings.Contains(final.Text, "You said: take your time") {
		t.Errorf("placeholder ends as %q, want the answer", final.Text)
	}
}

// TestE2EFlowProgressThroughResponseURL: a slash command's long flow shows
// the flow's description and, once, the time elapsed through its
// response_url, keeping three uses for the result, which replaces it.
func TestE2EFlowProgressThroughResponseURL(t *testing.T) {
	t.Parallel()
	e := startE2E(t, progressOptions(t, 200*time.Millisecond))
	ctx := waitCtx(t)
	d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "longcheck host=web1", UserID: e2eUser, ChannelID: e2eChannel}))
	e.response(ctx, d.ResponseURL, "Long check of web1 done")
	var texts []string
	for _, p := range e.slack.ResponseURLPosts() {
		if p.URL != d.ResponseURL {
			continue
		}
		if p.Error != "" {
			t.Errorf("response_url post refused: %s", p.Error)
		}
		texts = append(texts, p.Text)
		if len(texts) > 1 && !p.ReplaceOriginal {
			t.Errorf("post %d (%q) does not replace the original; want progress and result in place", len(texts), p.Text)
		}
	}
	if len(texts) != 3 {
		t.Fatalf("response_url posts = %q, want Running, one progress update, the result", texts)
	}
	if !strings.Contains(texts[0], "Running") || !strings.Contains(texts[0], "Checks every service of a host") {
		t.Errorf("first post = %q, want the flow's name and description", texts[0])
	}
	if !strings.Contains(texts[1], "so far") || !strings.Contains(texts[1], "Checks every service") {
		t.Errorf("progress post = %q, want the time elapsed and the description", texts[1])
	}
	if left := e.slack.ResponseURLUsesLeft(d.ResponseURL); left != 2 {
		t.Errorf("%d response_url uses left, want 2", left)
	}
}
