package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

var updateReadme = flag.Bool("update-readme", false, "rewrite the README's terminal session from a real run")

// TestReadmeTerminalSession: the terminal session at the top of the README
// is what flowbridge dev shows in a terminal when the lines after its
// prompts are typed, one after the other's answer, then Ctrl-D. Session
// IDs, times and durations differ from run to run and are compared as
// such; -update-readme writes the run's transcript into the README.
func TestReadmeTerminalSession(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## A terminal session\n\n```\n"
	start := strings.Index(string(readme), heading)
	if start < 0 {
		t.Fatal("README has no terminal session")
	}
	start += len(heading)
	end := start + strings.Index(string(readme[start:]), "```\n")
	want := string(readme[start:end])
	command, _, _ := strings.Cut(want, "\n")
	if command != "$ go run ./cmd/flowbridge dev" {
		t.Fatalf("the session starts with %q, want the README's dev command", command)
	}
	var typed []string
	for _, line := range strings.Split(want, "\n") {
		if in, ok := strings.CutPrefix(line, "> "); ok {
			typed = append(typed, in)
		}
	}
	if len(typed) < 5 {
		t.Fatalf("the README's session types %d lines; it shows too little", len(typed))
	}

	term := openTerminal(t)
	done := make(chan error, 1)
	go func() { done <- run(t.Context(), []string{"dev"}, mapEnv(nil), term.tty, term.tty, term.tty) }()
	at := term.waitFor(t, 0, "\n> ")
	for _, line := range typed {
		if _, err := term.screen.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
		at = term.waitFor(t, at, line+"\n")
		at = term.waitFor(t, at, "\n> ")
	}
	if _, err := term.screen.Write([]byte{4}); err != nil { // Ctrl-D
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("dev = %v\n%s", err, term.text())
	}
	got := command + "\n" + ansiEscape.ReplaceAllString(term.text(), "")
	got = strings.TrimSuffix(strings.TrimRight(got, " "), ">") // the prompt Ctrl-D answered
	got = trailing.ReplaceAllString(strings.TrimRight(got, "\n"), "") + "\n"
	if *updateReadme {
		out := string(readme[:start]) + got + string(readme[end:])
		if err := os.WriteFile("../../README.md", []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if g, w := varying(got), varying(want); g != w {
		t.Errorf("the README's terminal session is not what dev shows (go test -run TestReadmeTerminalSession -update-readme rewrites it)\ngot:\n%s\nwant:\n%s", got, want)
	}
}

var (
	ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	uuidText   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeText   = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d UTC`)
	tookText   = regexp.MustCompile(`(?m)(run by \S+ · )[0-9.]+ m?s$`)
	trailing   = regexp.MustCompile(`(?m)[ \t]+$`)
)

// varying replaces what differs from run to run with its kind, and drops
// the blanks at the ends of lines, which an editor would.
func varying(s string) string {
	s = uuidText.ReplaceAllString(s, "UUID")
	s = timeText.ReplaceAllString(s, "TIME")
	s = trailing.ReplaceAllString(s, "")
	return tookText.ReplaceAllString(s, "${1}DURATION")
}

// TestRunInTheTerminalConfigDirReadOnly: where the log file beside the config
// cannot be written (a config mounted read-only into a container, run with
// docker run -it), run still chats in the terminal, saying the log shares it.
func TestRunInTheTerminalConfigDirReadOnly(t *testing.T) {
	t.Parallel()
	term := openTerminal(t)
	path := exampleWith(t, map[string]string{"admin.listen": `"127.0.0.1:0"`})
	// A directory in the log file's place: no one can open it for writing,
	// not even root.
	if err := os.Mkdir(filepath.Join(filepath.Dir(path), "flowbridge.log"), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "-config", path}, mapEnv(map[string]string{"FLOWBRIDGE_API_TOKEN": "t"}), term.tty, term.tty, term.tty)
	}()
	term.waitFor(t, 0, "cannot write the log beside the config")
	term.waitFor(t, 0, "> ")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v\n%s", err, term.text())
	}
}
