package sessionmap

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
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
			_, ok, err := s.Session(key)
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
			if _, ok, err := s.Session(fmt.Sprintf("slack/T%08d/C000000001/1.%d", i%20, i)); err != nil || ok {
				b.Fatalf("Session(missing) = %v, %v", ok, err)
			}
		}
	})

	b.Run("ListChannel", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			// One channel's 450 threads.
			recs, err := s.ListSessions("slack/T00000000/C000000000/")
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
		if err := s.PutSession(rec); err != nil {
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

func BenchmarkMarkEvent(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("NoSync=%v", noSync), func(b *testing.B) {
			s, _ := openTest(b, Options{NoSync: noSync})
			now := time.Now()
			var lat []time.Duration
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				id := fmt.Sprintf("Ev%010d", i)
				start := time.Now()
				first, err := s.MarkEvent(id, 10*time.Minute, now)
				lat = append(lat, time.Since(start))
				if err != nil || !first {
					b.Fatalf("MarkEvent(%q) = %v, %v", id, first, err)
				}
			}
			reportPercentiles(b, lat)
		})
	}
}

func BenchmarkAppendAudit(b *testing.B) {
	s, _ := openTest(b, Options{NoSync: true})
	e := AuditEntry{Platform: "slack", User: "U0123", UserName: "ann", Channel: "C0456", Conversation: "slack/T0123/C0456", Flow: "healthcheck", Params: map[string]string{"host": "web1", "service": "nginx"}, Outcome: "ok", Duration: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.AppendAudit(e); err != nil {
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
			if err := s.PutSession(Session{Key: fixtureKey(i), Agent: "helper", SessionUUID: testUUID(i), LastUsed: time.Now()}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// eventID is the i-th of a realistic event ID population in arrival order:
// four in five are Slack event IDs, in no particular order, and the rest
// Discord snowflakes, which grow with time.
func eventID(i int) string {
	if i%5 == 4 {
		return "discord/" + strconv.FormatUint(1187000000000000000+uint64(i)*4096, 10)
	}
	// splitmix64's finaliser: a bijection, so the IDs are distinct.
	x := uint64(i) + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return "slack/Ev" + strings.ToUpper(strconv.FormatUint(x, 36))
}

// eventLoad is the service's de-duplication traffic: rate events a second,
// marked in batches (as the bridge's background writer does), with
// PurgeEvents every minute.
type eventLoad struct {
	rate, batch int
	ttl         time.Duration
}

var soakLoad = eventLoad{rate: 1000, batch: 100, ttl: 10 * time.Minute}

// run marks dur worth of events from start on and returns the end time and
// how many of the events are still live then.
func (l eventLoad) run(b testing.TB, s *Store, start time.Time, dur time.Duration) (end time.Time, live int) {
	b.Helper()
	step := time.Second * time.Duration(l.batch) / time.Duration(l.rate)
	ids := make([]string, l.batch)
	next, i := start.Add(time.Minute), 0
	end = start.Add(dur)
	for now := start; now.Before(end); now = now.Add(step) {
		for j := range ids {
			ids[j] = eventID(i)
			i++
		}
		if err := s.MarkEvents(ids, l.ttl, now); err != nil {
			b.Fatal(err)
		}
		if now.Add(l.ttl).After(end) {
			live += l.batch
		}
		if !now.Before(next) {
			if _, err := s.PurgeEvents(now); err != nil {
				b.Fatal(err)
			}
			next = next.Add(time.Minute)
		}
	}
	if _, err := s.PurgeEvents(end); err != nil {
		b.Fatal(err)
	}
	return end, live
}

// BenchmarkEventFileSize measures the file a de-duplication load leaves:
// 1,000 events a second in batches of 100 with a 10-minute ttl, purged every
// minute (NoSync). "10m" fills the window once (600,000 live events); "20m"
// runs as long again, so as many events have expired and been purged as
// are live. It reports the file size and the data in it (bbolt grows the
// file ahead of the data) per live event.
func BenchmarkEventFileSize(b *testing.B) {
	for _, dur := range []time.Duration{10 * time.Minute, 20 * time.Minute} {
		b.Run(dur.String(), func(b *testing.B) {
			var fileSize, dataSize int64
			var live int
			for b.Loop() {
				path := filepath.Join(b.TempDir(), "flowbridge.db")
				s, err := Open(path, Options{NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				_, live = soakLoad.run(b, s, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), dur)
				dataSize = s.Stats().FileSize
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				info, err := os.Stat(path)
				if err != nil {
					b.Fatal(err)
				}
				fileSize = info.Size()
			}
			b.ReportMetric(float64(fileSize)/float64(live), "file-B/event")
			b.ReportMetric(float64(dataSize)/float64(live), "data-B/event")
			b.ReportMetric(float64(fileSize)/(1<<20), "file-MB")
		})
	}
}

// BenchmarkEventSeen looks up event IDs in a store holding 10 minutes of
// the load above (600,000 live events in 8 generations, each of which a
// lookup visits): a miss, the common case, and a repeat of a recent event.
func BenchmarkEventSeen(b *testing.B) {
	s, _ := openTest(b, Options{NoSync: true})
	end, live := soakLoad.run(b, s, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), 10*time.Minute)
	gens := 0
	for exp := range generations(b, s) {
		if exp.After(end) {
			gens++
		}
	}
	b.Run("Miss", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			id := "slack/Ev-missing-" + strconv.Itoa(i)
			if seen, err := s.EventSeen(id, end); err != nil || seen {
				b.Fatalf("EventSeen(%q) = %v, %v, want false, nil", id, seen, err)
			}
		}
		b.ReportMetric(float64(gens), "generations")
	})
	b.Run("Hit", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(5, 6))
		b.ReportAllocs()
		for b.Loop() {
			id := eventID(live - 1 - rng.IntN(live/10)) // the last minute's
			if seen, err := s.EventSeen(id, end); err != nil || !seen {
				b.Fatalf("EventSeen(%q) = %v, %v, want true, nil", id, seen, err)
			}
		}
	})
}
