package groupcommit_test

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/flowbridge/flowbridge/internal/groupcommit"
)

type req struct {
	id     int
	commit int // the commit that carried it, from 1
}

// TestCallersShareCommits: while a commit runs, callers queue and the next
// commit carries them together; every request is carried exactly once, and
// fit bounds a batch.
func TestCallersShareCommits(t *testing.T) {
	synctest.Test(t, callersShareCommits)
}

func callersShareCommits(t *testing.T) {
	const callers = 20
	var (
		mu      sync.Mutex
		commits int
		sizes   []int
	)
	release := make(chan struct{})
	first := make(chan struct{})
	g := groupcommit.New(func(batch []*req) {
		mu.Lock()
		commits++
		n := commits
		sizes = append(sizes, len(batch))
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release // hold the first commit until everyone has queued
		}
		for _, r := range batch {
			if r.commit != 0 {
				t.Errorf("request %d carried twice", r.id)
			}
			r.commit = n
		}
	}, func(queue []*req) int { return min(len(queue), 7) })

	reqs := make([]*req, callers)
	var wg sync.WaitGroup
	reqs[0] = &req{id: 0}
	wg.Go(func() { g.Do(reqs[0]) })
	<-first
	for i := 1; i < callers; i++ {
		reqs[i] = &req{id: i}
		wg.Go(func() { g.Do(reqs[i]) })
	}
	synctest.Wait() // until the others have queued behind the first commit
	close(release)
	wg.Wait()
	for _, r := range reqs {
		if r.commit == 0 {
			t.Errorf("request %d never committed", r.id)
		}
	}
	// 1 alone, then 19 queued: a leader plus at most 7 others per commit.
	want := []int{1, 8, 8, 3}
	if len(sizes) != len(want) {
		t.Fatalf("batch sizes = %v, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("batch sizes = %v, want %v", sizes, want)
		}
	}
}
