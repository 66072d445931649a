package slack

import "sync"

const (
	// maxQueued bounds the work waiting per conversation in the adapter; the
	// core has its own, user-visible queue behind it.
	maxQueued = 256
	// maxWorkers bounds how many conversations do their after-ack lookups at once.
	maxWorkers = 32
)

// serial runs functions after the platform ack, one at a time per key, in
// the order they arrived, so the core sees a conversation's events in order
// even though lookups (users, threads) happen before it is called.
type serial struct {
	mu     sync.Mutex
	queues map[string][]func()
	sem    chan struct{}
	wg     sync.WaitGroup
}

func newSerial() *serial {
	return &serial{queues: make(map[string][]func()), sem: make(chan struct{}, maxWorkers)}
}

// do queues fn behind the key's earlier work. It reports false when the
// key's queue is full and fn was dropped.
func (s *serial) do(key string, fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, running := s.queues[key]
	if len(q) >= maxQueued {
		return false
	}
	s.queues[key] = append(q, fn)
	if !running {
		s.wg.Go(func() { s.drain(key) })
	}
	return true
}

func (s *serial) drain(key string) {
	for {
		s.mu.Lock()
		q := s.queues[key]
		if len(q) == 0 {
			delete(s.queues, key)
			s.mu.Unlock()
			return
		}
		fn := q[0]
		q[0] = nil
		s.queues[key] = q[1:]
		s.mu.Unlock()

		s.sem <- struct{}{}
		fn()
		<-s.sem
	}
}

// wait blocks until all queued work has run.
func (s *serial) wait() { s.wg.Wait() }
