package markdown

import (
	"reflect"
	"testing"
)

func TestTables(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want []Table
	}{
		{
			name: "plain",
			md:   "intro\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\nafter",
			want: []Table{{Header: []string{"a", "b"}, Align: []Align{AlignLeft, AlignRight}, Rows: [][]string{{"1", "2"}}, Start: 7, End: 36, Line: 2, Lines: 3}},
		},
		{
			name: "ragged and escaped",
			md:   "a | b\n:-: | ---\n| 1\n1 | 2 | 3\nx \\| y | z",
			want: []Table{{Header: []string{"a", "b"}, Align: []Align{AlignCenter, AlignLeft}, Rows: [][]string{{"1", ""}, {"1", "2"}, {"x | y", "z"}}, Start: 0, End: 40, Line: 0, Lines: 5}},
		},
		{
			name: "in a fence",
			md:   "```\n| a | b |\n|---|---|\n```",
		},
		{
			name: "cell counts differ",
			md:   "| a | b |\n|---|\n| 1 | 2 |",
		},
		{
			name: "not a delimiter",
			md:   "| a | b |\n| x | y |",
		},
		{
			name: "setext heading",
			md:   "a | b\n---",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tables(tt.md); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Tables(%q) = %#v, want %#v", tt.md, got, tt.want)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	tab := Tables("| name | n | city |\n|:--|--:|:-:|\n| 東京 | 1 | x |\n| **Bob** | 200 | Zürich |")[0]
	got := tab.Columns(PlainInline)
	want := "name |   n |  city\n-----+-----+-------\n東京 |   1 |   x\nBob  | 200 | Zürich"
	if got != want {
		t.Errorf("Columns =\n%s\nwant\n%s", got, want)
	}
}

func TestPlainInline(t *testing.T) {
	tests := map[string]string{
		"**bold** and _it_":   "bold and it",
		"snake_case_name":     "snake_case_name",
		"2 * 3 * 4":           "2 * 3 * 4",
		"`a|b` and ``x ` y``": "a|b and x ` y",
		"[docs](https://x.io) [https://x.io](https://x.io)": "docs (https://x.io) https://x.io",
		"![alt](i.png) <https://a.b>":                       "alt https://a.b",
		"~~gone~~ \\*kept\\*":                               "gone *kept*",
		"***both***":                                        "both",
		"**unclosed":                                        "**unclosed",
	}
	for in, want := range tests {
		if got := PlainInline(in); got != want {
			t.Errorf("PlainInline(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDisplayWidth(t *testing.T) {
	tests := map[string]int{"abc": 3, "東京": 4, "e\u0301": 1, "😀": 2, "👍🏽": 2, "Ｆ": 2, "⚠️": 2, "⚠": 1}
	for in, want := range tests {
		if got := DisplayWidth(in); got != want {
			t.Errorf("DisplayWidth(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestSpans(t *testing.T) {
	tests := map[string][]Span{
		"plain":                    {{Text: "plain"}},
		"**Total** 3":              {{Text: "Total", Style: StyleBold}, {Text: " 3"}},
		"_a_ ~~b~~ `c` ***d***":    {{Text: "a", Style: StyleItalic}, {Text: " "}, {Text: "b", Style: StyleStrike}, {Text: " "}, {Text: "c", Style: StyleCode}, {Text: " "}, {Text: "d", Style: StyleBold | StyleItalic}},
		"[**docs**](https://x.io)": {{Text: "docs", Style: StyleBold, URL: "https://x.io"}},
		"<mailto:a@b.c>":           {{Text: "a@b.c", URL: "mailto:a@b.c"}},
		"[a]()":                    {{Text: "[a]()"}},
	}
	for in, want := range tests {
		if got := Spans(in); !reflect.DeepEqual(got, want) {
			t.Errorf("Spans(%q) = %+v, want %+v", in, got, want)
		}
	}
}
