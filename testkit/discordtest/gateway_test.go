package discordtest_test

import (
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
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

// TestHeartbeatsAcked is not parallel: on a loaded machine a stall of five intervals would
// look like missing acks to discordgo.
func TestHeartbeatsAcked(t *testing.T) {
	// discordgo gives up on a connection after five intervals without an ack, so twelve
	// heartbeats on one connection show the acks arrive and count.
	fake := newFake(t, discordtest.Options{HeartbeatInterval: 50 * time.Millisecond})
	s := newSession(t, fake, bridgeIntents)
	open(t, s)
	c, err := fake.WaitConnection(ctx(t), func(c discordtest.Connection) bool { return c.Heartbeats >= 12 })
	if err != nil {
		t.Fatal(err)
	}
	if c.Index != 1 || c.Acks < 12 {
		t.Errorf("connection = %+v, want the first with 12 acks", c)
	}
	if n := len(fake.Handshakes()); n != 1 {
		t.Errorf("%d handshakes, want 1 (no reconnect)", n)
	}
}

func TestMissingAcksMakeDiscordgoClose(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{HeartbeatInterval: 25 * time.Millisecond})
	fake.SetHeartbeatAcks(false)
	s := newSession(t, fake, bridgeIntents)
	// Reconnecting stays off: after closing a zombie connection with 1000 discordgo's
	// heartbeat and listen goroutines would both reconnect (the server echoes the close
	// frame), each reading ShouldReconnectOnError without a lock.
	s.ShouldReconnectOnError = false
	open(t, s)
	c, err := fake.WaitConnection(ctx(t), func(c discordtest.Connection) bool { return c.Closed })
	if err != nil {
		t.Fatal(err)
	}
	if c.Index != 1 || c.ClientCloseCode != 1000 || c.Acks != 0 || c.Heartbeats < 2 {
		t.Errorf("connection = %+v, want the first closed by discordgo with 1000 after unacknowledged heartbeats", c)
	}
}
