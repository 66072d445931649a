package mrkdwn

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestGolden renders realistic LLM replies and compares them with the
// reviewed output in testdata/*.golden; go test -update rewrites those.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.md"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("Glob(testdata/*.md) = %v, %v; want replies to render", inputs, err)
	}
	renderers := []struct {
		name   string
		render func(string) string
	}{
		{"mrkdwn", Convert},
		{"plain", PlainText},
		{"safe", SafeMarkdown},
	}
	for _, in := range inputs {
		md, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range renderers {
			golden := strings.TrimSuffix(in, ".md") + "." + r.name + ".golden"
			t.Run(filepath.Base(golden), func(t *testing.T) {
				got := r.render(string(md))
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
					t.Errorf("%s(%s) differs from %s:\ngot:\n%s\nwant:\n%s", r.name, in, golden, got, want)
				}
			})
		}
	}
}
