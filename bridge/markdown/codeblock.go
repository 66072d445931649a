package markdown

import (
	"bytes"
	"encoding/json"
	"strings"
)

// CodeBlock returns body as a fenced code block. The fence is one backtick
// longer than the longest backtick run in body (at least three), so no
// line of body can close it early. Backticks and line breaks are removed
// from lang, where they would break the opening line.
//
// Discord's renderer predates CommonMark and only knows triple-backtick
// fences; a body that itself contains ``` may render imperfectly there,
// though the text is never lost.
func CodeBlock(lang, body string) string {
	longest, run := 0, 0
	for i := range len(body) {
		if body[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	lang = strings.Map(func(r rune) rune {
		if r == '`' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, lang)
	var b strings.Builder
	b.Grow(len(body) + 2*len(fence) + len(lang) + 3)
	b.WriteString(fence)
	b.WriteString(strings.TrimSpace(lang))
	b.WriteByte('\n')
	b.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(fence)
	return b.String()
}

// PrettyJSON indents raw JSON by two spaces, for showing flow output that
// is not a string. Anything that is not valid JSON is returned unchanged,
// because showing the user the raw output beats showing nothing.
func PrettyJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, bytes.TrimSpace(raw), "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// UTF16Len counts s in UTF-16 code units, for platforms whose limits are
// JavaScript string lengths. It can be passed to Split as the measure.
// Invalid UTF-8 bytes count as one unit each, as the U+FFFD that JSON
// encoding turns them into.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		if r > 0xFFFF {
			n += 2
		} else {
			n++
		}
	}
	return n
}
