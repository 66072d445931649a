package discord

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// Discord delivers no message twice: one posted while no session of the
// bot's shard was connected (a replica down, a process restarting) is
// never sent to it, and discordgo keeps the state to RESUME unexported. So
// when a shard starts a new session, the adapter reads the history of each
// conversation the inbox has recent messages of, after the last one
// recorded, and hands what it finds to the core as if just delivered; the
// inbox key answers each once. The same is done, for the channels
// concerned, when the store answers again after refusing messages.
const (
	// catchUpAge bounds catch-up: conversations with a message recorded
	// within it, and messages posted within it.
	catchUpAge = 10 * time.Minute
	// catchUpLimit is the most messages read per conversation (one page).
	catchUpLimit = 100
	// discordEpoch is the snowflakes' epoch, in Unix milliseconds.
	discordEpoch = 1420070400000
)

// catchUpCore is implemented by a core whose inbox can say how far each
// conversation was recorded (*bridge.Bridge on PostgreSQL).
type catchUpCore interface {
	LastSeen(ctx context.Context, keyPrefix string, maxAge time.Duration) (map[string]int64, error)
	OnStoreRecovered(f func())
}

// missed remembers, per channel, messages the store refused while it was
// down, to read again once it answers.
type missed struct {
	mu    sync.Mutex
	after map[string]missedChannel // by channel ID
}

type missedChannel struct {
	guild string // "" for a DM
	after int64  // read after this ID
}

// note remembers that message id of channel was not recorded.
func (m *missed) note(guild, channel string, id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.after == nil {
		m.after = make(map[string]missedChannel)
	}
	if c, ok := m.after[channel]; !ok || id-1 < c.after {
		m.after[channel] = missedChannel{guild: guild, after: id - 1}
	}
}

func (m *missed) take() map[string]missedChannel {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.after
	m.after = nil
	return out
}

// received hands a gateway message to the core; when the store could not
// record it, it is read again from the channel's history once the store
// answers (Discord will not send it again).
func (a *Adapter) received(ev bridge.Event, guild, channel, id string) {
	rec := a.core.Receive(ev)
	if _, ok := a.core.(catchUpCore); !ok {
		return
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return
	}
	a.spawn(func() {
		if errors.Is(rec.Wait(context.Background()), bridge.ErrNotSaved) {
			a.missed.note(guild, channel, n)
		}
	})
}

// watchStore registers the catch-up of what the store refused, run each
// time it answers again while ctx lives.
func (a *Adapter) watchStore(ctx context.Context) {
	cc, ok := a.core.(catchUpCore)
	if !ok {
		return
	}
	cc.OnStoreRecovered(func() {
		if ctx.Err() != nil {
			return
		}
		a.spawn(func() {
			for channel, c := range a.missed.take() {
				a.catchUpChannel(ctx, c.guild, channel, c.after)
			}
		})
	})
}

// catchUp reads, for each conversation of shard sh with messages recorded
// within catchUpAge, the channel's messages after the last one recorded,
// and hands them to the core.
func (a *Adapter) catchUp(ctx context.Context, sh *shard) {
	cc, ok := a.core.(catchUpCore)
	if !ok {
		return
	}
	log := a.shardLog(sh)
	last, err := cc.LastSeen(ctx, messageEventKey(""), catchUpAge)
	if err != nil {
		log.Warn("messages missed while away not looked for", zap.Error(err))
		return
	}
	read := 0
	for conv, after := range last {
		guild, channel, ok := conversationChannel(conv)
		if !ok || shardOf(guild, sh.count) != sh.id {
			continue
		}
		read += a.catchUpChannel(ctx, guild, channel, after)
	}
	if read > 0 {
		log.Info("messages posted while away taken up", zap.Int("messages", read))
	}
}

// catchUpChannel reads channel's messages after the ID after (at most
// catchUpLimit, none older than catchUpAge) and hands them to the core,
// oldest first, as the gateway would have. It returns how many of them
// are not the bot's own.
func (a *Adapter) catchUpChannel(ctx context.Context, guild, channel string, after int64) int {
	msgs, err := a.session.ChannelMessages(channel, catchUpLimit, "", strconv.FormatInt(after, 10), "", discordgo.WithContext(ctx))
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("channel history not read; messages posted while away may be missed", zap.String("channel", channel), zap.Error(err))
		}
		return 0
	}
	// Discord sends them newest first.
	slices.Reverse(msgs)
	oldest := time.Now().Add(-catchUpAge).UnixMilli()
	n := 0
	for _, m := range msgs {
		id, err := strconv.ParseInt(m.ID, 10, 64)
		if err != nil || id <= after || id>>22+discordEpoch < oldest {
			continue
		}
		if m.GuildID == "" {
			m.GuildID = guild // REST messages carry no guild ID
		}
		if m.ChannelID == "" {
			m.ChannelID = channel
		}
		if m.Author == nil || m.Author.ID != a.bot() {
			n++
		}
		a.onMessage(&discordgo.MessageCreate{Message: m})
	}
	return n
}

// conversationChannel returns the guild ("" for a DM) and channel of a
// conversation key: discord/<guild>/<channel> or discord/@me/<channel>.
func conversationChannel(conv string) (guild, channel string, ok bool) {
	rest, ok := strings.CutPrefix(conv, Platform+"/")
	if !ok {
		return "", "", false
	}
	guild, channel, ok = strings.Cut(rest, "/")
	if !ok || channel == "" || strings.Contains(channel, "/") {
		return "", "", false
	}
	if guild == "@me" {
		guild = ""
	}
	return guild, channel, true
}

// shardOf returns the shard Discord routes guild's events to; DMs go to
// shard 0.
func shardOf(guild string, count int) int {
	if guild == "" || count <= 1 {
		return 0
	}
	id, err := strconv.ParseUint(guild, 10, 64)
	if err != nil {
		return -1
	}
	return int((id >> 22) % uint64(count))
}
