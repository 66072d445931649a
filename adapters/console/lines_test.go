package console

import (
	"bufio"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadLine(t *testing.T) {
	const limit = 8
	tests := []struct {
		name, in string
		want     []inputLine
	}{
		{"empty", "", nil},
		{"lines", "a\nb\n", []inputLine{{text: "a", size: 1}, {text: "b", size: 1}}},
		{"no last line end", "a\nb", []inputLine{{text: "a", size: 1}, {text: "b", size: 1}}},
		{"crlf", "a\r\n\r\nb\r", []inputLine{{text: "a", size: 1}, {text: "", size: 0}, {text: "b\r", size: 2}}},
		{"at the limit", "12345678\r\n", []inputLine{{text: "12345678", size: 8}}},
		{"over the limit", "123456789\nok\n", []inputLine{{size: 9, tooLong: true}, {text: "ok", size: 2}}},
		{"over the limit, crlf", "123456789\r\n", []inputLine{{size: 9, tooLong: true}}},
		{"far over, no line end", strings.Repeat("x", 100), []inputLine{{size: 100, tooLong: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A buffer smaller than the lines, so they arrive in pieces.
			r := bufio.NewReaderSize(iotest.OneByteReader(strings.NewReader(tt.in)), 16)
			var got []inputLine
			for {
				line, err := readLine(r, limit)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("readLine = %v", err)
				}
				got = append(got, line)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("readLine(%q) gave %+v, want %+v", tt.in, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("readLine(%q) line %d = %+v, want %+v", tt.in, i, got[i], tt.want[i])
				}
			}
		})
	}
}

// An over-long line is read past, not kept: reading a 32 MiB line allocates
// about the limit, not the line.
func TestReadLineDoesNotKeepLongLine(t *testing.T) {
	const size = 32 << 20
	r := bufio.NewReaderSize(io.MultiReader(&repeatReader{n: size}, strings.NewReader("\nnext\n")), 64<<10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	line, err := readLine(r, maxLineBytes)
	runtime.ReadMemStats(&after)
	if err != nil || !line.tooLong || line.size != size {
		t.Fatalf("readLine = %+v, %v; want a refused line of %d bytes", line, err, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*maxLineBytes {
		t.Errorf("reading a %d-byte line allocated %d bytes", size, alloc)
	}
	if line, err := readLine(r, maxLineBytes); err != nil || line.text != "next" {
		t.Errorf("next readLine = %+v, %v; want next", line, err)
	}
}

// repeatReader yields n bytes of 'x' without holding them.
type repeatReader struct{ n int }

var xs = []byte(strings.Repeat("x", 4096))

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], xs)
	r.n -= k
	return k, nil
}
