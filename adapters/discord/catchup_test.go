package discord

import (
	"errors"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/adapters/discord/discordtest"
	"github.com/flowbridge/flowbridge/postgres/pgtest"
)

// TestCatchUpAfterDowntime: messages posted in a guild channel and a DM
// the bridge was serving, while no process was connected, are read from
// the channels' history when the next process identifies, and answered
// once each; what was answered before is not answered again, nor is
// anything when a later session catches up once more. (Three processes on
// PostgreSQL, each stop waiting out discordgo's second for the close
// handshake: about 3 s.)
func TestCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) { e.dsn = pgtest.Schema(t) })
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	r := e.start(t)
	send := func(channel, guild, text string) {
		t.Helper()
		if guild != "" {
			text = mention(bot, text)
		}
		if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guild, ChannelID: channel, Author: alice, Content: text}); err != nil && !errors.Is(err, discordtest.ErrNoSession) {
			t.Fatal(err)
		}
	}
	send(channelID, guildID, "before")
	e.waitBot(t, channelID, "You said: before")
	send("77", "", "dm before")
	e.waitBot(t, "77", "You said: dm before")
	r.stop(t)

	// Posted while no process is connected: Discord keeps them, and
	// will never send them to the next session.
	send(channelID, guildID, "while away 1")
	send(channelID, guildID, "while away 2")
	send("77", "", "dm while away")

	r = e.start(t)
	e.waitBot(t, channelID, "You said: while away 2")
	e.waitBot(t, "77", "You said: dm while away")
	// Another start catches up again and finds nothing new.
	r.stop(t)
	r = e.start(t)
	send(channelID, guildID, "after")
	e.waitBot(t, channelID, "You said: after")
	r.stop(t)

	count := map[string]int{}
	for _, m := range e.fake.Messages() {
		if m.Author.ID == bot {
			if _, said, ok := strings.Cut(m.Content, "You said: "); ok {
				count[said]++
			}
		}
	}
	for _, said := range []string{"before", "dm before", "while away 1", "while away 2", "dm while away", "after"} {
		if count[said] != 1 {
			t.Errorf("%q answered %d times, want once", said, count[said])
		}
	}
}
