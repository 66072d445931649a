package markdown

import (
	"fmt"
	"strings"
	"testing"
)

func TestCap(t *testing.T) {
	long := strings.Repeat("A paragraph of the answer, long enough.\n\n", 100_000) // 4 MB
	tests := []struct {
		name            string
		text, tail      string
		limit, maxParts int
		want            string // "" when only the checks below apply
		wantKept        string // the start the cut answer keeps
	}{
		{name: "fits", text: "short answer", tail: "\n-# footer", limit: 100, maxParts: 1, want: "short answer\n-# footer"},
		{name: "no cap", text: long[:1000], limit: 20, maxParts: 0, want: long[:1000]},
		{
			name: "cut at a part's end", text: "one two three\n\nfour five six\n\nseven eight nine", limit: 120, maxParts: 1,
			want: "one two three\n\nfour five six\n\nseven eight nine",
		},
		{
			name: "cut, note in the last part", text: strings.Repeat("word ", 100), limit: 200, maxParts: 2,
			wantKept: strings.Repeat("word ", 39) + "word",
		},
		{
			name: "open fence closed before the note", text: "```go\n" + strings.Repeat("x := 1\n", 200) + "```", limit: 300, maxParts: 2,
			wantKept: "```go\nx := 1\n",
		},
		{name: "4 MB", text: long, tail: "\n-# flow by Ann", limit: 2000, maxParts: 5, wantKept: "A paragraph of the answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Cap(tt.text, tt.tail, tt.limit, tt.maxParts, UTF16Len)
			if tt.want != "" {
				if got != tt.want {
					t.Errorf("Cap() = %q, want %q", got, tt.want)
				}
				return
			}
			parts := Split(got, tt.limit, UTF16Len)
			if len(parts) > tt.maxParts {
				t.Errorf("Cap() splits into %d parts, want at most %d", len(parts), tt.maxParts)
			}
			if !strings.HasPrefix(got, tt.wantKept) {
				t.Errorf("Cap() = %.80q…, want it to start with %.80q", got, tt.wantKept)
			}
			if !strings.HasSuffix(got, tt.tail) {
				t.Errorf("Cap() = …%q, want the tail %q kept", got[max(0, len(got)-80):], tt.tail)
			}
			kept, _, ok := strings.Cut(got, "\n\n_[The answer was too long")
			if !ok {
				t.Fatalf("Cap() = …%q: no cut note", got[max(0, len(got)-200):])
			}
			if !fencesBalanced(kept) {
				t.Errorf("kept %q: fences not balanced before the note", kept)
			}
			if n := len([]rune(tt.text)) - len([]rune(strings.TrimSuffix(strings.TrimSuffix(kept, "\n```"), "```"))); !strings.Contains(got, fmt.Sprintf(": %d more characters", n)) &&
				!strings.Contains(got, fmt.Sprintf(": %d more characters", n-len("\n```"))) {
				t.Logf("note: %q (kept %d runes of %d)", got[len(kept):], len([]rune(kept)), len([]rune(tt.text)))
			}
		})
	}
}

func TestCapCountsWhatWasLeftOut(t *testing.T) {
	text := strings.Repeat("abcdefghi\n\n", 100) // 1,100 characters
	got := Cap(text, "", 100, 3, nil)
	kept, note, _ := strings.Cut(got, "\n\n_[")
	if want := fmt.Sprintf(": %d more characters", len(text)-len(kept)); !strings.Contains(note, want) {
		t.Errorf("note %q, want it to say %q (kept %d of %d)", note, want, len(kept), len(text))
	}
}

// FuzzCap checks that a capped text splits into at most maxParts parts
// (when the note and tail fit in one part), keeps its tail, and is the text
// itself when it needs no cut.
func FuzzCap(f *testing.F) {
	f.Add("para one\n\npara two\n\n```go\nfunc main() {}\n```\n", "\n-# footer", 60, 2)
	f.Add(strings.Repeat("word ", 400), "", 120, 3)
	f.Add("```\n"+strings.Repeat("line\n", 300), "", 200, 1)
	f.Fuzz(func(t *testing.T, text, tail string, limit, maxParts int) {
		limit = 200 + abs(limit)%2000
		maxParts = 1 + abs(maxParts)%8
		if len(tail) > 40 {
			tail = tail[:40]
		}
		got := Cap(text, tail, limit, maxParts, UTF16Len)
		if !strings.HasSuffix(got, tail) {
			t.Fatalf("Cap(%q, %q) = %q: tail lost", text, tail, got)
		}
		if len(Split(text+tail, limit, UTF16Len)) <= maxParts {
			if got != text+tail {
				t.Fatalf("Cap(%q, %q) = %q: cut a text that fits", text, tail, got)
			}
			return
		}
		if n := len(Split(got, limit, UTF16Len)); n > maxParts && !strings.ContainsAny(tail, "`~") {
			t.Fatalf("Cap(%q, %q, %d, %d) = %q: %d parts", text, tail, limit, maxParts, got, n)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
