package markdown

import (
	"strings"
	"testing"
)

// benchReply is about 10,000 characters of prose and fenced code.
func benchReply() string {
	var b strings.Builder
	for b.Len() < 10000 {
		b.WriteString("Here is an explanation of the next step, with enough words to wrap a few times in a chat window.\n\n")
		b.WriteString("```go\nfunc handler(w http.ResponseWriter, r *http.Request) {\n\tfmt.Fprintln(w, \"ok\")\n}\n```\n\n")
		b.WriteString("- a list item\n- another *item*\n\n")
	}
	return b.String()
}

func BenchmarkSplit(b *testing.B) {
	text := benchReply()
	b.ReportAllocs()
	for b.Loop() {
		Split(text, 2000, nil)
	}
}

func BenchmarkSplitUTF16(b *testing.B) {
	text := benchReply()
	b.ReportAllocs()
	for b.Loop() {
		Split(text, 3000, UTF16Len)
	}
}
