package discord

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/markdown"
)

// longReply is about 7,000 characters of prose and code fences.
func longReply() string {
	var b strings.Builder
	for i := range 12 {
		b.WriteString("Paragraph with some words, @everyone and <@&123>. ")
		b.WriteString(strings.Repeat("More text here. ", 26))
		b.WriteString("\n\n")
		if i%3 == 0 {
			b.WriteString("```go\n")
			for range 8 {
				b.WriteString("fmt.Println(\"a line of code in a fenced block\")\n")
			}
			b.WriteString("```\n\n")
		}
	}
	return b.String()
}

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name  string
		reply bridge.Reply
	}{
		{"mentions", bridge.Reply{Kind: bridge.ReplyAgent, Text: "@everyone <@&123> **x** @here <@42>"}},
		{"footer_buttons", bridge.Reply{Kind: bridge.ReplyFlow, Text: "Checked web1 nginx\n", Footer: "healthcheck\n· alice · 2s", Ephemeral: true,
			Buttons: []bridge.Button{{Action: bridge.Action{ID: "share", Value: "abc123"}, Label: "Share with channel", Style: "primary"}, {Action: bridge.Action{ID: "cancel", Value: "x"}, Label: "Cancel", Style: "danger"}}}},
		{"empty", bridge.Reply{Kind: bridge.ReplyInfo}},
		{"long", bridge.Reply{Kind: bridge.ReplyAgent, Text: longReply(), Footer: "helper"}},
		{"tables", bridge.Reply{Kind: bridge.ReplyAgent, Text: tablesReply(t)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := render(tt.reply)
			checkMessages(t, msgs)
			var sends []*discordgo.MessageSend
			for _, m := range msgs {
				sends = append(sends, &discordgo.MessageSend{Content: m.Content, Components: m.Components, AllowedMentions: noMentions()})
			}
			b, err := json.MarshalIndent(sends, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "render_"+tt.name+".golden.json", append(b, '\n'))
		})
	}
}

// tablesReply is the shared table sample: wide, ragged, escaped, formatted
// and oversized tables.
func tablesReply(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "bridge", "markdown", "testdata", "tables.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkMessages asserts Discord's rules on rendered messages.
func checkMessages(t *testing.T, msgs []message) {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("render gave no messages")
	}
	for i, m := range msgs {
		if n := utf8.RuneCountInString(m.Content); n == 0 || n > maxContent {
			t.Errorf("part %d has %d characters, want 1 to %d", i, n, maxContent)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Errorf("part %d has unbalanced fences:\n%s", i, m.Content)
		}
		if i < len(msgs)-1 && m.Components != nil {
			t.Errorf("part %d carries components; only the last may", i)
		}
	}
}

func TestRenderLong(t *testing.T) {
	text := longReply()
	if len(text) < 7000 {
		t.Fatalf("longReply is %d bytes, want at least 7000", len(text))
	}
	msgs := render(bridge.Reply{Text: text})
	if len(msgs) < 4 {
		t.Errorf("render(7,000 characters) = %d parts, want at least 4", len(msgs))
	}
	checkMessages(t, msgs)
	var joined strings.Builder
	for _, m := range msgs {
		joined.WriteString(m.Content)
	}
	if got, want := strings.Count(joined.String(), "fmt.Println"), strings.Count(text, "fmt.Println"); got != want {
		t.Errorf("parts hold %d code lines, want %d", got, want)
	}
}

func TestRenderFooterAndButtons(t *testing.T) {
	msgs := render(bridge.Reply{Text: "done", Footer: "flow x\nby y", Buttons: []bridge.Button{
		{Action: bridge.Action{ID: "share", Value: "v"}, Label: "Share"},
		{Action: bridge.Action{ID: "share", Value: strings.Repeat("v", 100)}, Label: "Too long"},
	}})
	if len(msgs) != 1 || msgs[0].Content != "done\n-# flow x by y" {
		t.Fatalf("render = %+v, want one message ending in a subtext footer line", msgs)
	}
	rows := msgs[0].Components
	if len(rows) != 1 {
		t.Fatalf("components = %v, want one action row", rows)
	}
	row := rows[0].(discordgo.ActionsRow)
	if len(row.Components) != 1 || row.Components[0].(discordgo.Button).CustomID != "share:v" {
		t.Errorf("row = %+v, want the one button with a custom_id within 100 characters", row)
	}
	many := make([]bridge.Button, 7)
	for i := range many {
		many[i] = bridge.Button{Action: bridge.Action{ID: "b", Value: string(rune('a' + i))}, Label: "x"}
	}
	if rows := components(many); len(rows) != 2 {
		t.Errorf("components(7 buttons) = %d rows, want 2", len(rows))
	}
}

func TestParseCustomID(t *testing.T) {
	for _, a := range []bridge.Action{{ID: "share", Value: "abc"}, {ID: "confirm", Value: "a:b:c"}, {ID: "cancel"}} {
		if got := parseCustomID(customID(a)); got != a {
			t.Errorf("parseCustomID(customID(%v)) = %v", a, got)
		}
	}
}

// TestAllowedMentionsWire checks what actually goes over the wire: every
// body the adapter sends carries "allowed_mentions":{"parse":[]}.
func TestAllowedMentionsWire(t *testing.T) {
	content := "@everyone"
	comps := []discordgo.MessageComponent{}
	bodies := map[string]any{
		"message send":         &discordgo.MessageSend{Content: content, AllowedMentions: noMentions()},
		"message edit":         &discordgo.MessageEdit{Content: &content, AllowedMentions: noMentions()},
		"webhook edit":         &discordgo.WebhookEdit{Content: &content, Components: &comps, AllowedMentions: noMentions()},
		"follow-up":            &discordgo.WebhookParams{Content: content, AllowedMentions: noMentions()},
		"interaction response": &discordgo.InteractionResponse{Type: 5, Data: &discordgo.InteractionResponseData{AllowedMentions: noMentions()}},
	}
	for name, body := range bodies {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"allowed_mentions":{"parse":[]`) {
			t.Errorf("%s JSON = %s, want \"allowed_mentions\":{\"parse\":[]…}", name, b)
		}
	}
	var zero discordgo.MessageAllowedMentions
	if b, _ := json.Marshal(zero); !strings.Contains(string(b), `"parse":null`) {
		t.Errorf("zero MessageAllowedMentions = %s; the reason for the explicit empty list is gone", b)
	}
}

func FuzzRender(f *testing.F) {
	f.Add("hello", "footer")
	f.Add("```go\nx\n```", "")
	f.Add(longReply(), "f")
	f.Add(strings.Repeat("```\n", 700), "")
	f.Add(strings.Repeat("😀", 2100), "")
	f.Add("| a | 東京 |\n|--:|:-:|\n| `x\\|y` | **b** |\n"+strings.Repeat("| 1 | 2 |\n", 300), "")
	f.Fuzz(func(t *testing.T, text, footer string) {
		msgs := render(bridge.Reply{Text: text, Footer: footer, Buttons: []bridge.Button{{Action: bridge.Action{ID: "share", Value: "v"}, Label: "S"}}})
		if len(msgs) == 0 {
			t.Fatal("render gave no messages")
		}
		for i, m := range msgs {
			if n := markdown.UTF16Len(m.Content); n == 0 || n > maxContent {
				t.Fatalf("part %d measures %d, want 1 to %d", i, n, maxContent)
			}
		}
	})
}
