package mrkdwn

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// inline renders the inline Markdown of one line. All the characters it
// acts on are ASCII, so copying the other bytes one by one keeps valid
// UTF-8 valid.
type inline struct {
	plain bool // drop markup instead of converting it
	raw   bool // do not escape: the caller escapes the whole result
	// Set inside a span of that kind: mrkdwn cannot nest a style in itself.
	noBold, noItalic, noStrike bool
	// scans is what is left of the line's budget for searches that may
	// fail (a closing delimiter, a link's ']' or ')'). A failed search looks
	// to the end of the line, so a line of unmatched openers would cost time
	// quadratic in its length; once the budget is spent the rest of the line
	// is text. Shared by the spans rendered inside the line.
	scans *int
}

// scanBudget is generous: real text, whose searches end at a nearby closer,
// never comes near it.
func scanBudget(lineLen int) int { return 32*lineLen + 1<<16 }

// spend charges a search that started at from and stopped at end (or ran to
// the end of s when end < 0) to the line's budget.
func (r *inline) spend(s string, from, end int) {
	if end < 0 {
		end = len(s)
	}
	*r.scans -= max(end-from, 1)
}

func (r *inline) render(b *strings.Builder, s string) {
	if r.scans == nil {
		budget := scanBudget(len(s))
		r.scans = &budget
		defer func() { r.scans = nil }()
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) && isASCIIPunct(s[i+1]) {
				r.writeByte(b, s[i+1])
				i += 2
				continue
			}
		case '`':
			if end, ok := r.codeSpan(b, s, i); ok {
				i = end
				continue
			}
			n := runLen(s, i)
			r.write(b, s[i:i+n])
			i += n
			continue
		case '!':
			if i+1 < len(s) && s[i+1] == '[' {
				if end, ok := r.link(b, s, i+1, true); ok {
					i = end
					continue
				}
			}
		case '[':
			if end, ok := r.link(b, s, i, false); ok {
				i = end
				continue
			}
		case '<':
			if end, ok := r.autolink(b, s, i); ok {
				i = end
				continue
			}
		case 'h', 'H':
			if end, ok := r.bareURL(b, s, i); ok {
				i = end
				continue
			}
		case '*', '_', '~':
			if end, ok := r.emphasis(b, s, i); ok {
				i = end
				continue
			}
			// A run that is no delimiter is text as a whole; trying again
			// from its middle would pair it wrongly.
			n := runLen(s, i)
			r.write(b, s[i:i+n])
			i += n
			continue
		case '@':
			if !r.raw && !r.plain && atWordAt(s[i+1:]) {
				b.WriteString("@" + wordJoiner)
				i++
				continue
			}
		}
		r.writeByte(b, c)
		i++
	}
}

func (r *inline) write(b *strings.Builder, s string) {
	if r.raw {
		b.WriteString(s)
		return
	}
	writeEscaped(b, s)
}

func (r *inline) writeByte(b *strings.Builder, c byte) {
	if r.raw {
		b.WriteByte(c)
		return
	}
	writeEscapedByte(b, c)
}

// codeSpan renders the code span that starts at s[i] and returns the
// index after it.
func (r *inline) codeSpan(b *strings.Builder, s string, i int) (int, bool) {
	n := runLen(s, i)
	j, ok := closingTicks(s, i+n, n)
	if !ok {
		return 0, false
	}
	code := s[i+n : j]
	if len(code) >= 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
		code = code[1 : len(code)-1]
	}
	if !r.plain {
		b.WriteByte('`')
	}
	r.write(b, code)
	if !r.plain {
		b.WriteByte('`')
	}
	return j + n, true
}

// closingTicks finds the run of exactly n backticks that closes a code
// span opened before from.
func closingTicks(s string, from, n int) (int, bool) {
	for j := from; j < len(s); {
		if s[j] != '`' {
			j++
			continue
		}
		m := runLen(s, j)
		if m == n {
			return j, true
		}
		j += m
	}
	return 0, false
}

// link renders [label](url) or, with image, ![alt](url), where s[i] is the
// '['. It returns the index after the closing ')'.
func (r *inline) link(b *strings.Builder, s string, i int, image bool) (int, bool) {
	if *r.scans <= 0 {
		return 0, false
	}
	j, ok := labelEnd(s, i)
	if !ok {
		r.spend(s, i, -1)
		return 0, false
	}
	r.spend(s, i, j)
	if j+1 >= len(s) || s[j+1] != '(' {
		return 0, false
	}
	url, end, ok := destination(s, j+2)
	if !ok {
		r.spend(s, j, -1)
		return 0, false
	}
	r.spend(s, j, end)
	label := s[i+1 : j]
	switch {
	case !allowedURL(url) && (r.plain || image):
		r.write(b, r.labelText(label))
	case !allowedURL(url):
		r.render(b, label)
	case r.plain:
		text := r.labelText(label)
		if text != "" && text != url {
			r.write(b, text+" ("+url+")")
		} else {
			r.write(b, url)
		}
	default:
		b.WriteByte('<')
		writeURL(b, url)
		if text := r.labelText(label); text != "" {
			b.WriteByte('|')
			writeEscaped(b, strings.ReplaceAll(text, "|", "¦"))
		}
		b.WriteByte('>')
	}
	return end, true
}

// labelText is the text of a link label with its markup dropped, on one
// line, with @here and friends neutralised.
func (r *inline) labelText(label string) string {
	var lb strings.Builder
	(&inline{plain: true, raw: true}).render(&lb, label)
	text := strings.Join(strings.Fields(lb.String()), " ")
	if r.plain || r.raw {
		return text
	}
	return neutralizeAt(text)
}

// skipInert steps over what a delimiter search must not look into: a
// backslash escape, or a whole code span (a backtick run without its closer
// is skipped as text). It reports false when s[i] starts neither.
func skipInert(s string, i int) (int, bool) {
	switch s[i] {
	case '\\':
		return i + 2, true
	case '`':
		n := runLen(s, i)
		if k, ok := closingTicks(s, i+n, n); ok {
			return k + n, true
		}
		return i + n, true
	}
	return i, false
}

// labelEnd returns the index of the ']' that closes the '[' at s[i],
// skipping escapes, code spans and nested brackets.
func labelEnd(s string, i int) (int, bool) {
	depth := 0
	for j := i; j < len(s); {
		if next, ok := skipInert(s, j); ok {
			j = next
			continue
		}
		switch s[j] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return j, true
			}
		}
		j++
	}
	return 0, false
}

// destination parses a link destination and optional title starting at
// s[k], just after the '('. It returns the URL and the index after ')'.
func destination(s string, k int) (string, int, bool) {
	k = skipBlanks(s, k)
	var url string
	if k < len(s) && s[k] == '<' {
		e := strings.IndexAny(s[k+1:], "<>\n")
		if e < 0 || s[k+1+e] != '>' {
			return "", 0, false
		}
		url = s[k+1 : k+1+e]
		k += e + 2
	} else {
		start, depth := k, 0
	loop:
		for k < len(s) {
			switch c := s[k]; {
			case c == '\\' && k+1 < len(s):
				k += 2
				continue
			case c == ' ' || c == '\t' || c < ' ':
				break loop
			case c == '(':
				depth++
			case c == ')':
				if depth == 0 {
					break loop
				}
				depth--
			}
			k++
		}
		url = s[start:k]
	}
	k = skipBlanks(s, k)
	if k < len(s) && (s[k] == '"' || s[k] == '\'' || s[k] == '(') {
		closer := s[k]
		if closer == '(' {
			closer = ')'
		}
		e := strings.IndexByte(s[k+1:], closer)
		if e < 0 {
			return "", 0, false
		}
		k = skipBlanks(s, k+e+2)
	}
	if k >= len(s) || s[k] != ')' {
		return "", 0, false
	}
	return url, k + 1, true
}

// autolink renders <scheme:...> where s[i] is the '<'.
func (r *inline) autolink(b *strings.Builder, s string, i int) (int, bool) {
	e := strings.IndexAny(s[i+1:], "<> \t\n")
	if e < 0 || s[i+1+e] != '>' {
		return 0, false
	}
	url := s[i+1 : i+1+e]
	if !allowedURL(url) {
		return 0, false
	}
	if r.plain {
		r.write(b, url)
	} else {
		b.WriteByte('<')
		writeURL(b, url)
		b.WriteByte('>')
	}
	return i + e + 2, true
}

// bareURL copies a bare http(s) URL starting at s[i] unchanged but for
// escaping, so that its '_' and '*' are not read as emphasis. Slack links
// it by itself.
func (r *inline) bareURL(b *strings.Builder, s string, i int) (int, bool) {
	rest := strings.ToLower(s[i:min(len(s), i+8)])
	if !strings.HasPrefix(rest, "http://") && !strings.HasPrefix(rest, "https://") {
		return 0, false
	}
	if prev, _ := utf8.DecodeLastRuneInString(s[:i]); i > 0 && isWordRune(prev) {
		return 0, false
	}
	end := i
	for end < len(s) && s[end] > ' ' && s[end] != '<' && s[end] != '>' {
		end++
	}
	// Trailing punctuation belongs to the sentence, and a ')' to the
	// sentence unless the URL opened it, as GFM decides.
	for end > i {
		c := s[end-1]
		if strings.IndexByte("?!.,:;*_~'\"", c) >= 0 ||
			(c == ')' && strings.Count(s[i:end], ")") > strings.Count(s[i:end], "(")) {
			end--
			continue
		}
		break
	}
	r.write(b, s[i:end])
	return end, true
}

// emphasis renders a *, _ or ~ span that opens at s[i].
func (r *inline) emphasis(b *strings.Builder, s string, i int) (int, bool) {
	c, n := s[i], runLen(s, i)
	if (c == '~' && n > 2) || n > 3 || !canOpen(s, i, n) || *r.scans <= 0 {
		return 0, false
	}
	j := findCloser(s, i+n, n)
	r.spend(s, i+n, j)
	if j < 0 {
		return 0, false
	}
	inner := s[i+n : j]
	in := *r
	var open, close string
	switch {
	case c == '~':
		if !r.plain && !r.noStrike {
			open, close, in.noStrike = "~", "~", true
		}
	default:
		bold, italic := n >= 2, n != 2
		if bold && !r.plain && !r.noBold {
			open, close, in.noBold = "*", "*", true
		}
		if italic && !r.plain && !r.noItalic {
			open, close, in.noItalic = open+"_", "_"+close, true
		}
	}
	b.WriteString(open)
	in.render(b, inner)
	b.WriteString(close)
	return j + n, true
}

// canOpen reports whether the run of n delimiters at s[i] can open a
// span: it is followed by a non-space and, for '_', not preceded by a
// letter or digit (snake_case is not emphasis).
func canOpen(s string, i, n int) bool {
	if i+n >= len(s) {
		return false
	}
	next, _ := utf8.DecodeRuneInString(s[i+n:])
	if unicode.IsSpace(next) {
		return false
	}
	if s[i] == '_' && i > 0 {
		prev, _ := utf8.DecodeLastRuneInString(s[:i])
		return !isWordRune(prev)
	}
	return true
}

// canClose is canOpen mirrored for the run of n delimiters at s[j].
func canClose(s string, j, n int) bool {
	if j == 0 {
		return false
	}
	prev, _ := utf8.DecodeLastRuneInString(s[:j])
	if unicode.IsSpace(prev) {
		return false
	}
	if s[j] == '_' && j+n < len(s) {
		next, _ := utf8.DecodeRuneInString(s[j+n:])
		return !isWordRune(next)
	}
	return true
}

// findCloser returns the index of the first run of exactly n of the
// delimiter s[from-1] that can close a span opened just before from, or -1.
// Code spans are skipped: their text is not Markdown.
func findCloser(s string, from, n int) int {
	c := s[from-1]
	for k := from; k < len(s); {
		if next, ok := skipInert(s, k); ok {
			k = next
			continue
		}
		switch s[k] {
		case c:
			m := runLen(s, k)
			if m == n && k > from && canClose(s, k, n) {
				return k
			}
			k += m
			continue
		}
		k++
	}
	return -1
}

// allowedURL reports whether a link to url is safe to build: only web and
// mail links, never javascript:, data: or Slack's own schemes.
func allowedURL(url string) bool {
	u := strings.ToLower(url)
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "mailto:")
}

// writeURL writes url for the inside of <url|label>: '&' as &amp;, and
// percent-encoded where a byte could end the link, start a new one or is
// not valid UTF-8.
func writeURL(b *strings.Builder, url string) {
	for i := 0; i < len(url); {
		c := url[i]
		switch {
		case c == '&':
			b.WriteString("&amp;")
		case c <= ' ' || c == 0x7f || strings.IndexByte(`<>|"`+"`", c) >= 0:
			fmt.Fprintf(b, "%%%02X", c)
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(url[i:])
			if r == utf8.RuneError && size == 1 {
				fmt.Fprintf(b, "%%%02X", c)
			} else {
				b.WriteString(url[i : i+size])
			}
			i += size
			continue
		default:
			b.WriteByte(c)
		}
		i++
	}
}

func runLen(s string, i int) int {
	n := 1
	for i+n < len(s) && s[i+n] == s[i] {
		n++
	}
	return n
}

func skipBlanks(s string, k int) int {
	for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
		k++
	}
	return k
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isASCIIPunct(c byte) bool {
	return strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) >= 0
}
