//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// The slow flow of the Stop tests: the fake takes 30 s to run it, which no
// test waits out. Its result names its host, so that a result posted
// anywhere is found.
const (
	slowFlowUUID  = "flow-slow"
	slowFlowDelay = 30 * time.Second
	slowFlowTOML  = `
[[flows]]
name = "slow"
uuid = "flow-slow"
description = "Takes half a minute"
timeout = "60s"
allow = ["everyone"]
  [[flows.params]]
  name = "host"
  description = "Host name"
  required = true
`
	slowResult = "slow result for "
)

// waitLimit bounds each wait on a flowbridge process's output: a promise
// broken leaves the line waited for unwritten, and the wait would
// otherwise last as long as the process.
const waitLimit = 10 * time.Second

// within delivers p's exit error, or an error once waitLimit has passed:
// the done channel of one wait on p's output.
func (p *process) within(t *testing.T) <-chan error {
	ch := make(chan error, 1)
	timer := time.NewTimer(waitLimit)
	t.Cleanup(func() { timer.Stop() }) // before startProcess's cleanup ends p
	go func() {
		select {
		case <-p.exited:
			ch <- p.err
		case <-timer.C:
			ch <- fmt.Errorf("not within %s\nstderr:\n%s", waitLimit, p.errOut)
		}
	}()
	return ch
}

// stopNoticeMax is how soon a Stop's presser must be told (issue 31).
const stopNoticeMax = time.Second

// flowCalls stands in front of the fake workspace and says when a run of
// the slow flow arrives and when its request ends: a Stop must end it (the
// fake answers only after 30 s, unless its client goes away).
type flowCalls struct {
	URL     string
	started chan struct{}  // one per run received
	ended   chan time.Time // one per run's request ended
}

// newFlowCalls serves ws's handler on a loopback port of its own.
func newFlowCalls(t *testing.T, ws *workspacetest.Server) *flowCalls {
	t.Helper()
	f := &flowCalls{started: make(chan struct{}, 10), ended: make(chan time.Time, 10)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/prompts/"+slowFlowUUID+"/") {
			ws.Handler().ServeHTTP(w, r)
			return
		}
		f.started <- struct{}{}
		defer func() { f.ended <- time.Now() }()
		ws.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// waitStarted waits until a run of the slow flow reached the workspace.
func (f *flowCalls) waitStarted(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case <-f.started:
	case err := <-done:
		t.Fatalf("the flow did not reach the workspace: %v", err)
	}
}

// waitCancelled waits until the run's request ended, well before the
// fake's 30 s: only its client giving up ends it sooner.
func (f *flowCalls) waitCancelled(t *testing.T, pressed time.Time) {
	t.Helper()
	select {
	case at := <-f.ended:
		t.Logf("the workspace call ended %s after the press", at.Sub(pressed).Round(time.Millisecond))
	case <-time.After(slowFlowDelay / 3):
		t.Fatalf("the workspace call still runs %s after the Stop: it was not cancelled", slowFlowDelay/3)
	}
}

// workspaceSlowFlow is the slow flow as the fake workspace runs it.
func workspaceSlowFlow() workspacetest.Flow {
	return workspacetest.Flow{UUID: slowFlowUUID, Delay: slowFlowDelay, Template: slowResult + "{host}"}
}

// slowStack is a stack with the slow flow, whose workspace calls go
// through flowCalls.
func slowStack(t *testing.T, o stackOptions) (*stack, *flowCalls) {
	t.Helper()
	o.flows += slowFlowTOML
	s := newStack(t, o)
	s.ws.AddFlow(workspaceSlowFlow())
	calls := newFlowCalls(t, s.ws)
	data, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), `base_url = "`+s.ws.URL+`"`, `base_url = "`+calls.URL+`"`, 1)
	if text == string(data) {
		t.Fatal("the config names no workspace base_url to redirect")
	}
	if err := os.WriteFile(s.path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return s, calls
}

// auditStopped checks that `flowbridge audit` of the config at path says
// the flow slow was stopped n times, by by.
func auditStopped(t *testing.T, env map[string]string, path, by string, n int) {
	t.Helper()
	out, errOut, err := runCmd(t, env, "", "audit", "-config", path, "-flow", "slow", "-json")
	if err != nil {
		t.Fatalf("flowbridge audit: %v\n%s", err, errOut)
	}
	var outcomes []string
	stopped := 0
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e store.AuditEntry
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("flowbridge audit -json = %q: %v", out, err)
		}
		outcomes = append(outcomes, e.Outcome+" ("+e.Detail+")")
		if e.Outcome == store.OutcomeStopped && e.Detail == "stopped by "+by {
			stopped++
		}
	}
	if stopped != n {
		t.Errorf("flowbridge audit -flow slow = %q, want %d entries stopped, detail %q", outcomes, n, "stopped by "+by)
	}
}

// checkStoppedInStore checks, once flowbridge has exited, that its store
// holds no unanswered entry (the stopped run's entry was closed: the next
// start neither runs it nor tells its user flowbridge restarted) and that
// `flowbridge audit` says the flow was stopped n times, by by.
func checkStoppedInStore(t *testing.T, s *stack, by string, n int) {
	t.Helper()
	auditStopped(t, s.env, s.path, by, n)
	st, err := sessionmap.Open(filepath.Join(s.dir, "store.db"), sessionmap.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pending, err := st.Pending(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pending {
		t.Errorf("inbox entry %s left %v (stopped by %q): the stopped run was not closed", e.Key, e.State, e.StoppedBy)
	}
}

// stopNoticeText begins the line a presser reads when a flow is stopped;
// the working message itself then says stoppedHere.
const (
	stopNoticeText = "Stopped *slow*. The flow may still finish inside the workspace; its result will not be posted here."
	stoppedHere    = "Stopped."
)

// onlyStopShown fails t unless every text flowbridge showed is the
// Running message, the Stopped it became, or the Stop's notice (with or
// without its Markdown): no result, and no error of the cancelled call.
func onlyStopShown(t *testing.T, texts []string) {
	t.Helper()
	for _, text := range texts {
		plain := strings.ReplaceAll(text, "*", "")
		if !strings.HasPrefix(plain, "Running") && plain != stoppedHere && plain != strings.ReplaceAll(stopNoticeText, "*", "") {
			t.Errorf("flowbridge showed %q; after a Stop it shows nothing of the run", text)
		}
	}
}

// TestStopProcess is issue 31's first acceptance line on the real binary:
// a 30-second flow stopped from Slack, from Discord and from the terminal.
// Each time the presser is told (privately) within a second, the
// workspace call ends, nothing of the run is posted, the run's inbox
// entry is closed, and the audit says it was stopped and by whom.
//
// The press comes as soon as the run has reached the workspace and its
// "Running…" message is shown, not 2 s in as the issue words it: nothing
// in flowbridge changes with the time a run has taken before its first
// progress edit (15 s at the least, progress_interval), so pressing at
// 2 s would exercise the same state (the workspace call in flight, the
// Running message with its Stop button) and only add 2 s of waiting to
// each test.
func TestStopProcess(t *testing.T) {
	t.Parallel()
	bin := flowbridgeBinary(t)

	t.Run("Slack button", func(t *testing.T) {
		t.Parallel()
		s, calls := slowStack(t, stackOptions{slack: true})
		p := startProcess(t, bin, s.env, "run", "-config", s.path)
		p.errOut.waitFor(t, "flowbridge running", p.within(t))
		ctx := waitCtx(t)
		if err := s.slack.WaitConnections(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "slow host=slack-host", UserID: slackUser, ChannelID: slackChannel}); err != nil {
			t.Fatal(err)
		}
		calls.waitStarted(t, p.within(t))
		running, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "Running") })
		if err != nil {
			t.Fatalf("no Running message: %v", err)
		}
		pressed := time.Now()
		if _, err := s.slack.PressButton(ctx, running, "stop", slackUser); err != nil {
			t.Fatalf("the Running message has no Stop button: %v", err)
		}
		notice, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, stopNoticeText) })
		if err != nil {
			t.Fatalf("the presser was not told: %v", err)
		}
		told := time.Since(pressed)
		t.Logf("Slack: told %s after the press", told.Round(time.Millisecond))
		if told > stopNoticeMax {
			t.Errorf("told %s after the press, want within %s", told, stopNoticeMax)
		}
		if !notice.Ephemeral || notice.User != slackUser || notice.Channel != slackChannel {
			t.Errorf("the notice went to %s in %s, ephemeral %v; want only the presser %s to see it in %s", notice.User, notice.Channel, notice.Ephemeral, slackUser, slackChannel)
		}
		calls.waitCancelled(t, pressed)
		p.errOut.waitFor(t, "stopped; its answer is not posted", p.within(t))
		p.signal(t, syscall.SIGTERM)
		if err := p.wait(t, 30*time.Second); err != nil {
			t.Fatalf("exit: %v\nstderr:\n%s", err, p.errOut)
		}
		var shown []string
		for _, m := range s.slack.MessageLog() { // every version of every message
			shown = append(shown, m.Text)
		}
		onlyStopShown(t, shown)
		if m, ok := s.slack.Message(running.Channel, running.TS); !ok || m.Text != stoppedHere || len(m.Buttons()) != 0 {
			t.Errorf("the Running message became %q with buttons %v, want %q without its Stop", m.Text, m.Buttons(), stoppedHere)
		}
		checkStoppedInStore(t, s, slackUser, 1)
	})

	t.Run("Discord button", func(t *testing.T) {
		t.Parallel()
		s, calls := slowStack(t, stackOptions{discord: true})
		p := startProcess(t, bin, s.env, "run", "-config", s.path)
		p.errOut.waitFor(t, "flowbridge running", p.within(t))
		ctx := waitCtx(t)
		alice := discordgo.User{ID: "42", Username: "alice"}
		if _, err := s.discord.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.discord.WaitRequest(ctx, func(r discordtest.Request) bool {
			return r.Route == discordtest.RouteGuildCommands && r.Status == http.StatusOK
		}); err != nil {
			t.Fatal(err)
		}
		sent, err := s.discord.SendInteraction(ctx, discordtest.Interaction{GuildID: discordGuild, ChannelID: discordChannel, User: alice, Data: discordFlow("slow", "host", "discord-host")})
		if err != nil {
			t.Fatal(err)
		}
		calls.waitStarted(t, p.within(t))
		running, err := s.discord.WaitMessage(ctx, func(m discordtest.Message) bool {
			return m.InteractionID == sent.ID && strings.HasPrefix(m.Content, "Running")
		})
		if err != nil {
			t.Fatalf("no Running message: %v", err)
		}
		var stop string
		for _, b := range running.Buttons() {
			if strings.HasPrefix(b.CustomID, "stop:") {
				stop = b.CustomID
			}
		}
		if stop == "" {
			t.Fatalf("the Running message has no Stop button: %+v", running.Buttons())
		}
		pressed := time.Now()
		press, err := s.discord.SendInteraction(ctx, discordtest.Interaction{
			GuildID: discordGuild, ChannelID: discordChannel, User: alice, MessageID: running.ID,
			Data: discordgo.MessageComponentInteractionData{CustomID: stop, ComponentType: discordgo.ButtonComponent},
		})
		if err != nil {
			t.Fatal(err)
		}
		notice, err := s.discord.WaitMessage(ctx, func(m discordtest.Message) bool { return m.Content == stopNoticeText })
		if err != nil {
			t.Fatalf("the presser was not told: %v", err)
		}
		told := time.Since(pressed)
		t.Logf("Discord: told %s after the press", told.Round(time.Millisecond))
		if told > stopNoticeMax {
			t.Errorf("told %s after the press, want within %s", told, stopNoticeMax)
		}
		if notice.InteractionID != press.ID || notice.Flags&discordgo.MessageFlagsEphemeral == 0 {
			t.Errorf("the notice answers interaction %s with flags %d, want an ephemeral answer to the press %s", notice.InteractionID, notice.Flags, press.ID)
		}
		calls.waitCancelled(t, pressed)
		p.errOut.waitFor(t, "stopped; its answer is not posted", p.within(t))
		p.signal(t, syscall.SIGTERM)
		if err := p.wait(t, 30*time.Second); err != nil {
			t.Fatalf("exit: %v\nstderr:\n%s", err, p.errOut)
		}
		var shown []string
		for _, m := range s.discord.Messages() {
			shown = append(shown, m.Content)
		}
		for _, r := range s.discord.Requests() { // edits included
			if strings.Contains(string(r.Body), slowResult) {
				t.Errorf("%s %s carries the flow's result: %s", r.Method, r.Path, r.Body)
			}
		}
		onlyStopShown(t, shown)
		if m, ok := s.discord.Message(running.ID); !ok || m.Content != stoppedHere || len(m.Buttons()) != 0 {
			t.Errorf("the Running message became %q with buttons %v, want %q without its Stop", m.Content, m.Buttons(), stoppedHere)
		}
		checkStoppedInStore(t, s, alice.ID, 1)
	})

	t.Run("terminal /stop and Ctrl-C", func(t *testing.T) {
		t.Parallel()
		s, calls := slowStack(t, stackOptions{})
		p := startProcess(t, bin, s.env, "run", "-config", s.path)
		p.errOut.waitFor(t, "flowbridge running", p.within(t))
		// Stopped first by /stop, then by Ctrl-C (SIGINT, which the
		// console takes as /stop while a line is answered, and which
		// shuts flowbridge down otherwise).
		stops := []struct {
			name  string
			press func()
		}{
			{"/stop", func() { p.send(t, "/stop") }},
			{"Ctrl-C", func() { p.signal(t, syscall.SIGINT) }},
		}
		for i, stop := range stops {
			p.send(t, "/flow slow host=term-host")
			calls.waitStarted(t, p.within(t))
			waitCount(t, p.out, "Running slow…", i+1, p.within(t))
			pressed := time.Now()
			stop.press()
			waitCount(t, p.out, "Stopped slow. The flow may still finish inside the workspace; its result will not be posted here.", i+1, p.within(t))
			told := time.Since(pressed)
			t.Logf("terminal %s: told %s after the press", stop.name, told.Round(time.Millisecond))
			if told > stopNoticeMax {
				t.Errorf("%s: told %s after the press, want within %s", stop.name, told, stopNoticeMax)
			}
			calls.waitCancelled(t, pressed)
			waitCount(t, p.errOut, "stopped; its answer is not posted", i+1, p.within(t))
		}
		// Ctrl-C stopped the run only: flowbridge still answers.
		p.send(t, "still there?")
		p.out.waitFor(t, "You said: still there?", p.within(t))
		if strings.Contains(p.errOut.String(), "shutting down") {
			t.Errorf("Ctrl-C during a run shut flowbridge down; it stops the run only")
		}
		p.signal(t, syscall.SIGTERM)
		if err := p.wait(t, 30*time.Second); err != nil {
			t.Fatalf("exit: %v\nstderr:\n%s", err, p.errOut)
		}
		if strings.Contains(p.out.String(), slowResult) || strings.Contains(p.out.String(), "error") {
			t.Errorf("the terminal shows more than the Stop:\n%s", p.out)
		}
		checkStoppedInStore(t, s, "local", 2)
	})
}

// TestButtonsAfterRestart is issue 29's "a Share button and a pending Run
// pressed after a restart on bbolt work", on the real binary: the buttons
// are pressed on messages the first process posted, and answered by the
// second, which started on the same store after a SIGTERM.
func TestButtonsAfterRestart(t *testing.T) {
	t.Parallel()
	bin := flowbridgeBinary(t)
	s := newStack(t, stackOptions{slack: true, flows: `
[[flows]]
name = "guarded"
uuid = "flow-hc"
description = "Check a host, once confirmed"
confirm = true
allow = ["everyone"]
  [[flows.params]]
  name = "host"
  description = "Host name"
  required = true
`})
	ctx := waitCtx(t)
	first := startProcess(t, bin, s.env, "run", "-config", s.path)
	first.errOut.waitFor(t, "flowbridge running", first.within(t))
	if err := s.slack.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=share-host", UserID: slackUser, ChannelID: slackChannel}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "guarded host=run-host", UserID: slackUser, ChannelID: slackChannel}); err != nil {
		t.Fatal(err)
	}
	result, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "checked share-host") })
	if err != nil {
		t.Fatal(err)
	}
	question, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "guarded") && len(m.Buttons()) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	ranBefore := runsOf(s.ws, "run-host")
	first.signal(t, syscall.SIGTERM)
	if err := first.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit: %v\nstderr:\n%s", err, first.errOut)
	}

	next := startProcess(t, bin, s.env, "run", "-config", s.path)
	next.errOut.waitFor(t, "flowbridge running", next.within(t))
	if err := s.slack.WaitLiveConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.slack.PressButton(ctx, result, "share", slackUser); err != nil {
		t.Fatalf("the result has no Share button: %v", err)
	}
	if _, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		return !m.Ephemeral && m.Channel == slackChannel && slackHas(m, "checked share-host")
	}); err != nil {
		t.Errorf("the result was not shared with the channel after the restart: %v\nstderr:\n%s", err, next.errOut)
	}
	if _, err := s.slack.PressButton(ctx, question, "confirm", slackUser); err != nil {
		t.Fatalf("the question has no Run button: %v", err)
	}
	if _, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "checked run-host") }); err != nil {
		t.Errorf("the confirmed flow's result was not posted after the restart: %v\nstderr:\n%s", err, next.errOut)
	}
	next.signal(t, syscall.SIGTERM)
	if err := next.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit: %v\nstderr:\n%s", err, next.errOut)
	}
	if ranBefore != 0 || runsOf(s.ws, "run-host") != 1 {
		t.Errorf("the confirmed flow ran %d times before the restart and %d in all, want 0 and 1", ranBefore, runsOf(s.ws, "run-host"))
	}
}

// runsOf counts the flow runs the workspace received with host.
func runsOf(ws *workspacetest.Server, host string) int {
	n := 0
	for _, r := range ws.Requests() {
		if strings.Contains(r.Path, "/prompts/") && strings.Contains(string(r.Body), `"`+host+`"`) {
			n++
		}
	}
	return n
}
