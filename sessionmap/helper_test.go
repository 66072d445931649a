package sessionmap

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// The test binary doubles as a helper process: with helperEnv set it runs
// one of the modes below instead of the tests, so lock and crash behaviour
// can be checked across real processes.
const (
	helperEnv     = "SESSIONMAP_TEST_HELPER"
	helperPathEnv = "SESSIONMAP_TEST_PATH"

	modeHoldLock = "hold-lock"    // open, print "locked", hold until stdin closes
	modeWriter   = "crash-writer" // put sessions forever, printing each key once stored
	modeReceiver = "receiver"     // Receive each line of stdin as a key, printing "ok KEY" (new), "held KEY" or "error KEY: ERR"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Getenv(helperPathEnv)))
	}
	goleak.VerifyTestMain(m)
}

func runHelper(mode, path string) int {
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	switch mode {
	case modeHoldLock:
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case modeWriter:
		for i := 0; ; i++ {
			key := writerKey(i)
			if err := s.PutSession(context.Background(), Session{Key: key, Agent: "helper", SessionUUID: testUUID(i), Created: time.Now()}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			fmt.Println(key)
		}
	}
	if mode == modeReceiver {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			key := in.Text()
			if key == "ping" {
				if err := s.Ping(context.Background()); err != nil {
					fmt.Printf("error ping: %v\n", err)
				} else {
					fmt.Println("pong")
				}
				continue
			}
			switch fresh, err := s.Receive(context.Background(), store.InboxEntry{Key: key, Conversation: "c", Event: bytes.Repeat([]byte("e"), 2000), Received: time.Now()}); {
			case err != nil:
				fmt.Printf("error %s: %v\n", key, err)
			case fresh:
				fmt.Printf("ok %s\n", key)
			default:
				fmt.Printf("held %s\n", key)
			}
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 2
}

// startHelper runs the test binary in mode on path and returns it with its
// stdin and a line reader on its stdout.
func startHelper(t *testing.T, mode, path string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	// The race detector otherwise lingers a second at exit.
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperPathEnv+"="+path, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, stdin, bufio.NewScanner(stdout)
}

func writerKey(i int) string { return fmt.Sprintf("slack/T0123/C0456/1716212345.%06d", i) }

func testUUID(i int) string { return fmt.Sprintf("0190f5a2-7c1e-7abc-8def-%012x", i) }

func openTest(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flowbridge.db")
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

// reportErrs waits for wg's goroutines and reports every error they sent
// on errs.
func reportErrs(t *testing.T, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
