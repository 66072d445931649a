package groupcommit_test

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

// TestDoLaterRides: a request of DoLater starts no commit while a caller of
// Do comes within its lag: it rides with that caller's commit, ahead of it
// in the batch (queue order); alone, it is committed once its lag has passed.
func TestDoLaterRides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			batches [][]int
		)
		g := groupcommit.New(func(batch []*req) {
			mu.Lock()
			defer mu.Unlock()
			ids := make([]int, len(batch))
			for i, r := range batch {
				ids[i] = r.id
				r.commit = len(batches) + 1
			}
			batches = append(batches, ids)
		}, nil)
		const lag = 10 * time.Millisecond
		var wg sync.WaitGroup
		late := &req{id: 1}
		wg.Go(func() { g.DoLater(late, lag) })
		synctest.Wait()
		time.Sleep(lag / 2)
		g.Do(&req{id: 2})
		wg.Wait()
		if late.commit != 1 || len(batches) != 1 || !slices.Equal(batches[0], []int{1, 2}) {
			t.Fatalf("batches = %v (late request in commit %d), want [[1 2]]", batches, late.commit)
		}

		alone := &req{id: 3}
		start := time.Now()
		g.DoLater(alone, lag)
		if waited := time.Since(start); waited != lag || alone.commit != 2 {
			t.Fatalf("a lone DoLater returned after %v in commit %d, want %v, 2", waited, alone.commit, lag)
		}
	})
}

// TestDoLaterWaitsForCommitUnderWay: a request of DoLater queued behind a
// commit under way is not handed the lead when that commit ends; a caller
// of Do queued after it is, and carries both, in queue order.
func TestDoLaterWaitsForCommitUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			batches [][]int
		)
		release := make(chan struct{})
		g := groupcommit.New(func(batch []*req) {
			mu.Lock()
			ids := make([]int, len(batch))
			for i, r := range batch {
				ids[i] = r.id
			}
			batches = append(batches, ids)
			first := len(batches) == 1
			mu.Unlock()
			if first {
				<-release
			}
		}, nil)
		var wg sync.WaitGroup
		wg.Go(func() { g.Do(&req{id: 1}) })
		synctest.Wait() // the first commit is under way
		wg.Go(func() { g.DoLater(&req{id: 2}, time.Second) })
		synctest.Wait()
		close(release)
		synctest.Wait() // the first commit has ended; the late request still waits
		mu.Lock()
		n := len(batches)
		mu.Unlock()
		if n != 1 {
			t.Fatalf("after the first commit, batches = %v, want the late request still queued", batches)
		}
		g.Do(&req{id: 3})
		wg.Wait()
		if want := [][]int{{1}, {2, 3}}; !slices.EqualFunc(batches, want, slices.Equal) {
			t.Fatalf("batches = %v, want %v", batches, want)
		}
	})
}
