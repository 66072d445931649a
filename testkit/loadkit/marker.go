package loadkit

import (
	"bytes"
	"fmt"
	"strconv"
)

// Marker names one message: conversation Conv, sequence Seq. It travels in
// the message text as "fbl<c>x<n>y", letters and digits only, so no escaping
// (Markdown, mrkdwn, form or JSON encoding) changes it; the fake agent echoes
// it in its answer.
type Marker struct {
	Conv int
	Seq  int
}

func (m Marker) String() string { return fmt.Sprintf("fbl%dx%dy", m.Conv, m.Seq) }

// FindMarker returns the last marker in b: a message's own, after any
// context flowbridge puts before it (the earlier messages of a thread the
// bot is mentioned in, which carry their own markers).
func FindMarker(b []byte) (Marker, bool) {
	var last Marker
	found := false
	for {
		i := bytes.Index(b, []byte("fbl"))
		if i < 0 {
			return last, found
		}
		b = b[i+3:]
		c, rest, ok := digits(b)
		if !ok || len(rest) == 0 || rest[0] != 'x' {
			continue
		}
		n, rest, ok := digits(rest[1:])
		if !ok || len(rest) == 0 || rest[0] != 'y' {
			continue
		}
		last, found = Marker{Conv: c, Seq: n}, true
	}
}

func digits(b []byte) (int, []byte, bool) {
	i := 0
	for i < len(b) && i < 9 && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, b, false
	}
	n, err := strconv.Atoi(string(b[:i]))
	return n, b[i:], err == nil
}
