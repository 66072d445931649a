package slacktest_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func TestAssistantEventsParseWithSlackGo(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{})
	app := runSocketApp(t, srv, ackAll)
	ctx := timeout(t)
	app.next(t, ctx, socketmode.EventTypeHello)

	d, err := srv.SendAssistantThreadStarted(ctx, slacktest.AssistantThreadEvent{User: "U1", Channel: "D1", ContextChannel: "C7"})
	if err != nil {
		t.Fatal(err)
	}
	evt := app.next(t, ctx, socketmode.EventTypeEventsAPI)
	started, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AssistantThreadStartedEvent)
	if !ok {
		t.Fatalf("inner event = %T, want *AssistantThreadStartedEvent", evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data)
	}
	at := started.AssistantThread
	if at.UserID != "U1" || at.ChannelID != "D1" || at.ThreadTimeStamp != d.TS || at.Context.ChannelID != "C7" || at.Context.TeamID != srv.TeamID() {
		t.Errorf("assistant_thread = %+v, want user U1 in D1, thread %s, context C7 of %s", at, d.TS, srv.TeamID())
	}
	if _, err := srv.WaitAck(ctx, d.EnvelopeID); err != nil {
		t.Fatal(err)
	}

	if _, err := srv.SendAssistantThreadContextChanged(ctx, slacktest.AssistantThreadEvent{User: "U1", Channel: "D1", ThreadTS: d.TS}); err != nil {
		t.Fatal(err)
	}
	evt = app.next(t, ctx, socketmode.EventTypeEventsAPI)
	changed, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AssistantThreadContextChangedEvent)
	if !ok || changed.AssistantThread.ThreadTimeStamp != d.TS || changed.AssistantThread.Context.ChannelID != "" {
		t.Errorf("context changed = %+v (%v), want thread %s and no channel", changed, ok, d.TS)
	}
	if th, ok := srv.Assistant("D1", d.TS); !ok || th.ContextChannel != "" || th.User != "U1" {
		t.Errorf("Assistant() = %+v, %v", th, ok)
	}
}

func TestAssistantMethodsEnforceSlacksLimits(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := newServer(t, slacktest.Options{Now: clock})
	api := newClient(t, srv, srv.BotToken())
	ctx := timeout(t)
	app := runSocketApp(t, srv, ackAll)
	app.next(t, ctx, socketmode.EventTypeHello)
	d, err := srv.SendAssistantThreadStarted(ctx, slacktest.AssistantThreadEvent{User: "U1", Channel: "D1"})
	if err != nil {
		t.Fatal(err)
	}
	thread := d.TS

	prompt := func(n int, title, msg string) []slack.AssistantThreadsPrompt {
		out := make([]slack.AssistantThreadsPrompt, n)
		for i := range out {
			out[i] = slack.AssistantThreadsPrompt{Title: title, Message: msg}
		}
		return out
	}
	promptCases := []struct {
		name    string
		prompts []slack.AssistantThreadsPrompt
		wantErr string
	}{
		{"four", prompt(4, "Status", "What is the status?"), ""},
		{"five", prompt(5, "Status", "What is the status?"), "invalid_arguments"},
		{"none", nil, "invalid_arguments"},
		{"long title", prompt(1, strings.Repeat("t", slacktest.MaxPromptTitle+1), "m"), "invalid_arguments"},
		{"long message", prompt(1, "t", strings.Repeat("m", slacktest.MaxPromptMessage+1)), "invalid_arguments"},
		{"empty message", prompt(1, "t", " "), "invalid_arguments"},
	}
	for _, tc := range promptCases {
		err := api.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{
			ChannelID: "D1", ThreadTS: thread, Title: "Try", Prompts: tc.prompts})
		if got := errCode(err); got != tc.wantErr {
			t.Errorf("setSuggestedPrompts(%s) = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	th, _ := srv.Assistant("D1", thread)
	if len(th.Prompts) != 4 || th.PromptsTitle != "Try" {
		t.Errorf("prompts = %q %+v, want the four accepted ones", th.PromptsTitle, th.Prompts)
	}

	statusCases := []struct {
		status, wantErr string
	}{
		{strings.Repeat("s", slacktest.MaxStatusLength), ""},
		{strings.Repeat("s", slacktest.MaxStatusLength+1), "invalid_arguments"},
		{"is thinking…", ""},
	}
	for _, tc := range statusCases {
		err := api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "D1", ThreadTS: thread, Status: tc.status})
		if got := errCode(err); got != tc.wantErr {
			t.Errorf("setStatus(%d characters) = %v, want %q", len(tc.status), err, tc.wantErr)
		}
	}
	for _, tc := range []struct {
		name          string
		channel, ts   string
		wantErr       string
		loadingMsgCnt int
	}{
		{"unknown channel", "D404", thread, "channel_not_found", 0},
		{"bad thread", "D1", "yesterday", "invalid_thread_ts", 0},
		{"no thread", "D1", "", "invalid_arguments", 0},
		{"eleven loading messages", "D1", thread, "invalid_arguments", 11},
	} {
		err := api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
			ChannelID: tc.channel, ThreadTS: tc.ts, Status: "x", LoadingMessages: make([]string, tc.loadingMsgCnt)})
		if got := errCode(err); got != tc.wantErr {
			t.Errorf("setStatus(%s) = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	if th, _ := srv.Assistant("D1", thread); th.Status != "is thinking…" {
		t.Errorf("status = %q, want the last one accepted", th.Status)
	}
	// The app's reply in the thread clears the status.
	if _, _, err := api.PostMessageContext(ctx, "D1", slack.MsgOptionText("answer", false), slack.MsgOptionTS(thread)); err != nil {
		t.Fatal(err)
	}
	if th, _ := srv.Assistant("D1", thread); th.Status != "" {
		t.Errorf("status after the reply = %q, want none", th.Status)
	}
	// A status no reply follows goes after two minutes.
	if err := api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "D1", ThreadTS: thread, Status: "working"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(slacktest.StatusLifetime)
	mu.Unlock()
	if th, _ := srv.Assistant("D1", thread); th.Status != "" || th.Statuses[len(th.Statuses)-1] != "working" {
		t.Errorf("status two minutes on = %q (log %q), want it expired", th.Status, th.Statuses)
	}

	for _, tc := range []struct{ title, wantErr string }{
		{"Restarting nginx", ""},
		{"", "invalid_arguments"},
		{strings.Repeat("t", slacktest.MaxThreadTitle+1), "invalid_arguments"},
	} {
		err := api.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{ChannelID: "D1", ThreadTS: thread, Title: tc.title})
		if got := errCode(err); got != tc.wantErr {
			t.Errorf("setTitle(%.20q) = %v, want %q", tc.title, err, tc.wantErr)
		}
	}
	if th, _ := srv.Assistant("D1", thread); th.Title != "Restarting nginx" {
		t.Errorf("title = %q", th.Title)
	}
}

// errCode is the Slack error code of err, "" for nil.
func errCode(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := err.(slack.SlackErrorResponse); ok {
		return e.Err
	}
	return err.Error()
}
