package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/pgtest"
)

// TestSetResumePinsDiscordgo: setResume finds discordgo's unexported
// sessionID, gateway and sequence and sets them; it fails when a
// discordgo upgrade renames or retypes them, and setResume must then be
// revisited (the adapter would identify at every start).
func TestSetResumePinsDiscordgo(t *testing.T) {
	s, err := discordgo.New("Bot x")
	if err != nil {
		t.Fatal(err)
	}
	if err := setResume(s, "session-1", "wss://resume.example/?v=10&encoding=json", 42); err != nil {
		t.Fatalf("setResume() = %v; discordgo's fields changed", err)
	}
	v := reflect.ValueOf(s).Elem()
	read := func(name string) reflect.Value {
		f := v.FieldByName(name)
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	if got := read("sessionID").String(); got != "session-1" {
		t.Errorf("sessionID = %q", got)
	}
	if got := read("gateway").String(); got != "wss://resume.example/?v=10&encoding=json" {
		t.Errorf("gateway = %q", got)
	}
	if got := *read("sequence").Interface().(*int64); got != 42 {
		t.Errorf("*sequence = %d", got)
	}
}

// killable makes the adapters built next refuse to dial the gateway once
// the returned flag is set: a process killed does not reconnect.
func (e *env) killable() *atomic.Bool {
	var down atomic.Bool
	e.tune = func(a *Adapter) {
		for _, sh := range a.shards {
			d := *sh.session.Dialer
			next := d.NetDialContext
			d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if down.Load() {
					return nil, errors.New("killed")
				}
				return next(ctx, network, addr)
			}
			sh.session.Dialer = &d
		}
	}
	return &down
}

// waitSaved waits until the store holds r's shard's session at the
// sequence number the shard has reached, and returns it.
func waitSaved(t *testing.T, r *bridgeRun, sh *shard) gatewaySession {
	t.Helper()
	ctx := testCtx(t)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		text, ok, err := r.core.AdapterState(ctx, sh.stateName(), resumeWithin)
		if err != nil {
			t.Fatal(err)
		}
		var s gatewaySession
		if ok && json.Unmarshal([]byte(text), &s) == nil && s.ID != "" && s.Seq == sh.seq.Load() {
			return s
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("shard %d's session at seq %d never saved (store: %q)", sh.id, sh.seq.Load(), text)
		}
	}
}

// kill leaves Discord and the store as SIGKILL would leave them: the
// gateway connections of r drop without a close frame, nothing reconnects,
// and the store keeps the sessions as they were saved while r ran (a
// killed process writes nothing at exit: what r's stop writes is put
// back by restore, before the next process runs). It returns, by shard,
// the session the store held when its connection dropped: the one the next
// process resumes. (Not waitSaved's: an event after it, such as the echo of
// an answer, may have been saved before the drop.)
func kill(t *testing.T, r *bridgeRun, down *atomic.Bool) (restore func(*bridgeRun), sessions map[int]gatewaySession) {
	t.Helper()
	ctx := testCtx(t)
	down.Store(true)
	saved := map[string]string{}
	sessions = map[int]gatewaySession{}
	for _, sh := range r.a.shards {
		sh.gw.cut()
		text, _, err := r.core.AdapterState(ctx, sh.stateName(), resumeWithin)
		if err != nil {
			t.Fatal(err)
		}
		saved[sh.stateName()] = text
		var s gatewaySession
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			t.Fatalf("shard %d's saved session %q: %v", sh.id, text, err)
		}
		sessions[sh.id] = s
	}
	r.stop(t)
	return func(next *bridgeRun) {
		t.Helper()
		for name, text := range saved {
			if err := next.core.SaveAdapterState(ctx, name, text); err != nil {
				t.Fatal(err)
			}
		}
	}, sessions
}

// TestResumeAfterRestart: a bridge stopped, or killed, then a new DM's
// first message and a mention posted while no process runs: the next
// process on the same store RESUMEs the stored session at the stored
// sequence number, Discord replays what it missed, and each message is
// answered once (the DM's could not be found in any history: a bot cannot
// list DMs). Those answered before are not answered again, though the
// replay from the stored sequence number may hold them.
func TestResumeAfterRestart(t *testing.T) {
	t.Parallel()
	for _, killed := range []bool{false, true} {
		name := "stopped"
		if killed {
			name = "killed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			down := e.killable()
			e.tune = wrapTune(e.tune, func(a *Adapter) { a.saveSessionEvery = 10 * time.Millisecond })
			bot := e.fake.BotUser().ID
			r := e.start(t)
			post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "before")})
			e.waitBot(t, channelID, "You said: before")
			e.marker(t, "77")
			sh := r.a.shards[0]
			var want gatewaySession
			restore := func(*bridgeRun) {}
			if killed {
				waitSaved(t, r, sh)
				var saved map[int]gatewaySession
				restore, saved = kill(t, r, down)
				want = saved[sh.id]
			} else {
				r.stop(t)
				want = sh.current()
			}
			conns := len(e.fake.Connections())

			post(t, e, discordtest.MessageCreate{ChannelID: "78", Content: "new dm while away"})
			post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "while away")})

			e.tune = nil
			r = e.build(t)
			restore(r)
			r.run(t)
			h, err := e.fake.WaitHandshake(testCtx(t), func(h discordtest.Handshake) bool { return h.Conn > conns })
			if err != nil {
				t.Fatal(err)
			}
			if h.Op != 6 || !h.Resumed || h.SessionID != want.ID || h.Seq != want.Seq {
				t.Fatalf("restart's handshake: op %d, session %q, seq %d, resumed %v; want RESUME of %q at %d", h.Op, h.SessionID, h.Seq, h.Resumed, want.ID, want.Seq)
			}
			e.waitBot(t, "78", "You said: new dm while away")
			e.waitBot(t, channelID, "You said: while away")
			e.marker(t, "77")
			r.stop(t)
			for said, n := range answers(e) {
				if want := map[bool]int{true: 2, false: 1}[said == "marker"]; n != want {
					t.Errorf("%q answered %d times, want %d", said, n, want)
				}
			}
		})
	}
}

// wrapTune runs both tunings of an adapter.
func wrapTune(first, then func(*Adapter)) func(*Adapter) {
	return func(a *Adapter) {
		if first != nil {
			first(a)
		}
		then(a)
	}
}

// TestResumeRefusedIdentifies: a stored session Discord no longer knows
// (its window passed) is answered with op 9; the bridge identifies on the
// same connection and catches up from history as without a session. One
// saved longer ago than resumeWithin is not tried at all.
func TestResumeRefusedIdentifies(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64 // the core's clock, ahead of time.Now
	e := newEnv(t, func(e *env) {
		e.core = func(c *bridge.Config) {
			c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		}
	})
	bot := e.fake.BotUser().ID
	r := e.start(t)
	e.marker(t, "77")
	r.stop(t)
	first := r.a.shards[0].current()

	// Expired: op 9, then IDENTIFY, and the served DM's history is read.
	e.fake.ExpireSessions()
	post(t, e, discordtest.MessageCreate{ChannelID: "77", Content: "dm while away"})
	conns := len(e.fake.Connections())
	r = e.start(t)
	hs := handshakesAfter(e, conns)
	if len(hs) < 2 || hs[0].Op != 6 || hs[0].SessionID != first.ID || hs[0].Resumed || hs[1].Op != 2 || hs[1].Conn != hs[0].Conn {
		t.Fatalf("handshakes after an expired session: %v; want a refused RESUME of %q, then IDENTIFY on its connection", brief(hs), first.ID)
	}
	e.waitBot(t, "77", "You said: dm while away")
	if len(historyReads(e)["77"]) == 0 {
		t.Error("DM 77 not read from history")
	}
	r.stop(t)

	// Saved longer ago than resumeWithin (the core's clock has moved on):
	// IDENTIFY at once, though Discord would still resume the session.
	offset.Store(int64(resumeWithin + time.Second))
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "while away")})
	conns = len(e.fake.Connections())
	r = e.start(t)
	if hs := handshakesAfter(e, conns); len(hs) == 0 || hs[0].Op != 2 {
		t.Fatalf("handshakes after a stale session: %v; want IDENTIFY", brief(hs))
	}
	e.waitBot(t, channelID, "You said: while away")
	r.stop(t)
	for said, n := range answers(e) {
		if n != 1 {
			t.Errorf("%q answered %d times, want once", said, n)
		}
	}
}

// brief describes handshakes in a line each: connection, op, session, resumed.
func brief(hs []discordtest.Handshake) []string {
	var out []string
	for _, h := range hs {
		out = append(out, fmt.Sprintf("conn %d op %d session %q seq %d resumed %v", h.Conn, h.Op, h.SessionID, h.Seq, h.Resumed))
	}
	return out
}

// handshakesAfter returns the handshakes on connections after the first conns.
func handshakesAfter(e *env, conns int) []discordtest.Handshake {
	var out []discordtest.Handshake
	for _, h := range e.fake.Handshakes() {
		if h.Conn > conns {
			out = append(out, h)
		}
	}
	return out
}

// TestReplicaResumesShard: replicas on PostgreSQL, one per shard; the one
// holding shard 0 (the DMs) is killed, a new DM's first message and a
// mention in shard 0's guild are posted, and the replica that holds shard
// 0 next RESUMEs the dead one's session from the shared store: both are
// answered once; shard 1's replica is left alone.
func TestReplicaResumesShard(t *testing.T) {
	t.Parallel()
	e := newShardedEnv(t)
	e.dsn = pgtest.Schema(t)
	bot := e.fake.BotUser().ID
	down := e.killable()
	e.tune = wrapTune(e.tune, func(a *Adapter) { a.saveSessionEvery = 10 * time.Millisecond })
	zero, _ := e.startShards(t, 0)
	e.tune = nil
	one, _ := e.startShards(t, 1)
	e.waitCommands(t)
	dm := e.askEveryShard(t)
	sh := zero.a.shards[0]
	waitSaved(t, zero, sh)
	restore, saved := kill(t, zero, down)
	want := saved[sh.id]
	conns := len(e.fake.Connections())

	post(t, e, discordtest.MessageCreate{ChannelID: "78", Content: "new dm while away"})
	post(t, e, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Content: mention(bot, "while away")})

	e.cfg.ShardIDs = []int{0}
	next := e.build(t)
	restore(next)
	next.run(t)
	h, err := e.fake.WaitHandshake(testCtx(t), func(h discordtest.Handshake) bool { return h.Conn > conns })
	if err != nil {
		t.Fatal(err)
	}
	if h.Op != 6 || !h.Resumed || h.SessionID != want.ID || h.Seq != want.Seq {
		t.Fatalf("shard 0's next handshake: op %d, session %q, seq %d, resumed %v; want RESUME of %q at %d", h.Op, h.SessionID, h.Seq, h.Resumed, want.ID, want.Seq)
	}
	e.waitBot(t, "78", "You said: new dm while away")
	e.waitBot(t, channelID, "You said: while away")
	e.marker(t, dm)
	next.stop(t)
	if err := one.a.Ready(); err != nil {
		t.Errorf("shard 1's replica: Ready() = %v", err)
	}
	for said, n := range answers(e) {
		if n != 1 {
			t.Errorf("%q answered %d times, want once", said, n)
		}
	}
}
