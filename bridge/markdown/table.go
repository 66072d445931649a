package markdown

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/width"
)

// Align is a table column's alignment, from its delimiter row.
type Align uint8

// Alignments: ":--" or "---" is left, "--:" right, ":-:" center.
const (
	AlignLeft Align = iota
	AlignRight
	AlignCenter
)

// Table is a GitHub Flavored Markdown table found in a text.
type Table struct {
	// Header holds the header row's cells; every row has as many.
	Header []string
	Align  []Align
	// Rows are the body rows. As GitHub shows them, a row with fewer cells
	// than the header is filled with empty ones and a row with more has the
	// extra cells dropped.
	Rows [][]string
	// Start and End are the byte offsets of the table's lines in the text:
	// text[Start:End] is the header line to the end of the last row, without
	// its line feed.
	Start, End int
	// Line is the index of the header's line in the text, counting from
	// 0, and Lines the number of lines the table spans.
	Line, Lines int
}

// Tables returns the tables of md in order, outside code fences. A table is
// a header row holding a '|', a delimiter row with as many cells
// ("| --- | :-: |"), and the rows after it up to a blank line or a line
// without '|'. Cells are trimmed; "\|" is a '|' inside a cell, and the
// rest of a cell's inline Markdown is left as written. The header and
// delimiter rows may be indented by at most three spaces, as in GFM.
func Tables(md string) []Table {
	if strings.IndexByte(md, '|') < 0 {
		// No header row, so no table: most answers, which are spared
		// splitting into lines.
		return nil
	}
	var tables []Table
	lines := lineOffsets(md)
	var (
		open   fence
		inside bool // within open
	)
	for i := 0; i < len(lines); i++ {
		line := md[lines[i][0]:lines[i][1]]
		if inside {
			if open.closedBy(line) {
				inside = false
			}
			continue
		}
		if f, ok := parseOpener(line); ok {
			open, inside = f, true
			continue
		}
		if i+1 >= len(lines) {
			break
		}
		t, next, ok := parseTable(md, lines, i)
		if !ok {
			continue
		}
		tables = append(tables, t)
		i = next - 1
	}
	return tables
}

// lineOffsets returns the [start, end) of every line of s, without its
// line feed; a carriage return before it is left to the cell trimming.
func lineOffsets(s string) [][2]int {
	var out [][2]int
	for start := 0; ; {
		end := strings.IndexByte(s[start:], '\n')
		if end < 0 {
			return append(out, [2]int{start, len(s)})
		}
		out = append(out, [2]int{start, start + end})
		start += end + 1
	}
}

// parseTable reads the table whose header is lines[i] and returns it with
// the index of the first line after it.
func parseTable(md string, lines [][2]int, i int) (Table, int, bool) {
	head, delim := md[lines[i][0]:lines[i][1]], md[lines[i+1][0]:lines[i+1][1]]
	if !strings.Contains(head, "|") || indentOf(head) > 3 || indentOf(delim) > 3 {
		return Table{}, 0, false
	}
	aligns, ok := parseDelimiter(delim)
	if !ok {
		return Table{}, 0, false
	}
	header := SplitRow(head)
	if len(header) != len(aligns) {
		return Table{}, 0, false
	}
	t := Table{Header: header, Align: aligns, Start: lines[i][0], End: lines[i+1][1], Line: i}
	j := i + 2
	for ; j < len(lines); j++ {
		line := md[lines[j][0]:lines[j][1]]
		if isBlank(line) || !strings.Contains(line, "|") {
			break
		}
		row := SplitRow(line)
		switch {
		case len(row) > len(header):
			row = row[:len(header)]
		case len(row) < len(header):
			row = append(row, make([]string, len(header)-len(row))...)
		}
		t.Rows = append(t.Rows, row)
		t.End = lines[j][1]
	}
	t.Lines = j - i
	return t, j, true
}

func indentOf(s string) int {
	n := 0
	for n < len(s) && s[n] == ' ' {
		n++
	}
	if n < len(s) && s[n] == '\t' {
		return 4
	}
	return n
}

// parseDelimiter reads a delimiter row: cells of at least one '-' with an
// optional ':' at either end.
func parseDelimiter(line string) ([]Align, bool) {
	if !strings.Contains(line, "-") {
		return nil, false
	}
	cells := SplitRow(line)
	if len(cells) == 1 && !strings.Contains(line, "|") {
		return nil, false // "---" alone is a thematic break or setext underline
	}
	aligns := make([]Align, len(cells))
	for k, c := range cells {
		left, right := strings.HasPrefix(c, ":"), strings.HasSuffix(c, ":")
		dashes := strings.Trim(c, ":")
		if dashes == "" || strings.Trim(dashes, "-") != "" || strings.Count(c, ":") > 2 {
			return nil, false
		}
		switch {
		case left && right && len(c) > 1:
			aligns[k] = AlignCenter
		case right:
			aligns[k] = AlignRight
		}
	}
	return aligns, true
}

// SplitRow splits one table row into trimmed cells. Leading and trailing
// pipes are optional; "\|" is a literal '|', and a pipe inside a code span
// still separates cells, as in GFM.
func SplitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !escapedAt(line, len(line)-1) {
		line = line[:len(line)-1]
	}
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// escapedAt reports whether s[i] follows an odd run of backslashes.
func escapedAt(s string, i int) bool {
	n := 0
	for i-1-n >= 0 && s[i-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// Columns renders t as aligned text for a monospace font: cells separated
// by " | ", the header underlined with "-" joined by "-+-", each column as
// wide as its widest cell in terminal columns (DisplayWidth) and aligned as
// the delimiter row says. cell turns a cell's Markdown into the text shown
// (nil shows it as written); tabs and line breaks in the result become
// spaces. Trailing spaces are dropped from every line.
func (t Table) Columns(cell func(string) string) string {
	rows := make([][]string, 0, len(t.Rows)+1)
	for _, r := range append([][]string{t.Header}, t.Rows...) {
		out := make([]string, len(r))
		for c, s := range r {
			if cell != nil {
				s = cell(s)
			}
			out[c] = strings.Map(func(r rune) rune {
				if r == '\t' || r == '\n' || r == '\r' {
					return ' '
				}
				return r
			}, s)
		}
		rows = append(rows, out)
	}
	widths := make([]int, len(t.Header))
	for _, r := range rows {
		for c, s := range r {
			widths[c] = max(widths[c], DisplayWidth(s))
		}
	}
	var b strings.Builder
	for n, r := range rows {
		if n > 0 {
			b.WriteByte('\n')
		}
		var line strings.Builder
		for c, s := range r {
			if c > 0 {
				line.WriteString(" | ")
			}
			pad := widths[c] - DisplayWidth(s)
			left := 0
			switch t.Align[c] {
			case AlignRight:
				left = pad
			case AlignCenter:
				left = pad / 2
			}
			line.WriteString(strings.Repeat(" ", left))
			line.WriteString(s)
			line.WriteString(strings.Repeat(" ", pad-left))
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		if n == 0 {
			b.WriteByte('\n')
			for c, w := range widths {
				if c > 0 {
					b.WriteString("-+-")
				}
				b.WriteString(strings.Repeat("-", max(w, 1)))
			}
		}
	}
	return b.String()
}

// DisplayWidth is the number of terminal columns s takes in a monospace
// font: East Asian wide and fullwidth characters (CJK, most emoji) take
// two, as does a narrow symbol asked to show as emoji (U+FE0F after it:
// "⚠️"); combining marks, joiners and other variation selectors take none,
// every other rune one. It is an estimate: fonts and terminals differ on
// emoji sequences.
func DisplayWidth(s string) int {
	n, last := 0, 0
	for _, r := range s {
		w := runeWidth(r)
		if r == 0xFE0F && last == 1 {
			w = 1
		}
		n += w
		if w > 0 {
			last = w
		}
	}
	return n
}

func runeWidth(r rune) int {
	switch {
	case r == utf8.RuneError, r < 0x20, r == 0x7f:
		return 1
	case r < 0x300:
		return 1
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf),
		r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF,
		r >= 0x1F3FB && r <= 0x1F3FF:
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// ReplaceTables returns md with every table (as Tables finds them)
// replaced by what replace returns for it.
func ReplaceTables(md string, replace func(Table) string) string {
	tables := Tables(md)
	if len(tables) == 0 {
		return md
	}
	var b strings.Builder
	b.Grow(len(md) + len(md)/4)
	prev := 0
	for _, t := range tables {
		b.WriteString(md[prev:t.Start])
		b.WriteString(replace(t))
		prev = t.End
	}
	b.WriteString(md[prev:])
	return b.String()
}
