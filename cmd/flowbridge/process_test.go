//go:build unix

package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// flowbridgeBinary is the program the process tests run: this test binary,
// which is flowbridge when started with asFlowbridge set (startProcess
// sets it; see TestMain). Building flowbridge instead took a link of
// seconds per test, and tens of seconds on a busy machine; CI builds the
// static binary on its own.
func flowbridgeBinary(t *testing.T) string {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// process is a running flowbridge binary whose output the test reads.
type process struct {
	cmd         *exec.Cmd
	stdin       io.WriteCloser
	out, errOut *syncBuffer
	done        chan error    // gets Wait's result once; waitFor takes it on exit
	exited      chan struct{} // closed when the process has exited
	err         error         // Wait's result, once exited is closed
}

// startProcess runs bin with args and the stack's environment; its stdin is a
// pipe that stays open until the test closes it.
func startProcess(t *testing.T, bin string, env map[string]string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	// asFlowbridge makes the test binary flowbridge; a race-enabled binary
	// would otherwise wait a second at exit for nothing.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), asFlowbridge + "=1", "GORACE=atexit_sleep_ms=0"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &process{cmd: cmd, out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.errOut
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
		p.done <- p.err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		p.stdin.Close()
	})
	return p
}

func (p *process) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatalf("stdin: %v", err)
	}
}

func (p *process) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait returns the exit error once the process has ended.
func (p *process) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(within):
		t.Fatalf("the process did not exit within %s\nstderr:\n%s", within, p.errOut)
		return nil
	}
}

func TestProcess(t *testing.T) {
	t.Parallel()
	bin := flowbridgeBinary(t)

	// Each subtest runs its own processes on a stack of its own.

	t.Run("replies refused 429 across SIGTERM are posted once by the next start", func(t *testing.T) {
		t.Parallel()
		answersSurviveRateLimitAndRestart(t, bin)
	})

	t.Run("SIGTERM during a chat delivers the reply, then exits 0", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, stackOptions{})
		s.ws.AddAgent(workspacetest.Agent{UUID: stackAgentUUID, Delay: stackSlowAgentDelay})
		p := startProcess(t, bin, s.env, "run", "-config", s.path)
		p.errOut.waitFor(t, "flowbridge running", p.done)
		p.send(t, "a slow question")
		// Logged just before the call; the agent then takes 3 s to answer.
		p.errOut.waitFor(t, `"text":"a slow question"`, p.done)
		start := time.Now()
		p.signal(t, syscall.SIGTERM)
		p.errOut.waitFor(t, "signal received; shutting down", p.done)
		if strings.Contains(p.out.String(), "You said") {
			t.Fatal("the reply came before SIGTERM; the test proves nothing")
		}
		p.out.waitFor(t, "[turn 1] You said: a slow question", p.done)
		if err := p.wait(t, 30*time.Second); err != nil {
			t.Fatalf("exit: %v, want status 0\nstderr:\n%s", err, p.errOut)
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("exited %s after SIGTERM; the 3 s chat cannot have finished", d)
		}
		for _, want := range []string{"flowbridge stopped"} {
			if !strings.Contains(p.errOut.String(), want) {
				t.Errorf("stderr lacks %q", want)
			}
		}
		if strings.Contains(p.errOut.String(), "cut off") {
			t.Errorf("work was cut off:\n%s", p.errOut)
		}
	})

	t.Run("SIGTERM past the grace tells the cut-off users, then exits 0", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, stackOptions{slack: true, grace: "1s"})
		hold := make(chan struct{})
		t.Cleanup(func() { close(hold) }) // before the fakes close
		asked, running := make(chan struct{}, 1), make(chan struct{}, 1)
		s.ws.AddAgent(workspacetest.Agent{UUID: stackAgentUUID, Reply: func(int, string) string {
			asked <- struct{}{}
			<-hold
			return "too late"
		}})
		s.ws.AddFlow(workspacetest.Flow{UUID: stackFlowUUID, Reply: func(map[string]string) string {
			running <- struct{}{}
			<-hold
			return "too late"
		}})
		p := startProcess(t, bin, s.env, "run", "-config", s.path)
		p.errOut.waitFor(t, "flowbridge running", p.done)
		ctx := waitCtx(t)
		if err := s.slack.WaitConnections(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: "D0ALICE", ChannelType: "im", User: slackUser, Text: "a slow question"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=slow", UserID: "U0BOB", ChannelID: slackChannel}); err != nil {
			t.Fatal(err)
		}
		<-asked
		<-running
		p.signal(t, syscall.SIGTERM)
		if err := p.wait(t, 30*time.Second); err != nil {
			t.Fatalf("exit: %v, want status 0\nstderr:\n%s", err, p.errOut)
		}
		// Grace 1 s, plus at most 2 s to tell the users and close, by the
		// process's own clock (its log), which a busy test machine does not
		// stretch the way it stretches this test's waiting.
		if d := logSpan(t, p.errOut.String(), "signal received; shutting down", "flowbridge stopped"); d > 3*time.Second {
			t.Errorf("stopped %s after SIGTERM; want within the 1 s grace plus 2 s", d)
		}
		if _, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
			return m.Channel == "D0ALICE" && slackHas(m, "cut off")
		}); err != nil {
			t.Errorf("the chat user was not told: %v\nstderr:\n%s", err, p.errOut)
		}
		if _, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
			return m.Channel == slackChannel && slackHas(m, "cut off")
		}); err != nil {
			t.Errorf("the flow's user was not told: %v\nstderr:\n%s", err, p.errOut)
		}
	})

	t.Run("SIGHUP with a broken file keeps the running config", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, stackOptions{})
		s.ws.AddFlow(workspacetest.Flow{UUID: "flow-new", Template: "the new flow ran on {target}"})
		p := startProcess(t, bin, s.env, "run", "-config", s.path)
		p.errOut.waitFor(t, "flowbridge running", p.done)

		broken := []struct{ name, text string }{
			{"syntax", "[workspace\nbase_url = \n"},
			{"invalid", strings.Replace(s.config(stackOptions{}), `name = "helper"`, `name = "Not A Name"`, 1)},
		}
		for i, b := range broken {
			if err := os.WriteFile(s.path, []byte(b.text), 0o600); err != nil {
				t.Fatal(err)
			}
			p.signal(t, syscall.SIGHUP)
			// Each rejection is logged once; wait for this one by counting.
			waitCount(t, p.errOut, "reload rejected; the running config stays", i+1, p.done)
			if b.name == "invalid" && !strings.Contains(p.errOut.String(), "agents[0].name") {
				t.Errorf("the rejection does not name the bad key agents[0].name:\n%s", p.errOut)
			}
			p.send(t, "/flow healthcheck host=after-"+b.name)
			p.out.waitFor(t, "checked after-"+b.name, p.done)
			p.send(t, "still there? "+b.name)
			p.out.waitFor(t, "You said: still there? "+b.name, p.done)
		}

		s.writeConfig(t, stackOptions{flows: `
[[flows]]
name = "newflow"
uuid = "flow-new"
description = "Added by a reload"
allow = ["everyone"]
  [[flows.params]]
  name = "target"
  description = "Where"
  required = true
`})
		p.signal(t, syscall.SIGHUP)
		p.errOut.waitFor(t, "config reloaded", p.done)
		p.send(t, "/flow help")
		p.out.waitFor(t, "newflow: Added by a reload", p.done)
		p.send(t, "/flow newflow target=earth")
		p.out.waitFor(t, "the new flow ran on earth", p.done)

		p.signal(t, syscall.SIGTERM)
		if err := p.wait(t, 30*time.Second); err != nil {
			t.Fatalf("exit: %v\nstderr:\n%s", err, p.errOut)
		}
	})

	t.Run("a second process gets the lock error; the CLI goes through the admin API", func(t *testing.T) {
		t.Parallel()
		s := newStack(t, stackOptions{})
		p := startProcess(t, bin, s.env, "run", "-config", s.path)
		p.errOut.waitFor(t, "flowbridge running", p.done)
		p.send(t, "make a session")
		p.out.waitFor(t, "You said: make a session", p.done)

		start := time.Now()
		second := startProcess(t, bin, s.env, "run", "-config", s.path)
		err := second.wait(t, 30*time.Second)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("second run exited with %v, want status 1", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("second run took %s to fail, want about the 1 s lock timeout", d)
		}
		want := "store is locked by another flowbridge (" + filepath.Join(s.dir, "store.db") + ")"
		if !strings.Contains(second.errOut.String(), want) {
			t.Errorf("second run's stderr = %q, want it to contain %q", second.errOut, want)
		}

		list := startProcess(t, bin, s.env, "sessions", "list", "-config", s.path)
		if err := list.wait(t, 30*time.Second); err != nil {
			t.Fatalf("sessions list: %v\nstderr:\n%s", err, list.errOut)
		}
		if !strings.Contains(list.out.String(), "console/local") {
			t.Errorf("sessions list through the admin API = %q, want console/local", list.out)
		}

		// The first process is unharmed.
		p.send(t, "still serving")
		p.out.waitFor(t, "You said: still serving", p.done)
		p.signal(t, syscall.SIGTERM)
		if err := p.wait(t, 30*time.Second); err != nil {
			t.Fatalf("exit: %v\nstderr:\n%s", err, p.errOut)
		}
	})
}

// waitCount waits until want occurs n times in b.
func waitCount(t *testing.T, b *syncBuffer, want string, n int, done <-chan error) {
	t.Helper()
	for {
		b.mu.Lock()
		if b.wrote == nil {
			b.wrote = make(chan struct{})
		}
		count, wrote := strings.Count(b.b.String(), want), b.wrote
		b.mu.Unlock()
		if count >= n {
			return
		}
		select {
		case <-wrote:
		case err := <-done:
			t.Fatalf("ended before %q was written %d times: %v", want, n, err)
		}
	}
}

// logSpan is the time between the JSON log lines whose msg is from and to,
// by their ts fields.
func logSpan(t *testing.T, log, from, to string) time.Duration {
	t.Helper()
	at := map[string]float64{}
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Msg string  `json:"msg"`
			TS  float64 `json:"ts"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && (l.Msg == from || l.Msg == to) {
			at[l.Msg] = l.TS
		}
	}
	if at[from] == 0 || at[to] == 0 {
		t.Fatalf("log lacks %q or %q:\n%s", from, to, log)
	}
	return time.Duration((at[to] - at[from]) * float64(time.Second))
}
