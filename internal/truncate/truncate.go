// Package truncate shortens text to a budget of bytes, cut at a rune boundary and marked with an ellipsis.
package truncate

import "unicode/utf8"

// Mark ends a text Bytes cut.
const Mark = "…"

// Bytes returns s when it is at most n bytes long; otherwise its start, cut
// at a rune boundary, followed by Mark, in at most n bytes all told (with
// no mark when n is too small to hold one). The unit is the byte because it
// keeps every limit: no character takes fewer bytes in UTF-8 than it counts
// for in characters or in UTF-16 units, however a platform counts them.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	mark := Mark
	if n < len(mark) {
		mark = ""
	}
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
