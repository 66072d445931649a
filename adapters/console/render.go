package console

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/markdown"
)

// Style is how the console shows the Markdown of replies.
type Style int

const (
	// StyleAuto uses ANSI styles when Out is a terminal, plain text otherwise.
	StyleAuto Style = iota
	// StylePlain drops the markup: for pipes, files and tests.
	StylePlain
	// StyleANSI shows bold, italics and code with ANSI escape sequences.
	StyleANSI
)

// ansi reports whether s, for the writer out, means ANSI styles.
func (s Style) ansi(out io.Writer) bool {
	switch s {
	case StylePlain:
		return false
	case StyleANSI:
		return true
	}
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

var labels = map[bridge.ReplyKind]string{
	bridge.ReplyAgent:    "agent",
	bridge.ReplyFlow:     "flow",
	bridge.ReplyInfo:     "info",
	bridge.ReplyError:    "error",
	bridge.ReplyProgress: "working",
	bridge.ReplyConfirm:  "confirm",
}

// render formats a reply for the terminal: a label, the text with its
// Markdown rendered (see renderMarkdown), the footer and how to press any
// buttons.
func render(r bridge.Reply, ansi bool) string {
	var b strings.Builder
	label := labels[r.Kind]
	if label == "" {
		label = "bot"
	}
	text := strings.TrimRight(sanitize(r.Text), "\n")
	if strings.Contains(text, "\n") {
		fmt.Fprintf(&b, "%s:\n%s\n", label, indent(renderMarkdown(text, ansi)))
	} else {
		fmt.Fprintf(&b, "%s: %s\n", label, renderMarkdown(text, ansi))
	}
	if footer := strings.TrimSpace(strings.ReplaceAll(sanitize(r.Footer), "\n", " ")); footer != "" {
		fmt.Fprintf(&b, "  — %s\n", renderInline(footer, 0, ansi))
	}
	var hints []string
	for _, btn := range r.Buttons {
		label := strings.ToLower(strings.ReplaceAll(sanitize(btn.Label), "\n", " "))
		switch btn.Action.ID {
		case bridge.ActionShare:
			hints = append(hints, "type /share to "+label)
		case bridge.ActionConfirm:
			hints = append(hints, "type y to "+label)
		case bridge.ActionCancel:
			hints = append(hints, "n to "+label)
		}
	}
	if len(hints) > 0 {
		fmt.Fprintf(&b, "  [%s]\n", strings.Join(hints, ", "))
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// sanitize makes text safe to print on a terminal: invalid UTF-8 and every
// control character but tab and line feed (escape sequences, carriage
// returns that overwrite a line, C1 controls) become U+FFFD, and CRLF line
// ends become LF. Agent and flow output could otherwise move the cursor,
// retitle the window or hide text.
func sanitize(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || !unicode.IsControl(r) {
			return r
		}
		return '\uFFFD'
	}, s)
}

// The ANSI styles. Every styled piece of text is written as one SGR
// sequence, the text and a reset, so no style outlives its text.
type style uint8

const (
	styleBold style = 1 << iota
	styleItalic
	styleCode
	styleStrike
)

const sgrReset = "\x1b[0m"

func (st style) sgr() string {
	var codes []string
	if st&styleBold != 0 {
		codes = append(codes, "1")
	}
	if st&styleItalic != 0 {
		codes = append(codes, "3")
	}
	if st&styleCode != 0 {
		codes = append(codes, "36") // cyan
	}
	if st&styleStrike != 0 {
		codes = append(codes, "9") // crossed out
	}
	return "\x1b[" + strings.Join(codes, ";") + "m"
}

// termWriter writes text in a style: with ANSI sequences, or as is.
type termWriter struct {
	b    *strings.Builder
	ansi bool
}

func (w termWriter) write(st style, s string) {
	if s == "" {
		return
	}
	if !w.ansi && st&styleStrike != 0 {
		// Plain text has no crossed-out style, and struck text read as
		// plain says the opposite of what was meant ("~~restart~~"): each
		// character is overlaid with a long stroke (U+0336).
		for _, r := range s {
			w.b.WriteRune(r)
			if !unicode.IsSpace(r) {
				w.b.WriteRune('\u0336')
			}
		}
		return
	}
	if !w.ansi || st == 0 {
		w.b.WriteString(s)
		return
	}
	w.b.WriteString(st.sgr())
	w.b.WriteString(s)
	w.b.WriteString(sgrReset)
}

// renderMarkdown renders sanitized Markdown for a terminal:
//
//   - *bold* (as the core writes it, Slack style), **bold** and __bold__ are
//     bold; _italic_ is italic; ***both*** is both; ~~strike~~ is crossed
//     out (without ANSI, each character overlaid with U+0336: s̶t̶r̶i̶k̶e̶);
//   - `inline code` and the lines of fenced code blocks are in the code
//     colour, their text untouched; a code block's fence lines are dropped
//     and its lines indented by two spaces;
//   - [text](url) becomes "text (url)" and <url> becomes url;
//   - "# heading" becomes a bold line;
//   - a backslash before ASCII punctuation shows that character as is;
//   - a table becomes aligned columns (markdown.Table.Columns), measured in
//     terminal columns so wide characters line up, its cells without
//     markup and its header bold.
//
// With ansi false the markup is dropped and nothing styled but struck text. Emphasis does not
// span lines; lists and quotes are left as they read.
func renderMarkdown(text string, ansi bool) string {
	lines := strings.Split(text, "\n")
	out := make([]string, 0, len(lines))
	tables := tablesByLine(text)
	var open *fence
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if t, ok := tables[i]; ok && open == nil {
			out = append(out, tableLines(t, ansi)...)
			i += t.Lines - 1
			continue
		}
		switch f, ok := parseFence(line); {
		case open != nil && open.closedBy(line):
			open = nil
		case open != nil:
			var b strings.Builder
			b.WriteString("  ")
			termWriter{b: &b, ansi: ansi}.write(styleCode, line)
			out = append(out, b.String())
		case ok:
			open = &f
		default:
			if body, ok := heading(line); ok {
				out = append(out, renderInline(body, styleBold, ansi))
			} else {
				out = append(out, renderInline(line, 0, ansi))
			}
		}
	}
	return strings.Join(out, "\n")
}

// tablesByLine finds md's tables and keys them by their first line.
func tablesByLine(md string) map[int]markdown.Table {
	m := make(map[int]markdown.Table)
	for _, t := range markdown.Tables(md) {
		m[t.Line] = t
	}
	return m
}

// tableLines lays t out in columns, the header line bold under ANSI.
func tableLines(t markdown.Table, ansi bool) []string {
	lines := strings.Split(t.Columns(markdown.PlainInline), "\n")
	if ansi {
		var b strings.Builder
		termWriter{b: &b, ansi: true}.write(styleBold, lines[0])
		lines[0] = b.String()
	}
	return lines
}

// fence is an open code fence: three or more backticks or tildes, with any
// indentation (chat text does not count columns).
type fence struct {
	char byte
	n    int
}

func parseFence(line string) (fence, bool) {
	body := strings.TrimLeft(line, " \t")
	n := runLen(body, 0)
	if n < 3 || (body[0] != '`' && body[0] != '~') {
		return fence{}, false
	}
	// A backtick fence's info string holds no backtick: "```a``` b" is inline code.
	if body[0] == '`' && strings.IndexByte(body[n:], '`') >= 0 {
		return fence{}, false
	}
	return fence{char: body[0], n: n}, true
}

// closedBy reports whether line closes f: the same character, at least as
// many, and nothing but whitespace after.
func (f fence) closedBy(line string) bool {
	body := strings.TrimLeft(line, " \t")
	n := runLen(body, 0)
	return n >= f.n && body[0] == f.char && strings.TrimSpace(body[n:]) == ""
}

// heading returns the text of an ATX heading line ("## Steps").
func heading(line string) (string, bool) {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 {
		return "", false
	}
	n := runLen(s, 0)
	if n == 0 || n > 6 || s[0] != '#' || (n < len(s) && s[n] != ' ' && s[n] != '\t') {
		return "", false
	}
	body := strings.TrimSpace(s[n:])
	// An optional closing run of '#' after a space.
	if t := strings.TrimRight(body, "#"); t != body && (t == "" || strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t")) {
		body = strings.TrimSpace(t)
	}
	return body, true
}

// renderInline renders the inline Markdown of one line in style st.
func renderInline(line string, st style, ansi bool) string {
	var b strings.Builder
	b.Grow(len(line) + len(line)/8)
	r := &inline{w: termWriter{b: &b, ansi: ansi}, budget: 32*len(line) + 1<<16}
	r.spans(r.atomize(line), st, 0)
	return b.String()
}

// maxDepth bounds nested emphasis and links; deeper markers are text.
const maxDepth = 8

// inline renders one line in two passes. atomize replaces the code spans
// and backslash escapes, which no other markup may look into, with
// placeholders ("\x00" index "\x01"; sanitize leaves neither byte in the
// text); spans then renders emphasis and links around them.
type inline struct {
	w     termWriter
	atoms []atom
	// budget is what is left for searches that may fail (a closing
	// delimiter, a link's ']' or ')'). A failed search runs to the end of the
	// line, so a line of unmatched openers would cost time quadratic in its
	// length; once the budget is spent, markers are text. Real text, whose
	// searches end at a nearby closer, never comes near it.
	budget int
}

type atom struct {
	text string
	code bool
}

func (r *inline) spend(n int) { r.budget -= max(n, 1) }

func (r *inline) atomize(s string) string {
	if !strings.ContainsAny(s, "`\\") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			r.placeholder(&b, atom{text: s[i+1 : i+2]})
			i += 2
			continue
		case c == '`':
			n := runLen(s, i)
			if r.budget > 0 {
				if j, ok := closingTicks(s, i+n, n); ok {
					r.spend(j - i)
					code := s[i+n : j]
					if len(code) >= 2 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
						code = code[1 : len(code)-1]
					}
					r.placeholder(&b, atom{text: code, code: true})
					i = j + n
					continue
				}
				r.spend(len(s) - i)
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

func (r *inline) placeholder(b *strings.Builder, a atom) {
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(len(r.atoms)))
	b.WriteByte(1)
	r.atoms = append(r.atoms, a)
}

// closingTicks finds the run of exactly n backticks that closes a code span
// opened before from.
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

// spans renders s, in which code spans and escapes are placeholders, in
// style st.
func (r *inline) spans(s string, st style, depth int) {
	text := 0 // start of the plain text not yet written
	flush := func(i int) {
		r.w.write(st, s[text:i])
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0:
			flush(i)
			end := strings.IndexByte(s[i:], 1) + i
			idx, _ := strconv.Atoi(s[i+1 : end])
			a := r.atoms[idx]
			if a.code {
				r.w.write(st|styleCode, a.text)
			} else {
				r.w.write(st, a.text)
			}
			i = end + 1
			text = i
			continue
		case (c == '*' || c == '_') && depth < maxDepth:
			n := runLen(s, i)
			if j, ok := r.closer(s, i, n); ok {
				flush(i)
				r.spans(s[i+n:j], st|emphasis(c, n), depth+1)
				i = j + n
				text = i
				continue
			}
			i += n // a run that is no delimiter is text as a whole
			continue
		case c == '~' && depth < maxDepth:
			n := runLen(s, i)
			if n <= 2 {
				if j, ok := r.closer(s, i, n); ok {
					flush(i)
					r.spans(s[i+n:j], st|styleStrike, depth+1)
					i = j + n
					text = i
					continue
				}
			}
			i += n
			continue
		case (c == '[' || c == '!' && i+1 < len(s) && s[i+1] == '[') && depth < maxDepth:
			start := i
			if c == '!' {
				start++
			}
			if label, url, end, ok := r.link(s, start); ok {
				flush(i)
				if label == "" || label == url {
					r.w.write(st, url)
				} else {
					r.spans(label, st, depth+1)
					r.w.write(st, " ("+url+")")
				}
				i = end
				text = i
				continue
			}
		case c == '<':
			if url, end, ok := autolink(s, i); ok {
				flush(i)
				r.w.write(st, url)
				i = end
				text = i
				continue
			}
		case (c == 'h' || c == 'H') && !wordBefore(s, i):
			// A bare URL is text: its underscores and asterisks are no emphasis.
			if n := bareURL(s[i:]); n > 0 {
				i += n
				continue
			}
		}
		i++
	}
	flush(len(s))
}

// emphasis is the style of a delimiter run: *x* is bold as the core (and
// Slack) writes it, **x** and __x__ are bold, _x_ italic, three of either both.
func emphasis(c byte, n int) style {
	switch {
	case n >= 3:
		return styleBold | styleItalic
	case n == 2 || c == '*':
		return styleBold
	}
	return styleItalic
}

// closer finds the run that closes the delimiter run of n at s[i]: exactly
// as long, of the same character, after non-space text and not followed by a
// letter or digit. The opener must be followed by non-space text and not
// follow a letter or digit, so snake_case and 2*3*4 stay as they are.
func (r *inline) closer(s string, i, n int) (int, bool) {
	c := s[i]
	if n > 3 || r.budget <= 0 || wordBefore(s, i) || i+n >= len(s) || spaceAt(s, i+n) {
		return 0, false
	}
	for j := i + n; j < len(s); {
		if s[j] != c {
			j++
			continue
		}
		m := runLen(s, j)
		if m == n && !spaceBefore(s, j) && !wordAt(s, j+m) {
			r.spend(j - i)
			return j, true
		}
		j += m
	}
	r.spend(len(s) - i)
	return 0, false
}

// link parses [label](url) with s[i] == '[' and returns the index after it.
// The URL may hold balanced parentheses but no whitespace or placeholder.
func (r *inline) link(s string, i int) (label, url string, end int, ok bool) {
	if r.budget <= 0 {
		return "", "", 0, false
	}
	q := strings.IndexByte(s[i+1:], ']')
	if q < 0 {
		r.spend(len(s) - i)
		return "", "", 0, false
	}
	q += i + 1
	r.spend(q - i)
	if q+1 >= len(s) || s[q+1] != '(' {
		return "", "", 0, false
	}
	depth := 0
	for j := q + 2; j < len(s); j++ {
		switch c := s[j]; {
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case c == ')':
			r.spend(j - q)
			url = s[q+2 : j]
			if url == "" {
				return "", "", 0, false
			}
			return s[i+1 : q], url, j + 1, true
		case c == ' ' || c == '\t' || c == 0:
			r.spend(j - q)
			return "", "", 0, false
		}
	}
	r.spend(len(s) - q)
	return "", "", 0, false
}

// autolink parses <https://…>, <http://…> or <mailto:…> at s[i].
func autolink(s string, i int) (url string, end int, ok bool) {
	rest := s[i+1:]
	lower := strings.ToLower(rest[:min(len(rest), 8)])
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") && !strings.HasPrefix(lower, "mailto:") {
		return "", 0, false
	}
	j := strings.IndexAny(rest, "> \t<\x00")
	if j < 0 || rest[j] != '>' {
		return "", 0, false
	}
	return rest[:j], i + 1 + j + 1, true
}

// bareURL returns the length of the http or https URL at the start of s,
// up to the next whitespace, or 0.
func bareURL(s string) int {
	lower := strings.ToLower(s[:min(len(s), 8)])
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		return 0
	}
	n := strings.IndexAny(s, " \t\x00")
	if n < 0 {
		n = len(s)
	}
	return n
}

func runLen(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	n := 1
	for i+n < len(s) && s[i+n] == s[i] {
		n++
	}
	return n
}

// wordBefore reports whether a letter or digit comes just before s[i].
func wordBefore(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return i > 0 && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// wordAt reports whether a letter or digit starts s[i:].
func wordAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return i < len(s) && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

func spaceBefore(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return i == 0 || unicode.IsSpace(r)
}

func spaceAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return i >= len(s) || unicode.IsSpace(r)
}

func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}
