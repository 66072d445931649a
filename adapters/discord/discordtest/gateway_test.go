package discordtest_test

import (
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/adapters/discord/discordtest"
)

func TestOpenReachesReady(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{BotUsername: "bridge"})
	if err := fake.AddChannel(t.Context(), discordgo.Channel{ID: "3000", GuildID: "1", Type: discordgo.ChannelTypeGuildText, Name: "general"}); err != nil {
		t.Fatalf("AddChannel: %v", err)
	}
	s := newSession(t, fake, bridgeIntents)
	ready := events[*discordgo.Ready](s)
	open(t, s)

	r := receive(t, ready, "READY")
	if r.User == nil || r.User.ID != fake.BotUser().ID || !r.User.Bot {
		t.Errorf("READY user = %+v, want bot %s", r.User, fake.BotUser().ID)
	}
	if s.State.User == nil || s.State.User.Username != "bridge" {
		t.Errorf("State.User = %+v, want username bridge", s.State.User)
	}
	hs := fake.Handshakes()
	if len(hs) != 1 || hs[0].Op != 2 || hs[0].Intents != bridgeIntents || hs[0].Token != "Bot "+fake.Token() {
		t.Fatalf("Handshakes() = %+v, want one IDENTIFY with intents %d", hs, bridgeIntents)
	}
	if conns := fake.Connections(); len(conns) != 1 || conns[0].Query != "v=9&encoding=json" {
		t.Errorf("Connections() = %+v, want one dialled with v=9&encoding=json", conns)
	}
	// GUILD_CREATE follows READY, so discordgo's state knows the channel.
	if _, err := fake.WaitConnection(ctx(t), func(c discordtest.Connection) bool { return c.Heartbeats > 0 }); err != nil {
		t.Fatal(err)
	}
}

func TestIdentifyRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    discordtest.Options
		token   string
		intents discordgo.Intent
		want    string
		code    int
	}{
		{"bad token", discordtest.Options{}, "Bot wrong", bridgeIntents, "websocket: close 4004: Authentication failed.", 4004},
		{"privileged intent not enabled", discordtest.Options{DenyMessageContent: true}, "", bridgeIntents, "websocket: close 4014: Disallowed intent(s).", 4014},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake(t, tt.opts)
			s := newSession(t, fake, tt.intents)
			if tt.token != "" {
				// Only the gateway sees the bad token: GET /gateway must still work.
				s.Identify.Token = tt.token
			}
			s.ShouldReconnectOnError = false
			err := openErr(t, s)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Open() = %v, want %q", err, tt.want)
			}
			hs := fake.Handshakes()
			if len(hs) != 1 || hs[0].CloseCode != tt.code {
				t.Errorf("Handshakes() = %+v, want one refused with %d", hs, tt.code)
			}
		})
	}
}

func TestHeartbeatsAcked(t *testing.T) {
	t.Parallel()
	// discordgo gives up on a connection after five intervals without an ack, so twenty
	// heartbeats on one connection show the acks arrive and count.
	fake := newFake(t, discordtest.Options{HeartbeatInterval: 10 * time.Millisecond})
	s := newSession(t, fake, bridgeIntents)
	open(t, s)
	c, err := fake.WaitConnection(ctx(t), func(c discordtest.Connection) bool { return c.Heartbeats >= 20 })
	if err != nil {
		t.Fatal(err)
	}
	if c.Index != 1 || c.Acks < 20 {
		t.Errorf("connection = %+v, want the first with 20 acks", c)
	}
	if n := len(fake.Handshakes()); n != 1 {
		t.Errorf("%d handshakes, want 1 (no reconnect)", n)
	}
}

func TestMissingAcksMakeDiscordgoReconnect(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{HeartbeatInterval: 10 * time.Millisecond})
	fake.SetHeartbeatAcks(false)
	s := newSession(t, fake, bridgeIntents)
	open(t, s)
	// discordgo closes a zombie connection with 1000, which ends the session on Discord, so
	// its RESUME is refused with op 9 and it identifies again on the same connection.
	if _, err := fake.WaitHandshake(ctx(t), func(h discordtest.Handshake) bool { return h.Conn == 2 && h.Op == 2 }); err != nil {
		t.Fatal(err)
	}
	fake.SetHeartbeatAcks(true)
	hs := fake.Handshakes()
	if len(hs) < 3 || hs[1].Op != 6 || hs[1].Resumed || hs[1].Conn != 2 {
		t.Errorf("Handshakes() = %+v, want IDENTIFY, refused RESUME, IDENTIFY", hs)
	}
	if c := fake.Connections()[0]; c.ClientCloseCode != 1000 {
		t.Errorf("first connection closed by client with %d, want 1000", c.ClientCloseCode)
	}
}
