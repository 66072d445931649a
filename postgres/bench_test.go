package postgres

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// BenchmarkReceive records new platform events from 64 goroutines at once,
// as a burst of deliveries reaches the replicas: each op is one durable
// INSERT … ON CONFLICT.
func BenchmarkReceive(b *testing.B) {
	for _, conns := range []int32{0, 16, 64} {
		name := fmt.Sprintf("conns=%d", conns)
		if conns == 0 {
			name = "conns=default"
		}
		b.Run(name, func(b *testing.B) {
			s, _ := openTest(b, Options{MaxConns: conns})
			event := make([]byte, 512)
			var next atomic.Int64
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					ok, err := s.Receive(store.InboxEntry{
						Key: fmt.Sprintf("slack/ev/Ev%012d", i), Conversation: fmt.Sprintf("slack/T1/C%d", i%50), Event: event,
					})
					if err != nil || !ok {
						b.Errorf("Receive = %v, %v", ok, err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkReceiveDuplicate is a redelivery storm: every op a key held
// already, recognised without a write.
func BenchmarkReceiveDuplicate(b *testing.B) {
	s, _ := openTest(b, Options{MaxConns: 16})
	const keys = 1000
	for i := range keys {
		if _, err := s.Receive(store.InboxEntry{Key: fmt.Sprintf("slack/ev/%d", i), Conversation: "c"}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ok, err := s.Receive(store.InboxEntry{Key: fmt.Sprintf("slack/ev/%d", next.Add(1)%keys), Conversation: "c"})
			if err != nil || ok {
				b.Errorf("Receive of a held key = %v, %v, want false", ok, err)
				return
			}
		}
	})
}
