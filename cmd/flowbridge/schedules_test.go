package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestCheckConfigSchedules: check-config refuses a bad cron expression or
// time zone, an unknown flow, missing or unknown parameters and a platform
// that is not enabled, each under its key; a good schedule is listed with
// what its platform needs.
func TestCheckConfigSchedules(t *testing.T) {
	flow := "  [[flows.params]]\n  name = \"host\"\n  required = true\n"
	entry := func(fields string) string {
		return testConfig(flow, discordOn+"\n[[schedules]]\n"+fields)
	}
	good := "name = \"nightly\"\nflow = \"healthcheck\"\nparams = { host = \"web1\" }\ncron = \"30 6 * * 1-5\"\ntimezone = \"Europe/Berlin\"\nplatform = \"discord\"\nchannel = \"123456789012345678\"\n"
	for _, tc := range []struct {
		name, fields, want string
	}{
		{"bad cron", strings.Replace(good, `"30 6 * * 1-5"`, `"61 6 * * *"`, 1), "schedules[0].cron: \"61 6 * * *\" is not a cron expression"},
		{"no cron", strings.Replace(good, "cron = \"30 6 * * 1-5\"\n", "", 1), "schedules[0].cron: required"},
		{"bad time zone", strings.Replace(good, "Europe/Berlin", "Mars/Olympus", 1), "schedules[0].timezone: \"Mars/Olympus\" is not a time zone"},
		{"unknown flow", strings.Replace(good, `flow = "healthcheck"`, `flow = "deploy"`, 1), "schedules[0].flow: \"deploy\" is not a configured flow"},
		{"missing required parameter", strings.Replace(good, `params = { host = "web1" }`, `params = {}`, 1), "schedules[0].params: flow healthcheck needs host"},
		{"unknown parameter", strings.Replace(good, `{ host = "web1" }`, `{ host = "web1", port = "80" }`, 1), "schedules[0].params: flow healthcheck has no parameter \"port\""},
		{"unknown platform", strings.Replace(good, `platform = "discord"`, `platform = "teams"`, 1), "schedules[0].platform: \"teams\""},
		{"bad channel", strings.Replace(good, `"123456789012345678"`, `"general"`, 1), "schedules[0].channel: \"general\" is not a Discord channel ID"},
		{"unknown key", good + "every = \"day\"\n", "schedules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, entry(tc.fields))
			_, _, err := runCmd(t, nil, "", "check-config", "-config", path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("check-config = %v, want %q", err, tc.want)
			}
		})
	}
	out, _, err := runCmd(t, nil, "", "check-config", "-config", writeFile(t, entry(good)))
	if err != nil {
		t.Fatalf("check-config of a good schedule = %v", err)
	}
	for _, want := range []string{"schedules:", "nightly: flow healthcheck host=web1 at \"30 6 * * 1-5\" (Europe/Berlin) -> discord channel 123456789012345678", "Send Messages"} {
		if !strings.Contains(out, want) {
			t.Errorf("check-config output lacks %q:\n%s", want, out)
		}
	}
	// A schedule on a platform switched off is a warning: it does not run.
	off := strings.Replace(good, `platform = "discord"`, `platform = "slack"`, 1)
	off = strings.Replace(off, `"123456789012345678"`, `"C0123ABC"`, 1)
	out, _, err = runCmd(t, nil, "", "check-config", "-config", writeFile(t, entry(off)))
	if err != nil || !strings.Contains(out, "warning: schedules[0] (nightly): slack is not enabled, so this schedule does not run") {
		t.Errorf("check-config of a schedule on Slack, switched off = %v\n%s, want a warning", err, out)
	}
}

// nightlyOnSlack is the [[schedules]] entry of the process tests: the
// healthcheck flow on cron, posted in the Slack channel.
func nightlyOnSlack(cron string) string {
	return `
[[schedules]]
name = "nightly"
flow = "healthcheck"
params = { host = "sched-host" }
cron = "` + cron + `"
platform = "slack"
channel = "` + slackChannel + `"
`
}

// TestScheduleEndToEnd: flowbridge run with a [[schedules]] entry on Slack
// reports the run missed while it was down, runs the flow on its
// expression and posts the result in the channel, audited as run by the
// schedule; /flow help shows the schedule to admins.
func TestScheduleEndToEnd(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{slack: true})
	s.slack.AddChannel(slacktest.Channel{ID: slackChannel, Name: "general"})
	cfg := s.config(stackOptions{}) + nightlyOnSlack("@every 1s")
	cfg = strings.Replace(cfg, "[bridge]\n", "[bridge]\nadmins = [\"local\"]\n", 1)
	if err := os.WriteFile(s.path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The previous process last ran it a minute ago.
	st, err := sessionmap.Open(filepath.Join(s.dir, "store.db"), sessionmap.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimRun(t.Context(), "nightly", time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	r := s.start(t)
	ctx := waitCtx(t)
	if _, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.Channel == slackChannel && slackHas(m, "missed its run at") && slackHas(m, "while flowbridge was down")
	}); err != nil {
		t.Fatalf("missed run not reported in the channel: %v", err)
	}
	r.errOut.waitFor(t, "missed run at", r.done)
	result, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.Channel == slackChannel && slackHas(m, "checked sched-host")
	})
	if err != nil {
		t.Fatalf("scheduled result not posted: %v", err)
	}
	if result.Ephemeral || !slackHas(result, "schedule nightly") {
		t.Errorf("result = %+v, want a public message naming the schedule", result)
	}
	r.send(t, "/flow help")
	r.out.waitFor(t, "nightly", r.done)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCmd(t, s.env, "", "audit", "-config", s.path, "-json", "-user", "schedule:nightly", "-outcome", "ok")
	if err != nil {
		t.Fatal(err)
	}
	var e store.AuditEntry
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &e); err != nil {
		t.Fatalf("audit -json = %q: %v", out, err)
	}
	if e.Flow != "healthcheck" || e.Platform != "slack" || e.Channel != slackChannel || e.Params["host"] != "sched-host" {
		t.Errorf("audit entry = %+v, want the scheduled healthcheck in %s", e, slackChannel)
	}
}

// TestScheduledRunKilledMidFlow: the real binary is SIGKILLed while a
// scheduled flow runs. The next start (its schedule now due next year, so
// that nothing new runs) does not run the flow again: it tells the
// channel once, publicly, that flowbridge restarted while the schedule
// ran, and audits the run as interrupted.
func TestScheduledRunKilledMidFlow(t *testing.T) {
	t.Parallel()
	bin := flowbridgeBinary(t)
	s := newStack(t, stackOptions{slack: true})
	s.slack.AddChannel(slacktest.Channel{ID: slackChannel, Name: "general"})
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	s.ws.AddFlow(workspacetest.Flow{UUID: stackFlowUUID, Reply: func(p map[string]string) string {
		if runs.Add(1) == 1 {
			close(started)
			<-release // the run the SIGKILL cuts off
		}
		return "checked " + p["host"]
	}})
	t.Cleanup(func() { close(release) }) // after the processes' cleanups
	config := func(cron string) {
		cfg := s.config(stackOptions{}) + nightlyOnSlack(cron)
		if err := os.WriteFile(s.path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config("@every 1s")
	ctx := waitCtx(t)
	first := startProcess(t, bin, s.env, "run", "-config", s.path)
	first.errOut.waitFor(t, "flowbridge running", first.within(t))
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatalf("the scheduled flow did not start\nstderr:\n%s", first.errOut)
	}
	first.signal(t, syscall.SIGKILL)
	if err := first.wait(t, 30*time.Second); err == nil {
		t.Fatal("flowbridge exited 0 after SIGKILL")
	}

	config("@yearly")
	next := startProcess(t, bin, s.env, "run", "-config", s.path)
	next.errOut.waitFor(t, "flowbridge running", next.within(t))
	told := func(m slacktest.Message) bool {
		return m.Channel == slackChannel && slackHas(m, "restarted while the schedule") && slackHas(m, "nightly")
	}
	notice, err := s.slack.WaitMessage(ctx, told)
	if err != nil {
		t.Fatalf("the channel was not told of the run cut off: %v\nstderr:\n%s", err, next.errOut)
	}
	if notice.Ephemeral || !slackHas(notice, "may or may not have run") {
		t.Errorf("notice = %+v, want a public message saying the flow may or may not have run", notice)
	}
	next.signal(t, syscall.SIGTERM)
	if err := next.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit: %v\nstderr:\n%s", err, next.errOut)
	}
	n := 0
	for _, m := range s.slack.Messages() {
		if told(m) {
			n++
		}
	}
	if n != 1 || runs.Load() != 1 {
		t.Errorf("%d notices in the channel and %d flow runs, want 1 and 1: told once, never run again", n, runs.Load())
	}
	out, _, err := runCmd(t, s.env, "", "audit", "-config", s.path, "-json", "-user", "schedule:nightly", "-outcome", "interrupted")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; strings.TrimSpace(out) == "" || lines != 1 {
		t.Errorf("interrupted runs in the audit:\n%s\nwant one", out)
	}
}
