package mrkdwn

import (
	"os"
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
