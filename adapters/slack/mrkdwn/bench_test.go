package mrkdwn

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func BenchmarkConvert(b *testing.B) {
	md, err := os.ReadFile("testdata/debug.md")
	if err != nil {
		b.Fatal(err)
	}
	reply := string(md)
	for len(reply) < 3000 {
		reply += "\n\n" + string(md)
	}
	reply = reply[:3000]
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for b.Loop() {
		Convert(reply)
	}
}

// BenchmarkConvertAdversarial: lines of unmatched openers, each of whose
// searches would look to the end of the line. ns/op should grow linearly
// with the line (compare the sizes), not quadratically.
func BenchmarkConvertAdversarial(b *testing.B) {
	for _, p := range []string{"*a ", "_a ", "**a ", "[", "![", "[a]("} {
		for _, n := range []int{16 << 10, 64 << 10} {
			line := strings.Repeat(p, n/len(p))
			b.Run(fmt.Sprintf("%q/%dKiB", p, n>>10), func(b *testing.B) {
				b.SetBytes(int64(len(line)))
				for b.Loop() {
					Convert(line)
				}
			})
		}
	}
}
