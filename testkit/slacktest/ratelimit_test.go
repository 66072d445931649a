package slacktest_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
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

// TestChatPostMessageRateLimit: chat.postMessage takes DefaultPostBurst
// messages into one channel at once, then one a second (PostsPerSecond),
// answering 429 with the seconds until the next would pass in Retry-After;
// each channel has its own allowance, chat.postEphemeral is not under it,
// and PostBurst changes or lifts it.
func TestChatPostMessageRateLimit(t *testing.T) {
	channels := []slacktest.Channel{{ID: "C1", Name: "general"}, {ID: "C2", Name: "random"}}
	post := func(t *testing.T, api *slack.Client, ch string) error {
		t.Helper()
		_, _, err := api.PostMessageContext(t.Context(), ch, slack.MsgOptionText("hi", false))
		return err
	}
	limited := func(t *testing.T, err error, wantWait time.Duration) {
		t.Helper()
		rl, ok := errors.AsType[*slack.RateLimitedError](err)
		if !ok || rl.RetryAfter != wantWait {
			t.Fatalf("chat.postMessage = %v, want rate limited, retry after %v", err, wantWait)
		}
	}
	t.Run("default", func(t *testing.T) {
		clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		srv := newServer(t, slacktest.Options{Now: clk.Now, Channels: channels})
		api := newClient(t, srv, srv.BotToken())
		for i := range slacktest.DefaultPostBurst {
			if err := post(t, api, "C1"); err != nil {
				t.Fatalf("post %d of a burst = %v", i, err)
			}
		}
		limited(t, post(t, api, "C1"), time.Second)
		if err := post(t, api, "C2"); err != nil {
			t.Fatalf("post into another channel = %v, want its own allowance", err)
		}
		if _, err := api.PostEphemeralContext(t.Context(), "C1", "U1", slack.MsgOptionText("only you", false)); err != nil {
			t.Fatalf("chat.postEphemeral = %v, want it outside chat.postMessage's limit", err)
		}
		// 400 ms on, the next message is 600 ms away: Slack rounds up.
		clk.Advance(400 * time.Millisecond)
		limited(t, post(t, api, "C1"), time.Second)
		clk.Advance(600 * time.Millisecond)
		if err := post(t, api, "C1"); err != nil {
			t.Fatalf("post once Retry-After passed = %v", err)
		}
		limited(t, post(t, api, "C1"), time.Second)
		// Quiet for the burst's seconds, the whole burst passes again.
		clk.Advance(slacktest.DefaultPostBurst * time.Second)
		for i := range slacktest.DefaultPostBurst {
			if err := post(t, api, "C1"); err != nil {
				t.Fatalf("post %d of a burst after a pause = %v", i, err)
			}
		}
		limited(t, post(t, api, "C1"), time.Second)
		var refused int
		for _, c := range srv.Calls() {
			if c.Method == "chat.postMessage" && c.Status == http.StatusTooManyRequests {
				refused++
				if c.Error != "ratelimited" {
					t.Errorf("429 answer's error = %q, want ratelimited", c.Error)
				}
			}
		}
		if n := len(srv.Messages()); refused != 4 || n != 2*slacktest.DefaultPostBurst+3 {
			t.Errorf("%d refused, %d messages; want 4 refused and none of them kept", refused, n)
		}
	})
	t.Run("burst 5", func(t *testing.T) {
		clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		srv := newServer(t, slacktest.Options{Now: clk.Now, Channels: channels, PostBurst: 5})
		api := newClient(t, srv, srv.BotToken())
		for i := range 5 {
			if err := post(t, api, "C1"); err != nil {
				t.Fatalf("post %d of a burst of 5 = %v", i, err)
			}
		}
		// Five behind: the next passes in a second.
		limited(t, post(t, api, "C1"), time.Second)
	})
	t.Run("no limit", func(t *testing.T) {
		srv := newServer(t, slacktest.Options{Now: (&clock{now: time.Unix(1e9, 0)}).Now, Channels: channels, PostBurst: -1})
		api := newClient(t, srv, srv.BotToken())
		for i := range 50 {
			if err := post(t, api, "C1"); err != nil {
				t.Fatalf("post %d with no limit = %v", i, err)
			}
		}
	})
}

// TestUnstartedServerInBubble: a server made by New serves slack-go in
// memory, so inside a synctest bubble; there its clock is the bubble's, and
// chat.postMessage's Retry-After passes with the bubble's time.
func TestUnstartedServerInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := slacktest.New(slacktest.Options{Channels: []slacktest.Channel{{ID: "C1", Name: "general"}}})
		defer srv.Close()
		if srv.URL() != slacktest.UnstartedURL {
			t.Errorf("URL() = %q before Start, want %q", srv.URL(), slacktest.UnstartedURL)
		}
		api := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionHTTPClient(srv.Client()))
		post := func() error {
			_, _, err := api.PostMessageContext(t.Context(), "C1", slack.MsgOptionText("hi", false))
			return err
		}
		for range slacktest.DefaultPostBurst {
			if err := post(); err != nil {
				t.Fatal(err)
			}
		}
		err := post()
		rl, ok := errors.AsType[*slack.RateLimitedError](err)
		if !ok {
			t.Fatalf("post past the burst = %v, want rate limited", err)
		}
		time.Sleep(rl.RetryAfter)
		if err := post(); err != nil {
			t.Fatalf("post after Retry-After = %v", err)
		}
		srv.Close()
		if err := post(); !errors.Is(err, slacktest.ErrClosed) {
			t.Errorf("post after Close = %v, want ErrClosed", err)
		}
	})
}
