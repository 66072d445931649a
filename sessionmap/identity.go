package sessionmap

import (
	"crypto/rand"
)

// idLen is the length of a store ID: crypto/rand.Text's 26 characters of
// base32 (A-Z, 2-7), 130 random bits.
const idLen = 26

// newID returns a new random store ID.
func newID() string { return rand.Text() }

// ValidID reports whether id has the form of a store ID: 26 characters of
// A-Z and 2-7.
func ValidID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for _, c := range []byte(id) {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}
