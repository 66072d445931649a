// Package groupcommit lets concurrent writers share one commit.
package groupcommit

import (
	"slices"
	"sync"
	"time"
)

// Group runs commits one at a time. A caller that finds no commit under way
// leads one at once, carrying every request queued and its own; callers
// arriving while it runs queue, and when it ends one of them leads the next
// commit with the rest. A lone caller never waits for company, and under
// load each commit carries everything that arrived while the one before
// ran. Requests are committed in the order they were queued. The zero Group
// is not usable; see New.
type Group[T any] struct {
	commit func(batch []T)
	fit    func(queue []T) int

	mu      sync.Mutex
	queue   []T
	waits   []waiter // waits[i] is queue[i]'s
	leading bool
}

// waiter is a queued caller: lead receives true when it is to lead the next
// commit, false once a commit has carried its request. A late one (DoLater)
// is not chosen to lead while a caller of Do is queued.
type waiter struct {
	lead chan bool
	late bool
}

// New returns a Group whose commits run commit, which must set each
// request's result inside the request (T is usually a pointer) and must not
// panic. fit, when not nil, returns how many of the requests queued behind
// the first (which leads, or stands for its leader) join it in the next
// commit; the rest wait for the one after. nil takes them all.
func New[T any](commit func(batch []T), fit func(queue []T) int) *Group[T] {
	return &Group[T]{commit: commit, fit: fit}
}

// Do returns once a commit carrying r has run.
func (g *Group[T]) Do(r T) {
	w := waiter{lead: make(chan bool, 1)}
	g.mu.Lock()
	g.queue, g.waits = append(g.queue, r), append(g.waits, w)
	if g.leading {
		g.mu.Unlock()
		if lead := <-w.lead; !lead {
			return
		}
		g.mu.Lock()
	}
	g.leading = true
	g.lead(w.lead)
}

// DoLater returns, like Do, once a commit carrying r has run, but it starts
// none for r: r rides with the next commit a caller of Do starts (or the one
// under way hands on to), and only when none has carried it within lag does
// it lead one. It is for a change whose caller must know it is committed but
// need not have it soon, so that it costs no commit of its own under load.
func (g *Group[T]) DoLater(r T, lag time.Duration) {
	w := waiter{lead: make(chan bool, 1), late: true}
	g.mu.Lock()
	g.queue, g.waits = append(g.queue, r), append(g.waits, w)
	g.mu.Unlock()
	t := time.NewTimer(lag)
	defer t.Stop()
	select {
	case lead := <-w.lead:
		if !lead {
			return
		}
		g.mu.Lock()
	case <-t.C:
		g.mu.Lock()
		i := slices.IndexFunc(g.waits, func(q waiter) bool { return q.lead == w.lead })
		switch {
		case i < 0: // in the commit under way
			g.mu.Unlock()
			<-w.lead
			return
		case g.leading: // to lead when that commit ends, as Do's callers do
			g.waits[i].late = false
			g.mu.Unlock()
			if lead := <-w.lead; !lead {
				return
			}
			g.mu.Lock()
		}
	}
	g.leading = true
	g.lead(w.lead)
}

// lead runs commits of the queue's head, g.mu held on entry and released on
// return, until one has carried own's request; then it hands the lead on.
func (g *Group[T]) lead(own chan bool) {
	for {
		n := len(g.queue)
		if g.fit != nil {
			n = 1 + max(0, min(n-1, g.fit(g.queue[1:])))
		}
		batch := slices.Clone(g.queue[:n])
		waits := slices.Clone(g.waits[:n])
		g.queue, g.waits = slices.Delete(g.queue, 0, n), slices.Delete(g.waits, 0, n)
		g.mu.Unlock()

		g.commit(batch)
		done := false
		for _, w := range waits {
			if w.lead == own {
				done = true
				continue
			}
			w.lead <- false
		}

		g.mu.Lock()
		if done {
			break
		}
	}
	defer g.mu.Unlock()
	// The next commit is led by the first caller of Do queued; requests of
	// DoLater alone wait for one, or for their lag.
	i := slices.IndexFunc(g.waits, func(w waiter) bool { return !w.late })
	if i < 0 {
		g.leading = false
		return
	}
	g.waits[i].lead <- true
}
