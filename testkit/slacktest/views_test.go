package slacktest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
}

// modal is a valid view with a select of n options and a text input.
func modal(n int) slack.ModalViewRequest {
	opts := make([]*slack.OptionBlockObject, n)
	for i := range opts {
		opts[i] = slack.NewOptionBlockObject(fmt.Sprint("v", i), plain(fmt.Sprint("option ", i)), nil)
	}
	return slack.ModalViewRequest{
		Type: slack.VTModal, Title: plain("Run a flow"), Submit: plain("Run"), Close: plain("Cancel"), CallbackID: "form",
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewInputBlock("pick", plain("Pick"), nil, slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, plain("Choose"), "pick", opts...)),
			slack.NewInputBlock("text", plain("Text"), plain("a hint"), slack.NewPlainTextInputBlockElement(nil, "value")),
		}},
	}
}

func TestViewsOpenTriggers(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	)
	srv := newServer(t, slacktest.Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	api := newClient(t, srv, srv.BotToken())
	app := runSocketApp(t, srv, ackAll)
	ctx := timeout(t)
	app.next(t, ctx, socketmode.EventTypeHello)
	cmd := func() string {
		d, err := srv.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", UserID: "U1", ChannelID: "C1"})
		if err != nil {
			t.Fatal(err)
		}
		return d.TriggerID
	}

	fresh := cmd()
	res, err := api.OpenViewContext(ctx, fresh, modal(3))
	if err != nil {
		t.Fatalf("views.open with a fresh trigger = %v", err)
	}
	if v, ok := srv.Views()[res.ID]; !ok || v.User != "U1" || v.Hash != res.Hash || v.CallbackID != "form" {
		t.Errorf("Views()[%s] = %+v, %v, want U1's view with the answer's hash", res.ID, v, ok)
	}
	if _, err := api.OpenViewContext(ctx, fresh, modal(3)); errCode(err) != "exchanged_trigger_id" {
		t.Errorf("views.open with a used trigger = %v, want exchanged_trigger_id", err)
	}
	if _, err := api.OpenViewContext(ctx, "123.456.abc", modal(3)); errCode(err) != "invalid_trigger_id" {
		t.Errorf("views.open with an unknown trigger = %v, want invalid_trigger_id", err)
	}
	late := cmd()
	mu.Lock()
	now = now.Add(slacktest.TriggerLifetime + time.Millisecond)
	mu.Unlock()
	if _, err := api.OpenViewContext(ctx, late, modal(3)); errCode(err) != "expired_trigger_id" {
		t.Errorf("views.open with a trigger older than 3 s = %v, want expired_trigger_id", err)
	}

	// views.update respects the hash.
	upd, err := api.UpdateViewContext(ctx, modal(4), "", res.Hash, res.ID)
	if err != nil {
		t.Fatalf("views.update with the current hash = %v", err)
	}
	if upd.Hash == res.Hash {
		t.Error("views.update kept the hash")
	}
	if _, err := api.UpdateViewContext(ctx, modal(4), "", res.Hash, res.ID); errCode(err) != "hash_conflict" {
		t.Errorf("views.update with a stale hash = %v, want hash_conflict", err)
	}
	if _, err := api.UpdateViewContext(ctx, modal(4), "", "", "V404"); errCode(err) != "not_found" {
		t.Errorf("views.update of an unknown view = %v, want not_found", err)
	}
}

func TestViewsOpenEnforcesBlockKitLimits(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{})
	api := newClient(t, srv, srv.BotToken())
	app := runSocketApp(t, srv, ackAll)
	ctx := timeout(t)
	app.next(t, ctx, socketmode.EventTypeHello)
	long := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		name string
		edit func(*slack.ModalViewRequest)
		want string // in the error's details; "" for accepted
	}{
		{"valid", func(*slack.ModalViewRequest) {}, ""},
		{"title 25", func(v *slack.ModalViewRequest) { v.Title = plain(long(25)) }, "/view/title/text"},
		{"submit 25", func(v *slack.ModalViewRequest) { v.Submit = plain(long(25)) }, "/view/submit/text"},
		{"no submit", func(v *slack.ModalViewRequest) { v.Submit = nil }, "/view/submit"},
		{"101 blocks", func(v *slack.ModalViewRequest) {
			for range 99 {
				v.Blocks.BlockSet = append(v.Blocks.BlockSet, slack.NewDividerBlock())
			}
		}, "/view/blocks"},
		{"101 options", func(v *slack.ModalViewRequest) { *v = modal(101) }, "/view/blocks/0/element/options"},
		{"option text 76", func(v *slack.ModalViewRequest) {
			v.Blocks.BlockSet[0].(*slack.InputBlock).Element.(*slack.SelectBlockElement).Options[0].Text = plain(long(76))
		}, "/view/blocks/0/element/options/0/text/text"},
		{"label 2001", func(v *slack.ModalViewRequest) { v.Blocks.BlockSet[1].(*slack.InputBlock).Label = plain(long(2001)) }, "/view/blocks/1/label/text"},
		{"hint 2001", func(v *slack.ModalViewRequest) { v.Blocks.BlockSet[1].(*slack.InputBlock).Hint = plain(long(2001)) }, "/view/blocks/1/hint/text"},
		{"metadata 3001", func(v *slack.ModalViewRequest) { v.PrivateMetadata = long(3001) }, "/view/private_metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := srv.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", UserID: "U1", ChannelID: "C1"})
			if err != nil {
				t.Fatal(err)
			}
			v := modal(3)
			tc.edit(&v)
			_, err = api.OpenViewContext(ctx, d.TriggerID, v)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("views.open = %v, want it accepted", err)
			case tc.want != "" && (errCode(err) != "invalid_arguments" || !strings.Contains(fmt.Sprint(err.(slack.SlackErrorResponse).ResponseMetadata.Messages), "[json-pointer:"+tc.want+"]")):
				t.Errorf("views.open = %v (%+v), want invalid_arguments at %s", err, err, tc.want)
			}
		})
	}
}

func TestViewSubmissionAndShortcutParseWithSlackGo(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{})
	api := newClient(t, srv, srv.BotToken())
	errorsAck := func(evt socketmode.Event, c *socketmode.Client) {
		if evt.Request == nil {
			return
		}
		if cb, ok := evt.Data.(slack.InteractionCallback); ok && cb.Type == slack.InteractionTypeViewSubmission {
			_ = c.Ack(*evt.Request, slack.NewErrorsViewSubmissionResponse(map[string]string{"text": "Not like that."}))
			return
		}
		ackAll(evt, c)
	}
	app := runSocketApp(t, srv, errorsAck)
	ctx := timeout(t)
	app.next(t, ctx, socketmode.EventTypeHello)

	d, err := srv.SendMessageShortcut(ctx, slacktest.MessageShortcut{CallbackID: "run_flow", UserID: "U1", ChannelID: "C1", MessageTS: "1700000000.000200", ThreadTS: "1700000000.000100"})
	if err != nil {
		t.Fatal(err)
	}
	cb := app.next(t, ctx, socketmode.EventTypeInteractive).Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeMessageAction || cb.CallbackID != "run_flow" || cb.Channel.ID != "C1" ||
		cb.Message.ThreadTimestamp != "1700000000.000100" || cb.TriggerID != d.TriggerID || cb.ResponseURL == "" {
		t.Errorf("message_action = %+v", cb)
	}
	res, err := api.OpenViewContext(ctx, cb.TriggerID, modal(3))
	if err != nil {
		t.Fatal(err)
	}

	if _, err := srv.SelectInView(ctx, res.ID, "U1", "pick", "pick", "v2"); err != nil {
		t.Fatal(err)
	}
	cb = app.next(t, ctx, socketmode.EventTypeInteractive).Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeBlockActions || cb.View.ID != res.ID || cb.View.Hash != res.Hash || cb.Container.Type != "view" ||
		len(cb.ActionCallback.BlockActions) != 1 || cb.ActionCallback.BlockActions[0].SelectedOption.Value != "v2" {
		t.Errorf("block_actions in the view = %+v", cb)
	}

	sub, err := srv.SubmitView(ctx, slacktest.ViewSubmission{ViewID: res.ID, UserID: "U1",
		Values: map[string]map[string]string{"pick": {"pick": "v1"}, "text": {"value": "hello"}}})
	if err != nil {
		t.Fatal(err)
	}
	cb = app.next(t, ctx, socketmode.EventTypeInteractive).Data.(slack.InteractionCallback)
	vals := cb.View.State.Values
	if cb.Type != slack.InteractionTypeViewSubmission || cb.View.CallbackID != "form" ||
		vals["pick"]["pick"].SelectedOption.Value != "v1" || vals["text"]["value"].Value != "hello" {
		t.Errorf("view_submission = %+v, state %+v", cb, vals)
	}
	if _, err := srv.WaitAck(ctx, sub.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	if v := srv.Views()[res.ID]; v.Closed || v.Errors["text"] != "Not like that." {
		t.Errorf("view after an errors ack = %+v, want it open with the error", v)
	}
}
