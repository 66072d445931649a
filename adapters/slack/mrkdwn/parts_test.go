package mrkdwn

import (
	"os"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/markdown"
)

func TestParts(t *testing.T) {
	reply, err := os.ReadFile("testdata/debug.md")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat(string(reply)+"\n\n", 8)
	tests := []struct {
		name   string
		md     string
		limit  int
		render func(string) string
		min    int // at least this many parts
	}{
		{name: "short reply is one part", md: "**hi** <!here>", limit: 3000, render: Convert, min: 1},
		{name: "long reply for sections", md: long, limit: 3000, render: Convert, min: 4},
		{name: "long reply for markdown blocks", md: long, limit: 12000, render: SafeMarkdown, min: 1},
		{name: "escaping grows past the limit", md: strings.Repeat("<&> ", 1000), limit: 3000, render: Convert, min: 5},
		{name: "table padding grows past the limit", md: "|a|b|\n|-|-|\n|" + strings.Repeat("x", 200) + "|y|\n" + strings.Repeat("|1|2|\n", 100), limit: 500, render: Convert, min: 2},
		{name: "tiny limit", md: "&&&&&&&&", limit: 3, render: Convert, min: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := Parts(tt.md, tt.limit, tt.render)
			if len(parts) < tt.min {
				t.Errorf("Parts(%.40q, %d) = %d parts, want at least %d", tt.md, tt.limit, len(parts), tt.min)
			}
			for i, p := range parts {
				if n := markdown.UTF16Len(p); n > tt.limit {
					t.Errorf("Parts(%.40q, %d) part %d measures %d, want <= %d", tt.md, tt.limit, i, n, tt.limit)
				}
				if strings.TrimSpace(p) == "" {
					t.Errorf("Parts(%.40q, %d) part %d is blank", tt.md, tt.limit, i)
				}
				for _, seq := range []string{"<!", "<@", "<#"} {
					if strings.Contains(p, seq) {
						t.Errorf("Parts(%.40q, %d) part %d = %q holds %q", tt.md, tt.limit, i, p, seq)
					}
				}
			}
		})
	}
}

func FuzzParts(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, 40)
	}
	f.Fuzz(func(t *testing.T, md string, limit int) {
		if limit < 0 {
			limit = -limit
		}
		limit = markdown.MinLimit + limit%4000
		for _, render := range []func(string) string{Convert, PlainText, SafeMarkdown} {
			for i, p := range Parts(md, limit, render) {
				if n := markdown.UTF16Len(p); n > limit {
					t.Fatalf("Parts(%q, %d) part %d = %q measures %d", md, limit, i, p, n)
				}
				for _, seq := range []string{"<!", "<@", "<#"} {
					if strings.Contains(p, seq) {
						t.Fatalf("Parts(%q, %d) part %d = %q holds %q", md, limit, i, p, seq)
					}
				}
			}
		}
	})
}
