package mrkdwn

import (
	"regexp"
	"strings"

	"github.com/flowbridge/flowbridge/bridge/markdown"
)

var (
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextRE  = regexp.MustCompile(`^ {0,3}=+[ \t]*$`)
	ruleRE    = regexp.MustCompile(`^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$`)
	bulletRE  = regexp.MustCompile(`^([ \t]*)[-*+][ \t]+(.*)$`)
	orderedRE = regexp.MustCompile(`^([ \t]*)(\d{1,9}[.)])[ \t]+(.*)$`)
	taskRE    = regexp.MustCompile(`^\[([ xX])\][ \t]+`)
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
	tables := tablesByLine(md)
	for i := 0; i < len(lines); {
		if i > 0 {
			b.WriteByte('\n')
		}
		if f, ok := openFence(lines[i]); ok {
			i = r.codeBlock(&b, lines, i, f)
			continue
		}
		if t, ok := tables[i]; ok {
			i = r.table(&b, i, t)
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

// tablesByLine finds md's tables and keys them by their first line.
func tablesByLine(md string) map[int]markdown.Table {
	m := make(map[int]markdown.Table)
	for _, t := range markdown.Tables(md) {
		m[t.Line] = t
	}
	return m
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

// table renders t, whose first line is line i, as aligned
// columns in a code block (mrkdwn has no tables; plain text joins the cells
// with " | "), and returns the index of the line after it.
func (r *inline) table(b *strings.Builder, i int, t markdown.Table) int {
	// Cells are shown as code, so their markup is stripped to plain text;
	// they are prose all the same, so @here and the like are neutralized.
	cellText := &inline{plain: true, raw: true}
	plain := func(s string) string {
		var cb strings.Builder
		cellText.render(&cb, s)
		return neutralizeAt(cb.String())
	}
	end := i + t.Lines
	if r.plain {
		var rows []string
		for _, row := range append([][]string{t.Header}, t.Rows...) {
			cells := make([]string, len(row))
			for c, cell := range row {
				cells[c] = plain(cell)
			}
			rows = append(rows, strings.Join(cells, " | "))
		}
		writeEscaped(b, strings.Join(rows, "\n"))
		return end
	}
	b.WriteString("```\n")
	writeEscaped(b, t.Columns(plain))
	b.WriteString("\n```")
	return end
}
