package discord

import (
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestFeedback: with feedback on, an agent's answer carries 👍 / 👎
// buttons; a press is deferred as an update (type 6) and acknowledged to
// its user alone by an ephemeral follow-up; the answer itself and the
// channel stay as they were; the vote is stored once per user, changeable.
func TestFeedback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) { e.core = func(c *bridge.Config) { c.Feedback = true } })
	r := e.start(t)
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	question, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(bot, "hello")})
	if err != nil {
		t.Fatal(err)
	}
	answer := e.waitBot(t, channelID, "You said: hello")
	ids := map[string]string{}
	for _, b := range answer.Buttons() {
		ids[b.Label] = b.CustomID
	}
	if !strings.HasPrefix(ids["👍"], bridge.ActionVoteUp+":") || !strings.HasPrefix(ids["👎"], bridge.ActionVoteDown+":") {
		t.Fatalf("answer buttons = %+v, want 👍 and 👎", answer.Buttons())
	}
	bob := discordgo.User{ID: "43", Username: "bob"}

	press := func(user discordgo.User, label, want string) {
		t.Helper()
		before := len(e.fake.Messages())
		sent, err := e.fake.SendInteraction(ctx, discordtest.Interaction{
			GuildID: guildID, ChannelID: channelID, User: user, MessageID: answer.ID,
			Data: discordgo.MessageComponentInteractionData{CustomID: ids[label], ComponentType: discordgo.ButtonComponent},
		})
		if err != nil {
			t.Fatal(err)
		}
		ack, err := e.fake.WaitMessage(ctx, func(m discordtest.Message) bool {
			return m.InteractionID == sent.ID && strings.Contains(m.Content, want)
		})
		if err != nil {
			t.Fatalf("press of %s by %s: no acknowledgement with %q: %v", label, user.Username, want, err)
		}
		if !ack.Ephemeral() || ack.Source != discordtest.SourceFollowup {
			t.Errorf("acknowledgement = %+v, want an ephemeral follow-up", ack)
		}
		resps := e.fake.InteractionResponses(sent.ID)
		if len(resps) != 1 || resps[0].Type != discordgo.InteractionResponseDeferredMessageUpdate || resps[0].Code != 0 {
			t.Errorf("button callbacks = %+v, want one accepted type 6", resps)
		}
		for _, m := range e.fake.Messages()[before:] {
			if m.ID != ack.ID && !m.Ephemeral() {
				t.Errorf("message %+v after a vote, want nothing public", m)
			}
		}
	}
	press(alice, "👍", "Thanks for the feedback")
	press(alice, "👍", "already")
	press(alice, "👎", "Changed")
	press(bob, "👍", "Thanks for the feedback")

	if after, _ := e.fake.Message(answer.ID); after.Content != answer.Content || len(after.Buttons()) != 2 {
		t.Errorf("answer after the votes = %+v, want it unchanged with its buttons", after)
	}
	votes, err := r.store.Votes(ctx, store.FeedbackFilter{Platform: "discord"})
	if err != nil || len(votes) != 2 {
		t.Fatalf("Votes() = %+v, %v, want 2", votes, err)
	}
	for _, v := range votes {
		want := map[string]string{alice.ID: store.VoteDown, bob.ID: store.VoteUp}[v.User]
		if v.Value != want || v.Agent != "helper" || v.Session == "" || !strings.Contains(v.Conversation, channelID) {
			t.Errorf("vote %+v, want %s for helper in channel %s", v, want, channelID)
		}
		// It says which answer it rates: the message, its link, the question, the text.
		link := "https://discord.com/channels/" + guildID + "/" + channelID + "/" + answer.ID
		if v.Message != channelID+"/"+answer.ID || v.Link != link || v.Turn != "discord/msg/"+question.ID || v.Excerpt != answer.Content {
			t.Errorf("vote traces to message %q, link %q, turn %q, excerpt %q; want %s/%s, %s, discord/msg/%s, %q",
				v.Message, v.Link, v.Turn, v.Excerpt, channelID, answer.ID, link, question.ID, answer.Content)
		}
	}
}
