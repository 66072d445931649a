package bridge

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// memStore is the part of Store dedupe uses, in memory.
type memStore struct {
	Store
	mu     sync.Mutex
	marked map[string]bool
}

func (m *memStore) EventSeen(id string, _ time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.marked[id], nil
}

func (m *memStore) MarkEvents(ids []string, _ time.Duration, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.marked[id] = true
	}
	return nil
}

// TestDedupeForgetsExpiredMemory: memory holds only the last window of IDs,
// however many pass through.
func TestDedupeForgetsExpiredMemory(t *testing.T) {
	st := &memStore{marked: map[string]bool{}}
	w := newWriter(st, time.Hour, zap.NewNop())
	defer w.close()
	d := newDedupe(st, w, time.Hour, zap.NewNop())
	start := time.Unix(1700000000, 0)
	for i := range 10000 {
		now := start.Add(time.Duration(i) * 10 * time.Millisecond) // 100 IDs a second
		if !d.first(fmt.Sprint("id-", i), now) {
			t.Fatalf("id-%d reported as a repeat", i)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	window := int(memoryWindow / (10 * time.Millisecond))
	if len(d.seen) > window+1 || len(d.order)-d.head > window+1 || len(d.order) > 2*window+1024 {
		t.Errorf("memory holds %d IDs (%d queued, head %d), want about the last %d", len(d.seen), len(d.order), d.head, window)
	}
}

func BenchmarkDedupeFirst(b *testing.B) {
	st := &memStore{marked: map[string]bool{}}
	w := newWriter(st, time.Hour, zap.NewNop())
	defer w.close()
	d := newDedupe(st, w, time.Hour, zap.NewNop())
	now := time.Unix(1700000000, 0)
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = fmt.Sprint("slack/ev/", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now = now.Add(time.Millisecond) // 1,000 IDs a second: a full 30 s window
		d.first(ids[i%len(ids)]+fmt.Sprint(i/len(ids)), now)
		i++
	}
}
