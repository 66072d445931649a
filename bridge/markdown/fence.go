package markdown

import "strings"

// fence is an open code fence: a line of three or more backticks or tildes,
// optionally indented and followed by an info string.
type fence struct {
	char   byte   // '`' or '~'
	n      int    // length of the marker
	indent string // whitespace before the marker
	line   string // the opening line, trailing whitespace removed
}

// parseOpener reports whether line opens a fence. Unlike CommonMark, any
// indentation is accepted: chat renderers do not count columns, and LLMs
// indent fences inside list items by four spaces or more.
func parseOpener(line string) (fence, bool) {
	body := strings.TrimLeft(line, " \t")
	n := markerLen(body)
	if n < 3 {
		return fence{}, false
	}
	c := body[0]
	// A backtick info string may not contain backticks: "```a``` b" is
	// inline code, not a fence.
	if c == '`' && strings.IndexByte(body[n:], '`') >= 0 {
		return fence{}, false
	}
	return fence{
		char:   c,
		n:      n,
		indent: line[:len(line)-len(body)],
		line:   trimRightSpace(line),
	}, true
}

// closedBy reports whether line closes f: the same character, at least as
// many of it, and nothing but whitespace after.
func (f fence) closedBy(line string) bool {
	body := strings.TrimLeft(line, " \t")
	n := markerLen(body)
	return n >= f.n && body[0] == f.char && isBlank(body[n:])
}

// closer is the line that closes f.
func (f fence) closer() string {
	return f.indent + strings.Repeat(string(f.char), f.n)
}

// markerLen is the length of the run of '`' or '~' that starts s.
func markerLen(s string) int {
	if s == "" || (s[0] != '`' && s[0] != '~') {
		return 0
	}
	n := 1
	for n < len(s) && s[n] == s[0] {
		n++
	}
	return n
}

// fenceLike reports whether s, after leading whitespace, starts like a
// fence line. A cut that leaves such text at the start or end of a part
// could open or close a fence that was not there.
func fenceLike(s string) bool {
	return startsFence(strings.TrimLeft(s, " \t"))
}

func startsFence(s string) bool {
	return strings.HasPrefix(s, "```") || strings.HasPrefix(s, "~~~")
}

// isSpace reports whether b is ASCII whitespace, the only whitespace Split
// drops at a cut.
func isSpace(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

func isBlank(s string) bool {
	for i := range len(s) {
		if !isSpace(s[i]) {
			return false
		}
	}
	return true
}

func trimRightSpace(s string) string {
	i := len(s)
	for i > 0 && isSpace(s[i-1]) {
		i--
	}
	return s[:i]
}
