package bridge

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// memoryWindow is how long a delivered event ID is answered from memory. Its
// job is only to cover the moment before the ID reaches the store and the
// bursts where one event arrives twice at once (Slack's app_mention and
// message pair); later repeats are found in the store.
const memoryWindow = 30 * time.Second

// dedupe decides first deliveries in memory and hands new IDs to the writer,
// so a platform event costs no fsync on its way to the agent. A restart reads
// the store, so it does not answer twice either.
type dedupe struct {
	store  Store
	writer *writer
	ttl    time.Duration
	log    *zap.Logger

	mu    sync.Mutex
	seen  map[string]time.Time // ID -> when it leaves memory
	order []dedupeEntry        // the same, oldest first, for expiry
	head  int                  // order[:head] has expired
}

type dedupeEntry struct {
	id  string
	exp time.Time
}

func newDedupe(store Store, w *writer, ttl time.Duration, log *zap.Logger) *dedupe {
	return &dedupe{store: store, writer: w, ttl: ttl, log: log, seen: make(map[string]time.Time)}
}

// first reports whether id is delivered for the first time at now.
func (d *dedupe) first(id string, now time.Time) bool {
	d.mu.Lock()
	if exp, ok := d.seen[id]; ok && now.Before(exp) {
		d.mu.Unlock()
		return false
	}
	// Claim the ID before asking the store, so a concurrent duplicate sees it.
	d.forgetExpiredLocked(now)
	exp := now.Add(min(memoryWindow, d.ttl))
	d.seen[id] = exp
	d.order = append(d.order, dedupeEntry{id, exp})
	d.mu.Unlock()

	if seen, err := d.store.EventSeen(id, now); err != nil {
		d.log.Warn("de-duplication store failed; handling event", zap.String("event_id", id), zap.Error(err))
	} else if seen {
		return false
	}
	d.writer.addEvent(id)
	return true
}

// forgetExpiredLocked drops the IDs whose memory window has passed. Entries
// are appended in expiry order, so they leave from the front; the slice is
// compacted only once most of it is spent, keeping each call O(expired).
func (d *dedupe) forgetExpiredLocked(now time.Time) {
	for d.head < len(d.order) && !now.Before(d.order[d.head].exp) {
		e := d.order[d.head]
		if d.seen[e.id] == e.exp {
			delete(d.seen, e.id)
		}
		d.order[d.head] = dedupeEntry{}
		d.head++
	}
	if d.head > 1024 && d.head > len(d.order)/2 {
		n := copy(d.order, d.order[d.head:])
		d.order = d.order[:n]
		d.head = 0
	}
}
