package discord

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowbridge/flowbridge/adapters/discord/discordtest"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/postgres"
	"github.com/flowbridge/flowbridge/postgres/pgtest"
)

// TestCatchUpAfterDowntime: messages posted in a guild channel and a DM
// the bridge was serving, while no process was connected, are read from
// the channels' history when the next process identifies, and answered
// once each; what was answered before is not answered again, nor is
// anything when a later session catches up once more. On PostgreSQL, and
// on bbolt as the default deployment runs: one process, restarted over
// its file. (Three processes per store, each stop waiting out discordgo's
// second for the close handshake: about 3 s each, run in parallel.)
func TestCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testCatchUpAfterDowntime(t, newEnv(t, func(e *env) { e.dsn = pgtest.Schema(t) }))
	})
	t.Run("bbolt", func(t *testing.T) {
		t.Parallel()
		testCatchUpAfterDowntime(t, newEnv(t, nil))
	})
}

func testCatchUpAfterDowntime(t *testing.T, e *env) {
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

// downPG is the PostgreSQL store while its database is down (down set):
// inbox writes and probes fail; each refused write is reported on refused.
type downPG struct {
	*postgres.Store
	down    *atomic.Bool
	refused chan string
}

var errDBDown = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (d downPG) Receive(ctx context.Context, e store.InboxEntry) (bool, error) {
	if d.down.Load() {
		d.refused <- e.Key
		return false, errDBDown
	}
	return d.Store.Receive(ctx, e)
}

func (d downPG) Ping(ctx context.Context) error {
	if d.down.Load() {
		return errDBDown
	}
	return d.Store.Ping(ctx)
}

// TestCatchUpAfterStoreOutage: a DM message the store cannot record while
// the database is down is not answered then (nor its user told anything),
// and Discord will not send it again; once the database answers the
// bridge's probe, the message is read from the channel's history and
// answered, once. (The probe comes every second and a stop waits out
// discordgo's close handshake: about 3 s.)
func TestCatchUpAfterStoreOutage(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	refused := make(chan string, 10)
	e := newEnv(t, func(e *env) {
		e.dsn = pgtest.Schema(t)
		e.wrapPG = func(pg *postgres.Store) e2eStore { return downPG{Store: pg, down: &down, refused: refused} }
	})
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	e.start(t)
	send := func(text string) {
		t.Helper()
		if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "77", Author: alice, Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	send("before")
	e.waitBot(t, "77", "You said: before")
	down.Store(true)
	send("while down")
	select {
	case <-refused:
	case <-ctx.Done():
		t.Fatal("the message never reached the store")
	}
	down.Store(false)
	e.waitBot(t, "77", "You said: while down")
	send("after")
	e.waitBot(t, "77", "You said: after")
	count := map[string]int{}
	for _, m := range e.fake.Messages() {
		if m.Author.ID == bot && m.ChannelID == "77" {
			count[m.Content]++
		}
	}
	for text, n := range count {
		if n != 1 || !strings.Contains(text, "You said: ") {
			t.Errorf("bot wrote %q %d times, want only answers, each once", text, n)
		}
	}
	if len(count) != 3 {
		t.Errorf("bot wrote %d distinct messages, want the 3 answers: %v", len(count), count)
	}
}
