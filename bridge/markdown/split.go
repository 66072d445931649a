// Package markdown splits and formats Markdown text for chat platforms without depending on any of them.
package markdown

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// MinLimit is the smallest limit for which Split keeps code fences
// balanced. Below it there is no room for a re-opened fence plus its
// closing line, so Split cuts the text as if it had no fences.
const MinLimit = 16

// Split cuts Markdown text into parts of at most limit units, as counted
// by measure (nil counts runes). It prefers, in order: the end of the
// text; paragraph breaks (a blank line, or the edge of a code fence); line
// breaks; word boundaries; a cut between two non-space runes that does not
// split a combining sequence or emoji; any rune boundary. The furthest
// cut of the best kind that fits wins. Cuts never fall inside a UTF-8
// sequence.
//
// Code fences (``` or ~~~, any indentation, optional info string) stay
// balanced in every part: a part that ends inside a fence gets "\n" and the
// closing fence appended, and the next part starts with the opening fence
// line (info string kept) and "\n". The added lines count toward the
// limit. A fence the text leaves open is closed at the end of the last
// part. Fence lines are never cut.
//
// What is kept: with c(i) the text of part i without the added fence
// lines, text == w(0) + c(1) + w(1) + ... + c(n) + w(n), where every w(i)
// is ASCII whitespace. So a cut drops only the whitespace around it: the
// trailing whitespace of the part before and the blank lines (or, where a
// word was cut, the spaces) before the part after. Indentation at the
// start of a part is kept unless the part could not otherwise make
// progress. Text that fits in one part, after trimming leading blank lines
// and trailing whitespace, is returned as one part; text that is empty or
// only whitespace returns nil. No part is empty or only whitespace.
//
// Limits: measure must be additive over concatenation at rune boundaries
// (rune counts, UTF-16 units and bytes all are); Split measures rune by
// rune. With limit below MinLimit, fences are ignored, and a single rune
// that measures more than limit (only possible when limit < 4) becomes a
// part of its own. Fences stay balanced as long as every line that
// contains ``` or ~~~ measures at most (limit-6)/3. Past that, where no
// balanced cut fits, Split cuts as many runes as fit with no fence lines
// added, and the parts around such a cut may have unbalanced fences; the
// guarantee above about what is kept still holds. Split never loops
// forever and, for limit >= MinLimit, never returns a part longer than
// limit.
func Split(text string, limit int, measure func(string) int) []string {
	pieces := split(text, limit, measure)
	if len(pieces) == 0 {
		return nil
	}
	parts := make([]string, len(pieces))
	for i, p := range pieces {
		parts[i] = p.reopen + text[p.start:p.end] + p.close
	}
	return parts
}

// piece is one part of the text before rendering: text[start:end] plus
// the fence lines Split added around it.
type piece struct {
	start, end int
	reopen     string // the opening fence line and "\n", or ""
	close      string // "\n" and the closing fence, or ""
}

type lineKind uint8

const (
	kindText    lineKind = iota // outside any fence
	kindOpen                    // opens a fence
	kindContent                 // inside a fence
	kindClose                   // closes a fence
)

type lineInfo struct {
	start, end int // text[start:end] is the line without its '\n'
	kind       lineKind
	fence      int  // index into splitter.fences; -1 for kindText
	blank      bool // only whitespace
	fenceLike  bool // starts like a fence line without being one
}

// Kinds of cut, worst first; zero means the position is no cut at all.
const (
	cutNone  = iota
	cutGlyph // between two runes of one grapheme cluster
	cutPoor  // leaves an empty code block behind
	cutHard  // inside a word
	cutWord
	cutLine
	cutPara
	cutEnd
	numCuts
)

type splitter struct {
	text       string
	limit      int
	measure    func(string) int
	fenced     bool // limit >= MinLimit
	lines      []lineInfo
	fences     []fence
	closeCosts []int
}

type candidate struct {
	pos   int // where the next part starts looking
	end   int // end of this part's text, trailing whitespace dropped
	fence int // fence still open at pos, -1 if none
}

func split(text string, limit int, measure func(string) int) []piece {
	sp := &splitter{text: text, limit: limit, measure: measure}
	sp.fenced = limit >= MinLimit
	sp.scan()
	var pieces []piece
	for pos := skipBlankLines(text, 0); pos < len(text); {
		p, next := sp.part(pos)
		if p.end > p.start {
			pieces = append(pieces, p)
		}
		pos = skipBlankLines(text, next)
	}
	return pieces
}

// scan classifies every line. Without fences every line is text.
func (sp *splitter) scan() {
	text := sp.text
	open := -1
	for start := 0; ; {
		end := start
		for end < len(text) && text[end] != '\n' {
			end++
		}
		s := text[start:end]
		ln := lineInfo{start: start, end: end, fence: -1, blank: isBlank(s)}
		if sp.fenced {
			switch {
			case open >= 0 && sp.fences[open].closedBy(s):
				ln.kind, ln.fence = kindClose, open
				open = -1
			case open >= 0:
				ln.kind, ln.fence, ln.fenceLike = kindContent, open, fenceLike(s)
			default:
				if f, ok := parseOpener(s); ok {
					sp.fences = append(sp.fences, f)
					open = len(sp.fences) - 1
					ln.kind, ln.fence = kindOpen, open
				} else {
					ln.fenceLike = fenceLike(s)
				}
			}
		}
		sp.lines = append(sp.lines, ln)
		if end == len(text) {
			break
		}
		start = end + 1
	}
	sp.closeCosts = make([]int, len(sp.fences))
	for i, f := range sp.fences {
		sp.closeCosts[i] = sp.cost("\n" + f.closer())
	}
}

// part cuts the part that starts at s, which is not whitespace-only to the
// end of the text, and returns it with the position after the cut.
func (sp *splitter) part(s int) (piece, int) {
	li := sp.lineAt(s)
	f := sp.fenceAt(li, s)
	reopen := ""
	if f >= 0 {
		reopen = sp.fences[f].line + "\n"
	}
	if c, ok := sp.walk(s, li, reopen); ok {
		return piece{start: s, end: c.end, reopen: reopen, close: sp.closing(c.fence)}, c.pos
	}
	// Deep indentation can leave no room: drop it rather than cut blindly.
	if ln := sp.lines[li]; (ln.kind == kindText || ln.kind == kindContent) && isSpace(sp.text[s]) {
		t := s
		for t < ln.end && isSpace(sp.text[t]) {
			t++
		}
		if t < ln.end {
			return sp.part(t)
		}
	}
	return sp.hardCut(s)
}

// walk scans forward from s and returns the best cut that fits.
func (sp *splitter) walk(s, li int, reopen string) (candidate, bool) {
	text := sp.text
	var best [numCuts]candidate
	var found [numCuts]bool
	cost := sp.cost(reopen)
	trimEnd, trimCost := s, cost
	for p, i := s, li; ; {
		if p > s && trimEnd > s {
			if kind := sp.classify(i, p); kind != cutNone {
				f := sp.fenceAt(i, p)
				if trimCost+sp.closeCost(f) <= sp.limit {
					best[kind] = candidate{pos: p, end: trimEnd, fence: f}
					found[kind] = true
				}
			}
		}
		if p == len(text) {
			break
		}
		r, size := utf8.DecodeRuneInString(text[p:])
		if r == '\n' {
			i++
		}
		if sp.measure == nil {
			cost++
		} else {
			cost += sp.cost(text[p : p+size])
		}
		p += size
		if !isSpace(text[p-size]) {
			trimEnd, trimCost = p, cost
			if trimCost > sp.limit {
				break
			}
		}
	}
	for k := numCuts - 1; k > cutNone; k-- {
		if found[k] {
			return best[k], true
		}
	}
	return candidate{}, false
}

// classify says what kind of cut position p on line i would be.
func (sp *splitter) classify(i, p int) int {
	text := sp.text
	if p == len(text) {
		return cutEnd
	}
	ln := sp.lines[i]
	if p == ln.start {
		prev := sp.lines[i-1]
		switch {
		case ln.kind == kindClose:
			return cutPoor
		case ln.kind == kindContent && prev.kind == kindOpen:
			return cutPoor
		case ln.kind == kindOpen || prev.kind == kindClose || ln.blank || prev.blank:
			return cutPara
		default:
			return cutLine
		}
	}
	if p >= ln.end || ln.kind == kindOpen || ln.kind == kindClose || ln.fenceLike {
		return cutNone
	}
	if isSpace(text[p]) || (sp.fenced && startsFence(text[p:])) {
		return cutNone
	}
	before, _ := utf8.DecodeLastRuneInString(text[:p])
	if before < utf8.RuneSelf && isSpace(byte(before)) {
		return cutWord
	}
	after, _ := utf8.DecodeRuneInString(text[p:])
	if (before >= utf8.RuneSelf || after >= utf8.RuneSelf) && joins(before, after) {
		return cutGlyph
	}
	return cutHard
}

// hardCut is the last resort: as many runes as fit, no fence lines added.
func (sp *splitter) hardCut(s int) (piece, int) {
	text := sp.text
	p, cost := s, 0
	for p < len(text) {
		_, size := utf8.DecodeRuneInString(text[p:])
		c := sp.cost(text[p : p+size])
		if p > s && cost+c > sp.limit {
			break
		}
		cost += c
		p += size
	}
	return piece{start: s, end: s + len(trimRightSpace(text[s:p]))}, p
}

// lineAt returns the index of the line that holds position p.
func (sp *splitter) lineAt(p int) int {
	return sort.Search(len(sp.lines), func(i int) bool { return sp.lines[i].start > p }) - 1
}

// fenceAt returns the fence open at cut position p on line i, or -1.
func (sp *splitter) fenceAt(i, p int) int {
	ln := sp.lines[i]
	switch {
	case p == ln.start:
		if ln.kind == kindContent || ln.kind == kindClose {
			return ln.fence
		}
		return -1
	case p == ln.end:
		if ln.kind == kindOpen || ln.kind == kindContent {
			return ln.fence
		}
		return -1
	case ln.kind == kindContent || ln.kind == kindClose:
		return ln.fence
	}
	return -1
}

func (sp *splitter) closing(f int) string {
	if f < 0 {
		return ""
	}
	return "\n" + sp.fences[f].closer()
}

func (sp *splitter) closeCost(f int) int {
	if f < 0 {
		return 0
	}
	return sp.closeCosts[f]
}

func (sp *splitter) cost(s string) int {
	if sp.measure == nil {
		return utf8.RuneCountInString(s)
	}
	return max(sp.measure(s), 0)
}

// skipBlankLines returns the start of the first line at or after p that
// is not blank, keeping its indentation, or len(text) if none is left.
func skipBlankLines(text string, p int) int {
	next := p
	for i := p; i < len(text); i++ {
		switch {
		case text[i] == '\n':
			next = i + 1
		case !isSpace(text[i]):
			return next
		}
	}
	return len(text)
}

const zwj = '\u200d'

// joins reports whether a and b belong to one grapheme cluster, roughly:
// combining marks, joiners, variation selectors, skin tones, emoji tags
// and regional indicator pairs. Getting it wrong only makes a cut uglier.
func joins(a, b rune) bool {
	switch {
	case a == zwj || b == zwj:
		return true
	case unicode.In(b, unicode.Mn, unicode.Me, unicode.Mc):
		return true
	case b >= 0xFE00 && b <= 0xFE0F, b >= 0x1F3FB && b <= 0x1F3FF, b >= 0xE0020 && b <= 0xE007F:
		return true
	case isRegional(a) && isRegional(b):
		return true
	}
	return false
}

func isRegional(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }
