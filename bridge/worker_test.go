package bridge

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestWorkersIdleThenLeave: a worker that finished its work takes the next
// job handed over, leaves after workerIdle without work, and leaves at once
// when the bridge shuts down.
func TestWorkersIdleThenLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &Bridge{work: workers{handoff: make(chan func()), quit: make(chan struct{})}}
		ran := make(chan int, 2)
		b.goLocked(func() { ran <- 1 })
		<-ran
		synctest.Wait() // the worker is idle, waiting for work
		start := time.Now()
		b.goLocked(func() { ran <- 2 })
		<-ran
		b.work.wg.Wait() // returns once the worker has been idle for workerIdle
		if idle := time.Since(start); idle != workerIdle {
			t.Errorf("the idle worker left after %s, want %s", idle, workerIdle)
		}

		b.goLocked(func() {})
		synctest.Wait()
		start = time.Now()
		close(b.work.quit)
		b.work.wg.Wait()
		if waited := time.Since(start); waited != 0 {
			t.Errorf("an idle worker outlived shutdown by %s", waited)
		}
	})
}
