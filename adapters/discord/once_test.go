package discord

import (
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
)

// TestReplyPostedOnce: a reply the core names (Reply.Once) carries a nonce
// per part with enforce_nonce; sent again (after a restart, by a new
// responder) Discord creates nothing new and the same messages come back.
func TestReplyPostedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	a, err := New(e.cfg, catalogCore{}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	rep := bridge.Reply{Kind: bridge.ReplyAgent, Text: strings.Repeat("a long answer in several parts. ", 300), Once: "discord/msg/1234567890123456789"}
	first, err := (&messageResponder{a: a, channel: channelID}).Send(ctx, rep)
	if err != nil {
		t.Fatal(err)
	}
	parts := len(e.fake.Messages())
	if parts < 2 {
		t.Fatalf("the reply went out in %d message(s); the test needs several", parts)
	}
	rep.Again = true
	again, err := (&messageResponder{a: a, channel: channelID}).Send(ctx, rep)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.fake.Messages()); n != parts || again != first {
		t.Errorf("sent again: %d messages, ref %q; want %d and %q", n, again, parts, first)
	}
	rep.Once = "discord/msg/1234567890123456790"
	if _, err := (&messageResponder{a: a, channel: channelID}).Send(ctx, rep); err != nil {
		t.Fatal(err)
	}
	if n := len(e.fake.Messages()); n != 2*parts {
		t.Errorf("another reply: %d messages in all, want %d", n, 2*parts)
	}
	for _, m := range e.fake.Messages() {
		if len(m.Nonce) != 25 {
			t.Errorf("message %s has nonce %q, want 25 characters", m.ID, m.Nonce)
		}
	}
}
