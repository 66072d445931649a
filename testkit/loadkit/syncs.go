package loadkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// syncEvents are the system calls that make written data durable.
var syncEvents = []string{
	"syscalls:sys_enter_fsync",
	"syscalls:sys_enter_fdatasync",
	"syscalls:sys_enter_sync_file_range",
	"syscalls:sys_enter_syncfs",
}

// SyncCount counts a process's syncs (fsync, fdatasync, sync_file_range,
// syncfs) with `perf stat` attached to it: in-kernel counters on the
// syscall tracepoints, every thread of the process, nothing traced to user
// space. It needs perf and the right to read tracepoints (root here).
type SyncCount struct {
	cmd  *exec.Cmd
	out  string
	done chan error
	stop func() (int64, error)
}

// CountSyncs starts counting pid's syncs; its output goes to a file in dir.
func CountSyncs(pid int, dir string) (*SyncCount, error) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return nil, fmt.Errorf("counting syncs needs perf: %w", err)
	}
	s := &SyncCount{out: filepath.Join(dir, fmt.Sprintf("perf-%d.csv", pid)), done: make(chan error, 1)}
	s.cmd = exec.Command(perf, "stat", "-x", ",", "-e", strings.Join(syncEvents, ","), "-p", strconv.Itoa(pid), "-o", s.out)
	var stderr bytes.Buffer
	s.cmd.Stderr = &stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf stat: %w", err)
	}
	go func() {
		err := s.cmd.Wait()
		if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		s.done <- err
	}()
	s.stop = sync.OnceValues(s.end)
	return s, nil
}

// Stop ends the count and returns it; later calls return the same.
func (s *SyncCount) Stop() (int64, error) { return s.stop() }

func (s *SyncCount) end() (int64, error) {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case err := <-s.done:
		// perf stat exits with the status of what it waited for: a
		// SIGINT, which is how it is meant to end here.
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return 0, fmt.Errorf("perf stat: %w", err)
		}
	case <-t.C:
		_ = s.cmd.Process.Kill()
		<-s.done
		return 0, errors.New("perf stat did not stop within 10s")
	}
	data, err := os.ReadFile(s.out)
	if err != nil {
		return 0, fmt.Errorf("perf stat: %w", err)
	}
	return ParsePerfCSV(data)
}

// ParsePerfCSV sums the counts of `perf stat -x ,` output: one line per
// event, its count first and its name third. An event perf could not count
// is an error, not a zero.
func ParsePerfCSV(data []byte) (int64, error) {
	var sum int64
	events := 0
	for line := range strings.Lines(string(data)) {
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) < 3 || !strings.HasPrefix(f[2], "syscalls:") {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("perf stat: %s: %s", f[2], f[0])
		}
		sum += n
		events++
	}
	if events == 0 {
		return 0, errors.New("perf stat: no syscall counts in its output")
	}
	return sum, nil
}
