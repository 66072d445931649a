package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// eventsCore is the real core that also passes on every event the adapter
// hands it.
type eventsCore struct {
	Core
	got chan bridge.Event
}

func (c *eventsCore) Receive(ev bridge.Event) *bridge.Receipt {
	c.got <- ev
	return c.Core.Receive(ev)
}

func (c *eventsCore) next(t *testing.T, ctx context.Context) bridge.Event {
	t.Helper()
	select {
	case ev := <-c.got:
		return ev
	case <-ctx.Done():
		t.Fatal("no event reached the core")
		return bridge.Event{}
	}
}

// TestStopButton: the Stop button the core puts on a working message
// carries the entry's key in its custom_id, and its press comes back as an
// ActionStop with that key in the run's conversation, acknowledged as
// every press is (a deferred update), and not replacing the working message.
func TestStopButton(t *testing.T) {
	t.Parallel()
	rec := &eventsCore{got: make(chan bridge.Event, 100)}
	e := newEnv(t, func(e *env) {
		e.wrap = func(c Core) Core {
			rec.Core = c
			return rec
		}
	})
	r := e.start(t)
	ctx := testCtx(t)
	bob := discordgo.User{ID: "43", Username: "bob"}

	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(e.fake.BotUser().ID, "long job")}); err != nil {
		t.Fatal(err)
	}
	msg := rec.next(t, ctx)
	run, err := r.a.Responder(msg)
	if err != nil {
		t.Fatal(err)
	}
	stop := bridge.Button{Action: bridge.Action{ID: bridge.ActionStop, Value: msg.Key}, Label: "Stop", Style: "danger"}
	if _, err := run.Send(ctx, bridge.Reply{Kind: bridge.ReplyProgress, Text: "Working on it…", Buttons: []bridge.Button{stop}}); err != nil {
		t.Fatal(err)
	}
	working := e.waitBot(t, channelID, "Working on it")
	buttons := working.Buttons()
	if len(buttons) != 1 || buttons[0].CustomID != "stop:"+msg.Key || buttons[0].Style != discordgo.DangerButton || buttons[0].Label != "Stop" {
		t.Fatalf("working message buttons = %+v, want a red Stop with custom_id stop:%s", buttons, msg.Key)
	}

	p, err := e.fake.SendInteraction(ctx, discordtest.Interaction{
		GuildID: guildID, ChannelID: channelID, User: bob, MessageID: working.ID,
		Data: discordgo.MessageComponentInteractionData{CustomID: buttons[0].CustomID, ComponentType: discordgo.ButtonComponent},
	})
	if err != nil {
		t.Fatal(err)
	}
	press := rec.next(t, ctx)
	if press.Kind != bridge.KindAction || press.Action.ID != bridge.ActionStop || press.Action.Value != msg.Key ||
		press.Conversation != msg.Conversation || press.User.ID != bob.ID || press.Action.Message != channelID+"/"+working.ID {
		t.Errorf("press = %+v, want ActionStop %q by bob in %s", press, msg.Key, msg.Conversation)
	}
	var rt route
	if err := json.Unmarshal(press.Route, &rt); err != nil || rt.Interaction == nil || rt.Interaction.ReplaceOnSend {
		t.Errorf("press route = %+v (%v), want an interaction that replaces nothing", rt, err)
	}
	ack, err := e.fake.WaitInteractionResponse(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Type != discordgo.InteractionResponseDeferredMessageUpdate || ack.Code != 0 {
		t.Errorf("press acknowledged with type %d (code %d), want an accepted deferred update", ack.Type, ack.Code)
	}
	// The presser's answer goes beside the working message.
	answer, err := r.a.Responder(press)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := answer.Send(ctx, bridge.Reply{Kind: bridge.ReplyInfo, Text: "Stopped.", Ephemeral: true, Replace: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.WaitMessage(ctx, func(m discordtest.Message) bool { return strings.Contains(m.Content, "Stopped.") }); err != nil {
		t.Fatal(err)
	}
	if after, ok := e.fake.Message(working.ID); !ok || !strings.Contains(after.Content, "Working on it") {
		t.Errorf("working message after the Stop's answer = %q (found %v), want it as it was", after.Content, ok)
	}
}

// TestStopButtonLongKey: a Stop button whose key does not fit Discord's
// 100-character custom_id keeps its place without the key.
func TestStopButtonLongKey(t *testing.T) {
	t.Parallel()
	long := "discord/local/" + strings.Repeat("h", 90) + "/1"
	tests := []struct {
		name   string
		button bridge.Button
		want   string // "" for no button
	}{
		{"stop", bridge.Button{Action: bridge.Action{ID: bridge.ActionStop, Value: "discord/int/1234567890123456789"}, Label: "Stop"}, "stop:discord/int/1234567890123456789"},
		{"stop, long key", bridge.Button{Action: bridge.Action{ID: bridge.ActionStop, Value: long}, Label: "Stop"}, "stop:"},
		{"other, long value", bridge.Button{Action: bridge.Action{ID: bridge.ActionShare, Value: long}, Label: "Share"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := components([]bridge.Button{tt.button})
			got := ""
			if len(rows) == 1 {
				got = rows[0].(discordgo.ActionsRow).Components[0].(discordgo.Button).CustomID
			}
			if got != tt.want {
				t.Errorf("components(%s) custom_id = %q, want %q", tt.name, got, tt.want)
			}
			if a := parseCustomID(got); got != "" && a.ID != tt.button.Action.ID {
				t.Errorf("parseCustomID(%q) = %+v, want ID %s", got, a, tt.button.Action.ID)
			}
		})
	}
}
