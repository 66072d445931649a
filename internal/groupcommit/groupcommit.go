// Package groupcommit lets concurrent writers share one commit, with no timer.
package groupcommit

import (
	"slices"
	"sync"
)

// Group runs commits one at a time. A caller that finds no commit under way
// leads one at once, carrying its own request and every request queued;
// callers arriving while it runs queue, and when it ends the first of them
// leads the next commit with the rest. A lone caller never waits for
// company, and under load each commit carries everything that arrived while
// the one before ran. The zero Group is not usable; see New.
type Group[T any] struct {
	commit func(batch []T)
	fit    func(queue []T) int

	mu      sync.Mutex
	queue   []T
	waits   []chan bool // waits[i] is queue[i]'s: true to lead, false when answered
	leading bool
}

// New returns a Group whose commits run commit, which must set each
// request's result inside the request (T is usually a pointer) and must not
// panic. fit, when not nil, returns how many of the queued requests join
// a leader's batch (the rest wait for the next); nil takes them all.
func New[T any](commit func(batch []T), fit func(queue []T) int) *Group[T] {
	return &Group[T]{commit: commit, fit: fit}
}

// Do returns once a commit carrying r has run.
func (g *Group[T]) Do(r T) {
	g.mu.Lock()
	if g.leading {
		wait := make(chan bool, 1)
		g.queue = append(g.queue, r)
		g.waits = append(g.waits, wait)
		g.mu.Unlock()
		if lead := <-wait; !lead {
			return
		}
		g.mu.Lock()
	}
	g.leading = true
	n := len(g.queue)
	if g.fit != nil {
		n = min(n, g.fit(g.queue))
	}
	batch := append(append(make([]T, 0, n+1), r), g.queue[:n]...)
	waits := append([]chan bool(nil), g.waits[:n]...)
	g.queue, g.waits = slices.Delete(g.queue, 0, n), slices.Delete(g.waits, 0, n)
	g.mu.Unlock()

	g.commit(batch)
	for _, w := range waits {
		w <- false
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.leading = false
		return
	}
	next := g.waits[0]
	g.queue, g.waits = slices.Delete(g.queue, 0, 1), slices.Delete(g.waits, 0, 1)
	next <- true
}
