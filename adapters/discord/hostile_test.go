package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestOddInteractionsAreAnswered: an interaction whose command is not one of
// the bridge's, whose data is empty or missing, or whose option has another
// type than the one registered (what a stale client, a changed Discord or a
// forged payload may carry) is answered at once with an ephemeral error, and
// logged; nothing runs.
func TestOddInteractionsAreAnswered(t *testing.T) {
	t.Parallel()
	log, logs := observed(t)
	e := newEnv(t, func(e *env) { e.log = log })
	e.start(t)
	ctx := testCtx(t)
	flow := func(host string) json.RawMessage {
		return json.RawMessage(`{"id":"1","name":"flow","type":1,"options":[{"name":"healthcheck","type":1,"options":[{"name":"host","type":3,"value":` + host + `}]}]}`)
	}
	tests := []struct {
		name string
		data json.RawMessage
		want []string // in the answer
	}{
		{"unknown command", json.RawMessage(`{"id":"1","name":"nosuch","type":1}`), []string{"/flow", "/agent"}},
		{"empty data", json.RawMessage(`{}`), []string{"/flow", "/agent"}},
		{"no data", json.RawMessage(`null`), []string{"/flow", "/agent"}},
		{"host as a number", flow(`42`), []string{"`host`", "text", "a number", "Nothing was run"}},
		{"host as an object", flow(`{"a":1}`), []string{"`host`", "text", "an object", "Nothing was run"}},
		{"option typed integer", json.RawMessage(`{"id":"1","name":"flow","type":1,"options":[{"name":"healthcheck","type":1,"options":[{"name":"host","type":4,"value":42}]}]}`), []string{"`host`", "text"}},
	}
	for _, tt := range tests {
		sent, err := e.fake.SendInteraction(ctx, discordtest.Interaction{
			Type: discordgo.InteractionApplicationCommand, GuildID: guildID, ChannelID: channelID, User: alice, Roles: []string{"7"}, RawData: tt.data,
		})
		if err != nil {
			t.Fatal(err)
		}
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := e.fake.WaitInteractionResponse(wait, sent.ID)
		cancel()
		if err != nil {
			t.Fatalf("%s: not answered: %v", tt.name, err)
		}
		if resp.Code != 0 || resp.Type != discordgo.InteractionResponseChannelMessageWithSource || resp.Data == nil || resp.Data.Flags&discordgo.MessageFlagsEphemeral == 0 {
			t.Errorf("%s: answered with type %d code %d data %+v, want an ephemeral message (4)", tt.name, resp.Type, resp.Code, resp.Data)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(resp.Data.Content, w) {
				t.Errorf("%s: answer %q lacks %q", tt.name, resp.Data.Content, w)
			}
		}
	}
	for _, req := range e.ws.Requests() {
		if strings.Contains(req.Path, "flow") {
			t.Errorf("workspace request %s %s: a refused interaction ran a flow", req.Method, req.Path)
		}
	}
	if n := logs.FilterMessage("interaction refused").Len(); n != len(tests) {
		t.Errorf("%d log lines \"interaction refused\", want %d:\n%v", n, len(tests), logs.All())
	}
}

// TestOversizedGatewayMessageIsRefused: a gateway message over
// MaxGatewayMessageBytes (sent in fragments, as a stream) is refused at the
// frame header that takes it over, before its payload is held, counted, and
// the shard connects again and goes on.
func TestOversizedGatewayMessageIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.start(t)
	ctx := testCtx(t)
	conns := len(e.fake.Connections())
	if err := e.fake.SendOversized(ctx, MaxGatewayMessageBytes+64<<10); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.WaitHandshake(ctx, func(h discordtest.Handshake) bool { return h.Conn > conns }); err != nil {
		t.Fatalf("no new connection after the oversized message: %v", err)
	}
	if got := counter(t, r.metrics, "flowbridge_refusals_total", map[string]string{"reason": "frame_too_large"}); got != 1 {
		t.Errorf("frame_too_large refusals = %v, want 1", got)
	}
	e.marker(t, "95")
	// The limit bounds what is held only while nothing arrives compressed.
	for _, h := range e.fake.Handshakes() {
		var id struct {
			Compress *bool `json:"compress"`
		}
		if h.Op == 2 && (json.Unmarshal(h.Raw, &id) != nil || id.Compress == nil || *id.Compress) {
			t.Errorf("IDENTIFY %s asks for compressed payloads (or does not say), want compress false: an inflated payload is not bounded by the frame limit", h.Raw)
		}
	}
}
