package discord

import (
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestTablesAsColumns posts the table sample through discordgo to the fake:
// every table arrives as aligned columns in a code block, within 2,000
// characters a message, and the oversized one goes on across messages.
func TestTablesAsColumns(t *testing.T) {
	t.Parallel()
	sample := tablesReply(t)
	e := newEnv(t, func(e *env) {
		e.ws.AddAgent(workspacetest.Agent{UUID: "agent-1", Reply: func(int, string) string { return sample }})
	})
	e.start(t)
	ctx := testCtx(t)
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "30", Author: alice, Content: "tables"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, "30", "Done.") // parts are posted in order
	var all strings.Builder
	parts := 0
	for _, m := range e.fake.Messages() {
		if m.ChannelID != "30" || m.Author.ID != e.fake.BotUser().ID {
			continue
		}
		parts++
		checkNoPings(t, m)
		if n := len([]rune(m.Content)); n > maxContent {
			t.Errorf("part of %d characters", n)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Errorf("part with unbalanced fences:\n%s", m.Content)
		}
		all.WriteString(m.Content)
	}
	got := all.String()
	for _, want := range []string{
		"eu-west-1 | 東京サーバー |       😀 ok | e\u0301tat stable",
		"a | b      | a or b",
		"bold and italic    | the docs (https://example.com/docs)",
		"105 | host-105 | down",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("posted replies lack the line %q", want)
		}
	}
	if strings.Contains(got, "|---") || strings.Contains(got, "**bold**") {
		t.Errorf("posted replies still hold Markdown table syntax:\n%s", got)
	}
	if parts < 2 {
		t.Errorf("the sample came in %d parts, want the oversized table split", parts)
	}
}
