package discord

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestFlowsFinishTogether: three slow flows started together run at once,
// and their results replace their responses without waiting on each other,
// even while one result edit is stuck (discordgo would queue all edits of
// all tokens behind it).
func TestFlowsFinishTogether(t *testing.T) {
	t.Parallel()
	flows := newGate(func(r *http.Request, _ []byte) bool { return strings.Contains(r.URL.Path, "/prompts/flow-wait/") }, 0)
	edits := newGate(func(r *http.Request, body []byte) bool {
		return r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/messages/@original") && bytes.Contains(body, []byte("Done"))
	}, 1)
	e := newEnv(t, func(e *env) {
		e.wsRT = flows.wrap(e.wsRT)
		e.discordRT = edits.wrap
	})
	e.start(t)
	ctx := testCtx(t)

	var sent []discordtest.SentInteraction
	for _, n := range []string{"1", "2", "3"} {
		sent = append(sent, e.interact(t, flowCommand("wait", [2]string{"n", n})))
	}
	for range 3 {
		receive(t, ctx, flows.arrived) // all three flows are running at once
	}
	close(flows.release)

	stuck := receive(t, ctx, edits.arrived)
	for i, s := range sent {
		if strings.Contains(stuck, "/"+s.Token+"/") {
			continue
		}
		e.waitOriginal(t, s.ID, "Done "+[]string{"1", "2", "3"}[i])
	}
	close(edits.release)
	for i, s := range sent {
		e.waitOriginal(t, s.ID, "Done "+[]string{"1", "2", "3"}[i])
	}
}

// TestTypingRenewedUntilReply: the indicator is renewed while the agent
// thinks, and none follows the reply.
func TestTypingRenewedUntilReply(t *testing.T) {
	t.Parallel()
	chat := newGate(func(r *http.Request, _ []byte) bool { return strings.HasSuffix(r.URL.Path, "/chat") }, 1)
	e := newEnv(t, func(e *env) { e.wsRT = chat.wrap(e.wsRT) })
	e.start(t)
	ctx := testCtx(t)
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "60", Author: alice, Content: "think hard"}); err != nil {
		t.Fatal(err)
	}
	receive(t, ctx, chat.arrived)
	seen := map[time.Time]bool{}
	if _, err := e.fake.WaitRequest(ctx, func(r discordtest.Request) bool {
		if r.Route == discordtest.RouteTyping && strings.Contains(r.Path, "/60/") {
			seen[r.At] = true
		}
		return len(seen) >= 3
	}); err != nil {
		t.Fatalf("typing not renewed: %v", err)
	}
	close(chat.release)
	reply := e.waitBot(t, "60", "You said: think hard")
	for _, r := range e.fake.Requests() {
		if r.Route == discordtest.RouteTyping && strings.Contains(r.Path, "/60/") && r.At.After(reply.Timestamp) {
			t.Errorf("typing indicator at %s, after the reply at %s", r.At, reply.Timestamp)
		}
	}
}

// TestExpiredTokenFallsBackToDM: a private flow that outlives the 15-minute
// interaction token sends its result to the user by DM, never to the channel,
// and the channel hears only that it was sent (pinging only the user).
func TestExpiredTokenFallsBackToDM(t *testing.T) {
	t.Parallel()
	clock := discordtest.NewClock(time.Now())
	flows := newGate(func(r *http.Request, _ []byte) bool { return strings.Contains(r.URL.Path, "/prompts/flow-wait/") }, 0)
	e := newEnvWith(t, discordtest.Options{Now: clock.Now}, func(e *env) { e.wsRT = flows.wrap(e.wsRT) })
	e.start(t)
	ctx := testCtx(t)
	sent := e.interact(t, flowCommand("wait", [2]string{"n", "late"}))
	receive(t, ctx, flows.arrived)
	e.waitOriginal(t, sent.ID, "Running")
	clock.Advance(16 * time.Minute)
	close(flows.release)
	m, err := e.fake.WaitMessage(ctx, func(m discordtest.Message) bool {
		return m.Source == discordtest.SourceChannel && strings.Contains(m.Content, "Done late")
	})
	if err != nil {
		t.Fatalf("result not delivered: %v", err)
	}
	if ch, ok := e.fake.Channel(m.ChannelID); !ok || ch.Type != discordgo.ChannelTypeDM || len(ch.Recipients) != 1 || ch.Recipients[0].ID != alice.ID {
		t.Errorf("private result went to channel %s (%+v), want a DM with the user", m.ChannelID, ch)
	}
	if len(m.Buttons()) != 0 {
		t.Errorf("DM result has buttons %+v, want none", m.Buttons())
	}
	notice, err := e.fake.WaitMessage(ctx, func(m discordtest.Message) bool {
		return m.Source == discordtest.SourceChannel && m.ChannelID == channelID && strings.Contains(m.Content, "direct message")
	})
	if err != nil {
		t.Fatalf("no notice in the channel: %v", err)
	}
	if strings.Contains(notice.Content, "Done late") || len(notice.Pings) != 1 || notice.Pings[0] != "user:"+alice.ID {
		t.Errorf("channel notice %q pings %v: want no result text and a ping of only the user", notice.Content, notice.Pings)
	}
}

func TestAgentCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t)
	ctx := testCtx(t)
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(e.fake.BotUser().ID, "remember me")}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, channelID, "You said: remember me")
	for _, tc := range []struct {
		sub       string
		ephemeral bool
		want      string
	}{
		{"status", true, "helper"},
		{"share", false, "You said: remember me"},
	} {
		t.Run(tc.sub, func(t *testing.T) {
			sent := e.interact(t, discordgo.ApplicationCommandInteractionData{Name: "agent", Options: []*discordgo.ApplicationCommandInteractionDataOption{
				{Name: tc.sub, Type: discordgo.ApplicationCommandOptionSubCommand},
			}})
			m := e.waitOriginal(t, sent.ID, tc.want)
			if m.Ephemeral() != tc.ephemeral {
				t.Errorf("/agent %s answer ephemeral = %v, want %v", tc.sub, m.Ephemeral(), tc.ephemeral)
			}
			checkNoPings(t, m)
		})
	}
}
