package mrkdwn

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

var (
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextRE  = regexp.MustCompile(`^ {0,3}=+[ \t]*$`)
	ruleRE    = regexp.MustCompile(`^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$`)
	bulletRE  = regexp.MustCompile(`^([ \t]*)[-*+][ \t]+(.*)$`)
	orderedRE = regexp.MustCompile(`^([ \t]*)(\d{1,9}[.)])[ \t]+(.*)$`)
	taskRE    = regexp.MustCompile(`^\[([ xX])\][ \t]+`)
	delimRE   = regexp.MustCompile(`^[ \t]*\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$`)
)

const ruleLine = "──────────"

// renderBlocks converts md line by line: code fences and tables span
// lines, everything else is one line at a time.
func renderBlocks(md string, plain bool) string {
	md = strings.ReplaceAll(md, "\r\n", "\n")
	lines := strings.Split(md, "\n")
	var b strings.Builder
	b.Grow(len(md) + len(md)/8)
	r := &inline{plain: plain}
	for i := 0; i < len(lines); {
		if i > 0 {
			b.WriteByte('\n')
		}
		if f, ok := openFence(lines[i]); ok {
			i = r.codeBlock(&b, lines, i, f)
			continue
		}
		if isTableStart(lines, i) {
			i = r.table(&b, lines, i)
			continue
		}
		if i+1 < len(lines) && setextRE.MatchString(lines[i+1]) && strings.TrimSpace(lines[i]) != "" && !isSpecialLine(lines[i]) {
			r.heading(&b, strings.TrimSpace(lines[i]))
			i += 2
			continue
		}
		r.line(&b, lines[i])
		i++
	}
	return b.String()
}

// isSpecialLine reports whether line has a block meaning of its own, so
// a "===" below it does not make it a heading.
func isSpecialLine(line string) bool {
	return headingRE.MatchString(line) || bulletRE.MatchString(line) || orderedRE.MatchString(line) ||
		quotePrefixLen(line) > 0 || ruleRE.MatchString(line)
}

// line renders one line that is neither code nor table.
func (r *inline) line(b *strings.Builder, line string) {
	line = strings.TrimRight(line, " \t\r")
	line = strings.TrimSuffix(line, "\\") // a hard line break is just the newline here
	switch {
	case strings.TrimSpace(line) == "":
	case quotePrefixLen(line) > 0:
		rest := line[quotePrefixLen(line):]
		if !r.plain {
			b.WriteString(">")
			if rest != "" {
				b.WriteByte(' ')
			}
		}
		r.line(b, rest)
	case headingRE.MatchString(line):
		r.heading(b, headingRE.FindStringSubmatch(line)[2])
	case ruleRE.MatchString(line):
		if !r.plain {
			b.WriteString(ruleLine)
		}
	case bulletRE.MatchString(line):
		m := bulletRE.FindStringSubmatch(line)
		b.WriteString(m[1])
		b.WriteString("• ")
		item := m[2]
		if t := taskRE.FindStringSubmatch(item); t != nil {
			if t[1] == " " {
				b.WriteString("☐ ")
			} else {
				b.WriteString("☑ ")
			}
			item = item[len(t[0]):]
		}
		r.render(b, item)
	case orderedRE.MatchString(line):
		m := orderedRE.FindStringSubmatch(line)
		b.WriteString(m[1])
		b.WriteString(m[2])
		b.WriteByte(' ')
		r.render(b, m[3])
	default:
		r.render(b, line)
	}
}

func (r *inline) heading(b *strings.Builder, text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	if r.plain {
		r.render(b, text)
		return
	}
	h := *r
	h.noBold = true
	b.WriteByte('*')
	h.render(b, text)
	b.WriteByte('*')
}

// codeFence is an open fence: the marker character and length, and the
// indentation to strip from its lines.
type codeFence struct {
	char   byte
	n      int
	indent int
}

func openFence(line string) (codeFence, bool) {
	body := strings.TrimLeft(line, " \t")
	n := 0
	for n < len(body) && (body[n] == '`' || body[n] == '~') && body[n] == body[0] {
		n++
	}
	if n < 3 || (body[0] == '`' && strings.Contains(body[n:], "`")) {
		return codeFence{}, false
	}
	return codeFence{char: body[0], n: n, indent: len(line) - len(body)}, true
}

func (f codeFence) closedBy(line string) bool {
	body := strings.TrimLeft(line, " \t")
	n := 0
	for n < len(body) && body[n] == f.char {
		n++
	}
	return n >= f.n && strings.TrimSpace(body[n:]) == ""
}

// codeBlock renders the fence that opens at lines[i] and returns the index
// of the first line after it. A fence left open runs to the end.
func (r *inline) codeBlock(b *strings.Builder, lines []string, i int, f codeFence) int {
	j := i + 1
	var body []string
	for ; j < len(lines) && !f.closedBy(lines[j]); j++ {
		line := lines[j]
		// Strip the fence's own indentation, as CommonMark does, so code in
		// a list item is not indented twice.
		k := 0
		for k < f.indent && k < len(line) && (line[k] == ' ' || line[k] == '\t') {
			k++
		}
		body = append(body, line[k:])
	}
	text := strings.Join(body, "\n")
	if r.plain {
		writeEscaped(b, text)
	} else {
		b.WriteString("```\n")
		writeEscaped(b, text)
		b.WriteString("\n```")
	}
	if j < len(lines) {
		j++ // the closing line
	}
	return j
}

// isTableStart reports whether lines[i] is a GFM table header: a row with
// a '|' followed by a delimiter row with as many cells.
func isTableStart(lines []string, i int) bool {
	if i+1 >= len(lines) || !strings.Contains(lines[i], "|") || !delimRE.MatchString(lines[i+1]) {
		return false
	}
	return len(splitRow(lines[i])) == len(splitRow(lines[i+1]))
}

// splitRow splits a table row into trimmed cells; "\|" is a literal pipe.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !strings.HasSuffix(line, "\\|") {
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

type align uint8

const (
	alignLeft align = iota
	alignRight
	alignCenter
)

// table renders the table that starts at lines[i], aligned in a code block
// (mrkdwn has no tables), and returns the index of the line after it.
func (r *inline) table(b *strings.Builder, lines []string, i int) int {
	header := splitRow(lines[i])
	var aligns []align
	for _, d := range splitRow(lines[i+1]) {
		switch {
		case strings.HasPrefix(d, ":") && strings.HasSuffix(d, ":") && len(d) > 1:
			aligns = append(aligns, alignCenter)
		case strings.HasSuffix(d, ":"):
			aligns = append(aligns, alignRight)
		default:
			aligns = append(aligns, alignLeft)
		}
	}
	rows := [][]string{header}
	j := i + 2
	for ; j < len(lines) && strings.Contains(lines[j], "|") && strings.TrimSpace(lines[j]) != ""; j++ {
		rows = append(rows, splitRow(lines[j]))
	}
	// Cells are shown as code, so their markup is stripped to plain text.
	cellText := &inline{plain: true, raw: true}
	cols := len(header)
	widths := make([]int, cols)
	for _, row := range rows {
		for c := range cols {
			if c < len(row) {
				var cb strings.Builder
				cellText.render(&cb, row[c])
				row[c] = cb.String()
				widths[c] = max(widths[c], utf8.RuneCountInString(row[c]))
			}
		}
	}
	var t strings.Builder
	for n, row := range rows {
		if n > 0 {
			t.WriteByte('\n')
		}
		if r.plain {
			for c := range cols {
				if c > 0 {
					t.WriteString(" | ")
				}
				if c < len(row) {
					t.WriteString(row[c])
				}
			}
			continue
		}
		writeRow(&t, row, widths, aligns)
		if n == 0 {
			t.WriteByte('\n')
			for c, w := range widths {
				if c > 0 {
					t.WriteString("-+-")
				}
				t.WriteString(strings.Repeat("-", w))
			}
		}
	}
	if r.plain {
		writeEscaped(b, t.String())
	} else {
		b.WriteString("```\n")
		writeEscaped(b, strings.TrimRight(t.String(), " "))
		b.WriteString("\n```")
	}
	return j
}

func writeRow(t *strings.Builder, row []string, widths []int, aligns []align) {
	var line strings.Builder
	for c, w := range widths {
		if c > 0 {
			line.WriteString(" | ")
		}
		cell := ""
		if c < len(row) {
			cell = row[c]
		}
		pad := w - utf8.RuneCountInString(cell)
		left := 0
		switch aligns[c] {
		case alignRight:
			left = pad
		case alignCenter:
			left = pad / 2
		}
		line.WriteString(strings.Repeat(" ", left))
		line.WriteString(cell)
		line.WriteString(strings.Repeat(" ", pad-left))
	}
	// Padding after the last column only adds width.
	t.WriteString(strings.TrimRight(line.String(), " "))
}
