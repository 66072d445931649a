package bridge

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
)

// countingStore records how many batches reach the store and what they hold.
type countingStore struct {
	Store
	mu      sync.Mutex
	batches int
	marked  map[string]bool
	turns   map[string]string
}

func (c *countingStore) MarkEvents(ids []string, _ time.Duration, _ time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches++
	for _, id := range ids {
		c.marked[id] = true
	}
	return nil
}

func (c *countingStore) SaveTurns(turns []Turn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range turns {
		c.turns[t.Key] = t.Reply
	}
	return nil
}

// TestWriterGathersBatches: a steady stream of events reaches the store in a
// few batches per interval rather than one per event, and nothing is lost.
func TestWriterGathersBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &countingStore{marked: map[string]bool{}, turns: map[string]string{}}
		w := newWriter(st, time.Hour, zap.NewNop())
		// One event a millisecond for three intervals.
		const intervals = 3
		n := int(intervals * flushInterval / time.Millisecond)
		for i := range n {
			w.addEvent(fmt.Sprint("ev-", i))
			w.addTurn(Turn{Key: fmt.Sprint("c/", i%10), Reply: fmt.Sprint("reply ", i)})
			time.Sleep(time.Millisecond)
		}
		synctest.Wait()
		st.mu.Lock()
		batches := st.batches
		st.mu.Unlock()
		// About one batch per interval (the first event goes at once), never
		// one per event.
		if maxBatches := intervals + 2; batches > maxBatches {
			t.Errorf("%d events reached the store in %d batches, want at most %d", n, batches, maxBatches)
		}
		w.close()
		if len(st.marked) != n {
			t.Errorf("%d of %d events recorded", len(st.marked), n)
		}
		for i := range 10 {
			key := fmt.Sprint("c/", i)
			if want := fmt.Sprint("reply ", n-10+i); st.turns[key] != want {
				t.Errorf("%s: latest reply %q, want %q", key, st.turns[key], want)
			}
		}
	})
}

// TestWriterWritesALoneEventAtOnce: after a quiet spell, an event is written
// without waiting out the interval.
func TestWriterWritesALoneEventAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &countingStore{marked: map[string]bool{}, turns: map[string]string{}}
		w := newWriter(st, time.Hour, zap.NewNop())
		defer w.close()
		w.addEvent("first")
		time.Sleep(flushInterval)
		start := time.Now()
		w.addEvent("second")
		synctest.Wait()
		st.mu.Lock()
		defer st.mu.Unlock()
		if !st.marked["second"] || time.Since(start) != 0 {
			t.Errorf("after a quiet interval, an event waited %s to be written (recorded: %v)", time.Since(start), st.marked["second"])
		}
	})
}
