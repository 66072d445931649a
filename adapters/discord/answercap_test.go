package discord

import (
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/markdown"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestHugeAnswerIsCut: a long answer (430 KB) reaches the channel as at most
// maxParts messages, the last saying that the rest was cut, not as the
// 220 messages it would split into.
func TestHugeAnswerIsCut(t *testing.T) {
	t.Parallel()
	// 430 KB: 4 MB is TestRenderCapsAnAnswer's; end to end, the core and
	// the fakes take their time over it under -race.
	huge := strings.Repeat("A line of a very long answer, one of many.\n", 10_000)
	e := newEnv(t, func(e *env) {
		e.ws.AddAgent(workspacetest.Agent{UUID: "agent-1", Reply: func(int, string) string { return huge }})
	})
	e.start(t)
	ctx := testCtx(t)
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "40", Author: alice, Content: "everything, please"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, "40", "too long for chat")
	var parts int
	for _, m := range e.fake.Messages() {
		if m.ChannelID != "40" || m.Author.ID != e.fake.BotUser().ID {
			continue
		}
		parts++
		if n := markdown.UTF16Len(m.Content); n > maxContent {
			t.Errorf("part of %d units, over Discord's %d", n, maxContent)
		}
	}
	if parts > maxParts {
		t.Errorf("a 430 KB answer came as %d messages, want at most %d", parts, maxParts)
	}
}

func TestRenderCapsAnAnswer(t *testing.T) {
	table := "| host | status | note |\n|---|---|---|\n" + strings.Repeat("| web1 | ok | fine |\n", 100_000)
	for name, huge := range map[string]string{
		"4 MB of lines":       strings.Repeat("A line of a very long answer, one of many.\n", 100_000),
		"a 100,000-row table": table,
	} {
		msgs := render(bridge.Reply{Text: huge, Footer: "helper · 3 s"})
		if len(msgs) > maxParts {
			t.Errorf("render(%s) = %d messages, want at most %d", name, len(msgs), maxParts)
		}
		if last := msgs[len(msgs)-1].Content; !strings.Contains(last, "too long for chat") || !strings.HasSuffix(last, "-# helper · 3 s") {
			t.Errorf("render(%s): last message …%q, want the cut line and the footer", name, last[max(0, len(last)-300):])
		}
	}
}
