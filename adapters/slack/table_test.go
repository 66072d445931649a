package slack

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	slackgo "github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

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

// TestRenderTablesGolden renders the table sample with and without the
// markdown block and compares the messages with testdata/render/tables*.json.
func TestRenderTablesGolden(t *testing.T) {
	for _, markdownBlock := range []bool{true, false} {
		name := "tables.json"
		if !markdownBlock {
			name = "tables_as_mrkdwn.json"
		}
		t.Run(name, func(t *testing.T) {
			msgs := render(bridge.Reply{Kind: bridge.ReplyAgent, Text: tablesReply(t)}, markdownBlock)
			checkRendered(t, msgs)
			if n := countTables(msgs); n != 1 {
				t.Errorf("render() gave %d table blocks, want 1 (the first table; the rest in code)", n)
			}
			out, err := json.MarshalIndent(msgs, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "render/"+name, append(out, '\n'))
		})
	}
}

func countTables(msgs []outMessage) int {
	n := 0
	for _, m := range msgs {
		for _, b := range m.Blocks {
			if _, ok := b.(*slackgo.TableBlock); ok {
				n++
			}
		}
	}
	return n
}

func TestRenderTableLimits(t *testing.T) {
	row := func(cells int, text string) string {
		return "|" + strings.Repeat(" "+text+" |", cells) + "\n"
	}
	table := func(rows, cols int, text string) string {
		return row(cols, "h") + "|" + strings.Repeat("---|", cols) + "\n" + strings.Repeat(row(cols, text), rows)
	}
	tests := []struct {
		name string
		md   string
		want bool // a table block
	}{
		{name: "100 rows", md: table(99, 2, "x"), want: true},
		{name: "101 rows", md: table(100, 2, "x")},
		{name: "20 columns", md: table(3, 20, "x"), want: true},
		{name: "21 columns", md: table(3, 21, "x")},
		// The header "h" and 99 rows of 101 characters: 10,000.
		{name: "10000 characters", md: table(99, 1, strings.Repeat("é", 101)), want: true},
		{name: "10001 characters", md: table(98, 1, strings.Repeat("é", 101)) + row(1, strings.Repeat("é", 102))},
		{name: "in a fence", md: "```\n" + table(2, 2, "x") + "```"},
		{name: "formatted cells", md: table(2, 3, "**b** _i_ ~~s~~ `c` [l](https://x.io) [j](javascript:x) <!here>"), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := render(bridge.Reply{Text: "Before.\n\n" + tt.md + "\nAfter."}, true)
			checkRendered(t, msgs)
			if got := countTables(msgs) == 1; got != tt.want {
				t.Errorf("render() has a table block = %v, want %v", got, tt.want)
			}
			js, _ := json.Marshal(msgs)
			for _, s := range []string{"Before.", "After."} {
				if !strings.Contains(string(js), s) {
					t.Errorf("render() lost %q", s)
				}
			}
		})
	}
}

// TestTableCells: a cell with inline formatting is a rich_text cell in
// those styles, links only to http, https and mailto; a plain one is
// raw_text; an empty one a space; nothing can mention anyone.
func TestTableCells(t *testing.T) {
	tests := []struct{ md, want string }{
		{"plain & <b>", `{"type":"raw_text","text":"plain \u0026 \u003cb\u003e"}`},
		{"", `{"type":"raw_text","text":" "}`},
		{"<!here> @channel", `{"type":"raw_text","text":"\u003c` + "\u2060" + `!here\u003e @` + "\u2060" + `channel"}`},
		{"**Total** `42`", `{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[` +
			`{"type":"text","text":"Total","style":{"bold":true}},{"type":"text","text":" "},{"type":"text","text":"42","style":{"code":true}}]}]}`},
		{"[docs](https://x.io) [bad](javascript:alert)", `{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[` +
			`{"type":"link","url":"https://x.io","text":"docs"},{"type":"text","text":" bad"}]}]}`},
	}
	for _, tt := range tests {
		js, err := json.Marshal(tableCell(tt.md))
		if err != nil || string(js) != tt.want {
			t.Errorf("tableCell(%q) = %s, %v, want %s", tt.md, js, err, tt.want)
		}
	}
}

// TestE2ETables posts the table sample and a reply with two tables through
// slack-go to the fake, which checks table blocks as Slack does.
func TestE2ETables(t *testing.T) {
	t.Parallel()
	two := "First:\n\n| a | b |\n|---|---|\n| **1** | [two](https://x.io/2) |\n\nSecond:\n\n| c | d |\n|---|---|\n| 3 | 4 |\n"
	for _, noMarkdown := range []bool{false, true} {
		e := startE2E(t, e2eOptions{
			reply: func(_ int, msg string) string {
				if msg == "two" {
					return two
				}
				return tablesReply(t)
			},
			cfg: func(c *Config) { c.DisableMarkdownBlock = noMarkdown },
		})
		ctx := waitCtx(t)
		e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "sample"})))
		e.reply(ctx, e2eDM, "Done.")
		e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "two"})))
		e.reply(ctx, e2eDM, "First")
		for _, c := range e.slack.Calls() {
			if c.Error != "" {
				t.Errorf("markdown block %v: %s failed: %s", !noMarkdown, c.Method, c.Error)
			}
		}
		var tables []string
		for _, m := range e.slack.Messages() {
			if m.BotID == "" || len(m.Blocks) == 0 {
				continue
			}
			var blocks []map[string]json.RawMessage
			if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
				t.Fatal(err)
			}
			for _, b := range blocks {
				if string(b["type"]) == `"table"` {
					tables = append(tables, string(b["rows"]))
				}
			}
			if strings.Contains(m.Text, "Second") && !strings.Contains(string(m.Blocks), "c | d") {
				t.Errorf("markdown block %v: the second table is not in columns: %s", !noMarkdown, m.Blocks)
			}
		}
		if len(tables) != 2 || !strings.Contains(tables[0], "eu-west-1") || !strings.Contains(tables[1], `"a"`) ||
			!strings.Contains(tables[1], `"style":{"bold":true}`) || !strings.Contains(tables[1], `"url":"https://x.io/2"`) {
			t.Errorf("markdown block %v: table blocks posted = %q, want the sample's first table and the first of two", !noMarkdown, tables)
		}
	}
}
