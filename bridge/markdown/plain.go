package markdown

import "strings"

// PlainInline renders one line of inline Markdown as the plain text it
// reads as, for places that show no formatting (a table in a code block):
// emphasis, strikethrough and code markers are dropped where they pair up,
// [text](url) becomes "text (url)" (just "text" when the two are the same),
// ![alt](url) becomes its alt text, <url> becomes url, and a backslash
// before ASCII punctuation shows that character. Unpaired markers stay as
// written, so "2 * 3" is left alone.
func PlainInline(s string) string {
	p := plainInline{budget: 32*len(s) + 1<<16}
	var b strings.Builder
	b.Grow(len(s))
	p.render(&b, s)
	return b.String()
}

// plainInline's budget bounds the searches for closing markers that fail,
// so a line of unmatched openers costs linear rather than quadratic time.
type plainInline struct{ budget int }

func (p *plainInline) render(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			b.WriteByte(s[i+1])
			i += 2
			continue
		case c == '`':
			n := runOf(s, i)
			if end, ok := p.find(s, i+n, strings.Repeat("`", n), func(j int) bool { return runOf(s, j) == n }); ok {
				code := s[i+n : end]
				if len(code) > 1 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
					code = code[1 : len(code)-1]
				}
				b.WriteString(code)
				i = end + n
				continue
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		case c == '!' && i+1 < len(s) && s[i+1] == '[':
			if label, _, end, ok := p.link(s, i+1); ok {
				p.render(b, label)
				i = end
				continue
			}
		case c == '[':
			if label, url, end, ok := p.link(s, i); ok {
				var lb strings.Builder
				p.render(&lb, label)
				b.WriteString(lb.String())
				if url != "" && url != lb.String() {
					b.WriteString(" (" + url + ")")
				}
				i = end
				continue
			}
		case c == '<':
			if end := strings.IndexByte(s[i:], '>'); end > 0 {
				inner := s[i+1 : i+end]
				if isAutolink(inner) {
					b.WriteString(strings.TrimPrefix(inner, "mailto:"))
					i += end + 1
					continue
				}
			}
		case c == '*' || c == '_' || c == '~':
			n := runOf(s, i)
			if end, ok := p.emphasis(s, i, n); ok {
				p.render(b, s[i+n:end])
				i = end + n
				continue
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		b.WriteByte(c)
		i++
	}
}

// emphasis finds the run of n markers that closes the one opening at i:
// the opener is followed and the closer preceded by a non-space, and an
// underscore is not inside a word (snake_case stays).
func (p *plainInline) emphasis(s string, i, n int) (int, bool) {
	c := s[i]
	if i+n >= len(s) || isSpaceByte(s[i+n]) || (c == '_' && i > 0 && isWordByte(s[i-1])) || (c == '~' && n > 2) {
		return 0, false
	}
	return p.find(s, i+n+1, strings.Repeat(string(c), n), func(j int) bool {
		return runOf(s, j) == n && !isSpaceByte(s[j-1]) && (c != '_' || j+n >= len(s) || !isWordByte(s[j+n]))
	})
}

// find returns the first index at or after from where marker starts and
// ok accepts it, charging what it scanned to the budget.
func (p *plainInline) find(s string, from int, marker string, ok func(int) bool) (int, bool) {
	for j := from; j < len(s) && p.budget > 0; {
		k := strings.Index(s[j:], marker)
		if k < 0 {
			p.budget -= len(s) - j
			return 0, false
		}
		p.budget -= k + 1
		j += k
		if j > 0 && s[j-1] == marker[0] {
			j += runOf(s, j) // inside a longer run
			continue
		}
		if ok(j) {
			return j, true
		}
		j += runOf(s, j)
	}
	return 0, false
}

// link reads "[label](url)" at s[i] == '['; brackets nest, the URL may not
// hold spaces.
func (p *plainInline) link(s string, i int) (label, url string, end int, ok bool) {
	depth := 0
	for j := i; j < len(s) && p.budget > 0; j++ {
		p.budget--
		switch s[j] {
		case '\\':
			j++
		case '[':
			depth++
		case ']':
			depth--
			if depth > 0 {
				continue
			}
			if j+1 >= len(s) || s[j+1] != '(' {
				return "", "", 0, false
			}
			close := strings.IndexByte(s[j+2:], ')')
			if close < 0 {
				return "", "", 0, false
			}
			url = strings.TrimSpace(s[j+2 : j+2+close])
			if title := strings.IndexAny(url, " \t"); title >= 0 {
				url = url[:title] // [t](url "title")
			}
			return s[i+1 : j], strings.Trim(url, "<>"), j + 3 + close, true
		}
	}
	return "", "", 0, false
}

func isAutolink(s string) bool {
	if strings.ContainsAny(s, " \t<") {
		return false
	}
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "mailto:")
}

func runOf(s string, i int) int {
	n := 1
	for i+n < len(s) && s[i+n] == s[i] {
		n++
	}
	return n
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isWordByte(c byte) bool {
	return c >= 0x80 || c == '_' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}
