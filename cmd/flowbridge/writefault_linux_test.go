package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// TestStoreWriteFailureRecovers runs flowbridge as a process under a steady
// stream of Slack messages and makes its disk refuse writes for 2 s:
// RLIMIT_FSIZE (set on the running process with prlimit) below the store
// file's size, so every page bbolt writes past it fails with EFBIG, as a
// full disk fails it with ENOSPC. (Running as root, a read-only mode would
// not stop the writes; Go ignores SIGXFSZ, so the write fails rather than
// the signal ending the process.) While the writes fail, messages are not
// recorded (nor acknowledged: Slack delivers them again) and /readyz, which
// the container health check asks (flowbridge health -ready), answers 503
// with the reason. Once the disk takes writes again, a new message is
// answered within 10 s, with no restart, and /readyz is 200 again.
func TestStoreWriteFailureRecovers(t *testing.T) {
	t.Parallel()
	bin := flowbridgeBinary(t)
	s := newStack(t, stackOptions{slack: true})
	p := startProcess(t, bin, s.env, "run", "-config", s.path)
	p.errOut.waitFor(t, "flowbridge running", p.done)
	ctx := waitCtx(t)
	if err := s.slack.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	send := func(dm, text string) error {
		_, err := s.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: dm, ChannelType: "im", User: slackUser, Text: text})
		return err
	}
	answered := func(dm, text string) func(slacktest.Message) bool {
		return func(m slacktest.Message) bool { return m.Channel == dm && slackHas(m, "You said: "+text) }
	}

	// The load: a message every 20 ms, over ten DMs, until the test ends.
	stop := make(chan struct{})
	var load sync.WaitGroup
	load.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if send(fmt.Sprintf("D0LOAD%d", i%10), fmt.Sprintf("load %d", i)) != nil {
				return
			}
		}
	})
	stopLoad := sync.OnceFunc(func() { close(stop); load.Wait() })
	defer stopLoad()
	if _, err := s.slack.WaitMessage(ctx, answered("D0LOAD5", "load 5")); err != nil {
		t.Fatal(err)
	}

	limit := func(bytes uint64) {
		t.Helper()
		lim := unix.Rlimit{Cur: bytes, Max: unix.RLIM_INFINITY}
		if err := unix.Prlimit(p.cmd.Process.Pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
			t.Fatalf("prlimit: %v", err)
		}
	}
	limit(2 * 4096) // bbolt's two meta pages: every commit's new pages lie past them
	faultEnds := time.After(2 * time.Second)
	p.errOut.waitFor(t, "event not recorded", p.done)
	code, body := adminGet(t, s.admin, "/readyz", "")
	var status map[string]string
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(status["store"], "file too large") {
		t.Errorf("/readyz while writes fail = %d %v, want 503 with the store's reason", code, status)
	}
	if _, _, err := runCmd(t, s.env, "", "health", "-ready", "-config", s.path); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("health -ready while writes fail = %v, want an error with 503", err)
	}
	select {
	case <-faultEnds:
	case err := <-p.done:
		t.Fatalf("flowbridge exited while writes failed: %v\nstderr:\n%s", err, tail(p.errOut.String(), 3000))
	}

	limit(unix.RLIM_INFINITY)
	healed := time.Now()
	if err := send("D0AFTER", "after the fault"); err != nil {
		t.Fatal(err)
	}
	within, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.slack.WaitMessage(within, answered("D0AFTER", "after the fault")); err != nil {
		t.Fatalf("a new message once the disk took writes again: %v\nstderr:\n%s", err, tail(p.errOut.String(), 3000))
	}
	t.Logf("answered %s after the disk took writes again", time.Since(healed).Round(time.Millisecond))
	if code, body := adminGet(t, s.admin, "/readyz", ""); code != http.StatusOK {
		t.Errorf("/readyz after recovery = %d %s, want 200", code, body)
	}
	stopLoad()
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit: %v\nstderr:\n%s", err, tail(p.errOut.String(), 3000))
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }
