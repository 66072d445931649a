package discord

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// replyChain posts four messages, each replying to the one before (the
// bot's own among them, a file and mentions in them), none addressed to
// the bot; it returns the last one's ID.
func replyChain(t *testing.T, e *env) string {
	t.Helper()
	ctx := testCtx(t)
	bob := discordgo.User{ID: "43", Username: "bob"}
	carol := discordgo.User{ID: "44", Username: "carol", GlobalName: "Carol"}
	prev := ""
	for _, mc := range []discordtest.MessageCreate{
		{Author: bob, Content: "Is the deploy stuck?"},
		{Author: carol, Content: "Looks like it, logs attached", Files: []discordtest.File{{Name: "deploy.log", ContentType: "text/plain", Content: []byte("x")}}},
		{Author: e.fake.BotUser(), Content: "The deploy waits on a lock."},
		{Author: bob, Content: "<@44> can you check? @everyone"},
	} {
		mc.GuildID, mc.ChannelID = guildID, channelID
		if prev != "" {
			mc.Reference = &discordgo.MessageReference{MessageID: prev, ChannelID: channelID, GuildID: guildID}
		}
		m, err := e.fake.SendMessage(ctx, mc)
		if err != nil {
			t.Fatal(err)
		}
		prev = m.ID
	}
	return prev
}

func TestReplyChainReachesTheAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) {
		e.cfg.MessageContentIntent = true
		e.core = func(c *bridge.Config) { c.ThreadContext = bridge.ThreadContext{Messages: 3, Chars: 4000} }
	})
	e.start(t)
	ctx := testCtx(t)
	last := replyChain(t, e)
	bot := e.fake.BotUser().ID
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice,
		Content: mention(bot, "what now?"), Reference: &discordgo.MessageReference{MessageID: last, ChannelID: channelID, GuildID: guildID}}); err != nil {
		t.Fatal(err)
	}
	reply := waitBotAnywhere(t, e, "what now?")
	checkNoPings(t, reply)

	want := "[Earlier in this thread, oldest first:]\n" +
		"- Carol: Looks like it, logs attached [files: deploy.log]\n" +
		"- " + e.fake.BotUser().Username + " (you, an earlier answer): The deploy waits on a lock.\n" +
		"- bob: @Carol can you check? @\u2060everyone\n" +
		"[End of the earlier messages. The new message follows.]\n\nwhat now?"
	sessions := e.ws.Sessions("agent-1")
	if len(sessions) != 1 {
		t.Fatalf("%d sessions, want 1", len(sessions))
	}
	if got := e.ws.Messages(sessions[0]); len(got) != 1 || got[0] != want {
		t.Errorf("agent heard %q\nwant %q", got, want)
	}
	// Three messages asked, three read: one request each, none past.
	n := 0
	for _, r := range e.fake.Requests() {
		if r.Route == discordtest.RouteGetMessage {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d GET message requests, want 3", n)
	}
}

func TestReplyChainUnreadAnswersWithoutIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) {
		e.core = func(c *bridge.Config) { c.ThreadContext = bridge.ThreadContext{Messages: 5} }
	})
	e.start(t)
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	// A reply to a message the bot cannot read (deleted, or another channel's).
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice,
		Content: mention(bot, "still there?"), Reference: &discordgo.MessageReference{MessageID: "999999", ChannelID: channelID, GuildID: guildID}}); err != nil {
		t.Fatal(err)
	}
	waitBotAnywhere(t, e, "You said: still there?")
	sessions := e.ws.Sessions("agent-1")
	if got := e.ws.Messages(sessions[0]); !slices.Equal(got, []string{"still there?"}) {
		t.Errorf("agent heard %q, want the message alone", got)
	}
	if !slices.ContainsFunc(e.fake.Requests(), func(r discordtest.Request) bool {
		return r.Route == discordtest.RouteGetMessage && r.Status == http.StatusNotFound
	}) {
		t.Error("the replied-to message was not asked for")
	}
}

// waitBotAnywhere waits for a bot message containing text in any channel
// (a mention's answer goes to the thread it starts).
func waitBotAnywhere(t *testing.T, e *env, text string) discordtest.Message {
	t.Helper()
	m, err := e.fake.WaitMessage(testCtx(t), func(m discordtest.Message) bool {
		return m.Author.ID == e.fake.BotUser().ID && strings.Contains(m.Content, text)
	})
	if err != nil {
		t.Fatalf("waiting for a bot message with %q: %v", text, err)
	}
	return m
}

func TestReplyChainWithoutContentIntent(t *testing.T) {
	t.Parallel()
	// Without the message content intent Discord shows others' messages
	// blank over REST too: the agent hears only the bot's own.
	e := newEnv(t, func(e *env) {
		e.core = func(c *bridge.Config) { c.ThreadContext = bridge.ThreadContext{Messages: 5, Chars: 4000} }
	})
	e.start(t)
	ctx := testCtx(t)
	last := replyChain(t, e)
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice,
		Content: mention(e.fake.BotUser().ID, "what now?"), Reference: &discordgo.MessageReference{MessageID: last, ChannelID: channelID, GuildID: guildID}}); err != nil {
		t.Fatal(err)
	}
	waitBotAnywhere(t, e, "what now?")
	want := "[Earlier in this thread, oldest first:]\n" +
		"- " + e.fake.BotUser().Username + " (you, an earlier answer): The deploy waits on a lock.\n" +
		"[End of the earlier messages. The new message follows.]\n\nwhat now?"
	sessions := e.ws.Sessions("agent-1")
	if got := e.ws.Messages(sessions[0]); len(got) != 1 || got[0] != want {
		t.Errorf("agent heard %q\nwant %q", got, want)
	}
}

func TestThreadHistoryReachesTheAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) {
		e.cfg.MessageContentIntent = true
		e.core = func(c *bridge.Config) { c.ThreadContext = bridge.ThreadContext{Messages: 2, Chars: 4000} }
	})
	e.start(t)
	ctx := testCtx(t)
	bob := discordgo.User{ID: "43", Username: "bob"}
	th, err := e.fake.SendThreadCreate(ctx, discordtest.Thread{GuildID: guildID, ParentID: channelID, Name: "502s", OwnerID: bob.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"anyone seen the 502s?", "since 10:00", "only on web2"} {
		if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: th.ID, Author: bob, Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: th.ID, Author: alice, Content: mention(e.fake.BotUser().ID, "ideas?")}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, th.ID, "ideas?")
	want := "[Earlier in this thread, oldest first:]\n- bob: since 10:00\n- bob: only on web2\n" +
		"[End of the earlier messages. The new message follows.]\n\nideas?"
	sessions := e.ws.Sessions("agent-1")
	if len(sessions) != 1 {
		t.Fatalf("%d sessions, want 1", len(sessions))
	}
	if got := e.ws.Messages(sessions[0]); len(got) != 1 || got[0] != want {
		t.Errorf("agent heard %q\nwant %q", got, want)
	}
}
