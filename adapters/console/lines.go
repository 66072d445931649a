package console

import (
	"bufio"
	"errors"
	"io"
)

// maxLineBytes bounds an input line. A longer line is refused, as the core
// refuses an over-long chat message, and read past without being kept.
const maxLineBytes = 1 << 20

// inputLine is one line of input: its text and length in bytes. An
// over-long line has no text.
type inputLine struct {
	text    string
	size    int
	tooLong bool
}

// readLine reads the next line, without its "\n" or "\r\n". It keeps at most
// limit bytes of a line: a longer one is read to its end and only its length
// is returned. It returns io.EOF once the input is used up; a last line with
// no line end is a line.
func readLine(r *bufio.Reader, limit int) (inputLine, error) {
	var kept []byte
	size := 0
	var last, beforeLast byte // the last two bytes read, to find the line end
	for {
		chunk, err := r.ReadSlice('\n')
		size += len(chunk)
		switch {
		case size <= limit+2: // room for "\r\n"
			kept = append(kept, chunk...)
		case kept != nil:
			kept = nil
		}
		for _, c := range chunk[max(0, len(chunk)-2):] {
			beforeLast, last = last, c
		}
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && size > 0:
		default:
			return inputLine{}, err
		}
		n := size
		if last == '\n' {
			n--
			if beforeLast == '\r' {
				n--
			}
		}
		if n > limit {
			return inputLine{size: n, tooLong: true}, nil
		}
		return inputLine{text: string(kept[:n]), size: n}, nil
	}
}
