package markdown

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSplit checks the guarantees documented on Split:
//   - every part measures at most limit, and none is empty or only whitespace;
//   - with the added fence lines taken off, the parts are the text in order,
//     separated only by ASCII whitespace;
//   - the added lines are exactly a fence line and its closer;
//   - fences are balanced in every part whenever every line holding ``` or
//     ~~~ measures at most (limit-6)/3;
//   - text that fits (and has balanced fences) comes back as one part.
func FuzzSplit(f *testing.F) {
	seeds := []string{
		"",
		"hello",
		"para one\n\npara two\nline\n\n```go\nfunc main() {}\n```\n",
		"```\nunclosed",
		"  ```python  \n  x = 1\n  ```  \n",
		"~~~~\n```\ninner\n```\n~~~~\ntext",
		"a ```inline``` b\n```x`y\nnot a fence",
		"😀👍🏽🇫🇷e\u0301 words words words",
		"\r\n```\r\ncrlf\r\n```\r\n",
		strings.Repeat("word ", 50),
	}
	for _, s := range seeds {
		f.Add(s, 16, false)
		f.Add(s, 40, true)
	}
	f.Fuzz(func(t *testing.T, text string, limit int, utf16 bool) {
		if limit < 0 {
			limit = -limit
		}
		limit = MinLimit + limit%2000
		var measure func(string) int
		if utf16 {
			measure = UTF16Len
		}
		checkSplit(t, text, limit, measure)
	})
}

// checkSplit asserts Split's guarantees for one input.
func checkSplit(t *testing.T, text string, limit int, measure func(string) int) {
	t.Helper()
	m := measure
	if m == nil {
		m = utf8.RuneCountInString
	}
	parts := Split(text, limit, measure)
	pieces := split(text, limit, measure)
	if len(parts) != len(pieces) {
		t.Fatalf("Split(%q, %d) = %d parts, split = %d pieces", text, limit, len(parts), len(pieces))
	}
	if isBlank(text) != (parts == nil) {
		t.Fatalf("Split(%q, %d) = %q: want nil exactly when the text is blank", text, limit, parts)
	}
	checkBalance := fenceLinesShort(text, limit, m)
	prev := 0
	for i, p := range parts {
		pc := pieces[i]
		if got := m(p); got > limit {
			t.Errorf("Split(%q, %d) part %d = %q measures %d, want <= %d", text, limit, i, p, got, limit)
		}
		if isBlank(p) {
			t.Errorf("Split(%q, %d) part %d = %q is blank", text, limit, i, p)
		}
		if pc.start < prev || pc.end <= pc.start {
			t.Fatalf("Split(%q, %d) part %d spans [%d,%d) after %d", text, limit, i, pc.start, pc.end, prev)
		}
		if gap := text[prev:pc.start]; !isBlank(gap) {
			t.Errorf("Split(%q, %d) dropped %q before part %d", text, limit, gap, i)
		}
		if want := pc.reopen + text[pc.start:pc.end] + pc.close; p != want {
			t.Errorf("Split(%q, %d) part %d = %q, want %q", text, limit, i, p, want)
		}
		if pc.reopen != "" {
			fl, ok := parseOpener(strings.TrimSuffix(pc.reopen, "\n"))
			if !ok || !strings.HasSuffix(pc.reopen, "\n") || strings.Count(pc.reopen, "\n") != 1 {
				t.Errorf("Split(%q, %d) part %d reopens with %q, not a fence line", text, limit, i, pc.reopen)
			} else if !strings.Contains(text, fl.line) {
				t.Errorf("Split(%q, %d) part %d reopens with %q, not from the text", text, limit, i, pc.reopen)
			}
		}
		if pc.close != "" && strings.Trim(pc.close, "\n \t`~") != "" {
			t.Errorf("Split(%q, %d) part %d closes with %q, not a fence", text, limit, i, pc.close)
		}
		if checkBalance && !fencesBalanced(p) {
			t.Errorf("Split(%q, %d) part %d = %q has unbalanced fences", text, limit, i, p)
		}
		prev = pc.end
	}
	if rest := text[prev:]; !isBlank(rest) {
		t.Errorf("Split(%q, %d) dropped the tail %q", text, limit, rest)
	}
	trimmed := trimRightSpace(text[skipBlankLines(text, 0):])
	if trimmed != "" && m(trimmed) <= limit && fencesBalanced(trimmed) && len(parts) != 1 {
		t.Errorf("Split(%q, %d) = %q, want the one part %q", text, limit, parts, trimmed)
	}
}

// fenceLinesShort reports whether every line that holds ``` or ~~~
// measures at most (limit-6)/3, the condition for balanced fences.
func fenceLinesShort(text string, limit int, m func(string) int) bool {
	for _, line := range strings.Split(text, "\n") {
		if (strings.Contains(line, "```") || strings.Contains(line, "~~~")) && 3*m(trimRightSpace(line))+6 > limit {
			return false
		}
	}
	return true
}
