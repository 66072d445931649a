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
			checkGolden(t, golden, b.String())
		})
	}
}

// TestTablesGolden renders every table of testdata/tables.md as aligned
// columns and compares them with testdata/tables.golden.
func TestTablesGolden(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "tables.md"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i, tab := range Tables(string(text)) {
		fmt.Fprintf(&b, "===== table %d: %d columns, %d rows =====\n%s\n", i+1, len(tab.Header), len(tab.Rows), tab.Columns(PlainInline))
	}
	checkGolden(t, filepath.Join("testdata", "tables.golden"), b.String())
}

// checkGolden compares got with the golden file, rewriting it with -update.
func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
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
		t.Errorf("output differs from %s:\ngot:\n%s", golden, got)
	}
}
