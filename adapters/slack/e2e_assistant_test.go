package slack

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

var e2ePrompts = []bridge.Prompt{
	{Title: "Status", Message: "What is the status of prod?"},
	{Title: "Restart", Message: "How do I restart nginx?"},
}

// assistantOn turns on assistant threads and gives the default agent its
// suggested prompts.
func (e *e2e) assistantOn() {
	e.t.Helper()
	err := e.core.SetCatalog(testFlows(), []bridge.Agent{{Name: "helper", UUID: e2eAgent, Default: true, SuggestedPrompts: e2ePrompts}}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
}

func withAssistant(c *Config) { c.Assistant = true }

// thread starts an assistant thread for e2eUser viewing channel and waits
// for its greeting; it returns the thread's ts.
func (e *e2e) thread(ctx context.Context, channel string) string {
	e.t.Helper()
	d := e.sent(e.slack.SendAssistantThreadStarted(ctx, slacktest.AssistantThreadEvent{User: e2eUser, Channel: e2eDM, ContextChannel: channel}))
	e.ack(ctx, d)
	if _, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.Channel == e2eDM && m.ThreadTS == d.TS && strings.Contains(m.Text, "Ask me anything")
	}); err != nil {
		e.t.Fatalf("no greeting in the assistant thread %s: %v", d.TS, err)
	}
	return d.TS
}

// agentSessions returns the messages of each of the agent's sessions.
func (e *e2e) agentSessions() [][]string {
	var out [][]string
	for _, s := range e.ws.Sessions(e2eAgent) {
		out = append(out, e.ws.Messages(s))
	}
	return out
}

func TestE2EAssistantThreads(t *testing.T) {
	t.Parallel()
	// The assistant's threads, prompts and titles are checked, not how
	// their answers wait out Slack's message a second per channel.
	e := startE2E(t, e2eOptions{cfg: withAssistant, postBurst: -1})
	e.assistantOn()
	ctx := waitCtx(t)

	// A new thread is greeted with the agent's suggested prompts.
	first := e.thread(ctx, e2eChannel)
	th, err := e.slack.WaitAssistant(ctx, e2eDM, first, func(th slacktest.AssistantThread) bool { return len(th.Prompts) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	want := []slacktest.Prompt{{Title: "Status", Message: "What is the status of prod?"}, {Title: "Restart", Message: "How do I restart nginx?"}}
	if !slices.Equal(th.Prompts, want) {
		t.Errorf("suggested prompts = %+v, want %+v", th.Prompts, want)
	}

	// The first message: the status shows while the agent works, the reply
	// clears it, and the thread is named after the message.
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: first, Text: "How do I restart nginx?"}))
	if m := e.reply(ctx, e2eDM, "restart nginx"); m.ThreadTS != first {
		t.Errorf("answer thread_ts = %q, want %q", m.ThreadTS, first)
	}
	th, err = e.slack.WaitAssistant(ctx, e2eDM, first, func(th slacktest.AssistantThread) bool { return th.Title != "" })
	if err != nil {
		t.Fatal(err)
	}
	if th.Title != "How do I restart nginx?" || !slices.Equal(th.Statuses, []string{DefaultAssistantStatus}) || th.Status != "" {
		t.Errorf("thread = title %q, statuses %q, status now %q; want the first message, one %q, none now", th.Title, th.Statuses, th.Status, DefaultAssistantStatus)
	}
	for _, m := range e.slack.MessageLog() {
		if strings.Contains(m.Text, "Thinking") {
			t.Errorf("a placeholder was posted in an assistant thread: %+v", m)
		}
	}

	// A second message in the thread keeps the session and the title; the
	// user now views another channel, which the agent hears once.
	e.sent(e.slack.SendAssistantThreadContextChanged(ctx, slacktest.AssistantThreadEvent{User: e2eUser, Channel: e2eDM, ThreadTS: first, ContextChannel: "C0OTHER"}))
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: first, Text: "and apache?"}))
	e.reply(ctx, e2eDM, "[turn 2]")

	// Another thread of the same DM is a conversation of its own.
	second := e.thread(ctx, "")
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: second, Text: "unrelated"}))
	if m := e.reply(ctx, e2eDM, "You said: unrelated"); m.ThreadTS != second || !strings.Contains(m.Text, "[turn 1]") {
		t.Errorf("second thread's answer = %q in thread %q, want turn 1 in %q", m.Text, m.ThreadTS, second)
	}

	got := e.agentSessions()
	wantSessions := [][]string{
		{"[Context: The user is viewing the Slack channel <#C0GENERAL>.]\n\nHow do I restart nginx?",
			"[Context: The user is viewing the Slack channel <#C0OTHER>.]\n\nand apache?"},
		{"unrelated"},
	}
	if !slices.EqualFunc(got, wantSessions, slices.Equal[[]string]) {
		t.Errorf("agent sessions = %q, want %q", got, wantSessions)
	}
	if th, _ := e.slack.Assistant(e2eDM, first); !slices.Equal(th.Titles, []string{"How do I restart nginx?"}) {
		t.Errorf("titles of the first thread = %q, want one", th.Titles)
	}
}

func TestE2EAssistantThreadGreetedOnce(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: withAssistant})
	e.assistantOn()
	ctx := waitCtx(t)
	d := e.sent(e.slack.SendAssistantThreadStarted(ctx, slacktest.AssistantThreadEvent{User: e2eUser, Channel: e2eDM}))
	e.ack(ctx, d)
	e.reply(ctx, e2eDM, "Ask me anything")
	// Slack redelivers the start (no ack seen in time): acknowledged, not greeted again.
	e.ack(ctx, e.sent(e.slack.Redeliver(ctx, d.EnvelopeID)))
	// A message after it is answered: by then the redelivery was handled.
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: d.TS, Text: "hi"}))
	e.reply(ctx, e2eDM, "You said: hi")
	greetings := 0
	for _, m := range e.slack.Messages() {
		if strings.Contains(m.Text, "Ask me anything") {
			greetings++
		}
	}
	if greetings != 1 {
		t.Errorf("%d greetings, want 1", greetings)
	}
	if n := e.slack.CallCount("assistant.threads.setSuggestedPrompts"); n != 1 {
		t.Errorf("setSuggestedPrompts called %d times, want 1", n)
	}
}

func TestE2EAssistantStatusRefusedShowsPlaceholder(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: withAssistant})
	e.assistantOn()
	ctx := waitCtx(t)
	thread := e.thread(ctx, "")
	e.slack.FailNext("assistant.threads.setStatus", 1, "missing_scope")
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: thread, Text: "hello"}))
	m := e.reply(ctx, e2eDM, "You said: hello")
	if m.Op != "chat.update" || m.ThreadTS != thread {
		t.Errorf("answer = op %s in thread %q, want the placeholder replaced in %q", m.Op, m.ThreadTS, thread)
	}
}

func TestE2EAssistantOffKeepsOneDMConversation(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	e.assistantOn()
	ctx := waitCtx(t)
	d := e.sent(e.slack.SendAssistantThreadStarted(ctx, slacktest.AssistantThreadEvent{User: e2eUser, Channel: e2eDM}))
	e.ack(ctx, d) // acknowledged, and nothing else
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: d.TS, Text: "one"}))
	e.reply(ctx, e2eDM, "You said: one")
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "two"}))
	e.reply(ctx, e2eDM, "[turn 2] You said: two")
	if n := e.slack.CallCount("assistant.threads.setSuggestedPrompts") + e.slack.CallCount("assistant.threads.setStatus"); n != 0 {
		t.Errorf("%d assistant calls with slack.assistant off", n)
	}
}

func TestE2EAssistantThreadOverHTTP(t *testing.T) {
	t.Parallel()
	const secret = "assistant-secret"
	e := startE2E(t, e2eOptions{cfg: func(c *Config) { httpMode(secret)(c); c.Assistant = true }})
	e.assistantOn()
	ctx := waitCtx(t)
	body, d, err := e.slack.AssistantThreadBody(slacktest.AssistantThreadEvent{User: e2eUser, Channel: e2eDM, ContextChannel: e2eChannel})
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := e.post(t, ctx, "application/json", body, secret, time.Now(), nil); status != 200 {
		t.Fatalf("POST assistant_thread_started = %d", status)
	}
	if m := e.reply(ctx, e2eDM, "Ask me anything"); m.ThreadTS != d.TS {
		t.Errorf("greeting thread_ts = %q, want %q", m.ThreadTS, d.TS)
	}
	if _, err := e.slack.WaitAssistant(ctx, e2eDM, d.TS, func(th slacktest.AssistantThread) bool { return len(th.Prompts) == 2 }); err != nil {
		t.Error(err)
	}
}

// TestE2EContextChangeOrderedOnSlacksClock: Slack's clock is ten seconds
// behind this machine's. A context change and the message the user sends
// after it reach the agent in that order: the change is placed by its
// event_ts, on the clock of the messages' ts. Placed by the time this
// machine received it, as on the build before this one, the change sorted
// after the message and the agent heard the message without it.
func TestE2EContextChangeOrderedOnSlacksClock(t *testing.T) {
	t.Parallel()
	behind := func() time.Time { return time.Now().Add(-10 * time.Second) }
	s, ws := newFakesOpts(t, nil, slacktest.Options{Now: behind, PostBurst: -1})
	e := startE2E(t, e2eOptions{cfg: withAssistant, slack: s, ws: ws})
	e.assistantOn()
	ctx := waitCtx(t)
	first := e.thread(ctx, e2eChannel)
	e.sent(e.slack.SendAssistantThreadContextChanged(ctx, slacktest.AssistantThreadEvent{User: e2eUser, Channel: e2eDM, ThreadTS: first, ContextChannel: "C0OTHER"}))
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: first, Text: "and apache?"}))
	e.reply(ctx, e2eDM, "and apache?")
	want := [][]string{{"[Context: The user is viewing the Slack channel <#C0OTHER>.]\n\nand apache?"}}
	if got := e.agentSessions(); !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("agent sessions = %q, want %q", got, want)
	}
}
