package slacktest_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// clock is an injectable Options.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestResponseURLLimits(t *testing.T) {
	tests := []struct {
		name    string
		posts   int
		advance time.Duration
		want    string
	}{
		{name: "fifth use", posts: 5},
		{name: "sixth use", posts: 6, want: "used_url"},
		{name: "within 30 minutes", posts: 1, advance: 30 * time.Minute},
		{name: "after 30 minutes", posts: 1, advance: 30*time.Minute + time.Second, want: "expired_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
			srv := newServer(t, slacktest.Options{Now: clk.Now})
			u := srv.NewResponseURL("C1", "U1")
			clk.Advance(tt.advance)
			var err error
			for i := range tt.posts {
				err = slack.PostWebhookContext(t.Context(), u, &slack.WebhookMessage{Text: "result", ResponseType: slack.ResponseTypeEphemeral})
				if i < tt.posts-1 && err != nil {
					t.Fatalf("PostWebhook() #%d error = %v", i+1, err)
				}
			}
			posts := srv.ResponseURLPosts()
			last := posts[len(posts)-1]
			if tt.want == "" {
				if err != nil || last.Error != "" {
					t.Fatalf("PostWebhook() error = %v, post %+v, want accepted", err, last)
				}
				return
			}
			sce, ok := errors.AsType[slack.StatusCodeError](err)
			if !ok || sce.Code != http.StatusNotFound || last.Error != tt.want {
				t.Fatalf("PostWebhook() error = %#v, post error %q, want 404 %s", err, last.Error, tt.want)
			}
		})
	}
}

func TestResponseURLMessages(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	api := newClient(t, srv, srv.BotToken())
	ctx := t.Context()
	u := srv.NewResponseURL("C1", "U1")

	// A slash command's response_url: ephemeral by default, replace_original
	// then acts on the last message it posted.
	if _, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(u, slack.ResponseTypeEphemeral), slack.MsgOptionText("Running…", false)); err != nil {
		t.Fatalf("PostMessage(response_url) error = %v", err)
	}
	eph, err := srv.WaitMessage(ctx, func(m slacktest.Message) bool { return m.Via == "response_url" })
	if err != nil {
		t.Fatal(err)
	}
	if !eph.Ephemeral || eph.User != "U1" || eph.Channel != "C1" || eph.Text != "Running…" || eph.ResponseType != "ephemeral" {
		t.Errorf("ephemeral = %+v", eph)
	}
	if _, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionReplaceOriginal(u), slack.MsgOptionText("Done", false)); err != nil {
		t.Fatalf("PostMessage(replace_original) error = %v", err)
	}
	if m, _ := srv.Message("C1", eph.TS); m.Text != "Done" || m.Edits != 1 {
		t.Errorf("after replace_original = %+v", m)
	}
	if err := slack.PostWebhookContext(ctx, u, &slack.WebhookMessage{Text: "Shared", ResponseType: slack.ResponseTypeInChannel}); err != nil {
		t.Fatalf("PostWebhook(in_channel) error = %v", err)
	}
	pub, err := srv.WaitMessage(ctx, func(m slacktest.Message) bool { return m.Text == "Shared" })
	if err != nil {
		t.Fatal(err)
	}
	if pub.Ephemeral || pub.User != "" {
		t.Errorf("in_channel message = %+v, want public", pub)
	}
	if err := slack.PostWebhookContext(ctx, u, &slack.WebhookMessage{DeleteOriginal: true}); err != nil {
		t.Fatalf("PostWebhook(delete_original) error = %v", err)
	}
	if m, _ := srv.Message("C1", pub.TS); !m.Deleted {
		t.Errorf("after delete_original = %+v, want deleted", m)
	}
	if left := srv.ResponseURLUsesLeft(u); left != 1 {
		t.Errorf("ResponseURLUsesLeft() = %d, want 1", left)
	}

	// Rejected content does not use the URL up.
	err = slack.PostWebhookContext(ctx, u, &slack.WebhookMessage{})
	if sce, ok := errors.AsType[slack.StatusCodeError](err); !ok || sce.Code != http.StatusBadRequest {
		t.Errorf("PostWebhook(empty) error = %#v, want 400", err)
	}
	p, err := srv.WaitResponse(ctx, func(p slacktest.ResponsePost) bool { return p.Error != "" })
	if err != nil || p.Error != "no_text" {
		t.Errorf("WaitResponse(rejected) = %+v, %v, want no_text", p, err)
	}
	if left := srv.ResponseURLUsesLeft(u); left != 1 {
		t.Errorf("ResponseURLUsesLeft() after a rejected post = %d, want 1", left)
	}
}

func TestPostEphemeral(t *testing.T) {
	srv := newServer(t, slacktest.Options{Channels: []slacktest.Channel{{ID: "C1"}}})
	api := newClient(t, srv, srv.BotToken())
	ts, err := api.PostEphemeralContext(t.Context(), "C1", "U1", slack.MsgOptionText("only you", false))
	if err != nil {
		t.Fatalf("PostEphemeral() error = %v", err)
	}
	m, ok := srv.Message("C1", ts)
	if !ok || !m.Ephemeral || m.User != "U1" || m.Text != "only you" {
		t.Errorf("Message() = %+v, %v", m, ok)
	}
	// Ephemeral messages cannot be changed through chat.update.
	if _, _, _, err := api.UpdateMessageContext(t.Context(), "C1", ts, slack.MsgOptionText("x", false)); err == nil || err.Error() != "message_not_found" {
		t.Errorf("UpdateMessage(ephemeral) error = %v, want message_not_found", err)
	}
}

// TestShareFlow plays the slash command → ephemeral result → Share button →
// public post + ephemeral deleted sequence with a real socketmode client.
func TestShareFlow(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	api := newClient(t, srv, srv.BotToken())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	app := runSocketApp(t, srv, func(evt socketmode.Event, c *socketmode.Client) {
		switch data := evt.Data.(type) {
		case slack.SlashCommand:
			_ = c.Ack(*evt.Request, map[string]any{"response_type": "ephemeral", "text": "Running healthcheck…"})
			wg.Go(func() {
				btn := slack.NewButtonBlockElement("share", "result-1", slack.NewTextBlockObject(slack.PlainTextType, "Share with channel", false, false))
				_, _, _ = api.PostMessage("", slack.MsgOptionResponseURL(data.ResponseURL, slack.ResponseTypeEphemeral),
					slack.MsgOptionText("web1 ok", false),
					slack.MsgOptionBlocks(section("web1 ok"), slack.NewActionBlock("share_actions", btn)))
			})
		case slack.InteractionCallback:
			_ = c.Ack(*evt.Request)
			wg.Go(func() {
				_ = slack.PostWebhook(data.ResponseURL, &slack.WebhookMessage{ResponseType: slack.ResponseTypeInChannel, Text: "<@" + data.User.ID + "> shared: web1 ok"})
				_ = slack.PostWebhook(data.ResponseURL, &slack.WebhookMessage{DeleteOriginal: true})
			})
		}
	})
	ctx := timeout(t)

	cmd, err := srv.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=web1", UserID: "U1", ChannelID: "C1"})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := srv.WaitAck(ctx, cmd.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ack.Payload), "Running healthcheck") {
		t.Errorf("ack payload = %s", ack.Payload)
	}
	evt := app.next(t, ctx, socketmode.EventTypeSlashCommand)
	if sc := evt.Data.(slack.SlashCommand); sc.Command != "/flow" || sc.Text != "healthcheck host=web1" || sc.ResponseURL != cmd.ResponseURL || !evt.Request.AcceptsResponsePayload {
		t.Errorf("slash command = %+v", sc)
	}
	result, err := srv.WaitMessage(ctx, func(m slacktest.Message) bool { return m.Via == "response_url" && len(m.Buttons()) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if !result.Ephemeral || result.User != "U1" {
		t.Errorf("result = %+v, want ephemeral to U1", result)
	}
	press, err := srv.PressButton(ctx, result, "share", "U1")
	if err != nil {
		t.Fatal(err)
	}
	evt = app.next(t, ctx, socketmode.EventTypeInteractive)
	cb := evt.Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeBlockActions || cb.ActionCallback.BlockActions[0].ActionID != "share" ||
		cb.ActionCallback.BlockActions[0].Value != "result-1" || !cb.Container.IsEphemeral || cb.Container.MessageTs != result.TS ||
		cb.ResponseURL != press.ResponseURL || cb.User.ID != "U1" || cb.Channel.ID != "C1" {
		t.Errorf("block action = %+v", cb)
	}
	shared, err := srv.WaitMessage(ctx, func(m slacktest.Message) bool { return !m.Ephemeral && strings.Contains(m.Text, "shared") })
	if err != nil {
		t.Fatal(err)
	}
	gone, err := srv.WaitMessage(ctx, func(m slacktest.Message) bool { return m.TS == result.TS && m.Deleted })
	if err != nil {
		t.Fatal(err)
	}
	if gone.Seq < shared.Seq {
		t.Errorf("ephemeral deleted (seq %d) before the public post (seq %d)", gone.Seq, shared.Seq)
	}
	// The ack frame and the first response_url post race, as with real Slack.
	vias := map[string]int{}
	for _, m := range srv.Messages() {
		vias[m.Via]++
	}
	if vias["ack"] != 1 || vias["response_url"] != 2 || len(vias) != 2 {
		t.Errorf("Messages() created via %v, want 1 ack and 2 response_url", vias)
	}
}
