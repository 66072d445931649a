package markdown

import "strings"

// Style is the inline formatting of a Span.
type Style uint8

// Styles; a span may have several.
const (
	StyleBold Style = 1 << iota
	StyleItalic
	StyleStrike
	StyleCode
)

// Span is a run of inline text in one style, a link's label when URL is
// set.
type Span struct {
	Text  string
	Style Style
	URL   string
}

// Spans reads one line of inline Markdown as styled text: **bold** and
// __bold__, *italic* and _italic_, ***both***, ~~strike~~ and `code` where
// their markers pair up; [text](url) and <url> as links; ![alt](url) as its
// alt text; a backslash before ASCII punctuation as that character.
// Unpaired markers stay as written, so "2 * 3" is left alone, and an
// underscore inside a word (snake_case) is not a marker. Adjacent text of
// one style and link is one span.
func Spans(s string) []Span {
	p := plainInline{budget: 32*len(s) + 1<<16}
	p.parse(s, 0, "")
	p.flush()
	return p.spans
}

// PlainInline renders one line of inline Markdown as the plain text it
// reads as, for places that show no formatting (a table in a code block):
// the text of Spans, a link followed by its URL in parentheses unless the
// two are the same ("docs (https://x.io)").
func PlainInline(s string) string {
	spans := Spans(s)
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(spans); {
		if spans[i].URL == "" {
			b.WriteString(spans[i].Text)
			i++
			continue
		}
		url := spans[i].URL
		var label strings.Builder
		for ; i < len(spans) && spans[i].URL == url; i++ {
			label.WriteString(spans[i].Text)
		}
		b.WriteString(label.String())
		if l := label.String(); l != url && "mailto:"+l != url {
			b.WriteString(" (" + url + ")")
		}
	}
	return b.String()
}

// plainInline's budget bounds the searches for closing markers that fail,
// so a line of unmatched openers costs linear rather than quadratic time.
type plainInline struct {
	budget int
	spans  []Span
	cur    strings.Builder
	style  Style
	url    string
}

// write appends text in style st, linked to url.
func (p *plainInline) write(text string, st Style, url string) {
	if text == "" {
		return
	}
	if st != p.style || url != p.url {
		p.flush()
		p.style, p.url = st, url
	}
	p.cur.WriteString(text)
}

func (p *plainInline) flush() {
	if p.cur.Len() > 0 {
		p.spans = append(p.spans, Span{Text: p.cur.String(), Style: p.style, URL: p.url})
		p.cur.Reset()
	}
}

func (p *plainInline) parse(s string, st Style, url string) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			p.write(s[i+1:i+2], st, url)
			i += 2
			continue
		case c == '`':
			n := runOf(s, i)
			if end, ok := p.find(s, i+n, strings.Repeat("`", n), func(j int) bool { return runOf(s, j) == n }); ok {
				code := s[i+n : end]
				if len(code) > 1 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
					code = code[1 : len(code)-1]
				}
				p.write(code, st|StyleCode, url)
				i = end + n
				continue
			}
			p.write(s[i:i+n], st, url)
			i += n
			continue
		case c == '!' && i+1 < len(s) && s[i+1] == '[':
			if label, _, end, ok := p.link(s, i+1); ok {
				p.parse(label, st, url)
				i = end
				continue
			}
		case c == '[' && url == "":
			if label, target, end, ok := p.link(s, i); ok {
				p.parse(label, st, target)
				i = end
				continue
			}
		case c == '<' && url == "":
			if end := strings.IndexByte(s[i:], '>'); end > 0 {
				inner := s[i+1 : i+end]
				if isAutolink(inner) {
					p.write(strings.TrimPrefix(inner, "mailto:"), st, inner)
					i += end + 1
					continue
				}
			}
		case c == '*' || c == '_' || c == '~':
			n := runOf(s, i)
			if end, ok := p.emphasis(s, i, n); ok {
				p.parse(s[i+n:end], st|emphasisStyle(c, n), url)
				i = end + n
				continue
			}
			p.write(s[i:i+n], st, url)
			i += n
			continue
		}
		p.write(s[i:i+1], st, url)
		i++
	}
}

// emphasisStyle is the style n markers c open: one * or _ italic, two bold,
// three both; ~ strikes.
func emphasisStyle(c byte, n int) Style {
	switch {
	case c == '~':
		return StyleStrike
	case n == 1:
		return StyleItalic
	case n == 2:
		return StyleBold
	}
	return StyleBold | StyleItalic
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
			if url == "" {
				return "", "", 0, false
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
