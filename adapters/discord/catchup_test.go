package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/postgres"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/pgtest"
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
	e.fake.ExpireSessions() // the next start identifies, and catches up from history

	// Posted while no process is connected, and not resumed within the
	// session's window: Discord will never send them to the next session.
	send(channelID, guildID, "while away 1")
	send(channelID, guildID, "while away 2")
	send("77", "", "dm while away")

	r = e.start(t)
	e.waitBot(t, channelID, "You said: while away 2")
	e.waitBot(t, "77", "You said: dm while away")
	// Another start catches up again and finds nothing new.
	r.stop(t)
	e.fake.ExpireSessions()
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

// TestRefusedMessageAcrossStop: a message the store refused, and a stop
// before the store's probe brings its catch-up (a database connection cut
// just before a restart): the stop saves no sequence number past it, so
// the next process's RESUME has Discord replay it, and it is answered,
// once. Saving the last sequence number at the stop skipped it for good:
// the refusal is known only to the process that stopped.
func TestRefusedMessageAcrossStop(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	refused := make(chan string, 10)
	e := newEnv(t, func(e *env) {
		e.dsn = pgtest.Schema(t)
		e.wrapPG = func(pg *postgres.Store) e2eStore { return downPG{Store: pg, down: &down, refused: refused} }
	})
	ctx := testCtx(t)
	r := e.start(t)
	post(t, e, discordtest.MessageCreate{ChannelID: "77", Content: "before"})
	e.waitBot(t, "77", "You said: before")
	// Still down through the stop: the probe fails, so the recovery's
	// catch-up never runs in this process.
	down.Store(true)
	post(t, e, discordtest.MessageCreate{ChannelID: "77", Content: "while down"})
	select {
	case <-refused:
	case <-ctx.Done():
		t.Fatal("the message never reached the store")
	}
	r.stop(t)
	down.Store(false)

	r = e.build(t)
	r.run(t)
	e.waitBot(t, "77", "You said: while down")
	post(t, e, discordtest.MessageCreate{ChannelID: "77", Content: "after"})
	e.waitBot(t, "77", "You said: after")
	r.stop(t)
	for said, n := range answers(e) {
		if n != 1 {
			t.Errorf("%q answered %d times, want once", said, n)
		}
	}
}

// post sends a user's message, whether or not a session is connected to
// receive it (Discord keeps it in the channel's history either way).
func post(t *testing.T, e *env, mc discordtest.MessageCreate) discordtest.Message {
	t.Helper()
	if mc.Author.ID == "" {
		mc.Author = alice
	}
	m, err := e.fake.SendMessage(testCtx(t), mc)
	if err != nil && !errors.Is(err, discordtest.ErrNoSession) {
		t.Fatal(err)
	}
	return m
}

// answers counts the bot's "You said: …" answers by what they repeat.
func answers(e *env) map[string]int {
	count := map[string]int{}
	for _, m := range e.fake.Messages() {
		if m.Author.ID != e.fake.BotUser().ID {
			continue
		}
		if _, said, ok := strings.Cut(m.Content, "You said: "); ok {
			count[said]++
		}
	}
	return count
}

// historyReads returns the adapter's Get Channel Messages calls by channel.
func historyReads(e *env) map[string][]url.Values {
	out := map[string][]url.Values{}
	for _, r := range e.fake.Requests() {
		if r.Route != discordtest.RouteListMessages {
			continue
		}
		channel := strings.TrimSuffix(strings.TrimPrefix(r.Path, "/api/v9/channels/"), "/messages")
		q, _ := url.ParseQuery(r.Query)
		out[channel] = append(out[channel], q)
	}
	return out
}

// TestCatchUpFindsNewConversations: messages for the bot posted while no
// process was connected, in a guild channel it never answered in (a
// mention) and in a thread it owns (no mention needed there), are found
// from the guild's GUILD_CREATE — channels with a last_message_id newer
// than the newest message recorded in the guild — and answered once; a
// message not for the bot is not, and a channel whose last message is
// older than that watermark is not read at all. The fake's clock runs two
// minutes behind, so that the guild's messages before the watermark are
// within the catch-up's age. On PostgreSQL and on bbolt.
func TestCatchUpFindsNewConversations(t *testing.T) {
	t.Parallel()
	bothStores(t, testCatchUpFindsNewConversations)
}

// bothStores runs test on PostgreSQL and on bbolt, in parallel.
func bothStores(t *testing.T, test func(t *testing.T, onPG bool)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		test(t, true)
	})
	t.Run("bbolt", func(t *testing.T) {
		t.Parallel()
		test(t, false)
	})
}

func testCatchUpFindsNewConversations(t *testing.T, onPG bool) {
	start := time.Now()
	clock := discordtest.NewClock(start.Add(-2 * time.Minute))
	// With the message content intent, so that the thread's message and
	// the chatter have their text, over REST as on the gateway.
	e := newEnvWith(t, discordtest.Options{Now: clock.Now}, func(e *env) {
		e.cfg.MessageContentIntent = true
		if onPG {
			e.dsn = pgtest.Schema(t)
		}
	})
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	r := e.start(t)
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "13", Content: "chatter before the watermark"})
	thread, err := e.fake.SendThreadCreate(ctx, discordtest.Thread{GuildID: guildID, ParentID: channelID, Name: "the bot's", OwnerID: bot})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(90 * time.Second)
	served := post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "served")})
	e.waitBot(t, channelID, "You said: served")
	r.stop(t)
	e.fake.ExpireSessions() // the next start identifies, and catches up from history

	clock.Advance(30 * time.Second)
	// Posted while no session: the chatter first, so that, were it taken,
	// it would be answered before the mention after it.
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "11", Content: "chatter, not for the bot"})
	first := post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "11", Content: mention(bot, "first contact")})
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: thread.ID, Content: "in the bot's thread"})

	r = e.start(t)
	e.waitBot(t, "11", "You said: first contact")
	e.waitBot(t, thread.ID, "You said: in the bot's thread")
	r.stop(t)

	count := answers(e)
	for _, said := range []string{"served", "first contact", "in the bot's thread"} {
		if count[said] != 1 {
			t.Errorf("%q answered %d times, want once", said, count[said])
		}
	}
	if n := count["chatter, not for the bot"]; n != 0 {
		t.Errorf("a message not for the bot answered %d times", n)
	}
	reads := historyReads(e)
	if q := reads["13"]; len(q) != 0 {
		t.Errorf("channel 13, quiet since before the watermark, read: %v", q)
	}
	mark := snowflakeOrder(served.ID)
	for _, q := range reads["11"] {
		after, err := strconv.ParseInt(q.Get("after"), 10, 64)
		if err != nil || after < mark-int64(catchUpMargin/time.Millisecond)<<22 || after >= snowflakeOrder(first.ID) {
			t.Errorf("channel 11 read after %q; want after the watermark %d less %s, before its messages", q.Get("after"), mark, catchUpMargin)
		}
	}
	if len(reads["11"]) == 0 {
		t.Error("channel 11 never read")
	}
}

// historyGate holds the adapter's history reads of some channels while
// shut, reporting each one it holds on blocked.
type historyGate struct {
	channels map[string]bool
	blocked  chan string

	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newHistoryGate(channels ...string) *historyGate {
	g := &historyGate{channels: map[string]bool{}, blocked: make(chan string, 16), open: make(chan struct{})}
	for _, c := range channels {
		g.channels[c] = true
	}
	return g
}

// openUp lets every read through, the held ones too; shut holds the next ones.
func (g *historyGate) openUp() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *historyGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *historyGate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/api/v9/channels/")
		channel, isHistory := strings.CutSuffix(rest, "/messages")
		if ok && isHistory && r.Method == http.MethodGet && g.channels[channel] {
			g.mu.Lock()
			open := g.open
			g.mu.Unlock()
			select {
			case <-open:
			default:
				g.blocked <- channel
				select {
				case <-open:
				case <-r.Context().Done():
					return nil, r.Context().Err()
				}
			}
		}
		return next.RoundTrip(r)
	})
}

// TestCatchUpStoppedMidway: a session stopped while its guild's catch-up
// is still reading (one channel's history held back) has handed nothing
// over, and holds back the gateway messages that arrived meanwhile, so
// the newest message recorded in the guild stays where it was: the next
// session reads both the channel it could not and the one the held
// message came in, and answers each message once. Recording the live
// message would have put the watermark past the unread one, posted
// earlier. The next start resumes the stopped session, saved at READY as
// not caught up: Discord replays the guild's GUILD_CREATE and the held
// message, and the catch-up runs again. (The fake's clock places the
// messages apart by more than the catch-up's margin.) On PostgreSQL and
// on bbolt.
func TestCatchUpStoppedMidway(t *testing.T) {
	t.Parallel()
	bothStores(t, testCatchUpStoppedMidway)
}

func testCatchUpStoppedMidway(t *testing.T, onPG bool) {
	start := time.Now()
	clock := discordtest.NewClock(start.Add(-2 * time.Minute))
	g := newHistoryGate("11")
	e := newEnvWith(t, discordtest.Options{Now: clock.Now}, func(e *env) {
		e.discordRT = g.wrap
		if onPG {
			e.dsn = pgtest.Schema(t)
		}
	})
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	r := e.start(t)
	clock.Advance(time.Minute)
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "served")})
	e.waitBot(t, channelID, "You said: served")
	r.stop(t)
	e.fake.ExpireSessions() // the next start identifies, and catches up from history

	clock.Advance(30 * time.Second)
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "11", Content: mention(bot, "while away")})
	clock.Advance(30 * time.Second)
	r = e.start(t)
	select {
	case <-g.blocked:
	case <-ctx.Done():
		t.Fatal("channel 11 never read")
	}
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "12", Content: mention(bot, "live")})
	// The DMs' catch-up has nothing to read: the marker's answer says the
	// gateway message before it was taken (and held).
	e.marker(t, "77")
	r.stop(t)
	if n := answers(e)["live"]; n != 0 {
		t.Fatalf("the message held during the catch-up answered %d times before the catch-up ended", n)
	}

	g.openUp()
	r = e.start(t)
	e.waitBot(t, "11", "You said: while away")
	e.waitBot(t, "12", "You said: live")
	r.stop(t)
	count := answers(e)
	for _, said := range []string{"served", "while away", "live", "marker"} {
		if count[said] != 1 {
			t.Errorf("%q answered %d times, want once", said, count[said])
		}
	}
}

// TestCatchUpCutShort: a guild's catch-up whose reads go on past its bound
// gives them up and lets the guild's gateway messages through: a message
// held meanwhile is answered by the same session, not kept waiting on a
// channel that does not answer.
func TestCatchUpCutShort(t *testing.T) {
	t.Parallel()
	g := newHistoryGate("11")
	g.openUp()
	e := newEnv(t, func(e *env) { e.discordRT = g.wrap })
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	r := e.start(t)
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "served")})
	e.waitBot(t, channelID, "You said: served")
	r.stop(t)
	e.fake.ExpireSessions() // the next start identifies, and catches up from history

	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "11", Content: mention(bot, "while away")})
	g.shut()
	// The bound also covers the store's read of what was last seen, which
	// must finish within it for channel 11 to be read at all: at 300 ms a
	// busy machine (-race, the suite's packages at once) ran past it there,
	// and the catch-up gave up before it reached the channel. The message
	// held meanwhile waits out the bound, so it costs the test that long.
	e.tune = func(a *Adapter) { a.catchUpWithin = 2 * time.Second }
	r = e.start(t)
	select {
	case <-g.blocked:
	case <-ctx.Done():
		t.Fatal("channel 11 never read")
	}
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "12", Content: mention(bot, "live")})
	e.waitBot(t, "12", "You said: live")
	r.stop(t)
	if n := answers(e)["while away"]; n != 0 {
		t.Errorf("the message of the channel not read answered %d times", n)
	}
}

// TestCatchUpWaitsOutRateLimit: history reads Discord answers 429 are made
// again once their Retry-After has passed, and what they find is answered.
func TestCatchUpWaitsOutRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	bot := e.fake.BotUser().ID
	r := e.start(t)
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "served")})
	e.waitBot(t, channelID, "You said: served")
	r.stop(t)
	e.fake.ExpireSessions() // the next start identifies, and catches up from history

	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "while away")})
	const wait = 150 * time.Millisecond
	e.fake.RateLimit(discordtest.RouteListMessages, discordtest.RateLimit{Count: 2, RetryAfter: wait})
	r = e.start(t)
	e.waitBot(t, channelID, "You said: while away")
	r.stop(t)
	var reads []discordtest.Request
	for _, q := range e.fake.Requests() {
		if q.Route == discordtest.RouteListMessages {
			reads = append(reads, q)
		}
	}
	if len(reads) < 3 || reads[0].Status != http.StatusTooManyRequests || reads[1].Status != http.StatusTooManyRequests || reads[2].Status != http.StatusOK {
		t.Fatalf("history reads: %v, want two 429s, then 200", reads)
	}
	for i := 1; i < 3; i++ {
		if gap := reads[i].At.Sub(reads[i-1].At); gap < wait {
			t.Errorf("read %d came %s after the 429 before it, want at least its Retry-After %s", i, gap, wait)
		}
	}
	if n := answers(e)["while away"]; n != 1 {
		t.Errorf("answered %d times, want once", n)
	}
}

// TestMessagesDuringGracefulStop: messages arriving once the core's
// Shutdown has begun, while the gateway is still open (flowbridge stops
// the core first, then the adapters), are recorded as received and
// answered after the restart: a new DM's first message (which no
// catch-up could find) and a mention in a new channel. A served DM's
// message held while that DM's history is still being read is left to
// the next start's catch-up, which reads it after the last one recorded.
func TestMessagesDuringGracefulStop(t *testing.T) {
	t.Parallel()
	g := newHistoryGate("77")
	e := newEnv(t, func(e *env) { e.discordRT = g.wrap })
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	g.openUp()
	r := e.start(t)
	post(t, e, discordtest.MessageCreate{ChannelID: "77", Content: "served dm"})
	e.waitBot(t, "77", "You said: served dm")
	r.stop(t)
	e.fake.ExpireSessions() // the next start identifies, and catches up from history

	// A session whose DM catch-up is held back (DM 77's history).
	g.shut()
	r = e.start(t)
	select {
	case <-g.blocked:
	case <-ctx.Done():
		t.Fatal("DM 77 never read")
	}
	post(t, e, discordtest.MessageCreate{ChannelID: "77", Content: "served dm, held"})
	// The core stops first, as flowbridge does; the gateway stays open.
	shutdownCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.core.Shutdown(shutdownCtx); err != nil {
		t.Fatal(err)
	}
	post(t, e, discordtest.MessageCreate{ChannelID: "79", Content: "new dm, stopping"})
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: "14", Content: mention(bot, "new channel, stopping")})
	// An autocomplete is answered by the adapter alone, after the
	// messages before it were taken.
	data := flowCommand("healthcheck", [2]string{"host", "we"})
	data.Options[0].Options[0].Focused = true
	sent, err := e.fake.SendInteraction(ctx, discordtest.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, GuildID: guildID, ChannelID: channelID, User: alice, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.WaitInteractionResponse(ctx, sent.ID); err != nil {
		t.Fatal(err)
	}
	r.stop(t)
	if got := answers(e); len(got) != 1 {
		t.Fatalf("answers while stopping: %v, want only the first", got)
	}

	g.openUp()
	r = e.start(t)
	e.waitBot(t, "77", "You said: served dm, held")
	e.waitBot(t, "79", "You said: new dm, stopping")
	e.waitBot(t, "14", "You said: new channel, stopping")
	r.stop(t)
	for said, n := range answers(e) {
		if n != 1 {
			t.Errorf("%q answered %d times, want once", said, n)
		}
	}
}

// TestStopDrainsGateway: at a stop, what the gateway sent before it is
// handled before the connection closes (discordgo drops every event it
// reads once Close has begun, and a new DM's message could not be found
// again by a catch-up): the adapter sends a heartbeat and waits for its
// ACK, which comes after them. A handler holds the read loop on one
// message, so the next one is still unread when the stop begins.
func TestStopDrainsGateway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := testCtx(t)
	r := e.start(t)
	stalled, release := make(chan struct{}), make(chan struct{})
	var released sync.Once
	remove := r.a.shards[0].session.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		if m.Content == "stall" {
			close(stalled)
			<-release
		}
	})
	defer remove()
	// Also when the test fails early: the read loop must not stay held.
	defer released.Do(func() { close(release) })
	post(t, e, discordtest.MessageCreate{ChannelID: "83", Content: "stall"})
	select {
	case <-stalled:
	case <-ctx.Done():
		t.Fatal("the stalling message never reached the handler")
	}
	post(t, e, discordtest.MessageCreate{ChannelID: "84", Content: "sent as the stop begins"})
	// discordgo's own first heartbeat, sent right after it connects, is
	// counted before the stop's.
	conns := e.fake.Connections()
	last, err := e.fake.WaitConnection(ctx, func(c discordtest.Connection) bool { return c.Index == conns[len(conns)-1].Index && c.Heartbeats > 0 })
	if err != nil {
		t.Fatal(err)
	}
	r.cancel()
	if _, err := e.fake.WaitConnection(ctx, func(c discordtest.Connection) bool { return c.Index == last.Index && c.Heartbeats > last.Heartbeats }); err != nil {
		t.Fatalf("no heartbeat at the stop: %v", err)
	}
	released.Do(func() { close(release) })
	r.stop(t)

	r = e.start(t)
	e.waitBot(t, "84", "You said: sent as the stop begins")
	r.stop(t)
	if n := answers(e)["sent as the stop begins"]; n != 1 {
		t.Errorf("answered %d times, want once", n)
	}
}

// TestNewDMAfterSessionLost: a DM flowbridge never served gets three
// messages while no process runs, and the session cannot be resumed; the
// new session's catch-up cannot know the DM (a bot cannot list its DMs),
// but the DM's next message, the first the new session gets, brings the
// DM's history since the gap: the four are answered once each, in order.
func TestNewDMAfterSessionLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.start(t)
	e.marker(t, "77")
	r.stop(t)
	e.fake.ExpireSessions() // the next start identifies: nothing is replayed
	for i := 1; i <= 3; i++ {
		post(t, e, discordtest.MessageCreate{ChannelID: "88", Content: fmt.Sprint("new dm ", i)})
	}
	r = e.start(t)
	post(t, e, discordtest.MessageCreate{ChannelID: "88", Content: "new dm 4"})
	e.waitBot(t, "88", "You said: new dm 4")
	for i := 1; i <= 3; i++ {
		e.waitBot(t, "88", fmt.Sprint("You said: new dm ", i))
	}
	r.stop(t)
	var order []string
	for _, m := range e.fake.Messages() {
		if _, said, ok := strings.Cut(m.Content, "You said: "); ok && m.ChannelID == "88" && m.Author.ID == e.fake.BotUser().ID {
			order = append(order, said)
		}
	}
	if want := []string{"new dm 1", "new dm 2", "new dm 3", "new dm 4"}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("answers in the new DM: %q, want %q, each once", order, want)
	}
}
