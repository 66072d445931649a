package discordtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// guildOnShard returns a guild id that Discord routes to shard of count.
func guildOnShard(n, shard, count int) string {
	return strconv.FormatUint(uint64(n*count+shard)<<22|uint64(n), 10)
}

func TestShardOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		guild string
		count int
		want  int
	}{
		{"", 4, 0},                    // DMs go to shard 0
		{"41771983423143937", 1, 0},   // one shard takes everything
		{"41771983423143937", 2, 0},   // 41771983423143937 >> 22 = 9959216934 (the docs' example guild)
		{"41771983423143937", 7, 2},   // 9959216934 % 7
		{"197038439483310086", 3, 2},  // 46977624770 % 3
		{guildOnShard(5, 3, 4), 4, 3}, // the helper below agrees
	}
	for _, tt := range tests {
		if got := discordtest.ShardOf(tt.guild, tt.count); got != tt.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tt.guild, tt.count, got, tt.want)
		}
	}
}

// shardSession opens a discordgo session identifying as shard id of count, as the adapter
// will, with events handled in order so a test can tell what arrived before a marker.
func shardSession(t *testing.T, fake *discordtest.Server, id, count int) (*discordgo.Session, <-chan *discordgo.Event) {
	t.Helper()
	s := newSession(t, fake, bridgeIntents)
	s.ShardID, s.ShardCount = id, count
	s.SyncEvents = true
	evs := make(chan *discordgo.Event, 256)
	s.AddHandler(func(_ *discordgo.Session, e *discordgo.Event) {
		if e.Type != "" {
			evs <- e
		}
	})
	open(t, s)
	return s, evs
}

// rawEvent is what a test reads of an event: its raw data, since the structs discordgo
// hands out are shared with its state, which keeps writing to them.
type rawEvent struct {
	typ     string
	ID      string   `json:"id"`
	GuildID string   `json:"guild_id"`
	Content string   `json:"content"`
	Shard   *[2]int  `json:"shard"`
	Guilds  []rawRef `json:"guilds"`
}

type rawRef struct {
	ID string `json:"id"`
}

// guild returns the guild the event is about, "" for none.
func (e rawEvent) guild() string {
	if e.typ == "GUILD_CREATE" {
		return e.ID
	}
	return e.GuildID
}

// until returns the events before the MESSAGE_CREATE whose content is marker.
func until(t *testing.T, evs <-chan *discordgo.Event, marker string) []rawEvent {
	t.Helper()
	var out []rawEvent
	for {
		e := receive(t, evs, "MESSAGE_CREATE "+marker)
		r := rawEvent{typ: e.Type}
		if err := json.Unmarshal(e.RawData, &r); err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
		if r.typ == "MESSAGE_CREATE" && r.Content == marker {
			return out
		}
		out = append(out, r)
	}
}

// twoShardGuilds starts a fake of two shards with one guild on each, and
// a text channel in each guild (ch0 in g0 on shard 0, ch1 in g1 on 1).
func twoShardGuilds(t *testing.T) (fake *discordtest.Server, c context.Context, g0, g1, ch0, ch1 string) {
	t.Helper()
	fake = newFake(t, discordtest.Options{Shards: 2})
	c = ctx(t)
	g0, g1 = guildOnShard(1, 0, 2), guildOnShard(1, 1, 2)
	ch0, ch1 = guildOnShard(2, 0, 2), guildOnShard(3, 1, 2)
	for _, ch := range []discordgo.Channel{
		{ID: ch0, GuildID: g0, Type: discordgo.ChannelTypeGuildText, Name: "zero"},
		{ID: ch1, GuildID: g1, Type: discordgo.ChannelTypeGuildText, Name: "one"},
	} {
		if err := fake.AddChannel(c, ch); err != nil {
			t.Fatal(err)
		}
	}
	return fake, c, g0, g1, ch0, ch1
}

func TestShardsGetTheirGuildsOnly(t *testing.T) {
	t.Parallel()
	fake, c, g0, g1, ch0, ch1 := twoShardGuilds(t)
	s0, ev0 := shardSession(t, fake, 0, 2)
	s1, ev1 := shardSession(t, fake, 1, 2)
	if _, err := s0.ApplicationCommandBulkOverwrite(fake.ApplicationID(), g1, []*discordgo.ApplicationCommand{{Name: "run", Description: "Run"}}); err != nil {
		t.Fatal(err)
	}
	if gb, err := s0.GatewayBot(); err != nil || gb.Shards != 2 {
		t.Errorf("GatewayBot() = %+v, %v, want 2 shards", gb, err)
	}
	for shard := range 2 {
		if _, err := fake.WaitShardReady(c, shard, 2); err != nil {
			t.Fatal(err)
		}
	}

	// What each shard must see: its guild's events, and shard 0 the DMs.
	g2 := guildOnShard(4, 1, 2)
	if err := fake.AddGuild(c, g2); err != nil {
		t.Fatal(err)
	}
	for _, mc := range []discordtest.MessageCreate{
		{ChannelID: ch0, GuildID: g0, Author: alice, Content: "in zero"},
		{ChannelID: ch1, GuildID: g1, Author: alice, Content: "in one"},
		{ChannelID: "77", Author: alice, Content: "in a dm"},
	} {
		if _, err := fake.SendMessage(c, mc); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fake.SendInteraction(c, discordtest.Interaction{GuildID: g1, ChannelID: ch1, User: alice,
		Data: discordgo.ApplicationCommandInteractionData{Name: "run"}}); err != nil {
		t.Fatal(err)
	}
	for _, mc := range []discordtest.MessageCreate{
		{ChannelID: ch0, GuildID: g0, Author: alice, Content: "end"},
		{ChannelID: ch1, GuildID: g1, Author: alice, Content: "end"},
	} {
		if _, err := fake.SendMessage(c, mc); err != nil {
			t.Fatal(err)
		}
	}

	// READY names the shard and lists its guilds only; then come its guilds' events.
	type seen struct{ typ, guild string }
	for _, tt := range []struct {
		shard  int
		evs    <-chan *discordgo.Event
		guilds []string
		want   []seen
	}{
		{0, ev0, []string{g0}, []seen{{"GUILD_CREATE", g0}, {"MESSAGE_CREATE", g0}, {"MESSAGE_CREATE", ""}}},
		{1, ev1, []string{g1}, []seen{{"GUILD_CREATE", g1}, {"GUILD_CREATE", g2}, {"MESSAGE_CREATE", g1}, {"INTERACTION_CREATE", g1}}},
	} {
		var got []seen
		for _, e := range until(t, tt.evs, "end") {
			if e.typ != "READY" {
				got = append(got, seen{e.typ, e.guild()})
				continue
			}
			var ids []string
			for _, g := range e.Guilds {
				ids = append(ids, g.ID)
			}
			if e.Shard == nil || *e.Shard != [2]int{tt.shard, 2} || !slices.Equal(ids, tt.guilds) {
				t.Errorf("shard %d: READY shard %v guilds %v, want [%d 2] and %v", tt.shard, e.Shard, ids, tt.shard, tt.guilds)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("shard %d saw %v, want %v", tt.shard, got, tt.want)
		}
	}

	// With shard 1 gone, its guilds' events have nowhere to go; shard 0 still gets its own.
	closeSession(s1)
	if _, err := fake.SendMessage(c, discordtest.MessageCreate{ChannelID: ch1, GuildID: g1, Author: alice, Content: "lost"}); !errors.Is(err, discordtest.ErrNoSession) {
		t.Errorf("SendMessage to shard 1's guild with shard 1 closed = %v, want ErrNoSession", err)
	}
	if _, err := fake.SendMessage(c, discordtest.MessageCreate{ChannelID: ch0, GuildID: g0, Author: alice, Content: "still"}); err != nil {
		t.Errorf("SendMessage to shard 0's guild = %v", err)
	}
}

// TestUnshardedSessionGetsEverything checks that a session sending no shard is shard 0 of 1.
func TestUnshardedSessionGetsEverything(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{})
	_, evs := shardSession(t, fake, 0, 1)
	c := ctx(t)
	for _, g := range []string{guildOnShard(1, 0, 2), guildOnShard(1, 1, 2)} {
		if _, err := fake.SendMessage(c, discordtest.MessageCreate{ChannelID: g + "1", GuildID: g, Author: alice, Content: "hi " + g}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fake.SendMessage(c, discordtest.MessageCreate{ChannelID: "5", Author: alice, Content: "end"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range until(t, evs, "end") {
		if e.typ == "MESSAGE_CREATE" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("unsharded session got %d guild messages, want 2", n)
	}
	if hs := fake.Handshakes(); len(hs) != 1 || hs[0].Shard != nil {
		t.Errorf("Handshakes() = %+v, want one IDENTIFY without shard", hs)
	}
}

func TestInvalidShardClosed4010(t *testing.T) {
	t.Parallel()
	// discordgo refuses to identify with ShardID >= ShardCount itself (ErrWSShardBounds), so
	// these IDENTIFYs are sent by hand.
	for _, shard := range [][2]int{{2, 2}, {5, 2}, {-1, 2}, {0, 0}} {
		t.Run(strconv.Itoa(shard[0])+"of"+strconv.Itoa(shard[1]), func(t *testing.T) {
			t.Parallel()
			fake := newFake(t, discordtest.Options{})
			c := dialGateway(t, fake)
			c.send(2, map[string]any{"token": "Bot " + fake.Token(), "intents": bridgeIntents, "properties": map[string]string{}, "shard": shard})
			_, _, err := c.ws.ReadMessage()
			if ce, ok := errors.AsType[*websocket.CloseError](err); !ok || ce.Code != 4010 || ce.Text != "Invalid shard." {
				t.Fatalf("after IDENTIFY with shard %v: %v, want close 4010 Invalid shard.", shard, err)
			}
			if hs := fake.Handshakes(); len(hs) != 1 || hs[0].CloseCode != 4010 || hs[0].Shard == nil || *hs[0].Shard != shard {
				t.Errorf("Handshakes() = %+v, want one refused with 4010", hs)
			}
		})
	}
}

// TestDropShard: dropping one shard's connection leaves the other shard's alone; the
// dropped shard resumes and gets the events of its guilds dispatched while it was away.
func TestDropShard(t *testing.T) {
	t.Parallel()
	fake, c, g0, g1, ch0, ch1 := twoShardGuilds(t)
	_, ev0 := shardSession(t, fake, 0, 2)
	_, ev1 := shardSession(t, fake, 1, 2)
	var sessions [2]string
	for shard := range 2 {
		id, err := fake.WaitShardReady(c, shard, 2)
		if err != nil {
			t.Fatal(err)
		}
		sessions[shard] = id
	}
	if err := fake.DropShard(c, 1, 2); err != nil {
		t.Fatal(err)
	}
	for _, mc := range []discordtest.MessageCreate{
		{ChannelID: ch1, GuildID: g1, Author: alice, Content: "while away"},
		{ChannelID: ch1, GuildID: g1, Author: alice, Content: "end"},
		{ChannelID: ch0, GuildID: g0, Author: alice, Content: "end"},
	} {
		if _, err := fake.SendMessage(c, mc); err != nil {
			t.Fatal(err)
		}
	}
	resumed, err := fake.WaitHandshake(c, func(h discordtest.Handshake) bool { return h.Op == 6 && h.Resumed })
	if err != nil {
		t.Fatal(err)
	}
	if resumed.SessionID != sessions[1] {
		t.Errorf("RESUME of session %s, want shard 1's %s", resumed.SessionID, sessions[1])
	}
	var got []string
	for _, e := range until(t, ev1, "end") {
		if e.typ == "MESSAGE_CREATE" {
			got = append(got, e.Content)
		}
	}
	if !slices.Equal(got, []string{"while away"}) {
		t.Errorf("shard 1 got messages %q before its end marker, want the one sent while it was away", got)
	}
	until(t, ev0, "end")
	var dropped []int
	for _, cn := range fake.Connections() {
		if cn.Dropped {
			dropped = append(dropped, cn.Index)
			if cn.SessionID != sessions[1] {
				t.Errorf("dropped connection %d of session %s, want shard 1's %s", cn.Index, cn.SessionID, sessions[1])
			}
		}
	}
	if len(dropped) != 1 {
		t.Errorf("dropped connections %v, want one", dropped)
	}
}
