package slacktest_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// thread stores a root and n replies in C1 and returns the root's ts.
func thread(srv *slacktest.Server, n int) string {
	root := srv.AddThreadMessage(slacktest.ThreadMessage{Channel: "C1", User: "U1", Text: "root"})
	for i := 1; i <= n; i++ {
		srv.AddThreadMessage(slacktest.ThreadMessage{Channel: "C1", ThreadTS: root, User: "U2", Text: fmt.Sprintf("reply %d", i), Files: []string{"a.txt"}})
	}
	return root
}

func TestRepliesPages(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{Channels: []slacktest.Channel{{ID: "C1"}}})
	api := newClient(t, srv, srv.BotToken())
	root := thread(srv, 24)

	var texts []string
	cursor, pages := "", 0
	for {
		msgs, more, next, err := api.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root, Limit: 10, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range msgs {
			texts = append(texts, m.Text)
			if m.Timestamp != root && (len(m.Files) != 1 || m.Files[0].Name != "a.txt" || m.User != "U2" || m.ThreadTimestamp != root) {
				t.Errorf("reply %+v, want U2's with a.txt in the thread", m)
			}
		}
		if !more {
			if next != "" {
				t.Errorf("last page's next_cursor = %q, want none", next)
			}
			break
		}
		cursor = next
	}
	if pages != 3 || len(texts) != 25 || texts[0] != "root" || texts[24] != "reply 24" {
		t.Errorf("%d pages of %d messages (%q … %q), want 3 pages of 25 in order", pages, len(texts), texts[0], texts[len(texts)-1])
	}

	// latest bounds the page, exclusive unless inclusive.
	all, _, _, _ := api.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root})
	before, _, _, err := api.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root, Latest: all[5].Timestamp})
	if err != nil || len(before) != 5 || before[4].Text != "reply 4" {
		t.Errorf("replies before the 6th = %d messages, %v; want 5", len(before), err)
	}
	if _, _, _, err := api.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root, Cursor: "bogus"}); err == nil || err.Error() != "invalid_cursor" {
		t.Errorf("a bad cursor = %v, want invalid_cursor", err)
	}
	if _, _, _, err := api.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: "1.000001"}); err == nil || err.Error() != "thread_not_found" {
		t.Errorf("an unknown thread = %v, want thread_not_found", err)
	}
}

func TestRepliesRateTiers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		restricted bool
		perMinute  int
		pageMax    int
	}{
		{"tier 3", false, slacktest.RepliesPerMinute, 30},
		{"outside the Marketplace", true, slacktest.RestrictedRepliesPerMinute, slacktest.RestrictedRepliesLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := &clock{now: time.Unix(1_800_000_000, 0)}
			srv := newServer(t, slacktest.Options{Channels: []slacktest.Channel{{ID: "C1"}}, RestrictedHistory: tt.restricted, Now: clk.Now})
			api := newClient(t, srv, srv.BotToken())
			root := thread(srv, 29)
			ask := func() ([]slack.Message, error) {
				msgs, _, _, err := api.GetConversationRepliesContext(t.Context(), &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root, Limit: 100})
				return msgs, err
			}
			for i := range tt.perMinute {
				msgs, err := ask()
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if len(msgs) != tt.pageMax {
					t.Fatalf("a page of limit 100 = %d messages, want %d", len(msgs), tt.pageMax)
				}
			}
			_, err := ask()
			rl, ok := errors.AsType[*slack.RateLimitedError](err)
			if !ok || rl.RetryAfter <= 0 || rl.RetryAfter > time.Minute {
				t.Fatalf("call %d in a minute = %v, want ratelimited with Retry-After within a minute", tt.perMinute+1, err)
			}
			clk.Advance(time.Minute)
			if _, err := ask(); err != nil {
				t.Errorf("a minute later = %v, want an answer", err)
			}
		})
	}
}

func TestAgentViewEvents(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{AgentView: true})
	ctx := t.Context()
	open, err := srv.AppHomeOpenedBody(slacktest.AgentEvent{User: "U1", Channel: "D1", Entities: []slacktest.ContextEntity{
		{Type: slacktest.EntityChannel, Value: "C1"}, {Type: slacktest.EntityMessage, Channel: "C2", MessageTS: "1.000002"}}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := slackevents.ParseEvent(open, slackevents.OptionNoVerifyToken())
	if err != nil {
		t.Fatal(err)
	}
	home, ok := ev.InnerEvent.Data.(*slackevents.AppHomeOpenedEvent)
	if !ok || home.Tab != "messages" || home.Channel != "D1" || home.User != "U1" || home.Context == nil || len(home.Context.Entities) != 2 ||
		home.Context.Entities[0].Value != "C1" || home.Context.Entities[1].Message == nil || home.Context.Entities[1].Message.ChannelID != "C2" {
		t.Errorf("app_home_opened = %+v, want the messages tab of D1 with its two entities", ev.InnerEvent.Data)
	}
	if _, err := srv.SendAppContextChanged(ctx, slacktest.AgentEvent{Channel: "D1"}); err == nil {
		t.Error("app_context_changed without a user was sent")
	}

	// An agent's prompts belong to the DM: a thread_ts is ignored, as Slack documents.
	api := newClient(t, srv, srv.BotToken())
	params := slack.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: "D1", ThreadTS: "1.000001"}
	params.AddPrompt("Hi", "Say hi")
	if err := api.SetAssistantThreadsSuggestedPromptsContext(ctx, params); err != nil {
		t.Fatal(err)
	}
	if th, ok := srv.Assistant("D1", "1.000001"); ok && len(th.Prompts) > 0 {
		t.Errorf("prompts set on a thread of an agent_view app: %+v", th)
	}
	params.ThreadTS = ""
	if err := api.SetAssistantThreadsSuggestedPromptsContext(ctx, params); err != nil {
		t.Fatal(err)
	}
	if th, _ := srv.Assistant("D1", ""); len(th.Prompts) != 1 || th.Prompts[0].Title != "Hi" {
		t.Errorf("DM prompts = %+v, want one", th.Prompts)
	}
}
