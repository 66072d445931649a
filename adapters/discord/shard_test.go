package discord

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// onShard returns a Discord ID that routes to shard of count: (id >> 22) % count == shard.
func onShard(n, shard, count int) string {
	return strconv.FormatUint(uint64(n*count+shard)<<22|uint64(n), 10)
}

// The guilds of the sharded tests: guildID ("1", the env's) is on shard 0 of 2.
var (
	shardGuild1   = onShard(1, 1, 2)
	shardChannel1 = "11"
)

// newShardedEnv is an env whose fake recommends and routes 2 shards, with
// the guild of channelID on shard 0 and that of shardChannel1 on shard 1;
// the commands are registered in both guilds.
func newShardedEnv(t *testing.T) *env {
	t.Helper()
	e := newEnvWith(t, discordtest.Options{Shards: 2}, func(e *env) {
		e.cfg.ShardCount = 2
		e.cfg.GuildIDs = []string{guildID, shardGuild1}
	})
	if got := discordtest.ShardOf(guildID, 2); got != 0 {
		t.Fatalf("ShardOf(%s, 2) = %d, want 0", guildID, got)
	}
	if got := discordtest.ShardOf(shardGuild1, 2); got != 1 {
		t.Fatalf("ShardOf(%s, 2) = %d, want 1", shardGuild1, got)
	}
	if err := e.fake.AddChannel(testCtx(t), discordgo.Channel{ID: shardChannel1, GuildID: shardGuild1, Type: discordgo.ChannelTypeGuildText, Name: "one"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// restLog records the REST calls of one adapter, "METHOD /path".
type restLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *restLog) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.calls = append(l.calls, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		return next.RoundTrip(r)
	})
}

// count returns how many calls start with prefix.
func (l *restLog) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// replies returns how many messages the adapter posted in channel.
func (l *restLog) replies(channel string) int {
	return l.count("POST /api/v9/channels/" + channel + "/messages")
}

// startShards runs a bridge holding ids of the env's 2 shards (none: all),
// on a store of its own, recording its REST calls; it waits until its
// shards are connected.
func (e *env) startShards(t *testing.T, ids ...int) (*bridgeRun, *restLog) {
	t.Helper()
	log := &restLog{}
	e.cfg.ShardIDs = ids
	e.storePath = filepath.Join(t.TempDir(), "s.db")
	e.discordRT = log.wrap
	r := e.build(t)
	r.run(t)
	for _, sh := range r.a.shards {
		if _, err := e.fake.WaitShardReady(testCtx(t), sh.id, 2); err != nil {
			t.Fatal(err)
		}
	}
	return r, log
}

// waitCommands waits until the commands are registered in every guild of the env.
func (e *env) waitCommands(t *testing.T) {
	t.Helper()
	for _, g := range e.cfg.GuildIDs {
		if _, err := e.fake.WaitRequest(testCtx(t), func(r discordtest.Request) bool {
			return r.Route == discordtest.RouteGuildCommands && r.Status == http.StatusOK && strings.Contains(r.Path, "/guilds/"+g+"/")
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// askEveryShard sends a mention on each shard's guild and a DM, and waits
// for the three answers; it returns the DM's channel.
func (e *env) askEveryShard(t *testing.T) string {
	t.Helper()
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	const dm = "77"
	for _, mc := range []discordtest.MessageCreate{
		{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(bot, "on shard zero")},
		{GuildID: shardGuild1, ChannelID: shardChannel1, Author: alice, Content: mention(bot, "on shard one")},
		{ChannelID: dm, Author: alice, Content: "in a DM"},
	} {
		if _, err := e.fake.SendMessage(ctx, mc); err != nil {
			t.Fatal(err)
		}
	}
	e.waitBot(t, channelID, "You said: on shard zero")
	e.waitBot(t, shardChannel1, "You said: on shard one")
	e.waitBot(t, dm, "You said: in a DM")
	return dm
}

// flowOnShard1 runs /flow healthcheck in the guild of shard 1 and waits for its result.
func (e *env) flowOnShard1(t *testing.T) {
	t.Helper()
	sent, err := e.fake.SendInteraction(testCtx(t), discordtest.Interaction{GuildID: shardGuild1, ChannelID: shardChannel1, User: alice,
		Data: flowCommand("healthcheck", [2]string{"host", "web1"})})
	if err != nil {
		t.Fatal(err)
	}
	e.waitOriginal(t, sent.ID, "Checked web1")
}

// TestShardsAllInOneProcess: with shard_count = 2 and no shard_ids, one
// process connects both shards, each identifying as itself, and answers a
// guild on each and a DM.
func TestShardsAllInOneProcess(t *testing.T) {
	t.Parallel()
	e := newShardedEnv(t)
	r, _ := e.startShards(t) // no shard_ids: all of them
	var shards [][2]int
	for _, h := range e.fake.Handshakes() {
		if h.Shard == nil {
			t.Fatalf("IDENTIFY without shard: %+v", h)
		}
		shards = append(shards, *h.Shard)
	}
	slices.SortFunc(shards, func(x, y [2]int) int { return x[0] - y[0] })
	if want := [][2]int{{0, 2}, {1, 2}}; !slices.Equal(shards, want) {
		t.Errorf("IDENTIFY shards = %v, want %v", shards, want)
	}
	e.waitCommands(t)

	e.askEveryShard(t)
	e.flowOnShard1(t)
	if err := r.a.Ready(); err != nil {
		t.Errorf("Ready() = %v with both shards connected, want nil", err)
	}
}

// TestShardsSplitAcrossProcesses: two processes (each with its own core
// and store) hold shard 0 and shard 1. Each answers only the messages of
// its guilds, the DMs go to shard 0's, a command in shard 1's guild is
// answered by shard 1's, and only shard 0's registers the commands.
func TestShardsSplitAcrossProcesses(t *testing.T) {
	t.Parallel()
	e := newShardedEnv(t)
	zero, log0 := e.startShards(t, 0)
	one, log1 := e.startShards(t, 1)
	e.waitCommands(t)

	dm := e.askEveryShard(t)
	e.flowOnShard1(t)

	for _, tt := range []struct {
		name    string
		log     *restLog
		channel string
		want    int
	}{
		{"shard 0's process", log0, channelID, 1},
		{"shard 0's process", log0, dm, 1},
		{"shard 0's process", log0, shardChannel1, 0},
		{"shard 1's process", log1, shardChannel1, 1},
		{"shard 1's process", log1, channelID, 0},
		{"shard 1's process", log1, dm, 0},
	} {
		if got := tt.log.replies(tt.channel); got != tt.want {
			t.Errorf("%s posted %d messages in channel %s, want %d", tt.name, got, tt.channel, tt.want)
		}
	}
	if n := log1.count("POST /api/v9/interactions/"); n != 1 {
		t.Errorf("shard 1's process answered %d interactions, want 1 (the command in its guild)", n)
	}
	if n := log0.count("POST /api/v9/interactions/"); n != 0 {
		t.Errorf("shard 0's process answered %d interactions, want 0", n)
	}
	if n := log0.count("PUT /api/v9/applications/"); n != len(e.cfg.GuildIDs) {
		t.Errorf("shard 0's process registered commands %d times, want once per guild (%d)", n, len(e.cfg.GuildIDs))
	}
	// A reload asks again; the process without shard 0 still leaves the commands alone.
	if err := one.a.SyncCommands(testCtx(t)); err != nil {
		t.Errorf("SyncCommands() without shard 0 = %v, want nil", err)
	}
	if n := log1.count("GET /api/v9/applications/") + log1.count("PUT /api/v9/applications/"); n != 0 {
		t.Errorf("shard 1's process made %d command calls, want none: shard 0's registers", n)
	}
	for name, r := range map[string]*bridgeRun{"shard 0's": zero, "shard 1's": one} {
		if err := r.a.Ready(); err != nil {
			t.Errorf("%s Ready() = %v, want nil", name, err)
		}
	}
}

// TestReadyNamesEachShardDown: Ready reports every held shard that is not
// connected, by number, and nil once all are.
func TestReadyNamesEachShardDown(t *testing.T) {
	t.Parallel()
	cfg := validConfig()
	cfg.ShardCount, cfg.ShardIDs = 3, []int{2, 0}
	a, err := New(cfg, catalogCore{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	down := func(want ...string) {
		t.Helper()
		err := a.Ready()
		var got []string
		for _, sh := range []string{"0", "1", "2"} {
			if err != nil && strings.Contains(err.Error(), "shard "+sh+" of 3 not connected") {
				got = append(got, sh)
			}
		}
		if !slices.Equal(got, want) || (len(want) == 0) != (err == nil) {
			t.Errorf("Ready() = %v, want shards %v named as not connected", err, want)
		}
	}
	down("0", "2")
	a.shards[0].connected.Store(true)
	down("2")
	a.shards[1].connected.Store(true)
	down()
	a.onDisconnect(a.shards[0])
	if err := a.Ready(); err == nil || !strings.Contains(err.Error(), "discord gateway shard 0 of 3 not connected: connection lost") {
		t.Errorf("Ready() after shard 0 dropped = %v, want it named with the reason", err)
	}
}

// TestIdentifyPacer: shards of one bucket (shard_id % max_concurrency)
// identify one window apart; shards of other buckets do not wait for them.
func TestIdentifyPacer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		buckets int
		shards  []int
		want    []time.Duration // when each shard may identify, after the start
	}{
		{"one bucket", 1, []int{0, 1, 2}, []time.Duration{0, 5 * time.Second, 10 * time.Second}},
		{"two buckets", 2, []int{0, 1, 2, 3, 4}, []time.Duration{0, 0, 5 * time.Second, 5 * time.Second, 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				p := newIdentifyPacer(tt.buckets, identifyEvery)
				start := time.Now()
				got := make([]time.Duration, len(tt.shards))
				for i, id := range tt.shards {
					if !p.wait(t.Context(), id) {
						t.Fatalf("wait(%d) = false", id)
					}
					got[i] = time.Since(start)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("identified at %v, want %v", got, tt.want)
				}
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				if p.wait(ctx, 0) {
					t.Errorf("wait with an ended context = true, want false")
				}
			})
		})
	}
	var none *identifyPacer
	if !none.wait(t.Context(), 7) {
		t.Errorf("nil pacer wait = false, want true at once")
	}
}
