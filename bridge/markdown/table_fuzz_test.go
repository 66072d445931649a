package markdown

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzTables checks what Tables, Columns and ReplaceTables promise:
//   - tables come in order, do not overlap, start at a line holding '|'
//     and end at a line end;
//   - every row has as many cells as the header and the alignments;
//   - Columns gives one line per row plus the rule, the rule as wide as
//     the header line at most, and valid UTF-8 for valid input;
//   - replacing every table by its own text gives the text back.
func FuzzTables(f *testing.F) {
	seeds := []string{
		"| a | b |\n|---|---|\n| 1 | 2 |",
		"a | b\n:-: | --:\n1 | 2 | 3\n| 4\n\nafter",
		"```\n| a |\n|---|\n```\n| x |\n| - |",
		"| 東京 | 😀 |\n|---|---|\n| `a\\|b` | **b** |",
		"| a |\r\n| --- |\r\n| b |\r\n",
		"|\n|-|\n||||",
		"   | a |\n   |:-:|\n",
		"\\|a|b\\\\|\n-|-\n",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		tables := Tables(md)
		prev := 0
		for i, tab := range tables {
			if tab.Start < prev || tab.End <= tab.Start || tab.End > len(md) {
				t.Fatalf("Tables(%q)[%d] spans [%d,%d) after %d", md, i, tab.Start, tab.End, prev)
			}
			if tab.Start > 0 && md[tab.Start-1] != '\n' || tab.End < len(md) && md[tab.End] != '\n' {
				t.Errorf("Tables(%q)[%d] = [%d,%d) is not whole lines", md, i, tab.Start, tab.End)
			}
			if tab.Line != strings.Count(md[:tab.Start], "\n") || tab.Lines != strings.Count(md[tab.Start:tab.End], "\n")+1 {
				t.Errorf("Tables(%q)[%d] says lines %d+%d, not where it is", md, i, tab.Line, tab.Lines)
			}
			first, _, _ := strings.Cut(md[tab.Start:tab.End], "\n")
			if !strings.Contains(first, "|") {
				t.Errorf("Tables(%q)[%d] starts at %q, which holds no '|'", md, i, first)
			}
			if len(tab.Align) != len(tab.Header) || len(tab.Header) == 0 {
				t.Errorf("Tables(%q)[%d] has %d cells and %d alignments", md, i, len(tab.Header), len(tab.Align))
			}
			for r, row := range tab.Rows {
				if len(row) != len(tab.Header) {
					t.Errorf("Tables(%q)[%d] row %d has %d cells, want %d", md, i, r, len(row), len(tab.Header))
				}
			}
			cols := tab.Columns(PlainInline)
			lines := strings.Split(cols, "\n")
			if len(lines) != len(tab.Rows)+2 {
				t.Errorf("Columns of Tables(%q)[%d] = %q: %d lines, want %d", md, i, cols, len(lines), len(tab.Rows)+2)
			}
			if utf8.ValidString(md) && !utf8.ValidString(cols) {
				t.Errorf("Columns of Tables(%q)[%d] = %q is not valid UTF-8", md, i, cols)
			}
			prev = tab.End
		}
		if got := ReplaceTables(md, func(tab Table) string { return md[tab.Start:tab.End] }); got != md {
			t.Errorf("ReplaceTables(%q, itself) = %q", md, got)
		}
		if plain := PlainInline(md); utf8.ValidString(md) && !utf8.ValidString(plain) {
			t.Errorf("PlainInline(%q) = %q is not valid UTF-8", md, plain)
		}
	})
}
