package postgres

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// BenchmarkReceive records new platform events, one goroutine at a time
// (each op a commit of its own) and from 64 goroutines at once, as a burst
// of deliveries reaches a replica (concurrent ops share commits).
func BenchmarkReceive(b *testing.B) {
	event := make([]byte, 512)
	entry := func(i int64) store.InboxEntry {
		return store.InboxEntry{Key: fmt.Sprintf("slack/ev/Ev%012d", i), Conversation: fmt.Sprintf("slack/T1/C%d", i%50), Event: event}
	}
	b.Run("goroutines=1", func(b *testing.B) {
		s, _ := openTest(b, Options{})
		b.ReportAllocs()
		var i int64
		for b.Loop() {
			i++
			if ok, err := s.Receive(b.Context(), entry(i)); err != nil || !ok {
				b.Fatalf("Receive = %v, %v", ok, err)
			}
		}
	})
	b.Run("goroutines=64", func(b *testing.B) {
		s, _ := openTest(b, Options{})
		var next atomic.Int64
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, err := s.Receive(b.Context(), entry(next.Add(1))); err != nil || !ok {
					b.Errorf("Receive = %v, %v", ok, err)
					return
				}
			}
		})
	})
}

// BenchmarkReceiveDuplicate is a redelivery storm from 64 goroutines: every
// op a key held already, recognised without a write.
func BenchmarkReceiveDuplicate(b *testing.B) {
	s, _ := openTest(b, Options{})
	const keys = 1000
	for i := range keys {
		if _, err := s.Receive(b.Context(), store.InboxEntry{Key: fmt.Sprintf("slack/ev/%d", i), Conversation: "c", Received: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ok, err := s.Receive(b.Context(), store.InboxEntry{Key: fmt.Sprintf("slack/ev/%d", next.Add(1)%keys), Conversation: "c", Received: time.Now()})
			if err != nil || ok {
				b.Errorf("Receive of a held key = %v, %v, want false", ok, err)
				return
			}
		}
	})
}
