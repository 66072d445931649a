package markdown

import (
	"fmt"
	"unicode/utf8"
)

// CutNote is the line Cap puts where it cut a text; %d is how many
// characters were left out.
const CutNote = "_[The answer was too long for chat and was cut here: %d more characters were left out.]_"

// Cap bounds what one answer becomes in chat: when Split(text+tail, limit,
// measure) gives at most maxParts parts, it returns text+tail; otherwise it
// keeps the longest start of text made of Split's whole parts whose
// rendering, with any code fence left open closed, a blank line, CutNote
// and tail, Split gives in at most maxParts parts, and returns that. tail
// (a footer, say) is never cut. measure is Split's and must count every
// rune as at least 1. With maxParts below 1 there is no cap.
//
// A text many times longer than the cap costs no more than the cap: only
// its start is split.
func Cap(text, tail string, limit, maxParts int, measure func(string) int) string {
	if maxParts < 1 || limit < 1 {
		return text + tail
	}
	// Every part holds at most limit runes, so no more than this start of
	// text can be kept; a further limit lets the kept parts be cut as they
	// would be in the whole text.
	if room := (maxParts + 2) * limit * utf8.UTFMax; len(text) > room {
		head := text[:room]
		for len(head) > 0 && !utf8.RuneStart(text[len(head)]) {
			head = head[:len(head)-1]
		}
		return capParts(text, head, tail, limit, maxParts, measure)
	}
	if len(split(text+tail, limit, measure)) <= maxParts {
		return text + tail
	}
	return capParts(text, text, tail, limit, maxParts, measure)
}

// capParts cuts text, known to need more than maxParts parts with tail,
// keeping whole parts of head, its start; with none kept, the note and tail
// are all that is left.
func capParts(text, head, tail string, limit, maxParts int, measure func(string) int) string {
	pieces := split(head, limit, measure)
	for k := min(maxParts, len(pieces)); ; k-- {
		end, closing := 0, ""
		if k > 0 {
			end, closing = pieces[k-1].end, pieces[k-1].close
		}
		out := text[:end] + closing
		if out != "" {
			out += "\n\n"
		}
		out += fmt.Sprintf(CutNote, utf8.RuneCountInString(text[end:])) + tail
		if k == 0 || len(split(out, limit, measure)) <= maxParts {
			return out
		}
	}
}
