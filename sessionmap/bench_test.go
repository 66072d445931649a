package sessionmap

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// fixtureKey is the i-th of a realistic key population: Slack threads
// spread over 2,000 channels in 20 workspaces, in arrival (time) order, with
// every tenth a Discord channel.
func fixtureKey(i int) string {
	if i%10 == 9 {
		return fmt.Sprintf("discord/1187%014d/12%016d", i%50, i)
	}
	return fmt.Sprintf("slack/T%08d/C%09d/%d.%06d", i%20, i%2000, 1716212345+i/1000, i%1000000)
}

// buildFixture writes n mappings to a new store at path, in arrival order,
// through batched transactions (bulk loading, not the serving path).
func buildFixture(b testing.TB, path string, n int) {
	b.Helper()
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const batch = 10000
	created := time.Unix(1716212345, 0)
	for start := 0; start < n; start += batch {
		err := s.db.Update(func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucketSessions)
			bk.FillPercent = sessionFill
			for i := start; i < min(start+batch, n); i++ {
				v, err := appendSession(nil, Session{Agent: "helper", SessionUUID: testUUID(i), Created: created, LastUsed: created.Add(time.Duration(i) * time.Second)})
				if err != nil {
					return err
				}
				if err := bk.Put([]byte(fixtureKey(i)), v); err != nil {
					return err
				}
			}
			return addCounter(tx, metaSessions, int64(min(batch, n-start)))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStore1M measures a store holding 1,000,000 mappings (issue 6:
// lookup p99 ≤ 50 µs, open ≤ 1 s, file ≤ 300 MB). The fixture is built once
// per run.
func BenchmarkStore1M(b *testing.B) {
	const n = 1_000_000
	path := filepath.Join(b.TempDir(), "flowbridge.db")
	buildFixture(b, path, n)
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	fileMB := float64(info.Size()) / (1 << 20)

	b.Run("Open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := Open(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(fileMB, "file-MB")
	})

	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if got := s.Stats().Sessions; got != n {
		b.Fatalf("Stats().Sessions = %d, want %d", got, n)
	}

	b.Run("Lookup", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 2))
		keys := make([]string, 1<<16)
		for i := range keys {
			keys[i] = fixtureKey(rng.IntN(n))
		}
		var lat []time.Duration
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			key := keys[i%len(keys)]
			i++
			start := time.Now()
			_, ok, err := s.Session(b.Context(), key)
			lat = append(lat, time.Since(start))
			if err != nil || !ok {
				b.Fatalf("Session(%q) = %v, %v", key, ok, err)
			}
		}
		reportPercentiles(b, lat)
		b.ReportMetric(fileMB, "file-MB")
	})

	b.Run("LookupMissing", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if _, ok, err := s.Session(b.Context(), fmt.Sprintf("slack/T%08d/C000000001/1.%d", i%20, i)); err != nil || ok {
				b.Fatalf("Session(missing) = %v, %v", ok, err)
			}
		}
	})

	b.Run("ListChannel", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			// One channel's 450 threads.
			recs, err := s.ListSessions(b.Context(), "slack/T00000000/C000000000/")
			if err != nil || len(recs) == 0 {
				b.Fatalf("ListSessions = %d, %v", len(recs), err)
			}
		}
	})

	b.Run("PutSession", func(b *testing.B) {
		benchPut(b, s, n)
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*50/100].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// benchPut updates LastUsed of existing mappings, the write a busy
// conversation makes, and reports latency percentiles.
func benchPut(b *testing.B, s *Store, n int) {
	rng := rand.New(rand.NewPCG(3, 4))
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		i := rng.IntN(n)
		rec := Session{Key: fixtureKey(i), Agent: "helper", SessionUUID: testUUID(i), Created: time.Unix(1716212345, 0), LastUsed: time.Now()}
		start := time.Now()
		if err := s.PutSession(b.Context(), rec); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

func BenchmarkPutSession(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("NoSync=%v", noSync), func(b *testing.B) {
			const n = 10_000
			path := filepath.Join(b.TempDir(), "flowbridge.db")
			buildFixture(b, path, n)
			s, err := Open(path, Options{NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchPut(b, s, n)
		})
	}
}

func BenchmarkAppendAudit(b *testing.B) {
	s, _ := openTest(b, Options{NoSync: true})
	e := AuditEntry{Platform: "slack", User: "U0123", UserName: "ann", Channel: "C0456", Conversation: "slack/T0123/C0456", Flow: "healthcheck", Params: map[string]string{"host": "web1", "service": "nginx"}, Outcome: "ok", Duration: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.AppendAudit(b.Context(), e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutSessionParallel is many conversations writing at once, each
// write synced: group commit shares transactions and syncs between them.
func BenchmarkPutSessionParallel(b *testing.B) {
	const n = 10_000
	path := filepath.Join(b.TempDir(), "flowbridge.db")
	buildFixture(b, path, n)
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetParallelism(32) // 64 writers on 2 cores
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 5))
		for pb.Next() {
			i := rng.IntN(n)
			if err := s.PutSession(b.Context(), Session{Key: fixtureKey(i), Agent: "helper", SessionUUID: testUUID(i), LastUsed: time.Now()}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// inboxKey is the i-th of a realistic inbox key population: Slack messages
// over 2,000 channels in arrival order, with every fifth a Discord
// interaction, whose IDs grow with time.
func inboxKey(i int) string {
	if i%5 == 4 {
		return "discord/int/" + strconv.FormatUint(1187000000000000000+uint64(i)*4096, 10)
	}
	return fmt.Sprintf("slack/msg/C%09d/%d.%06d", i%2000, 1716212345+i/1000, i%1000000)
}

// benchEvent is an encoded event of a typical size.
var benchEvent = []byte(`{"platform":"slack","team":"T0123","channel":"C0456","user":"U0789","thread":"1716212345.000100","text":"/flow healthcheck host=web1 service=nginx"}`)

// BenchmarkReceive measures what recording a platform event costs: one
// Receive of a new key, each committed (and, with sync, fsynced) before it
// returns, by 1 and 64 goroutines at once. With many, group commit shares
// transactions and fsyncs between them, which ns/op shows.
func BenchmarkReceive(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		for _, workers := range []int{1, 64} {
			b.Run(fmt.Sprintf("sync=%v/goroutines=%d", !noSync, workers), func(b *testing.B) {
				s, _ := openTest(b, Options{NoSync: noSync})
				runInbox(b, workers, func(i int) error {
					ok, err := s.Receive(b.Context(), store.InboxEntry{Key: inboxKey(i), Conversation: "slack/T0123/C0456", Event: benchEvent, Received: time.Now()})
					if err == nil && !ok {
						err = fmt.Errorf("Receive(%q) = false, want new", inboxKey(i))
					}
					return err
				})
			})
		}
	}
}

// BenchmarkInboxLifecycle is the inbox's whole cost per event: Receive,
// MarkSent and Finish with a turn, three transactions, by 64 goroutines;
// nosync is that without the disk's syncs, the store's own CPU.
func BenchmarkInboxLifecycle(b *testing.B) {
	const conversations = 1000
	for _, c := range []struct {
		name   string
		noSync bool
	}{{"sync", false}, {"nosync", true}} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := openTest(b, Options{NoSync: c.noSync})
			created := time.Now()
			for i := range conversations {
				if err := s.PutSession(b.Context(), Session{Key: fixtureKey(i), Agent: "helper", SessionUUID: testUUID(i), Created: created, LastUsed: created}); err != nil {
					b.Fatal(err)
				}
			}
			runInbox(b, 64, func(i int) error {
				key, conv := inboxKey(i), fixtureKey(i%conversations)
				e := store.InboxEntry{Key: key, Conversation: conv, Event: benchEvent, Received: time.Now()}
				if _, err := s.Receive(b.Context(), e); err != nil {
					return err
				}
				if err := s.MarkSent(b.Context(), key, time.Now()); err != nil {
					return err
				}
				turn := Turn{Session: Session{Key: conv, Agent: "helper", SessionUUID: testUUID(i % conversations), Created: created, LastUsed: time.Now()}, Reply: "the answer"}
				return s.Finish(b.Context(), key, "msg-ref", &turn, time.Now())
			})
		})
	}
}

// runInbox calls op(i) for i = 0, 1, ... once per benchmark iteration,
// spread over workers goroutines. The loop hands out work; the last few ops
// still running when it ends are not timed, a bias of workers ops in b.N.
func runInbox(b *testing.B, workers int, op func(i int) error) {
	b.ReportAllocs()
	defer startCPU().report(b)
	if workers == 1 {
		i := 0
		for b.Loop() {
			if err := op(i); err != nil {
				b.Fatal(err)
			}
			i++
		}
		return
	}
	work := make(chan int, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range work {
				if err := op(i); err != nil {
					b.Error(err)
				}
			}
		})
	}
	i := 0
	for b.Loop() {
		work <- i
		i++
	}
	close(work)
	wg.Wait()
}

// cpuMeter reports, as cpu-µs/op, the process's CPU time per benchmark
// iteration from its start to report: on a machine with two cores, wall
// time per op hides what concurrent work costs, and CPU is what the
// speed targets cap.
type cpuMeter struct{ start time.Duration }

func startCPU() cpuMeter {
	c, _ := processCPU()
	return cpuMeter{start: c}
}

func (m cpuMeter) report(b *testing.B) {
	if c, ok := processCPU(); ok && b.N > 0 {
		b.ReportMetric(float64(c-m.start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	}
}
