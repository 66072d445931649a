package discord

import (
	"cmp"
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
// each new session of a shard catches up from the channels' history, scope
// by scope: the DMs (shard 0) once READY arrives, each guild once its
// GUILD_CREATE does.
//
//   - A conversation with a message recorded within the catch-up age is
//     read after the last message recorded in it.
//   - In a guild, every other channel and active thread GUILD_CREATE lists
//     whose last_message_id is newer than the guild's watermark is read
//     after it: the watermark is the newest message recorded in any of the
//     guild's conversations, less catchUpMargin. What is read goes through
//     the same rules as the gateway's messages (a mention, a reply that
//     pings the bot, a thread the bot owns), so the first message of a
//     conversation flowbridge never answered is found too.
//   - What a scope's reads find is handed to the core oldest first, and the
//     scope's gateway messages that arrive meanwhile are held and handed
//     over after it. So the newest message recorded in a guild never gets
//     ahead of what its catch-up has handed over: a session that dies
//     during its catch-up leaves the watermark where the next one must
//     start (see hold).
//   - A DM channel cannot be listed by a bot: a new DM's first message,
//     posted while no session of shard 0 was connected, is not found.
//
// Reads are bounded: messages posted within the catch-up age
// (Config.CatchUpAge, which the process keeps within how long the inbox
// remembers answered messages, so nothing read can be one answered and
// forgotten), catchUpPages pages of catchUpLimit per channel,
// catchUpChannels channels per guild, the newest first, catchUpReaders at
// once; a 429 is waited out (Retry-After) at most
// catchUpRetries times per page. The inbox key answers each message once.
//
// The same reads serve the channels whose messages the store refused while
// it was down, once it answers again.
const (
	// catchUpLimit is the messages read per page (Discord's most).
	catchUpLimit = 100
	// catchUpPages bounds the pages read per channel.
	catchUpPages = 3
	// catchUpChannels bounds the channels read per guild.
	catchUpChannels = 200
	// catchUpReaders is how many channels the adapter reads at once, all
	// catch-ups together: with Discord's usual round trip, about its
	// global limit of 50 requests a second.
	catchUpReaders = 4
	// catchUpRetries bounds the 429s waited out per page.
	catchUpRetries = 5
	// catchUpWithin bounds a scope's catch-up (the inbox's answer, then
	// the reads), as its gateway messages wait for it: past it, what was
	// read is handed over and the channels not read are given up.
	catchUpWithin = time.Minute
	// catchUpMargin is read below a guild's watermark: the messages
	// received just before a crash are recorded concurrently, and one may
	// have been committed while an older one, of another channel, was not.
	catchUpMargin = 5 * time.Second
	// maxHeld bounds the gateway messages a scope holds during its
	// catch-up; beyond it they are dropped (a guild's are read again by the
	// next session's catch-up, the watermark not having passed them).
	maxHeld = 10000
	// dmScope is the scope of the DMs; the others are guild IDs.
	dmScope = "@me"
	// discordEpoch is the snowflakes' epoch, in Unix milliseconds.
	discordEpoch = 1420070400000
)

// CatchUpCore is implemented by a core whose inbox can say how far each
// conversation was recorded (*bridge.Bridge).
type CatchUpCore interface {
	LastSeen(ctx context.Context, keyPrefix string, maxAge time.Duration) (map[string]int64, error)
	OnStoreRecovered(f func())
}

// hold keeps a scope's gateway messages, in their order, while the scope's
// catch-up runs; the catch-up hands them over after what it read, then
// lets the scope's messages through.
type hold struct {
	msgs    []*discordgo.MessageCreate
	dropped int
	// only, when set, holds the messages of these channels alone: the DMs
	// being read. A DM not read has no watermark to keep.
	only map[string]bool
}

// lastSeen is the inbox's last recorded message per conversation, asked
// once per session, before any of the session's messages is handed over.
type lastSeen struct {
	once  sync.Once
	done  chan struct{}
	last  map[string]int64
	err   error
	asked func() (map[string]int64, error)
}

func newLastSeen(ask func() (map[string]int64, error)) *lastSeen {
	return &lastSeen{done: make(chan struct{}), asked: ask}
}

// get asks the inbox the first time, and returns its answer.
func (l *lastSeen) get() (map[string]int64, error) {
	l.once.Do(func() {
		l.last, l.err = l.asked()
		close(l.done)
	})
	return l.last, l.err
}

// known returns the answer if it came, without asking.
func (l *lastSeen) known() (map[string]int64, bool) {
	if l == nil {
		return nil, false
	}
	select {
	case <-l.done:
		return l.last, l.err == nil
	default:
		return nil, false
	}
}

// holdScopes starts holding each scope's gateway messages for a catch-up,
// and returns the holds; last, when not nil, becomes the session's
// lastSeen (a new session has identified). A scope still held by an
// earlier catch-up keeps what it holds: the new catch-up hands it over.
func (sh *shard) holdScopes(last *lastSeen, scopes ...string) map[string]*hold {
	sh.holdMu.Lock()
	defer sh.holdMu.Unlock()
	if last != nil {
		sh.last = last
	}
	if sh.held == nil {
		sh.held = make(map[string]*hold)
	}
	out := make(map[string]*hold, len(scopes))
	for _, scope := range scopes {
		h := &hold{}
		if old := sh.held[scope]; old != nil {
			h.msgs, h.dropped = old.msgs, old.dropped
			old.msgs, old.dropped = nil, 0
		}
		sh.held[scope] = h
		out[scope] = h
	}
	return out
}

// lastSeen returns the current session's lastSeen, nil before READY.
func (sh *shard) lastSeen() *lastSeen {
	sh.holdMu.Lock()
	defer sh.holdMu.Unlock()
	return sh.last
}

// holds reports whether h is still scope's hold (no later catch-up took
// it over).
func (sh *shard) holds(scope string, h *hold) bool {
	sh.holdMu.Lock()
	defer sh.holdMu.Unlock()
	return sh.held[scope] == h
}

// onLive takes a gateway message on the shard's read loop: held while its
// scope (or its channel, probed) catches up, else handed to onMessage, or
// held for a probe of its channel (probeLocked).
func (a *Adapter) onLive(ctx context.Context, sh *shard, m *discordgo.MessageCreate) {
	if m == nil || m.Message == nil {
		return
	}
	if m.Author == nil || m.Author.ID != a.bot() {
		scope := cmp.Or(m.GuildID, dmScope)
		sh.holdMu.Lock()
		h := sh.held[scope]
		if h == nil || h.only != nil && !h.only[m.ChannelID] {
			h = sh.held[probeScope(m)]
		}
		if h != nil && (h.only == nil || h.only[m.ChannelID]) {
			if len(h.msgs) < maxHeld {
				h.msgs = append(h.msgs, m)
			} else {
				h.dropped++
			}
			sh.holdMu.Unlock()
			return
		}
		probed := a.probeLocked(ctx, sh, m)
		sh.holdMu.Unlock()
		if probed {
			return
		}
	}
	a.onMessage(m)
}

// A new session (READY) cannot know the DMs flowbridge never answered in:
// a bot cannot list its DMs, so its catch-up reads only those served
// lately. A new DM's messages posted while no session was up are never
// sent; the first one the new session does get (onLive) is held, and its
// DM's history read since the gap began, so that the messages posted
// before it are answered too, in order. Only a DM's first message before
// the session, with none after, stays unseen. After a sequence gap (gap.go)
// the same holds of every channel not served lately, in guilds too: the
// gap may have hidden a message in any.

// probe is a session's probing of the channels its catch-up could not
// know: their history is read after from, until the catch-up age has
// passed since it began.
type probe struct {
	from   int64
	until  time.Time
	guilds bool            // guild channels too, not only DMs
	done   map[string]bool // channels probed or known
}

// probeScope is the scope a message's probe holds: its own channel.
func probeScope(m *discordgo.MessageCreate) string {
	if m.GuildID != "" {
		return "ch:" + m.ChannelID
	}
	return "dm:" + m.ChannelID
}

// probeLocked starts a probe of m's channel when it is one the session
// probes and has neither served nor probed: m is held under the channel's
// own scope while its history is read; it reports whether it did.
// sh.holdMu is held.
func (a *Adapter) probeLocked(ctx context.Context, sh *shard, m *discordgo.MessageCreate) bool {
	p := sh.probe
	if p == nil || m.GuildID != "" && !p.guilds || p.done[m.ChannelID] || !time.Now().Before(p.until) || len(p.done) >= maxRemembered {
		return false
	}
	if m.Author == nil || (m.Author.Bot || m.WebhookID != "") && !a.cfg.AllowBots ||
		m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return false // not a message onMessage would take
	}
	p.done[m.ChannelID] = true
	conv := dmKey(m.ChannelID)
	if m.GuildID != "" {
		conv = channelKey(m.GuildID, m.ChannelID)
	}
	if served, ok := sh.last.known(); ok {
		if _, known := served[conv]; known {
			return false // read by the session's catch-up
		}
	}
	if _, ok := a.core.(CatchUpCore); !ok {
		return false
	}
	scope := probeScope(m)
	h := &hold{msgs: []*discordgo.MessageCreate{m}}
	if sh.held == nil {
		sh.held = make(map[string]*hold)
	}
	sh.held[scope] = h
	read := historyRead{guild: m.GuildID, channel: m.ChannelID, after: p.from, floor: p.from}
	if !a.spawn(func() {
		a.shardLog(sh).Info("a channel not served lately: reading its history since the gap", zap.String("channel", m.ChannelID))
		a.catchUpScope(ctx, sh, scope, h, []historyRead{read})
	}) {
		delete(sh.held, scope)
		return false
	}
	return true
}

// startProbe begins probing the channels not served lately: a new
// session's DMs (shard 0), or after a gap every channel (guilds set).
func (a *Adapter) startProbe(sh *shard, guilds bool) {
	a.startProbeFrom(sh, guilds, a.catchUpFloor())
}

// startProbeFrom is startProbe reading the channels after from, a
// snowflake.
func (a *Adapter) startProbeFrom(sh *shard, guilds bool, from int64) {
	if sh.id != 0 && !guilds {
		return
	}
	now := time.Now()
	sh.holdMu.Lock()
	defer sh.holdMu.Unlock()
	if p := sh.probe; p != nil && now.Before(p.until) {
		// An earlier probe (a session's, a gap's) still runs: a channel
		// it has not probed yet may hide a message since it began.
		from, guilds = min(from, p.from), guilds || p.guilds
	}
	sh.probe = &probe{from: from, until: now.Add(a.catchUpAge()), guilds: guilds, done: make(map[string]bool)}
}

// narrow makes scope's hold h keep only the messages of channels in only
// from now on, and hands over, in order, those it holds of others. It
// hands them over under the lock, so that a message of the same channel
// arriving meanwhile comes after them.
func (a *Adapter) narrow(ctx context.Context, sh *shard, scope string, h *hold, only map[string]bool) {
	sh.holdMu.Lock()
	defer sh.holdMu.Unlock()
	if sh.held[scope] != h {
		return
	}
	h.only = only
	var pass []*discordgo.MessageCreate
	kept := h.msgs[:0]
	for _, m := range h.msgs {
		if only[m.ChannelID] {
			kept = append(kept, m)
		} else {
			pass = append(pass, m)
		}
	}
	h.msgs = kept
	for _, m := range pass {
		if ph := sh.held[probeScope(m)]; ph != nil {
			ph.msgs = append(ph.msgs, m)
		} else if !a.probeLocked(ctx, sh, m) {
			a.onMessage(m)
		}
	}
}

// release hands over what scope's hold h kept, in order, until none is
// left, then lets the scope's messages through; it does nothing once a
// later catch-up took the scope over. Messages in handed, which the
// catch-up handed over from history, are not handed over again: two
// receipts of one message at once would race for its inbox key, and the
// later one could win, its place in the queue after newer messages.
func (a *Adapter) release(ctx context.Context, sh *shard, scope string, h *hold, handed map[string]bool) {
	for {
		sh.holdMu.Lock()
		if sh.held[scope] != h {
			sh.holdMu.Unlock()
			return
		}
		msgs, dropped := h.msgs, h.dropped
		h.msgs, h.dropped = nil, 0
		if len(msgs) == 0 {
			delete(sh.held, scope)
		}
		sh.holdMu.Unlock()
		if dropped > 0 {
			a.shardLog(sh).Warn("gateway messages dropped while catching up (too many held); a guild's are read again at the next catch-up", zap.String("scope", scope), zap.Int("messages", dropped))
		}
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			if !handed[m.ID] && !a.divert(ctx, sh, h, m) {
				a.onMessage(m)
			}
		}
	}
}

// divert hands m, released from hold h, to its channel's probe instead:
// one that runs (m then waits behind what it reads), or one m starts; it
// reports whether it did.
func (a *Adapter) divert(ctx context.Context, sh *shard, h *hold, m *discordgo.MessageCreate) bool {
	sh.holdMu.Lock()
	defer sh.holdMu.Unlock()
	if ph := sh.held[probeScope(m)]; ph != nil && ph != h {
		ph.msgs = append(ph.msgs, m)
		return true
	}
	return a.probeLocked(ctx, sh, m)
}

// settleHolds, once the gateways are closed and the catch-ups have ended,
// decides for what is still held: a guild's messages are left to the next
// start's catch-up, which reads them again (its watermark has not passed
// them), so that they do not move it past what this catch-up did not
// read; a DM's are handed to the core, which records them for the next
// start, unless its conversation was served (its history is read again
// after its last recorded message): a new DM's first message could not be
// found again.
func (a *Adapter) settleHolds() {
	for _, sh := range a.shards {
		sh.holdMu.Lock()
		held, last := sh.held, sh.last
		sh.held = nil
		sh.holdMu.Unlock()
		for scope, h := range held {
			if len(h.msgs) == 0 {
				continue
			}
			if scope != dmScope && !strings.HasPrefix(scope, "dm:") {
				// A guild's, or a guild channel's probe.
				a.shardLog(sh).Info("messages received while catching up left to the next start's catch-up", zap.String("guild", scope), zap.Int("messages", len(h.msgs)))
				continue
			}
			served, ok := last.known()
			for _, m := range h.msgs {
				if _, again := served[dmKey(m.ChannelID)]; ok && again {
					continue
				}
				a.onMessage(m)
			}
		}
	}
}

// onReady notes the bot's ID and, as a new session gets no replay of what
// was posted meanwhile, starts its catch-up: the DMs now (shard 0), each
// guild when its GUILD_CREATE arrives. Until then their messages are held.
func (a *Adapter) onReady(ctx context.Context, sh *shard, r *discordgo.Ready) {
	if r.User != nil {
		id := r.User.ID
		a.botID.Store(&id)
	}
	a.shardLog(sh).Info("gateway ready", zap.Int("guilds", len(r.Guilds)))
	a.startProbe(sh, false)
	var guilds []string
	for _, g := range r.Guilds {
		if g != nil && g.ID != "" {
			guilds = append(guilds, g.ID)
		}
	}
	a.beginCatchUp(ctx, sh, guilds)
}

// beginCatchUp starts a session's catch-up: it holds the gateway messages
// of the DMs (shard 0) and of guilds, and reads the DMs' history now; each
// guild's is read when its GUILD_CREATE arrives. It runs at READY, and
// before a resume of a session whose catch-up never ended (resume.go),
// whose GUILD_CREATEs Discord replays.
func (a *Adapter) beginCatchUp(ctx context.Context, sh *shard, guilds []string) *lastSeen {
	return a.beginCatchUpFrom(ctx, sh, guilds, a.catchUpFloor())
}

// beginCatchUpFrom is beginCatchUp reading the DMs after floor, a
// snowflake: the catch-up age back, or where a sequence gap began (gap.go).
func (a *Adapter) beginCatchUpFrom(ctx context.Context, sh *shard, guilds []string, floor int64) *lastSeen {
	cc, ok := a.core.(CatchUpCore)
	if !ok {
		return nil
	}
	// The conversations recorded since floor, at least within the
	// catch-up age.
	age := max(a.catchUpAge(), time.Since(snowflakeTime(floor)))
	last := newLastSeen(func() (map[string]int64, error) {
		qctx, cancel := context.WithTimeout(ctx, a.catchUpWithin)
		defer cancel()
		return cc.LastSeen(qctx, messageEventKey(""), age)
	})
	var scopes []string
	if sh.id == 0 {
		scopes = append(scopes, dmScope)
	}
	scopes = append(scopes, guilds...)
	holds := sh.holdScopes(last, scopes...)
	if h := holds[dmScope]; h != nil {
		a.spawn(func() { a.catchUpDMs(ctx, sh, h, last, floor) })
	}
	return last
}

// zeroTime is the join time of a guild whose GUILD_CREATE is not at hand.
var zeroTime time.Time

// listedChannel is what a guild's catch-up needs of a channel GUILD_CREATE
// lists.
type listedChannel struct {
	id   string
	last int64 // its last_message_id
}

// onGuildCreate starts a guild's catch-up: at the start of a session, or
// when the guild becomes available, or the bot joins it.
func (a *Adapter) onGuildCreate(ctx context.Context, sh *shard, g *discordgo.GuildCreate) {
	if g == nil || g.Guild == nil || g.Unavailable || g.ID == "" {
		return
	}
	if _, ok := a.core.(CatchUpCore); !ok {
		return
	}
	// Copied on the read loop, which alone changes the state's guilds.
	var listed []listedChannel
	for _, ch := range slices.Concat(g.Channels, g.Threads) {
		if ch == nil {
			continue
		}
		if id := snowflakeOrder(ch.LastMessageID); id > 0 {
			listed = append(listed, listedChannel{id: ch.ID, last: id})
		}
	}
	joined := g.JoinedAt
	last := sh.lastSeen()
	if last == nil {
		return // no READY: not a session of this adapter's
	}
	h := sh.holdScopes(nil, g.ID)[g.ID]
	a.spawn(func() { a.catchUpGuild(ctx, sh, g.ID, joined, listed, h, last) })
}

// historyRead is one channel's history to read: its messages after after.
type historyRead struct {
	guild, channel string
	after          int64
	last           int64 // its last_message_id, when known: the newest first
	// floor is the oldest snowflake read; 0: the catch-up age back.
	floor int64
}

// catchUpDMs reads the DM conversations served within the catch-up age
// after their last recorded message. Until the inbox has said which they
// are, every DM's messages are held; then only theirs.
func (a *Adapter) catchUpDMs(ctx context.Context, sh *shard, h *hold, last *lastSeen, floor int64) {
	seen, err := last.get()
	if err != nil {
		a.shardLog(sh).Warn("messages missed while away not looked for", zap.Error(err))
		a.release(ctx, sh, dmScope, h, nil)
		return
	}
	var reads []historyRead
	only := make(map[string]bool)
	for conv, after := range seen {
		if guild, channel, ok := conversationChannel(conv); ok && guild == "" {
			reads = append(reads, historyRead{channel: channel, after: max(after, floor), floor: floor})
			only[channel] = true
		}
	}
	// A new DM's messages need not wait: nothing of it is read, and held
	// they would be lost with the process.
	a.narrow(ctx, sh, dmScope, h, only)
	a.catchUpScope(ctx, sh, dmScope, h, reads)
}

// catchUpGuild reads a guild's served conversations after their last
// recorded message, and the other channels listed with anything newer than
// the guild's watermark after it.
func (a *Adapter) catchUpGuild(ctx context.Context, sh *shard, guild string, joined time.Time, listed []listedChannel, h *hold, last *lastSeen) {
	a.catchUpGuildFrom(ctx, sh, guild, joined, listed, h, last, a.catchUpFloor())
}

// catchUpGuildFrom is catchUpGuild reading nothing older than floor, a
// snowflake.
func (a *Adapter) catchUpGuildFrom(ctx context.Context, sh *shard, guild string, joined time.Time, listed []listedChannel, h *hold, last *lastSeen, floor int64) {
	seen, err := last.get()
	if err != nil {
		a.shardLog(sh).Warn("messages missed while away not looked for", zap.String("guild", guild), zap.Error(err))
		a.release(ctx, sh, guild, h, nil)
		return
	}
	if !joined.IsZero() {
		// Nothing posted before the bot joined was for it.
		floor = max(floor, snowflakeAt(joined))
	}
	served := make(map[string]int64)
	var mark int64
	for conv, after := range seen {
		if g, channel, ok := conversationChannel(conv); ok && g == guild {
			served[channel] = after
			mark = max(mark, after)
		}
	}
	watermark := floor
	if mark > 0 {
		watermark = max(mark-int64(catchUpMargin/time.Millisecond)<<22, floor)
	}
	var reads []historyRead
	for _, ch := range listed {
		after, ok := served[ch.id]
		if !ok {
			after = watermark
		}
		delete(served, ch.id)
		after = max(after, floor)
		if ch.last > after {
			reads = append(reads, historyRead{guild: guild, channel: ch.id, after: after, last: ch.last, floor: floor})
		}
	}
	// Served, not listed: an archived thread, say, which a message revives.
	for channel, after := range served {
		reads = append(reads, historyRead{guild: guild, channel: channel, after: max(after, floor), floor: floor})
	}
	slices.SortFunc(reads, func(x, y historyRead) int { return cmp.Compare(y.last, x.last) })
	if len(reads) > catchUpChannels {
		a.shardLog(sh).Warn("too many channels with messages since the last one recorded; the newest read", zap.String("guild", guild), zap.Int("channels", len(reads)), zap.Int("read", catchUpChannels))
		reads = reads[:catchUpChannels]
	}
	a.catchUpScope(ctx, sh, guild, h, reads)
}

// catchUpScope reads reads, hands what they found to the core oldest
// first, then what scope's hold h kept. When ctx ends first it hands over
// nothing: settleHolds decides for the held messages. Reads still going
// after catchUpWithin are given up.
func (a *Adapter) catchUpScope(ctx context.Context, sh *shard, scope string, h *hold, reads []historyRead) {
	readCtx, cancel := context.WithTimeout(ctx, a.catchUpWithin)
	found := a.readHistories(readCtx, reads)
	cut := readCtx.Err() != nil
	cancel()
	if ctx.Err() != nil || !sh.holds(scope, h) {
		return
	}
	if cut {
		a.shardLog(sh).Warn("catch-up cut short; messages posted while away in the channels not read may be missed", zap.String("scope", scope), zap.Duration("after", a.catchUpWithin))
	}
	handed := make(map[string]bool, len(found))
	for _, m := range found {
		handed[m.ID] = true
	}
	if n := a.handOver(found); n > 0 {
		a.shardLog(sh).Info("messages posted while away taken up", zap.String("scope", scope), zap.Int("channels", len(reads)), zap.Int("messages", n))
	}
	a.release(ctx, sh, scope, h, handed)
}

// handOver hands messages read from history to the core, oldest first, as
// the gateway would have, and returns how many of them are not the bot's
// own.
func (a *Adapter) handOver(found []*discordgo.Message) int {
	slices.SortFunc(found, func(x, y *discordgo.Message) int { return cmp.Compare(snowflakeOrder(x.ID), snowflakeOrder(y.ID)) })
	n := 0
	for _, m := range found {
		if m.Author == nil || m.Author.ID != a.bot() {
			n++
		}
		a.onMessage(&discordgo.MessageCreate{Message: m})
	}
	return n
}

// readHistories reads each channel's history, at most catchUpReaders at
// once (with every other catch-up's reads), and returns every message
// found; a channel that cannot be read is logged and skipped.
func (a *Adapter) readHistories(ctx context.Context, reads []historyRead) []*discordgo.Message {
	var (
		mu    sync.Mutex
		found []*discordgo.Message
		wg    sync.WaitGroup
	)
	next := make(chan historyRead)
	for range min(catchUpReaders, len(reads)) {
		wg.Go(func() {
			for r := range next {
				msgs, err := a.readHistory(ctx, r)
				if err != nil && ctx.Err() == nil {
					a.log.Warn("channel history not read; messages posted while away may be missed", zap.String("channel", r.channel), zap.Error(err))
				}
				mu.Lock()
				found = append(found, msgs...)
				mu.Unlock()
			}
		})
	}
	for _, r := range reads {
		select {
		case next <- r:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return found
}

// readHistory reads one channel's messages after r.after and within the
// catch-up age, at most catchUpPages pages; REST messages carry no guild
// ID, so it is set from r.
func (a *Adapter) readHistory(ctx context.Context, r historyRead) ([]*discordgo.Message, error) {
	// One pool of readers for all the scopes: a session's GUILD_CREATEs
	// start every guild's catch-up at once.
	select {
	case a.readers <- struct{}{}:
		defer func() { <-a.readers }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	floor := r.floor
	if floor == 0 {
		floor = a.catchUpFloor()
	}
	after := r.after
	var out []*discordgo.Message
	for range catchUpPages {
		page, err := a.historyPage(ctx, r.channel, after)
		if err != nil {
			return out, err
		}
		for _, m := range page {
			if m == nil {
				continue
			}
			id := snowflakeOrder(m.ID)
			if id <= after || id < floor {
				continue
			}
			r.after = max(r.after, id)
			if m.GuildID == "" {
				m.GuildID = r.guild
			}
			if m.ChannelID == "" {
				m.ChannelID = r.channel
			}
			out = append(out, m)
		}
		if len(page) < catchUpLimit || r.after == after {
			return out, nil
		}
		after = r.after
	}
	a.log.Warn("more messages in a channel than catch-up reads; the oldest taken up", zap.String("channel", r.channel), zap.Int("read", len(out)))
	return out, nil
}

// historyPage is one Get Channel Messages after after (newest first, as
// Discord sends them), waiting out a 429's Retry-After itself, so that a
// stop need not wait for it.
func (a *Adapter) historyPage(ctx context.Context, channel string, after int64) ([]*discordgo.Message, error) {
	for attempt := 0; ; attempt++ {
		msgs, err := a.session.ChannelMessages(channel, catchUpLimit, "", strconv.FormatInt(after, 10), "",
			discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false))
		rl, limited := errors.AsType[*discordgo.RateLimitError](err)
		if !limited || rl.RateLimit == nil || rl.TooManyRequests == nil || attempt >= catchUpRetries {
			return msgs, err
		}
		wait := max(rl.RetryAfter, 10*time.Millisecond)
		a.log.Info("history read rate limited; waiting", zap.String("channel", channel), zap.Duration("retry_after", wait))
		if !sleep(ctx, wait) {
			return nil, ctx.Err()
		}
	}
}

// catchUpAge is how far back catch-up reads (Config.CatchUpAge).
func (a *Adapter) catchUpAge() time.Duration {
	if d := time.Duration(a.cfg.CatchUpAge); d > 0 {
		return d
	}
	return DefaultCatchUpAge
}

// catchUpFloor is the oldest snowflake catch-up reads.
func (a *Adapter) catchUpFloor() int64 {
	return snowflakeAt(time.Now().Add(-a.catchUpAge()))
}

// snowflakeTime is the time of snowflake id, to the millisecond.
func snowflakeTime(id int64) time.Time {
	return time.UnixMilli(id>>22 + discordEpoch)
}

// snowflakeAt is the first snowflake of t's millisecond.
func snowflakeAt(t time.Time) int64 {
	ms := t.UnixMilli() - discordEpoch
	if ms <= 0 {
		return 0
	}
	return ms << 22
}

// missed remembers, per channel, messages the store refused while it was
// down, to read again once it answers. Until they are read again (pending)
// no shard saves a later sequence number: a process stopped or killed
// meanwhile forgets them, and the next one, resuming past them, would
// never see them again (Discord replays only what follows the sequence
// number resumed at).
type missed struct {
	mu    sync.Mutex
	after map[string]missedChannel // by channel ID
	// reading counts the catch-ups of what was taken, until what they
	// read has been handed to the core.
	reading int
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

// take returns what was noted and forgets it; the caller reads it again,
// then calls read.
func (m *missed) take() map[string]missedChannel {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.after
	m.after = nil
	m.reading++
	return out
}

// read ends a take's catch-up.
func (m *missed) read() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reading--
}

// pending reports whether messages the store refused are still to be read
// again.
func (m *missed) pending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.after) > 0 || m.reading > 0
}

// received hands a gateway message to the core; when the store could not
// record it, it is read again from the channel's history once the store
// answers (Discord will not send it again).
func (a *Adapter) received(ev bridge.Event, guild, channel, id string) {
	rec := a.core.Receive(ev)
	if _, ok := a.core.(CatchUpCore); !ok {
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
	cc, ok := a.core.(CatchUpCore)
	if !ok {
		return
	}
	cc.OnStoreRecovered(func() {
		if ctx.Err() != nil {
			return
		}
		a.spawn(func() {
			taken := a.missed.take()
			defer a.missed.read()
			var reads []historyRead
			for channel, c := range taken {
				reads = append(reads, historyRead{guild: c.guild, channel: channel, after: c.after})
			}
			found := a.readHistories(ctx, reads)
			if ctx.Err() != nil {
				// Stopped while reading: what was not read stays
				// pending, so the stop saves no sequence number past it.
				for channel, c := range taken {
					a.missed.note(c.guild, channel, c.after+1)
				}
			}
			a.handOver(found)
		})
	})
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
