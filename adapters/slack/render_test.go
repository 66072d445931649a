package slack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	slackgo "github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/adapters/slack/mrkdwn"
	"github.com/flowbridge/flowbridge/bridge"
)

// longReply builds Markdown of about n runes with paragraphs, lists and code fences.
func longReply(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "## Part %d\n\nSome **bold** text & <tags> with a [link](http://example.com/%d) and `code`.\n\n", i, i)
		case 1:
			fmt.Fprintf(&b, "- item %d\n- another item\n\n", i)
		case 2:
			b.WriteString("```go\nfunc main() {\n\tfmt.Println(\"<!channel> & more\")\n}\n")
			b.WriteString(strings.Repeat("// a long comment line inside the fence\n", 20))
			b.WriteString("```\n\n")
		default:
			b.WriteString(strings.Repeat("Plain sentence that goes on for a while. ", 10) + "\n\n")
		}
	}
	return b.String()
}

func TestRender(t *testing.T) {
	t.Parallel()
	share := bridge.Button{Action: bridge.Action{ID: bridge.ActionShare, Value: "r-1"}, Label: "Share with channel", Style: "primary"}
	tests := []struct {
		name          string
		reply         bridge.Reply
		noMarkdown    bool
		wantMsgs      int
		wantMarkdown  bool
		wantFooter    bool
		wantButtonsOn int // index of the message with the buttons; -1 for none
	}{
		{name: "short", reply: bridge.Reply{Text: "Hello **there**"}, wantMsgs: 1, wantMarkdown: true, wantButtonsOn: -1},
		{name: "footer and button", reply: bridge.Reply{Text: "Checked web1 nginx: ok", Footer: "healthcheck · run by @alice · 1.2s", Buttons: []bridge.Button{share}},
			wantMsgs: 1, wantMarkdown: true, wantFooter: true, wantButtonsOn: 0},
		{name: "mentions", reply: bridge.Reply{Text: "<!channel> @here **x** [a](http://b) <@U123> <!subteam^S1> &amp;"}, wantMsgs: 1, wantMarkdown: true, wantButtonsOn: -1},
		{name: "mentions as mrkdwn", reply: bridge.Reply{Text: "<!channel> @here **x** [a](http://b) <@U123> <!subteam^S1> &amp;"}, noMarkdown: true, wantMsgs: 1, wantButtonsOn: -1},
		{name: "10000 chars", reply: bridge.Reply{Text: longReply(10_000)}, wantMsgs: 1, wantMarkdown: true, wantButtonsOn: -1},
		{name: "10000 chars as mrkdwn", reply: bridge.Reply{Text: longReply(10_000), Footer: "f", Buttons: []bridge.Button{share}}, noMarkdown: true, wantMsgs: 1, wantFooter: true, wantButtonsOn: 0},
		{name: "30000 chars", reply: bridge.Reply{Text: longReply(30_000), Buttons: []bridge.Button{share}}, wantMsgs: 3, wantButtonsOn: 2},
		{name: "empty", reply: bridge.Reply{Text: "  "}, wantMsgs: 1, wantMarkdown: true, wantButtonsOn: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := render(tt.reply, !tt.noMarkdown)
			checkRendered(t, msgs)
			if len(msgs) != tt.wantMsgs {
				t.Fatalf("render() gave %d messages, want %d", len(msgs), tt.wantMsgs)
			}
			first, _ := json.Marshal(msgs[0].Blocks)
			if got := strings.Contains(string(first), `"type":"markdown"`); got != tt.wantMarkdown {
				t.Errorf("markdown block = %v, want %v", got, tt.wantMarkdown)
			}
			for i, m := range msgs {
				js, _ := json.Marshal(m.Blocks)
				hasButtons := strings.Contains(string(js), `"type":"actions"`)
				if hasButtons != (i == tt.wantButtonsOn) {
					t.Errorf("message %d has buttons = %v, want %v", i, hasButtons, i == tt.wantButtonsOn)
				}
				if hasFooter := strings.Contains(string(js), `"type":"context"`); hasFooter != (tt.wantFooter && i == len(msgs)-1) {
					t.Errorf("message %d has footer = %v", i, hasFooter)
				}
			}
			if strings.HasPrefix(tt.name, "10000") || strings.HasPrefix(tt.name, "30000") {
				return // too long for a readable golden file; the checks above cover them
			}
			out, err := json.MarshalIndent(msgs, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "render/"+strings.ReplaceAll(tt.name, " ", "_")+".json", append(out, '\n'))
		})
	}
}

// pinging matches what Slack turns into a notification: special, user and
// group mentions, and the plain @here/@channel/@everyone words.
var pinging = regexp.MustCompile(`<[!@#]|(?i)@(here|channel|everyone)\b`)

// fenceLines counts the lines that open or close a code block in mrkdwn.
func fenceLines(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "```" {
			n++
		}
	}
	return n
}

// checkRendered checks Slack's limits and mention safety on rendered messages.
func checkRendered(t *testing.T, msgs []outMessage) {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("render() gave no message")
	}
	for i, m := range msgs {
		if m.Text == "" || runes(m.Text) > maxFallback {
			t.Errorf("message %d: fallback text has %d runes, want 1..%d", i, runes(m.Text), maxFallback)
		}
		if pinging.MatchString(m.Text) {
			t.Errorf("message %d: fallback text can ping: %q", i, m.Text)
		}
		if len(m.Blocks) > maxBlocks {
			t.Errorf("message %d: %d blocks, want at most %d", i, len(m.Blocks), maxBlocks)
		}
		markdownTotal, tables := 0, 0
		for j, b := range m.Blocks {
			var text string
			switch b := b.(type) {
			case *slackgo.MarkdownBlock:
				text = b.Text
				markdownTotal += runes(text)
			case *slackgo.SectionBlock:
				text = b.Text.Text
				if runes(text) > maxSection {
					t.Errorf("message %d block %d: section of %d runes, want at most %d", i, j, runes(text), maxSection)
				}
				if fenceLines(text)%2 != 0 {
					t.Errorf("message %d block %d: unbalanced code fences:\n%s", i, j, text)
				}
			case *slackgo.ContextBlock:
				for _, e := range b.ContextElements.Elements {
					if tb, ok := e.(*slackgo.TextBlockObject); ok {
						text += tb.Text
					}
				}
			case *slackgo.ActionBlock:
				continue
			case *slackgo.TableBlock:
				tables++
				if len(b.Rows) > maxTableRows || tableChars(b) > maxTableCellChars {
					t.Errorf("message %d block %d: table of %d rows and %d characters, want at most %d and %d", i, j, len(b.Rows), tableChars(b), maxTableRows, maxTableCellChars)
				}
				for r, row := range b.Rows {
					if len(row) > maxTableColumns || len(row) != len(b.Rows[0]) {
						t.Errorf("message %d block %d row %d: %d cells, want %d, at most %d", i, j, r, len(row), len(b.Rows[0]), maxTableColumns)
					}
					for _, c := range row {
						js, _ := json.Marshal(c)
						switch c := c.(type) {
						case *slackgo.TableRawTextCell:
							if c.Text == "" {
								t.Errorf("message %d block %d row %d: empty cell", i, j, r)
							}
						case *slackgo.TableRichTextCell:
							if len(c.Elements) == 0 {
								t.Errorf("message %d block %d row %d: rich cell without elements", i, j, r)
							}
							if strings.Contains(string(js), `"url":`) && !regexp.MustCompile(`"url":"(https?|mailto):[^"<>| ]*"`).Match(js) {
								t.Errorf("message %d block %d row %d: unsafe link in %s", i, j, r, js)
							}
						default:
							t.Errorf("message %d block %d row %d: cell %T", i, j, r, c)
						}
						text += string(js) + "\n"
					}
				}
			default:
				t.Errorf("message %d block %d: unexpected block %T", i, j, b)
			}
			if pinging.MatchString(text) {
				t.Errorf("message %d block %d can ping: %q", i, j, text)
			}
		}
		if tables > 1 {
			t.Errorf("message %d: %d table blocks, want at most one", i, tables)
		}
		if markdownTotal > maxMarkdownBlock {
			t.Errorf("message %d: markdown blocks of %d runes, want at most %d", i, markdownTotal, maxMarkdownBlock)
		}
	}
}

func FuzzRender(f *testing.F) {
	f.Add("<!channel> @here **x** [a](http://b)", false)
	f.Add(longReply(4000), true)
	f.Add("```\n"+strings.Repeat("<@U1> & x\n", 800)+"```", true)
	f.Add("| a | b |\n|---|---|\n| <!here> | 2 |\n", true)
	f.Fuzz(func(t *testing.T, text string, noMarkdown bool) {
		if fenceLines(mrkdwn.Convert(text))%2 != 0 {
			// Unbalanced before any split (a "```" line inside a ~~~ fence):
			// the converter's business, not the splitter's.
			return
		}
		checkRendered(t, render(bridge.Reply{Text: text, Footer: text}, !noMarkdown))
	})
}
