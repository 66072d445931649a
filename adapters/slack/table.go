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
// text. Cells are raw_text: their Markdown is read as plain text
// (markdown.PlainInline), since a table block formats none of it.
func tableBlock(t markdown.Table) (*slackgo.TableBlock, bool) {
	if len(t.Rows)+1 > maxTableRows || len(t.Header) > maxTableColumns {
		return nil, false
	}
	block := slackgo.NewTableBlock("")
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		cells := make([]slackgo.TableCell, len(row))
		for c, md := range row {
			cells[c] = slackgo.NewTableRawTextCell(cellText(md))
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

// tableChars counts the characters of a table block's cells.
func tableChars(t *slackgo.TableBlock) int {
	n := 0
	for _, row := range t.Rows {
		for _, c := range row {
			if raw, ok := c.(*slackgo.TableRawTextCell); ok {
				n += utf8.RuneCountInString(raw.Text)
			}
		}
	}
	return n
}

// cellText is a cell's Markdown as the text of a raw_text cell, which
// Slack shows as it is (mrkdwn.RawText). An empty cell is one space, since
// Slack refuses an empty raw_text.
func cellText(md string) string {
	s := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, markdown.PlainInline(md))
	if strings.TrimSpace(s) == "" {
		return " "
	}
	return mrkdwn.RawText(s)
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
