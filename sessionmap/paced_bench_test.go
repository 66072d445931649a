package sessionmap

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// BenchmarkPacedMessages is the store's part of flowbridge-load's default
// run, without the network: 1,000 conversations (and 100, a tenth of the
// rate, where commits are seldom shared), each sending a message and
// making the store calls the dispatcher makes for it on bbolt (Receive;
// Claim of the conversation's lease, PendingOf, MarkSentUnder; 50 ms for
// the agent; PutReply with the turn, Finish; PendingOf, Release, PendingOf;
// then about a second of thought), for 10 s. It reports the process's CPU
// per message, the commits (bbolt write transactions) per message, pages
// per commit and per message (bbolt's page writes, the meta page's
// included; a run of overflow pages counts once), the bytes written per
// message (wchar-B/msg: passed to write calls; disk-B/msg: sent towards
// the disk, /proc/self/io's write_bytes, Linux only), the allocations per
// message (the whole process's, the run's goroutines included), and how long a
// message waits for the store on its way (Receive, MarkSentUnder,
// PutReply: waited-p50-ms, waited-p99-ms). Run it with -benchtime=1x: each
// iteration is the whole run.
func BenchmarkPacedMessages(b *testing.B) {
	for _, n := range []int{1000, 100} {
		b.Run(fmt.Sprintf("conversations=%d", n), func(b *testing.B) { pacedMessages(b, n) })
	}
}

func pacedMessages(b *testing.B, conversations int) {
	const (
		agent = 50 * time.Millisecond
		think = time.Second
		warm  = 2 * time.Second
		run   = 10 * time.Second
	)
	ctx := b.Context()
	for b.Loop() {
		s, _ := openTest(b, Options{})
		created := time.Now()
		for i := range conversations {
			if err := s.PutSession(ctx, Session{Key: fixtureKey(i), Agent: "helper", SessionUUID: testUUID(i), Created: created, LastUsed: created}); err != nil {
				b.Fatal(err)
			}
		}
		var (
			mu       sync.Mutex
			messages int
			counting bool
			waited   []time.Duration // per message: Receive, MarkSent and PutReply
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range conversations {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(c), 1))
				conv := fixtureKey(c)
				sleep := func(d time.Duration) bool {
					t := time.NewTimer(d)
					defer t.Stop()
					select {
					case <-stop:
						return false
					case <-t.C:
						return true
					}
				}
				if !sleep(time.Duration(rng.Int64N(int64(think)))) {
					return
				}
				for n := 0; ; n++ {
					key := fmt.Sprintf("slack/msg/C%09d/%d.%06d", c%100, 1716212345+n, c)
					t0 := time.Now()
					if _, err := s.Receive(ctx, store.InboxEntry{Key: key, Conversation: conv, Event: benchEvent, Received: time.Now()}); err != nil {
						b.Error(err)
						return
					}
					if ok, err := s.Claim(ctx, conv, "bench", time.Minute); err != nil || !ok {
						b.Error("claim", ok, err)
						return
					}
					if p, err := s.PendingOf(ctx, conv); err != nil || len(p) != 1 {
						b.Error("pending before running", len(p), err)
						return
					}
					if err := s.MarkSentUnder(ctx, key, conv, "bench", time.Now()); err != nil {
						b.Error(err)
						return
					}
					w := time.Since(t0)
					if !sleep(agent) {
						return
					}
					t1 := time.Now()
					turn := Turn{Session: Session{Key: conv, Agent: "helper", SessionUUID: testUUID(c), Created: created, LastUsed: time.Now()}, Reply: "the answer"}
					if err := s.PutReply(ctx, key, []byte(`{"reply":{"kind":"agent","text":"the answer to the question"}}`), &turn, time.Now()); err != nil {
						b.Error(err)
						return
					}
					w += time.Since(t1)
					if err := s.Finish(ctx, key, "1716212345.000100", nil, time.Now()); err != nil {
						b.Error(err)
						return
					}
					if _, err := s.PendingOf(ctx, conv); err != nil {
						b.Error("pending after running", err)
						return
					}
					if err := s.Release(ctx, conv, "bench"); err != nil {
						b.Error(err)
						return
					}
					if _, err := s.PendingOf(ctx, conv); err != nil {
						b.Error("pending after release", err)
						return
					}
					mu.Lock()
					if counting {
						messages++
						waited = append(waited, w)
					}
					mu.Unlock()
					if !sleep(think/2 + time.Duration(rng.Int64N(int64(think)))) {
						return
					}
				}
			})
		}
		time.Sleep(warm)
		txid := func() int {
			var id int
			_ = s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
			return id
		}
		pages := func() int64 { st := s.db.Stats(); return st.TxStats.GetWrite() }
		tx0, pages0 := txid(), pages()
		wchar0, disk0, ioOK := processIO()
		var mem runtime.MemStats
		runtime.ReadMemStats(&mem)
		allocs0 := mem.Mallocs
		mu.Lock()
		counting = true
		mu.Unlock()
		cpu := startCPU()
		time.Sleep(run)
		mu.Lock()
		counting = false
		n := messages
		mu.Unlock()
		used, _ := processCPU()
		tx1, pages1 := txid(), pages()
		wchar1, disk1, _ := processIO()
		runtime.ReadMemStats(&mem)
		allocs1 := mem.Mallocs
		close(stop)
		wg.Wait()
		b.ReportMetric(float64(n)/run.Seconds(), "msg/s")
		b.ReportMetric(float64((used-cpu.start).Microseconds())/float64(n), "cpu-µs/msg")
		b.ReportMetric(float64(tx1-tx0)/float64(n), "commits/msg")
		b.ReportMetric(float64(pages1-pages0)/float64(tx1-tx0), "pages/commit")
		b.ReportMetric(float64(pages1-pages0)/float64(n), "pages/msg")
		b.ReportMetric(float64(allocs1-allocs0)/float64(n), "allocs/msg")
		if ioOK {
			b.ReportMetric(float64(wchar1-wchar0)/float64(n), "wchar-B/msg")
			b.ReportMetric(float64(disk1-disk0)/float64(n), "disk-B/msg")
		}
		slices.Sort(waited)
		if len(waited) > 0 {
			b.ReportMetric(float64(waited[len(waited)/2].Microseconds())/1000, "waited-p50-ms")
			b.ReportMetric(float64(waited[len(waited)*99/100].Microseconds())/1000, "waited-p99-ms")
		}
	}
}

// BenchmarkMessageAlone is one message at a time through the store calls
// BenchmarkPacedMessages makes for it (without the agent's 50 ms), so no
// commit is shared: its pages and bytes per message do not move with how
// the machine's load batches commits, as the paced run's do. The store
// holds 1,000 sessions and 200 entries in flight in other conversations,
// as under the paced load. sync=false is the same without the disk's
// syncs: the store's own CPU, which the machine's disk does not disturb.
func BenchmarkMessageAlone(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", !noSync), func(b *testing.B) { messageAlone(b, noSync) })
	}
}

func messageAlone(b *testing.B, noSync bool) {
	const conversations, inFlight = 1000, 200
	ctx := b.Context()
	s, _ := openTest(b, Options{NoSync: noSync})
	created := time.Now()
	for i := range conversations {
		if err := s.PutSession(ctx, Session{Key: fixtureKey(i), Agent: "helper", SessionUUID: testUUID(i), Created: created, LastUsed: created}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range inFlight {
		e := store.InboxEntry{Key: fmt.Sprintf("slack/msg/waiting/%d", i), Conversation: fixtureKey(conversations + i), Event: benchEvent, Received: time.Now()}
		if _, err := s.Receive(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	pages := func() int64 { st := s.db.Stats(); return st.TxStats.GetWrite() }
	pages0 := pages()
	wchar0, disk0, ioOK := processIO()
	cpu := startCPU()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		c := n % conversations
		conv := fixtureKey(c)
		key := fmt.Sprintf("slack/msg/alone/%d", n)
		n++
		if _, err := s.Receive(ctx, store.InboxEntry{Key: key, Conversation: conv, Event: benchEvent, Received: time.Now()}); err != nil {
			b.Fatal(err)
		}
		if ok, err := s.Claim(ctx, conv, "bench", time.Minute); err != nil || !ok {
			b.Fatal("claim", ok, err)
		}
		if p, err := s.PendingOf(ctx, conv); err != nil || len(p) != 1 {
			b.Fatal("pending before running", len(p), err)
		}
		if err := s.MarkSentUnder(ctx, key, conv, "bench", time.Now()); err != nil {
			b.Fatal(err)
		}
		turn := Turn{Session: Session{Key: conv, Agent: "helper", SessionUUID: testUUID(c), Created: created, LastUsed: time.Now()}, Reply: "the answer"}
		if err := s.PutReply(ctx, key, []byte(`{"reply":{"kind":"agent","text":"the answer to the question"}}`), &turn, time.Now()); err != nil {
			b.Fatal(err)
		}
		if err := s.Finish(ctx, key, "1716212345.000100", nil, time.Now()); err != nil {
			b.Fatal(err)
		}
		if _, err := s.PendingOf(ctx, conv); err != nil {
			b.Fatal("pending after running", err)
		}
		if err := s.Release(ctx, conv, "bench"); err != nil {
			b.Fatal(err)
		}
		if _, err := s.PendingOf(ctx, conv); err != nil {
			b.Fatal("pending after release", err)
		}
	}
	cpu.report(b)
	b.ReportMetric(float64(pages()-pages0)/float64(n), "pages/msg")
	if wchar1, disk1, _ := processIO(); ioOK {
		b.ReportMetric(float64(wchar1-wchar0)/float64(n), "wchar-B/msg")
		b.ReportMetric(float64(disk1-disk0)/float64(n), "disk-B/msg")
	}
}
