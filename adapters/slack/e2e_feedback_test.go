package slack

import (
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// TestE2EFeedback: with feedback on, an agent's answer in a thread carries
// 👍 / 👎 buttons; a press is acknowledged to its user alone (ephemeral,
// nothing in the channel), stored once per user and reply, and changed by
// the other button.
func TestE2EFeedback(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{core: func(c *bridge.Config) { c.Feedback = true }})
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "<@" + e.slack.BotUserID() + "> hello"})))
	answer := e.reply(ctx, e2eChannel, "You said: hello")
	buttons := map[string]slacktest.Button{}
	for _, b := range answer.Buttons() {
		buttons[b.ActionID] = b
	}
	if buttons[bridge.ActionVoteUp].Label != "👍" || buttons[bridge.ActionVoteDown].Label != "👎" {
		t.Fatalf("answer buttons = %+v, want 👍 and 👎", answer.Buttons())
	}
	posted := len(e.slack.MessageLog())

	press := func(actionID, user, want string) {
		t.Helper()
		d := e.sent(e.slack.PressButton(ctx, answer, actionID, user))
		e.ack(ctx, d)
		p := e.response(ctx, d.ResponseURL, want)
		if p.ResponseType != "ephemeral" || p.ReplaceOriginal {
			t.Errorf("acknowledgement of %s = {type %q, replace %v}, want a new ephemeral message", actionID, p.ResponseType, p.ReplaceOriginal)
		}
	}
	press(bridge.ActionVoteUp, e2eUser, "Thanks for the feedback")
	press(bridge.ActionVoteUp, e2eUser, "already")
	press(bridge.ActionVoteDown, e2eUser, "Changed your rating of this answer to 👎")
	press(bridge.ActionVoteUp, "U0BOB", "Thanks for the feedback")

	votes, err := e.core.store.Votes(ctx, store.FeedbackFilter{})
	if err != nil || len(votes) != 2 {
		t.Fatalf("Votes() = %+v, %v, want 2", votes, err)
	}
	for _, v := range votes {
		want := map[string]string{e2eUser: store.VoteDown, "U0BOB": store.VoteUp}[v.User]
		if v.Value != want || v.Agent != "helper" || v.Platform != "slack" || v.Session == "" ||
			!strings.HasPrefix(v.Conversation, "slack/") || !strings.Contains(v.Conversation, e2eChannel) {
			t.Errorf("vote %+v, want %s by %s for helper in a conversation of %s", v, want, v.User, e2eChannel)
		}
		// It says which answer it rates: the message, its permalink (a
		// thread reply's, with the thread), the question, the text.
		link := "https://" + slacktest.DefaultTeamName + ".slack.com/archives/" + e2eChannel + "/p" + strings.ReplaceAll(answer.TS, ".", "") +
			"?thread_ts=" + answer.ThreadTS + "&cid=" + e2eChannel
		if v.Message != e2eChannel+"/"+answer.TS || v.Link != link || v.Turn != "slack/msg/"+e2eChannel+"/"+answer.ThreadTS ||
			v.Excerpt != answer.Text {
			t.Errorf("vote traces to message %q, link %q, turn %q, excerpt %q; want %s/%s, %s, the mention and the answer",
				v.Message, v.Link, v.Turn, v.Excerpt, e2eChannel, answer.TS, link)
		}
	}
	// The acknowledgements went through response_urls only: no message was
	// posted or changed in the channel.
	for _, m := range e.slack.MessageLog()[posted:] {
		if !m.Ephemeral {
			t.Errorf("message %+v after the presses, want none in the channel", m)
		}
	}
}
