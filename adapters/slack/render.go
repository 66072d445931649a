package slack

import (
	"strings"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/adapters/slack/mrkdwn"
	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/markdown"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Slack's limits that shape a rendered reply.
const (
	// maxMarkdownBlock is the markdown block's cumulative limit per message.
	maxMarkdownBlock = 12_000
	// maxSection is the limit of a section block's text.
	maxSection = 3_000
	// maxBlocks is the block limit of a message.
	maxBlocks = 50
	// maxMessageText keeps the sections of one message below the total size
	// at which Slack answers msg_blocks_too_long (seen at 11–13k).
	maxMessageText = 12_000
	// maxFallback bounds the plain-text fallback; it only feeds notifications.
	maxFallback = 3_000
	maxFooter   = 500
	maxLabel    = 75
	// reservedBlocks leaves room for the footer and the buttons.
	reservedBlocks = 2
	// maxSections caps the section-sized parts of one answer, about four
	// messages: past it the answer is cut with a line saying so
	// (markdown.Cap), so one answer never floods a channel. A longer answer
	// goes as a file where files are on (the core's Files.ReplyOver).
	maxSections = 16
)

const (
	actionsBlockID = "flowbridge_actions"
	placeholder    = "_Thinking…_"
)

// outMessage is one Slack message: blocks plus the plain-text fallback every
// message with blocks needs (notifications, screen readers).
type outMessage struct {
	Text   string
	Blocks []slackgo.Block
}

// render turns a reply into Slack messages. The first Markdown table that
// fits Slack's table block becomes one (tableBlock); the text around it
// goes into Slack's markdown block where it fits (standard Markdown, with
// any other table laid out in a code block), and otherwise is split at
// paragraph, line or fence boundaries into converted mrkdwn sections. The
// blocks are spread over as many messages as Slack's limits need.
// Everything from the reply is escaped, so no part can mention anyone. The
// footer and buttons go on the last message.
func render(r bridge.Reply, markdownBlock bool) []outMessage {
	text := r.Text
	if strings.TrimSpace(text) == "" {
		text = "…"
	}
	text = markdown.Cap(text, "", maxSection, maxSections, escapedLen)
	msgs := pack(bodyUnits(text, markdownBlock))

	last := &msgs[len(msgs)-1]
	if f := strings.TrimSpace(r.Footer); f != "" {
		footer := mrkdwn.Convert(truncate.Bytes(f, maxFooter))
		last.Blocks = append(last.Blocks, slackgo.NewContextBlock("",
			slackgo.NewTextBlockObject(slackgo.MarkdownType, footer, false, false)))
	}
	if len(r.Buttons) > 0 {
		last.Blocks = append(last.Blocks, buttons(r.Buttons))
	}
	return msgs
}

// unit is one block of a reply's body with what packing it needs to know.
type unit struct {
	block  slackgo.Block
	source string // the Markdown it shows, for the fallback text
	size   int    // the characters it adds to its message
	kind   unitKind
}

type unitKind uint8

const (
	unitSection unitKind = iota
	unitMarkdown
	unitTable
)

// bodyUnits renders text as blocks, the first table that fits a table
// block as one.
func bodyUnits(text string, markdownBlock bool) []unit {
	for _, t := range markdown.Tables(text) {
		block, ok := tableBlock(t)
		if !ok {
			continue
		}
		units := textUnits(strings.TrimRight(text[:t.Start], " \t\r\n"), markdownBlock)
		units = append(units, unit{block: block, source: text[t.Start:t.End], size: tableChars(block), kind: unitTable})
		return append(units, textUnits(strings.TrimLeft(text[t.End:], "\r\n"), markdownBlock)...)
	}
	return textUnits(text, markdownBlock)
}

// textUnits renders Markdown as one markdown block where it fits, else as
// mrkdwn sections.
func textUnits(md string, markdownBlock bool) []unit {
	if strings.TrimSpace(md) == "" {
		return nil
	}
	if markdownBlock {
		if safe := mrkdwn.SafeMarkdown(monospaceTables(md)); runes(safe) <= maxMarkdownBlock {
			return []unit{{block: slackgo.NewMarkdownBlock("", safe), source: md, size: runes(safe), kind: unitMarkdown}}
		}
	}
	var units []unit
	for _, part := range convertSplit(md, maxSection) {
		units = append(units, unit{
			block:  slackgo.NewSectionBlock(slackgo.NewTextBlockObject(slackgo.MarkdownType, part.mrkdwn, false, false), nil, nil),
			source: part.markdown,
			size:   runes(part.mrkdwn),
		})
	}
	return units
}

// pack groups blocks into messages within Slack's limits: blocks per
// message, total text, the markdown blocks' total, one table.
func pack(units []unit) []outMessage {
	var (
		msgs               []outMessage
		cur                outMessage
		src                strings.Builder
		size, markdownSize int
		hasTable           bool
	)
	flush := func() {
		if len(cur.Blocks) == 0 {
			return
		}
		cur.Text = fallback(src.String())
		msgs = append(msgs, cur)
		cur, size, markdownSize, hasTable = outMessage{}, 0, 0, false
		src.Reset()
	}
	for _, u := range units {
		if len(cur.Blocks) >= maxBlocks-reservedBlocks || size+u.size > maxMessageText ||
			(u.kind == unitMarkdown && markdownSize+u.size > maxMarkdownBlock) || (u.kind == unitTable && hasTable) {
			flush()
		}
		cur.Blocks = append(cur.Blocks, u.block)
		size += u.size
		switch u.kind {
		case unitMarkdown:
			markdownSize += u.size
		case unitTable:
			hasTable = true
		}
		if src.Len() > 0 {
			src.WriteString("\n\n")
		}
		src.WriteString(u.source)
	}
	flush()
	if len(msgs) == 0 {
		msgs = []outMessage{{Text: "…"}}
	}
	return msgs
}

// convertedPart is a piece of Markdown and its mrkdwn conversion.
type convertedPart struct{ markdown, mrkdwn string }

// convertSplit cuts Markdown into fence-balanced parts whose mrkdwn
// conversions each fit in limit runes. Split needs an additive measure, so
// it measures the Markdown with room for the escaping conversion adds; a part
// that still converts too long (a table padded into a code block) is split
// again, finer.
func convertSplit(text string, limit int) []convertedPart {
	var out []convertedPart
	for _, part := range markdown.Split(text, limit, escapedLen) {
		conv := mrkdwn.Convert(part)
		n := runes(conv)
		switch {
		case strings.TrimSpace(conv) == "":
		case n <= limit:
			out = append(out, convertedPart{part, conv})
		case limit > minSplit:
			finer := max(limit*limit/n*9/10, minSplit)
			if finer >= limit {
				finer = limit - 1
			}
			out = append(out, convertSplit(part, finer)...)
		default:
			// Nothing finer is possible: cut the converted text itself.
			for conv != "" {
				head := truncateEscaped(conv, limit)
				head = strings.TrimSuffix(head, "…")
				if head == "" {
					head = string([]rune(conv)[:limit])
				}
				out = append(out, convertedPart{part, head})
				conv = strings.TrimPrefix(conv, head)
			}
		}
	}
	return out
}

// minSplit is the smallest limit convertSplit asks Split for.
const minSplit = 256

// escapedLen measures Markdown as runes plus what escaping & < > adds: an
// additive upper bound of most conversions' growth.
func escapedLen(s string) int {
	n := 0
	for _, r := range s {
		switch r {
		case '&':
			n += 5
		case '<', '>':
			n += 4
		default:
			n++
		}
	}
	return n
}

func buttons(bs []bridge.Button) slackgo.Block {
	els := make([]slackgo.BlockElement, 0, len(bs))
	for _, b := range bs {
		btn := slackgo.NewButtonBlockElement(b.Action.ID, b.Action.Value,
			slackgo.NewTextBlockObject(slackgo.PlainTextType, truncate.Bytes(b.Label, maxLabel), false, false))
		switch b.Style {
		case "primary":
			btn.Style = slackgo.StylePrimary
		case "danger":
			btn.Style = slackgo.StyleDanger
		}
		els = append(els, btn)
	}
	return slackgo.NewActionBlock(actionsBlockID, els...)
}

// fallback is the plain-text version of Markdown for a message's text field.
func fallback(md string) string {
	t := strings.TrimSpace(mrkdwn.PlainText(md))
	if t == "" {
		return "…"
	}
	return truncateEscaped(t, maxFallback)
}

// escapeText makes text from users or the AI safe in any mrkdwn field.
func escapeText(s string) string { return mrkdwn.Escape(s) }

func runes(s string) int { return utf8.RuneCountInString(s) }

// truncateEscaped is truncate.Bytes for already-escaped text: it leaves
// no half an entity such as "&am" behind.
func truncateEscaped(s string, n int) string {
	t := truncate.Bytes(s, n)
	if t == s {
		return s
	}
	t = strings.TrimSuffix(t, truncate.Mark)
	if i := strings.LastIndexByte(t, '&'); i >= 0 && !strings.Contains(t[i:], ";") {
		t = t[:i]
	}
	return t + truncate.Mark
}
