//go:build unix

package sessionmap

import (
	"errors"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestOpenWhileForking: a child process forked while Open's precheck holds
// its shared lock keeps the descriptor, and so the lock, until it execs;
// the precheck releases the lock itself, so bbolt's exclusive lock right
// after never waits for a child. (It did: under the suite's helper
// processes, TestOpenTurnsPanicIntoErrCorrupt's Open with a 1 ms timeout
// found the store locked.)
func TestOpenWhileForking(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flowbridge.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var forks sync.WaitGroup
	forks.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := exec.Command(bin).Run(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer forks.Wait()
	defer close(stop)
	for i := range 200 {
		s, err := Open(path, Options{NoSync: true, Timeout: time.Millisecond})
		if errors.Is(err, ErrLocked) {
			t.Fatalf("Open %d while a goroutine forks = %v, want the lock free", i, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
