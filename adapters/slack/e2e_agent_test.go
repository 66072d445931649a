package slack

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// newFakesWith is newFakes with the fake Slack's options.
func newFakesWith(t *testing.T, o slacktest.Options) (*slacktest.Server, *workspacetest.Server) {
	t.Helper()
	s := slacktest.NewServer(o)
	t.Cleanup(s.Close)
	ws := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(ws.Close)
	ws.AddAgent(workspacetest.Agent{UUID: e2eAgent})
	return s, ws
}

func withAgentView(c *Config) { c.AgentView = true }

func TestE2EAgentView(t *testing.T) {
	t.Parallel()
	// The agent view's events and prompts are checked, not how its
	// answers wait out Slack's message a second per channel.
	s, ws := newFakesWith(t, slacktest.Options{AgentView: true, PostBurst: -1})
	e := startE2E(t, e2eOptions{cfg: withAgentView, slack: s, ws: ws})
	e.assistantOn()
	ctx := waitCtx(t)

	// Opening the Messages tab greets the DM, and the agent's prompts sit
	// at its top.
	viewing := []slacktest.ContextEntity{{Type: slacktest.EntityChannel, Value: e2eChannel}}
	e.ack(ctx, e.sent(e.slack.SendAppHomeOpened(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM, Entities: viewing})))
	if m := e.reply(ctx, e2eDM, "Ask me anything"); m.ThreadTS != "" {
		t.Errorf("greeting in thread %q, want the DM itself", m.ThreadTS)
	}
	dm, err := e.slack.WaitAssistant(ctx, e2eDM, "", func(th slacktest.AssistantThread) bool { return len(th.Prompts) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if want := []slacktest.Prompt{{Title: "Status", Message: "What is the status of prod?"}, {Title: "Restart", Message: "How do I restart nginx?"}}; !slices.Equal(dm.Prompts, want) {
		t.Errorf("DM prompts = %+v, want %+v", dm.Prompts, want)
	}
	// Opening it again greets no more; what the user views changes.
	e.ack(ctx, e.sent(e.slack.SendAppHomeOpened(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM, Entities: viewing})))
	e.ack(ctx, e.sent(e.slack.SendAppContextChanged(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM, Entities: []slacktest.ContextEntity{
		{Type: slacktest.EntityCanvas, Value: "F0SPEC"},
		{Type: slacktest.EntityMessage, Channel: "C0OTHER", MessageTS: "1700000000.000100"},
		{Type: "slack#/types/something_new", Value: "X1"},
	}})))

	// A message in the tab starts a thread, which is its conversation: the
	// status shows there while the agent works, and the answer goes there.
	first := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "How do I restart nginx?"}))
	if m := e.reply(ctx, e2eDM, "restart nginx"); m.ThreadTS != first.TS {
		t.Errorf("answer thread_ts = %q, want the message's %q", m.ThreadTS, first.TS)
	}
	th, err := e.slack.WaitAssistant(ctx, e2eDM, first.TS, func(th slacktest.AssistantThread) bool { return len(th.Statuses) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(th.Statuses, []string{DefaultAssistantStatus}) || th.Status != "" || len(th.Titles) != 0 {
		t.Errorf("thread = statuses %q, status now %q, titles %q; want one %q, none now, no title", th.Statuses, th.Status, th.Titles, DefaultAssistantStatus)
	}
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: first.TS, Text: "and apache?"}))
	e.reply(ctx, e2eDM, "[turn 2]")
	second := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "unrelated"}))
	if m := e.reply(ctx, e2eDM, "You said: unrelated"); m.ThreadTS != second.TS || !strings.Contains(m.Text, "[turn 1]") {
		t.Errorf("second thread's answer = %q in %q, want turn 1 in %q", m.Text, m.ThreadTS, second.TS)
	}

	got := e.agentSessions()
	want := [][]string{
		{"[Context: The user is viewing the canvas F0SPEC, and the message 1700000000.000100 in <#C0OTHER>.]\n\nHow do I restart nginx?", "and apache?"},
		{"unrelated"},
	}
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("agent sessions = %q, want %q", got, want)
	}
	greetings := 0
	for _, m := range e.slack.Messages() {
		if strings.Contains(m.Text, "Ask me anything") {
			greetings++
		}
		if strings.Contains(m.Text, "Thinking") {
			t.Errorf("a placeholder was posted with agent_view: %+v", m)
		}
	}
	if greetings != 1 {
		t.Errorf("%d greetings, want 1", greetings)
	}
}

func TestE2EAgentViewOffIgnoresItsEvents(t *testing.T) {
	t.Parallel()
	s, ws := newFakesWith(t, slacktest.Options{AgentView: true})
	e := startE2E(t, e2eOptions{slack: s, ws: ws})
	e.assistantOn()
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendAppHomeOpened(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM})))
	e.ack(ctx, e.sent(e.slack.SendAppContextChanged(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM,
		Entities: []slacktest.ContextEntity{{Type: slacktest.EntityChannel, Value: e2eChannel}}})))
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "one"}))
	if m := e.reply(ctx, e2eDM, "You said: one"); m.ThreadTS != "" {
		t.Errorf("answer in thread %q, want the DM itself without agent_view", m.ThreadTS)
	}
	if got := e.agentSessions(); len(got) != 1 || !slices.Equal(got[0], []string{"one"}) {
		t.Errorf("agent sessions = %q, want one without context", got)
	}
	if n := len(e.slack.Messages()); n != 1 {
		t.Errorf("%d messages posted, want the answer alone", n)
	}
}

func TestFakeRefusesAgentEventsWithoutAgentView(t *testing.T) {
	t.Parallel()
	s := slacktest.NewServer(slacktest.Options{})
	t.Cleanup(s.Close)
	_, err := s.SendAppContextChanged(t.Context(), slacktest.AgentEvent{User: e2eUser, Channel: e2eDM})
	if !errors.Is(err, slacktest.ErrNotAgentView) {
		t.Errorf("SendAppContextChanged() without agent_view = %v, want ErrNotAgentView", err)
	}
}

// thread puts a root and n replies, by three people, the bot and a file
// among them, in channel; it returns the root's ts and the lines the agent
// should read for them, oldest first.
func seedThread(s *slacktest.Server, channel string, n int) (string, []string) {
	root := s.AddThreadMessage(slacktest.ThreadMessage{Channel: channel, User: "U0ALICE", Text: "Is prod down? <!here>"})
	lines := []string{"- Alice: Is prod down? @\u2060here"}
	who := []struct{ id, name string }{{"U0ALICE", "Alice"}, {"U0BOB", "Bob"}, {"U0CAROL", "Carol"}}
	for i := 1; i < n; i++ {
		m := slacktest.ThreadMessage{Channel: channel, ThreadTS: root, Text: fmt.Sprintf("reply %02d", i)}
		line := ""
		switch {
		case i == n-3:
			m.User, m.BotID = s.BotUserID(), s.BotID()
			line = fmt.Sprintf("- %s (you, an earlier answer): reply %02d", strings.ToLower(s.BotUserID()), i)
		case i == n-2:
			m.User, m.Files = "U0BOB", []string{"graph.png"}
			m.Text = fmt.Sprintf("reply %02d cc <@U0CAROL>", i)
			line = fmt.Sprintf("- Bob: reply %02d cc @U0CAROL [files: graph.png]", i)
		default:
			w := who[i%len(who)]
			m.User = w.id
			line = fmt.Sprintf("- %s: reply %02d", w.name, i)
		}
		s.AddThreadMessage(m)
		lines = append(lines, line)
	}
	return root, lines
}

var threadNames = map[string]string{"U0ALICE": "Alice", "U0BOB": "Bob", "U0CAROL": "Carol"}

func withThreadContext(n int) func(*bridge.Config) {
	return func(c *bridge.Config) { c.ThreadContext = bridge.ThreadContext{Messages: n, Chars: 20000} }
}

func TestE2EMentionInThreadHearsTheThread(t *testing.T) {
	t.Parallel()
	s, ws := newFakesWith(t, slacktest.Options{UserNames: threadNames})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, core: withThreadContext(12)})
	ctx := waitCtx(t)
	root, lines := seedThread(s, e2eChannel, 30)

	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "what do you make of it?"}))
	if m := e.reply(ctx, e2eChannel, "what do you make of it?"); m.ThreadTS != root {
		t.Errorf("answer thread_ts = %q, want the thread %q", m.ThreadTS, root)
	}
	// A second mention in the thread is the same session: no thread again.
	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "and now?"}))
	e.reply(ctx, e2eChannel, "[turn 2]")

	want := "[Earlier in this thread, oldest first:]\n" + strings.Join(lines[len(lines)-12:], "\n") +
		"\n[End of the earlier messages. The new message follows.]\n\nwhat do you make of it?"
	got := e.agentSessions()
	if len(got) != 1 || len(got[0]) != 2 || got[0][0] != want || got[0][1] != "and now?" {
		t.Errorf("agent session = %q\nwant first message\n%q", got, want)
	}
}

func TestE2EThreadNotReadAnswersWithoutIt(t *testing.T) {
	t.Parallel()
	s, ws := newFakesWith(t, slacktest.Options{UserNames: threadNames})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, core: withThreadContext(10)})
	ctx := waitCtx(t)
	root, _ := seedThread(s, e2eChannel, 5)
	e.slack.RateLimit("conversations.replies", 1, 60)
	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "summary?"}))
	e.reply(ctx, e2eChannel, "You said: summary?")
	if got := e.agentSessions(); len(got) != 1 || !slices.Equal(got[0], []string{"summary?"}) {
		t.Errorf("agent session = %q, want the message alone when conversations.replies is rate limited", got)
	}
	if n := e.slack.CallCount("conversations.replies"); n != 1 {
		t.Errorf("conversations.replies called %d times, want 1 (no retry on ratelimited)", n)
	}
}

func TestE2EThreadRestrictedHistoryReadsOnePage(t *testing.T) {
	t.Parallel()
	// A commercially distributed app outside the Marketplace: one call a
	// minute, 15 messages a page. The first page is read, the second is
	// rate limited, and the agent hears the newest of what was read.
	s, ws := newFakesWith(t, slacktest.Options{UserNames: threadNames, RestrictedHistory: true})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, core: withThreadContext(5)})
	ctx := waitCtx(t)
	root, lines := seedThread(s, e2eChannel, 30)
	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "summary?"}))
	e.reply(ctx, e2eChannel, "You said:")
	want := "[Earlier in this thread, oldest first:]\n" + strings.Join(lines[10:15], "\n") +
		"\n[End of the earlier messages. The new message follows.]\n\nsummary?"
	if got := e.agentSessions(); len(got) != 1 || len(got[0]) != 1 || got[0][0] != want {
		t.Errorf("agent session = %q\nwant %q", got, want)
	}
	if calls := e.slack.Calls(); !slices.ContainsFunc(calls, func(c slacktest.Call) bool { return c.Method == "conversations.replies" && c.Error == "ratelimited" }) {
		t.Error("the second page was not refused: the fake does not hold the restricted tier")
	}
}

func TestE2EAgentViewOverHTTP(t *testing.T) {
	t.Parallel()
	const secret = "agent-secret"
	s, ws := newFakesWith(t, slacktest.Options{AgentView: true})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, cfg: func(c *Config) { httpMode(secret)(c); c.AgentView = true }})
	e.assistantOn()
	ctx := waitCtx(t)
	body, err := e.slack.AppHomeOpenedBody(slacktest.AgentEvent{User: e2eUser, Channel: e2eDM})
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := e.post(t, ctx, "application/json", body, secret, time.Now(), nil); status != 200 {
		t.Fatalf("POST app_home_opened = %d", status)
	}
	if m := e.reply(ctx, e2eDM, "Ask me anything"); m.ThreadTS != "" {
		t.Errorf("greeting in thread %q, want the DM", m.ThreadTS)
	}
	if _, err := e.slack.WaitAssistant(ctx, e2eDM, "", func(th slacktest.AssistantThread) bool { return len(th.Prompts) == 2 }); err != nil {
		t.Error(err)
	}
}

// TestRestoreKeepsThreadContext: an event read back from the inbox after a
// restart still reads its thread, and an agent_view thread keeps its status.
func TestRestoreKeepsThreadContext(t *testing.T) {
	t.Parallel()
	a, err := New(validSocket(), idleCore{t}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		route       string
		earlier     bool
		statusReply bool
	}{
		{`{"kind":"chat","channel":"C0GENERAL","thread":"1700000000.000100","user_ts":"1700000001.000100","context_of":"1700000000.000100"}`, true, false},
		{`{"kind":"chat","channel":"C0GENERAL","thread":"1700000000.000100","user_ts":"1700000001.000100"}`, false, false},
		{`{"kind":"chat","channel":"D0ALICE","thread":"1700000000.000100","agent":true}`, false, true},
	} {
		ev := bridge.Event{Key: "k", Route: []byte(tt.route)}
		if err := a.Restore(&ev); err != nil {
			t.Fatalf("Restore(%s) = %v", tt.route, err)
		}
		if (ev.Earlier != nil) != tt.earlier {
			t.Errorf("Restore(%s): Earlier set = %v, want %v", tt.route, ev.Earlier != nil, tt.earlier)
		}
		if _, ok := ev.Reply.(*statusResponder); ok != tt.statusReply {
			t.Errorf("Restore(%s): responder %T", tt.route, ev.Reply)
		}
	}
	if err := a.Restore(&bridge.Event{Key: "k", Route: []byte(`{"kind":"chat","channel":"C0GENERAL","context_of":"nope"}`)}); err == nil {
		t.Error("Restore accepted a malformed context_of")
	}
}
