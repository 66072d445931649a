package discord

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestReplayGapCaughtUp: the connection drops; while it is down, six
// messages are posted in a guild channel and a DM the bridge serves, and
// in a guild channel it never served; the RESUME's replay leaves out the
// third and the sixth, so s jumps. The gap is logged, and every message is
// answered once, in each channel in order: those of the channels served
// at once, that of the other channel when its next message comes.
func TestReplayGapCaughtUp(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	e := newEnv(t, func(e *env) { e.log = zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core())) })
	down := e.killable()
	bot := e.fake.BotUser().ID
	ctx := testCtx(t)
	if err := e.fake.AddChannel(ctx, discordgo.Channel{ID: "11", GuildID: guildID, Type: discordgo.ChannelTypeGuildText, Name: "random"}); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "before")})
	e.waitBot(t, channelID, "You said: before")
	post(t, e, discordtest.MessageCreate{ChannelID: "77", Content: "dm before"})
	e.waitBot(t, "77", "You said: dm before")

	down.Store(true)
	conns := len(e.fake.Connections())
	if err := e.fake.DropConnection(ctx); err != nil {
		t.Fatal(err)
	}
	var said []string
	var unserved discordtest.Message
	for i := 1; i <= 6; i++ {
		if i == 3 { // the third dispatch of the replay: left out
			unserved = post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "11", Content: mention(bot, "unserved 3")})
			continue
		}
		if i%2 == 1 {
			post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, fmt.Sprint("guild ", i))})
			said = append(said, fmt.Sprint("guild ", i))
		} else {
			post(t, e, discordtest.MessageCreate{ChannelID: "77", Content: fmt.Sprint("dm ", i)})
			said = append(said, fmt.Sprint("dm ", i))
		}
	}
	e.fake.SetReplayGap(func(d discordtest.Dispatch) bool {
		return d.Type == "MESSAGE_CREATE" && (strings.Contains(string(d.Data), " 3\"") || strings.Contains(string(d.Data), " 6\""))
	})
	down.Store(false)
	h, err := e.fake.WaitHandshake(ctx, func(h discordtest.Handshake) bool { return h.Conn > conns && h.Resumed })
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Skipped) == 0 {
		t.Fatalf("the replay left nothing out: %v", brief([]discordtest.Handshake{h}))
	}
	hidden := false
	for _, d := range e.fake.Dispatches() {
		hidden = hidden || d.Type == "MESSAGE_CREATE" && strings.Contains(string(d.Data), unserved.ID) && slices.Contains(h.Skipped, d.Seq)
	}
	if !hidden {
		t.Errorf("the replay left out %v, not the message in the channel never served", h.Skipped)
	}
	for _, s := range said {
		ch := channelID
		if s[:2] == "dm" {
			ch = "77"
		}
		e.waitBot(t, ch, "You said: "+s)
	}
	waitLog(t, logs, "gateway sequence gap")
	// The channel never served: its next message brings the one hidden.
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "11", Content: mention(bot, "unserved 7")})
	e.waitBot(t, "11", "You said: unserved 7")
	e.waitBot(t, "11", "You said: unserved 3")
	for s, n := range answers(e) {
		if n != 1 {
			t.Errorf("%q answered %d times, want once", s, n)
		}
	}
	// In order, per channel: each answer after the one before it.
	order := map[string][]string{}
	for _, m := range e.fake.Messages() {
		if _, said, ok := strings.Cut(m.Content, "You said: "); ok && m.Author.ID == bot {
			order[m.ChannelID] = append(order[m.ChannelID], said)
		}
	}
	want := map[string][]string{
		channelID: {"before", "guild 1", "guild 5"},
		"77":      {"dm before", "dm 2", "dm 4", "dm 6"},
		"11":      {"unserved 3", "unserved 7"},
	}
	for ch, w := range want {
		if fmt.Sprint(order[ch]) != fmt.Sprint(w) {
			t.Errorf("answers in %s: %q, want %q", ch, order[ch], w)
		}
	}
}

// TestReplayGapCaughtUpFromItsStart: a gap that began longer ago than the
// catch-up age (10 minutes) of message time is caught up from where it
// began, the last message seen before it, rather than 10 minutes back:
// a message posted 20 minutes ago, after the last one seen 30 minutes
// ago, which the RESUME's replay leaves out, is answered once, before the
// message whose arrival revealed the gap.
func TestReplayGapCaughtUpFromItsStart(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64 // the fake Discord's clock, behind the bridge's
	offset.Store(int64(-30 * time.Minute))
	opts := discordtest.Options{Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }}
	core, logs := observer.New(zapcore.InfoLevel)
	e := newEnvWith(t, opts, func(e *env) { e.log = zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core())) })
	down := e.killable()
	bot := e.fake.BotUser().ID
	ctx := testCtx(t)
	e.start(t)
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "seen 30m ago")})
	e.waitBot(t, channelID, "You said: seen 30m ago")

	down.Store(true)
	conns := len(e.fake.Connections())
	if err := e.fake.DropConnection(ctx); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(-20 * time.Minute))
	hidden := post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "hidden 20m ago")})
	offset.Store(int64(-time.Minute))
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "replayed 1m ago")})
	e.fake.SetReplayGap(func(d discordtest.Dispatch) bool {
		return d.Type == "MESSAGE_CREATE" && strings.Contains(string(d.Data), hidden.ID)
	})
	down.Store(false)
	h, err := e.fake.WaitHandshake(ctx, func(h discordtest.Handshake) bool { return h.Conn > conns && h.Resumed })
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Skipped) == 0 {
		t.Fatalf("the replay left nothing out: %v", brief([]discordtest.Handshake{h}))
	}
	e.waitBot(t, channelID, "You said: replayed 1m ago")
	waitLog(t, logs, "gateway sequence gap")
	e.waitBot(t, channelID, "You said: hidden 20m ago")
	for s, n := range answers(e) {
		if n != 1 {
			t.Errorf("%q answered %d times, want once", s, n)
		}
	}
	var order []string
	for _, m := range e.fake.Messages() {
		if _, said, ok := strings.Cut(m.Content, "You said: "); ok && m.Author.ID == bot && m.ChannelID == channelID {
			order = append(order, said)
		}
	}
	if want := []string{"seen 30m ago", "hidden 20m ago", "replayed 1m ago"}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("answers in order %q, want %q", order, want)
	}
}
