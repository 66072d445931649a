// Package mrkdwn renders AI Markdown as Slack text that can never ping anyone.
package mrkdwn

import "strings"

// Why nothing here can ping: Slack treats only '&', '<' and '>' specially
// in message text, and every control sequence (<!here>, <!channel>,
// <!everyone>, <@U123>, <!subteam^S123>, <#C123>, <!date^…>, <url|text>)
// starts with '<'. Every function here escapes all three; the only raw '<'
// written opens a link Convert built to an http, https or mailto URL.
//
// Plain "@here", "@channel" and "@everyone" are not mentions in messages an
// app posts: Slack stopped turning them into notifications
// in bot messages (18F/charlie PR #353 records the deprecation), and
// chat.postMessage links names only when the caller sets link_names=true
// (its docs: "Find and link channel names and usernames", later "user
// groups"), which the bridge must never set; the
// default parse=none leaves text as it is. A real mention needs the <!here>
// form. As defence in depth, the word joiner below still goes after the '@'
// of those three words.

// wordJoiner (U+2060) is invisible and, unlike a space, does not change how
// the word looks or wraps.
const wordJoiner = "\u2060"

// Escape replaces &, < and > with &amp;, &lt; and &gt;, as Slack requires
// for any text placed in mrkdwn, plain_text or the message text field. It
// escapes every '&', including one that already starts an entity, so the
// text shows exactly as given.
func Escape(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	writeEscaped(&b, s)
	return b.String()
}

func writeEscaped(b *strings.Builder, s string) {
	for i := range len(s) {
		writeEscapedByte(b, s[i])
	}
}

func writeEscapedByte(b *strings.Builder, c byte) {
	switch c {
	case '&':
		b.WriteString("&amp;")
	case '<':
		b.WriteString("&lt;")
	case '>':
		b.WriteString("&gt;")
	default:
		b.WriteByte(c)
	}
}

// Convert turns standard Markdown, as LLMs write it, into Slack mrkdwn:
//
//   - **bold** and __bold__ become *bold*; *italic* and _italic_ become
//     _italic_; ***both*** becomes *_both_*; ~~strike~~ becomes ~strike~;
//   - [text](url) and ![alt](url) become <url|text>, and <url> autolinks
//     stay links, when the URL is http, https or mailto; other links keep
//     only their text; bare URLs are left for Slack to link;
//   - # headings become a *bold* line; "- ", "* " and "+ " list items
//     become "• item" with their indentation kept ("- [ ]" and "- [x]"
//     become ☐ and ☑); ordered items, > quotes and blank lines stay;
//     a thematic break becomes a line of box-drawing characters;
//   - fenced code keeps its text (the info string is dropped, since mrkdwn
//     would show it) and `inline code` is not formatted inside;
//   - tables become an aligned table inside a code block.
//
// Everything else is escaped (&amp; &lt; &gt;), except the '>' that starts
// a quote line and the links Convert builds, whose URLs are percent-encoded
// where they hold '<', '>', '|', quotes or whitespace and whose labels have
// '|' replaced by '¦'. So the result can never hold a Slack control
// sequence. "@here", "@channel" and "@everyone" outside code get a word
// joiner after the '@'. Emphasis does not span lines, as in mrkdwn.
func Convert(md string) string {
	return renderBlocks(md, false)
}

// PlainText renders Markdown as the plain text Slack shows in
// notifications and uses as the fallback for blocks: markup is dropped
// (links become "text (url)"), code keeps its text, and the result is
// escaped, with no '<' or '>' left at all and a word joiner after the '@'
// of "@here", "@channel" and "@everyone" everywhere.
func PlainText(md string) string {
	return neutralizeAt(renderBlocks(md, true))
}

// SafeMarkdown prepares standard Markdown for Slack's markdown block,
// which renders the Markdown itself, so that it can never ping anyone. It
// changes exactly this and nothing else:
//
//   - every '&', '<' and '>' becomes &amp;, &lt; and &gt;, in code too,
//     because Slack stores and decodes message text in this escaped form;
//   - except the '>' characters that open a quote at the start of a line
//     (after at most three spaces, possibly nested as "> >"), so quotes
//     keep working;
//   - "@here", "@channel" and "@everyone", in any case, get U+2060 WORD
//     JOINER after the '@'.
//
// Markdown autolinks (<https://…>) therefore show as text; Slack still
// links the bare URL inside them.
func SafeMarkdown(md string) string {
	var b strings.Builder
	b.Grow(len(md) + len(md)/16)
	for i, line := range strings.Split(md, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		n := quotePrefixLen(line)
		b.WriteString(line[:n])
		writeEscaped(&b, line[n:])
	}
	return neutralizeAt(b.String())
}

// RawText prepares text for a field Slack shows as it is, unescaped (a
// table block's raw_text cell): a word joiner goes after the '<' of "<!",
// "<@" and "<#", which start Slack's control sequences, and after the '@'
// of "@here", "@channel" and "@everyone", in any case. Nothing is escaped,
// so "a & b" shows as written.
func RawText(s string) string {
	if strings.Contains(s, "<") {
		s = controlStarts.Replace(s)
	}
	return neutralizeAt(s)
}

var controlStarts = strings.NewReplacer("<!", "<"+wordJoiner+"!", "<@", "<"+wordJoiner+"@", "<#", "<"+wordJoiner+"#")

// quotePrefixLen is the length of the blockquote markers that start line:
// up to three spaces, then one or more '>' each followed by optional
// spaces.
func quotePrefixLen(line string) int {
	i := 0
	for i < 3 && i < len(line) && line[i] == ' ' {
		i++
	}
	if i >= len(line) || line[i] != '>' {
		return 0
	}
	for i < len(line) && (line[i] == '>' || line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return i
}

var atWords = []string{"here", "channel", "everyone"}

// neutralizeAt puts a word joiner after the '@' of @here, @channel and
// @everyone, in any case.
func neutralizeAt(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] == '@' && atWordAt(s[i+1:]) {
			b.WriteString(wordJoiner)
		}
	}
	return b.String()
}

func atWordAt(s string) bool {
	for _, w := range atWords {
		if len(s) >= len(w) && strings.EqualFold(s[:len(w)], w) {
			return true
		}
	}
	return false
}
