package bridge

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// Turn is an answered message to record: the conversation's session with
// LastUsed moved on, and the reply, which becomes its latest.
type Turn struct {
	Key     string
	Session Session
	Reply   string
}

// flushInterval is the least time between two background batches. A batch
// costs two transactions and their fsyncs whatever its size, which under load
// was 30% of the bridge's CPU when batches followed each other back to back.
// Each batch also reads and rewrites every B+tree leaf its random
// de-duplication hashes land in, so fewer, larger batches share leaves: at
// 1,000 messages a second, a second instead of 100 ms cut the bridge's CPU
// per message by about 6%. It is also the most that a crash can lose: "last
// used", latest replies and de-duplication IDs of that moment, never a
// session mapping. A quiet bridge writes its first event at once.
const flushInterval = time.Second

// writer persists what does not have to be on disk before the user sees the
// answer — delivered event IDs and answered turns — in background batches,
// at most one per flushInterval, so under load many messages share one
// transaction and one fsync. Session mappings themselves are written at once,
// when a session is created. After close, writes are synchronous.
type writer struct {
	store Store
	ttl   time.Duration
	log   *zap.Logger

	mu       sync.Mutex
	events   []string
	turns    map[string]Turn // latest per conversation, not yet taken
	inflight map[string]Turn // taken by the batch being written
	stopped  bool

	start sync.Once
	wake  chan struct{}
	stop  chan struct{}
	done  sync.WaitGroup
}

func newWriter(store Store, ttl time.Duration, log *zap.Logger) *writer {
	return &writer{store: store, ttl: ttl, log: log, turns: make(map[string]Turn),
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (w *writer) addEvent(id string) {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		if err := w.store.MarkEvents([]string{id}, w.ttl, time.Now()); err != nil {
			w.log.Warn("event not recorded", zap.String("event_id", id), zap.Error(err))
		}
		return
	}
	w.events = append(w.events, id)
	w.mu.Unlock()
	w.kick()
}

func (w *writer) addTurn(t Turn) {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		if err := w.store.SaveTurns([]Turn{t}); err != nil {
			w.log.Warn("turn not recorded", zap.String("conversation", t.Key), zap.Error(err))
		}
		return
	}
	w.turns[t.Key] = t
	w.mu.Unlock()
	w.kick()
}

// pendingReply returns a conversation's latest reply while it is not yet on disk.
func (w *writer) pendingReply(key string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.turns[key]; ok {
		return t.Reply, true
	}
	if t, ok := w.inflight[key]; ok {
		return t.Reply, true
	}
	return "", false
}

// dropTurn forgets a conversation's pending turn (on reset). A batch already
// being written cannot bring the session back: the store applies a turn only
// while the conversation still maps to its session.
func (w *writer) dropTurn(key string) {
	w.mu.Lock()
	delete(w.turns, key)
	delete(w.inflight, key)
	w.mu.Unlock()
}

func (w *writer) kick() {
	w.start.Do(func() { w.done.Go(w.run) })
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *writer) run() {
	var last time.Time
	for {
		select {
		case <-w.wake:
		case <-w.stop:
			w.flush()
			return
		}
		if wait := flushInterval - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-w.stop:
				t.Stop()
				w.flush()
				return
			}
		}
		last = time.Now()
		w.flush()
	}
}

func (w *writer) flush() {
	w.mu.Lock()
	events := w.events
	w.events = nil
	w.inflight, w.turns = w.turns, make(map[string]Turn)
	turns := make([]Turn, 0, len(w.inflight))
	for _, t := range w.inflight {
		turns = append(turns, t)
	}
	w.mu.Unlock()
	if len(events) > 0 {
		if err := w.store.MarkEvents(events, w.ttl, time.Now()); err != nil {
			w.log.Warn("events not recorded", zap.Int("events", len(events)), zap.Error(err))
		}
	}
	if len(turns) > 0 {
		if err := w.store.SaveTurns(turns); err != nil {
			w.log.Warn("turns not recorded", zap.Int("turns", len(turns)), zap.Error(err))
		}
	}
	w.mu.Lock()
	w.inflight = nil
	w.mu.Unlock()
}

// close writes what is pending and stops the background writer.
func (w *writer) close() {
	w.mu.Lock()
	already := w.stopped
	w.stopped = true
	w.mu.Unlock()
	if already {
		return
	}
	close(w.stop)
	w.done.Wait()
	w.flush()
}
