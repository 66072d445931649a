package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// terminal is a pseudo-terminal: the program under test reads and writes
// tty, the test reads what it shows and types through screen.
type terminal struct {
	tty    *os.File
	screen *os.File

	mu    sync.Mutex
	shown strings.Builder
	more  chan struct{} // signalled when output arrives
	wg    sync.WaitGroup
}

// openTerminal opens a pseudo-terminal, closed when the test ends.
func openTerminal(t *testing.T) *terminal {
	t.Helper()
	screen, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	var n int
	// Through SyscallConn: Fd would make the file blocking, and Close could
	// then not end a Read.
	rc, err := screen.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) {
			if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
				n, err = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
			}
		})
		err = cmpErr(err, cerr)
	}
	if err != nil {
		screen.Close()
		t.Fatalf("pseudo-terminal: %v", err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		screen.Close()
		t.Fatalf("pseudo-terminal: %v", err)
	}
	term := &terminal{tty: tty, screen: screen, more: make(chan struct{}, 1)}
	term.wg.Go(func() {
		buf := make([]byte, 4096)
		for {
			n, err := screen.Read(buf)
			term.mu.Lock()
			term.shown.Write(buf[:n])
			term.mu.Unlock()
			select {
			case term.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	})
	t.Cleanup(func() {
		tty.Close()
		screen.Close()
		term.wg.Wait()
	})
	return term
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// text is what the terminal has shown, with "\r\n" as "\n".
func (term *terminal) text() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return strings.ReplaceAll(term.shown.String(), "\r\n", "\n")
}

// waitFor waits until the terminal has shown want since it had shown from
// characters, and returns the length of what it has shown then.
func (term *terminal) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		text := term.text()
		if i := strings.Index(text[min(from, len(text)):], want); i >= 0 {
			return from + i + len(want)
		}
		select {
		case <-term.more:
		case <-deadline.C:
			t.Fatalf("the terminal did not show %q; it shows:\n%s", want, text)
		}
	}
}

// TestRunInTheTerminalLogsToAFile: run with the console on, in a terminal
// that is standard input, output and error at once, writes its log to a
// file beside the config, says where once, and shows no log line between
// the prompts.
func TestRunInTheTerminalLogsToAFile(t *testing.T) {
	t.Parallel()
	term := openTerminal(t)
	path := exampleWith(t, map[string]string{"admin.listen": `"127.0.0.1:0"`})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "-config", path}, mapEnv(map[string]string{"FLOWBRIDGE_API_TOKEN": "t"}), term.tty, term.tty, term.tty)
	}()
	term.waitFor(t, 0, "> ")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v\n%s", err, term.text())
	}
	shown := term.text()
	logPath := filepath.Join(filepath.Dir(path), "flowbridge.log")
	if n := strings.Count(shown, "logging to "+logPath); n != 1 {
		t.Errorf("the terminal names the log file %d times, want once:\n%s", n, shown)
	}
	if strings.Contains(shown, `"level"`) {
		t.Errorf("a log line reached the terminal:\n%s", shown)
	}
	logged, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logged), `"level":"warn"`) || !strings.Contains(string(logged), "bridge.admins: empty") {
		t.Errorf("the log file lacks run's warning:\n%s", logged)
	}
}
