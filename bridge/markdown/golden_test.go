package markdown

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestSplitGolden splits a long realistic reply at the Discord and Slack
// section limits and compares the parts with testdata/*.golden; go test
// -update rewrites those.
func TestSplitGolden(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "reply.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{2000, 3000} {
		golden := filepath.Join("testdata", fmt.Sprintf("reply.%d.golden", limit))
		t.Run(filepath.Base(golden), func(t *testing.T) {
			var b strings.Builder
			for i, p := range Split(string(text), limit, nil) {
				fmt.Fprintf(&b, "===== part %d: %d runes =====\n%s\n", i+1, utf8.RuneCountInString(p), p)
			}
			got := b.String()
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run go test -update): %v", err)
			}
			if got != string(want) {
				t.Errorf("Split(reply.md, %d) differs from %s:\ngot:\n%s", limit, golden, got)
			}
		})
	}
}
