package slack

import (
	"strings"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/adapters/slack/mrkdwn"
	"github.com/flowbridge/flowbridge/bridge/markdown"
)

// Slack's table block limits (docs.slack.dev, "Table block"): at most 100
// rows of at most 20 cells, at most 20 column settings, one table per
// message, and at most 10,000 characters across the cells of a table.
// A raw_text cell may not be empty.
const (
	maxTableRows      = 100
	maxTableColumns   = 20
	maxTableCellChars = 10_000
)

// tableBlock renders t as a Slack table block, or reports false when t
// does not fit the limits above; the caller then shows it as monospace
// text. A cell with inline formatting (bold, italics, strikethrough, code,
// links) is a rich_text cell in those styles; any other is raw_text.
func tableBlock(t markdown.Table) (*slackgo.TableBlock, bool) {
	if len(t.Rows)+1 > maxTableRows || len(t.Header) > maxTableColumns {
		return nil, false
	}
	block := slackgo.NewTableBlock("")
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		cells := make([]slackgo.TableCell, len(row))
		for c, md := range row {
			cells[c] = tableCell(md)
		}
		block.AddRow(cells...)
	}
	if tableChars(block) > maxTableCellChars {
		return nil, false
	}
	settings := make([]slackgo.ColumnSetting, len(t.Align))
	for c, a := range t.Align {
		settings[c] = slackgo.ColumnSetting{Align: columnAlign(a), IsWrapped: true}
	}
	return block.WithColumnSettings(settings...), true
}

// tableChars counts the characters of a table block's cells: the text of
// raw_text cells, and of the elements of rich_text ones.
func tableChars(t *slackgo.TableBlock) int {
	n := 0
	for _, row := range t.Rows {
		for _, c := range row {
			switch c := c.(type) {
			case *slackgo.TableRawTextCell:
				n += utf8.RuneCountInString(c.Text)
			case *slackgo.TableRichTextCell:
				for _, e := range c.Elements {
					s, ok := e.(*slackgo.RichTextSection)
					if !ok {
						continue
					}
					for _, el := range s.Elements {
						switch el := el.(type) {
						case *slackgo.RichTextSectionTextElement:
							n += utf8.RuneCountInString(el.Text)
						case *slackgo.RichTextSectionLinkElement:
							n += utf8.RuneCountInString(el.Text)
						}
					}
				}
			}
		}
	}
	return n
}

// tableCell renders a cell's Markdown. Slack shows cell text as it is,
// unescaped, so it goes through mrkdwn.RawText; an empty cell is one
// space, since Slack refuses an empty raw_text. Links keep only http,
// https and mailto URLs; other links are their text.
func tableCell(md string) slackgo.TableCell {
	var spans []markdown.Span
	styled := false
	for _, sp := range markdown.Spans(md) {
		if sp.URL != "" && !safeURL(sp.URL) {
			sp.URL = ""
		}
		styled = styled || sp.Style != 0 || sp.URL != ""
		if n := len(spans); n > 0 && spans[n-1].Style == sp.Style && spans[n-1].URL == sp.URL {
			spans[n-1].Text += sp.Text
			continue
		}
		spans = append(spans, sp)
	}
	for i := range spans {
		spans[i].Text = mrkdwn.RawText(oneLine(spans[i].Text))
	}
	if !styled {
		text := ""
		for _, sp := range spans {
			text += sp.Text
		}
		if strings.TrimSpace(text) == "" {
			text = " "
		}
		return slackgo.NewTableRawTextCell(text)
	}
	els := make([]slackgo.RichTextSectionElement, 0, len(spans))
	for _, sp := range spans {
		var style *slackgo.RichTextSectionTextStyle
		if sp.Style != 0 {
			style = &slackgo.RichTextSectionTextStyle{
				Bold: sp.Style&markdown.StyleBold != 0, Italic: sp.Style&markdown.StyleItalic != 0,
				Strike: sp.Style&markdown.StyleStrike != 0, Code: sp.Style&markdown.StyleCode != 0,
			}
		}
		if sp.URL != "" {
			els = append(els, slackgo.NewRichTextSectionLinkElement(sp.URL, sp.Text, style))
		} else {
			els = append(els, slackgo.NewRichTextSectionTextElement(sp.Text, style))
		}
	}
	return slackgo.NewTableRichTextCell(slackgo.NewRichTextSection(els...))
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}

// safeURL accepts the link targets a reply may carry: http, https, mailto.
func safeURL(u string) bool {
	l := strings.ToLower(u)
	return (strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "mailto:")) &&
		!strings.ContainsAny(u, " \t\n<>|")
}

func columnAlign(a markdown.Align) slackgo.ColumnAlignment {
	switch a {
	case markdown.AlignRight:
		return slackgo.ColumnAlignmentRight
	case markdown.AlignCenter:
		return slackgo.ColumnAlignmentCenter
	}
	return slackgo.ColumnAlignmentLeft
}

// monospaceTables replaces every table of md with its aligned columns in a
// code block: in a markdown block, the tables that are not the message's
// table block then read as columns, whatever Slack makes of their pipes.
func monospaceTables(md string) string {
	return markdown.ReplaceTables(md, func(t markdown.Table) string {
		return markdown.CodeBlock("", t.Columns(markdown.PlainInline))
	})
}
