package slacktest_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/adapters/slack/slacktest"
)

// TestChatUpdateRateLimits: chat.update answers 429 with Retry-After past
// MaxUpdatesPerMessage rewrites of one message in UpdateWindowPerMessage, and
// past the workspace's updates per minute; both pass again once the window
// has moved on. slack-go reads the answer as *slack.RateLimitedError.
func TestChatUpdateRateLimits(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv := newServer(t, slacktest.Options{Now: clk.Now, UpdatesPerMinute: 8, Channels: []slacktest.Channel{{ID: "C1", Name: "general"}}})
	api := newClient(t, srv, srv.BotToken())
	post := func() string {
		t.Helper()
		_, ts, err := api.PostMessageContext(t.Context(), "C1", slack.MsgOptionText("first", false))
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	update := func(ts string, i int) error {
		_, _, _, err := api.UpdateMessageContext(t.Context(), "C1", ts, slack.MsgOptionText(fmt.Sprint("edit ", i), false))
		return err
	}
	limited := func(err error, wantWait time.Duration) {
		t.Helper()
		rl, ok := errors.AsType[*slack.RateLimitedError](err)
		if !ok || rl.RetryAfter != wantWait {
			t.Fatalf("chat.update = %v, want rate limited, retry after %v", err, wantWait)
		}
	}

	one := post()
	for i := range slacktest.MaxUpdatesPerMessage {
		if err := update(one, i); err != nil {
			t.Fatalf("update %d of one message = %v, want it to pass", i, err)
		}
		clk.Advance(100 * time.Millisecond)
	}
	// The window of the first update ends 4.5 s from now.
	limited(update(one, 99), 5*time.Second)
	if m, _ := srv.Message("C1", one); m.Text != fmt.Sprint("edit ", slacktest.MaxUpdatesPerMessage-1) {
		t.Errorf("text after the refused update = %q, want the last accepted one", m.Text)
	}
	clk.Advance(slacktest.UpdateWindowPerMessage)
	if err := update(one, 6); err != nil {
		t.Fatalf("update once the window moved on = %v", err)
	}

	// Workspace: 8 a minute (the option); 6 used so far, spread over other messages.
	clk.Advance(time.Second)
	for i := range 2 {
		if err := update(post(), i); err != nil {
			t.Fatalf("workspace update %d = %v", i, err)
		}
	}
	limited(update(post(), 9), 54*time.Second)
	clk.Advance(time.Minute)
	if err := update(post(), 10); err != nil {
		t.Fatalf("update a minute later = %v", err)
	}
}
