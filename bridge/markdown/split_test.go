package markdown

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		limit   int
		measure func(string) int
		want    []string
	}{
		{name: "empty", text: "", limit: 100, want: nil},
		{name: "only whitespace", text: " \n\t\n  ", limit: 100, want: nil},
		{name: "fits", text: "hello **world**", limit: 100, want: []string{"hello **world**"}},
		{name: "fits exactly", text: "0123456789abcdef", limit: 16, want: []string{"0123456789abcdef"}},
		{name: "fits after trimming", text: "\n\n  hi there  \n\n", limit: 100, want: []string{"  hi there"}},
		{
			name:  "paragraph break preferred over line break",
			text:  "first para\nstill first\n\nsecond para here",
			limit: 30,
			want:  []string{"first para\nstill first", "second para here"},
		},
		{
			name:  "line break preferred over word",
			text:  "line one is here\nline two is here too",
			limit: 25,
			want:  []string{"line one is here", "line two is here too"},
		},
		{
			name:  "word boundary",
			text:  "alpha beta gamma delta epsilon",
			limit: 16,
			want:  []string{"alpha beta gamma", "delta epsilon"},
		},
		{
			name:  "hard cut",
			text:  strings.Repeat("x", 40),
			limit: 16,
			want:  []string{strings.Repeat("x", 16), strings.Repeat("x", 16), strings.Repeat("x", 8)},
		},
		{
			name:  "fence reopened with info string",
			text:  "```go\na := 1\nb := 2\nc := 3\n```",
			limit: 23,
			want:  []string{"```go\na := 1\nb := 2\n```", "```go\nc := 3\n```"},
		},
		{
			name:  "cut before fence rather than inside",
			text:  "Here is code:\n```sh\nls -la\n```\nDone.",
			limit: 26,
			want:  []string{"Here is code:", "```sh\nls -la\n```\nDone."},
		},
		{
			name:  "tilde fence",
			text:  "~~~\none\ntwo\nthree\n~~~",
			limit: 16,
			want:  []string{"~~~\none\ntwo\n~~~", "~~~\nthree\n~~~"},
		},
		{
			name:  "indented fence keeps indentation",
			text:  "1. step\n   ```\n   aaa\n   bbb\n   ```",
			limit: 24,
			want:  []string{"1. step", "   ```\n   aaa\n   ```", "   ```\n   bbb\n   ```"},
		},
		{
			name:  "unclosed fence closed at the end",
			text:  "```py\nprint(1)",
			limit: 100,
			want:  []string{"```py\nprint(1)\n```"},
		},
		{
			name:  "inner shorter fence is content",
			text:  "````md\n```go\nx\n```\n````",
			limit: 18,
			want:  []string{"````md\n```go\n````", "````md\nx\n```\n````"},
		},
		{
			name:    "utf16 counts astral runes twice",
			text:    strings.Repeat("😀", 10),
			limit:   16,
			measure: UTF16Len,
			want:    []string{strings.Repeat("😀", 8), strings.Repeat("😀", 2)},
		},
		{
			name:  "combining mark stays with its base",
			text:  strings.Repeat("e\u0301", 10),
			limit: 17,
			want:  []string{strings.Repeat("e\u0301", 8), strings.Repeat("e\u0301", 2)},
		},
		{
			name:  "below MinLimit fences are ignored",
			text:  "```\nabc\n```",
			limit: 5,
			want:  []string{"```", "abc", "```"},
		},
		{
			name:  "below MinLimit a wide rune stands alone",
			text:  "😀😀",
			limit: 1, measure: UTF16Len,
			want: []string{"😀", "😀"},
		},
		{
			name:  "zero limit still ends",
			text:  "ab",
			limit: 0,
			want:  []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.text, tt.limit, tt.measure)
			if !equalParts(got, tt.want) {
				t.Errorf("Split(%q, %d) = %q, want %q", tt.text, tt.limit, got, tt.want)
			}
		})
	}
}

func TestSplitFallback(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		limit int
	}{
		{name: "fence line longer than limit", text: "```" + strings.Repeat("x", 40) + "\ncode\n```\nafter", limit: 16},
		{name: "closing fence longer than limit", text: "```\ncode\n" + strings.Repeat("`", 40) + "\nafter", limit: 16},
		{name: "deep indentation inside fence", text: "```\n" + strings.Repeat(" ", 40) + "x\n```", limit: 16},
		{name: "long backtick run in text", text: "a" + strings.Repeat("`", 40) + " b", limit: 16},
		{name: "long grapheme cluster", text: "e" + strings.Repeat("\u0301", 40), limit: 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSplit(t, tt.text, tt.limit, nil)
		})
	}
}

func TestSplitDiscordReply(t *testing.T) {
	var b strings.Builder
	for i := range 12 {
		b.WriteString("Here is an explanation paragraph that talks about the next step in some detail, number ")
		b.WriteString(strings.Repeat("x", i))
		b.WriteString(".\n\n```go\n")
		for j := range 12 {
			b.WriteString("func step")
			b.WriteString(strings.Repeat("A", j))
			b.WriteString("() error { return nil }\n")
		}
		b.WriteString("```\n\n")
	}
	text := b.String()
	parts := Split(text, 2000, nil)
	if len(parts) < 2 {
		t.Fatalf("Split(7k reply, 2000) = %d parts, want several", len(parts))
	}
	for i, p := range parts {
		if n := utf8.RuneCountInString(p); n > 2000 {
			t.Errorf("part %d has %d runes, want <= 2000", i, n)
		}
		if !fencesBalanced(p) {
			t.Errorf("part %d has unbalanced fences:\n%s", i, p)
		}
	}
}

func TestCodeBlock(t *testing.T) {
	tests := []struct {
		name, lang, body, want string
	}{
		{name: "plain", lang: "json", body: "{}", want: "```json\n{}\n```"},
		{name: "trailing newline kept once", lang: "", body: "a\n", want: "```\na\n```"},
		{name: "triple backticks inside", lang: "md", body: "```go\nx\n```", want: "````md\n```go\nx\n```\n````"},
		{name: "long run inside", lang: "", body: "a ````` b", want: "``````\na ````` b\n``````"},
		{name: "lang sanitised", lang: " g`o\n ", body: "x", want: "```go\nx\n```"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CodeBlock(tt.lang, tt.body); got != tt.want {
				t.Errorf("CodeBlock(%q, %q) = %q, want %q", tt.lang, tt.body, got, tt.want)
			}
		})
	}
}

func TestPrettyJSON(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{name: "object", raw: `{"a":1,"b":[true,null]}`, want: "{\n  \"a\": 1,\n  \"b\": [\n    true,\n    null\n  ]\n}"},
		{name: "number", raw: ` 42 `, want: "42"},
		{name: "invalid kept", raw: `{"a":`, want: `{"a":`},
		{name: "empty", raw: ``, want: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PrettyJSON([]byte(tt.raw)); got != tt.want {
				t.Errorf("PrettyJSON(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

func TestUTF16Len(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"é", 1},
		{"😀", 2},
		{"a😀b", 4},
		{"\xff", 1},
	}
	for _, tt := range tests {
		if got := UTF16Len(tt.s); got != tt.want {
			t.Errorf("UTF16Len(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

func equalParts(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// fencesBalanced reports whether every fence opened in s is closed in s.
// It is written apart from the splitter's scanner on purpose, from the
// rules in Split's documentation.
func fencesBalanced(s string) bool {
	var char byte
	n := 0 // length of the open fence; 0 when none is open
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimLeft(line, " \t")
		run := 0
		for run < len(t) && (t[run] == '`' || t[run] == '~') && t[run] == t[0] {
			run++
		}
		rest := t[run:]
		switch {
		case n == 0 && run >= 3 && (t[0] == '~' || !strings.Contains(rest, "`")):
			char, n = t[0], run
		case n > 0 && run >= n && t[0] == char && strings.Trim(rest, " \t\r\n\v\f") == "":
			n = 0
		}
	}
	return n == 0
}
