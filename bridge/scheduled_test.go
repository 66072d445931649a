package bridge_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// scheduledAt numbers the due times of the tests' scheduled runs.
var scheduledAt atomic.Int64

// scheduledRun is a run of s (on the platform "test") in the conversation
// test/C1, answered through r: each call's is a run of its own, due at a
// time no other call's is, and so under an inbox key of its own.
func scheduledRun(s bridge.Scheduled, r bridge.Responder, giveUp time.Time) bridge.ScheduledRun {
	return bridge.ScheduledRun{Scheduled: s, At: time.Unix(1_800_000_000, scheduledAt.Add(1)), Conversation: "test/C1",
		Route: via(bridge.Event{}, r).Route, GiveUp: giveUp}
}

// TestRunScheduled: a scheduled run posts its progress and result
// publicly, without a share button, the result named by the run's inbox
// key, and is audited as the schedule's user; its entry is closed. A
// schedule whose parameters no longer fit the flow posts why and runs
// nothing.
func TestRunScheduled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaultConfig(), func(f *workspacetest.Server) {
		f.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "Checked {host}"})
	})
	s := bridge.Scheduled{Name: "nightly", Flow: "healthcheck", Params: map[string]string{"host": "web7"}, Cron: "@daily", Platform: "test", Channel: "C1"}
	rec := newRecorder()
	run := scheduledRun(s, rec, time.Time{})
	if err := h.b.RunScheduled(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	all := rec.all()
	if len(all) != 2 {
		t.Fatalf("replies = %+v, want progress and result", all)
	}
	for _, r := range all {
		if r.Ephemeral || len(r.Buttons) != 0 {
			t.Errorf("reply %+v, want public without buttons", r)
		}
	}
	key := bridge.ScheduleKey("nightly", run.At)
	wantContains(t, "result", all[1].Text, "Checked web7")
	wantContains(t, "footer", all[1].Footer, "run by schedule nightly")
	if all[1].Once != key {
		t.Errorf("result named %q, want the run's inbox key %q", all[1].Once, key)
	}
	if state, ok, err := h.store.EntryState(t.Context(), key); err != nil || !ok || state != store.Answered {
		t.Errorf("inbox entry %s = %v, %v, %v; want answered", key, state, ok, err)
	}
	entries, err := h.store.Audit(t.Context(), store.AuditFilter{User: "schedule:nightly", Outcome: store.OutcomeOK})
	if err != nil || len(entries) != 1 || entries[0].Conversation != "test/C1" || entries[0].Channel != "C1" {
		t.Errorf("audit = %+v, %v, want one ok run by schedule:nightly in test/C1", entries, err)
	}

	bad := s
	bad.Params = map[string]string{}
	rec = newRecorder()
	if err := h.b.RunScheduled(t.Context(), scheduledRun(bad, rec, time.Time{})); err == nil {
		t.Error("RunScheduled without the required host = nil error")
	}
	wantContains(t, "refusal", rec.last(t).Text, "schedule *nightly* could not run", "host")
	if r := rec.last(t); r.Ephemeral {
		t.Errorf("refusal %+v, want it public: it is for the channel", r)
	}
	gone := s
	gone.Flow = "removed"
	rec = newRecorder()
	if err := h.b.RunScheduled(t.Context(), scheduledRun(gone, rec, time.Time{})); !errors.Is(err, bridge.ErrUnknownFlow) {
		t.Errorf("RunScheduled of a removed flow = %v, want ErrUnknownFlow", err)
	}
	wantContains(t, "report of a removed flow", rec.last(t).Text, "schedule *nightly* could not run", "*removed* is no longer configured")
}

// TestPlatformCannotHandInAScheduledRun: a scheduled run runs a flow with
// no access rule asked, so only the core makes one; an adapter's
// KindScheduled event is refused and runs nothing.
func TestPlatformCannotHandInAScheduledRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaultConfig(), nil)
	rec := newRecorder()
	ev := event("c/forged", bridge.KindScheduled, "", rec)
	ev.Key, ev.Flow, ev.Params = "test/forged/1", "healthcheck", map[string]string{"host": "web1"}
	ev.User = bridge.Scheduled{Name: "nightly"}.User()
	if err := h.do(ev); err == nil {
		t.Fatal("Receive of a KindScheduled event = nil error, want a refusal")
	}
	if got := rec.all(); len(got) != 0 {
		t.Errorf("replies = %+v, want none", got)
	}
	if _, ok, err := h.store.EntryState(t.Context(), ev.Key); ok || err != nil {
		t.Errorf("the forged event is in the inbox (%v, %v)", ok, err)
	}
	for _, req := range h.fake.Requests() {
		if strings.Contains(req.Path, "/run/sync") {
			t.Errorf("the forged run ran the flow: %s", req.Path)
		}
	}
}

// TestFlowHelpListsSchedulesForAdmins: /flow help shows the schedules to
// admins only.
func TestFlowHelpListsSchedulesForAdmins(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaultConfig(), nil)
	h.b.SetSchedules([]bridge.Scheduled{{Name: "nightly", Flow: "healthcheck", Params: map[string]string{"host": "web7"}, Cron: "30 6 * * 1-5", Timezone: "Europe/Berlin", Platform: "slack", Channel: "C1"}})
	_, user := h.command("c/h", bridge.CommandFlow, "help")
	if strings.Contains(user.Text, "nightly") {
		t.Errorf("help for a user lists the schedules:\n%s", user.Text)
	}
	rec := newRecorder()
	ev := command("c/h", bridge.CommandFlow, "help", rec)
	ev.User = bridge.User{ID: "U-admin"}
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "help for an admin", rec.last(t).Text, "*Schedules*", "`nightly`", "`30 6 * * 1-5`", "Europe/Berlin", "slack channel `C1`", "`host=web7`")
}

// TestSchedulesHaveTheirOwnCapacity: chat holding every in-flight slot does
// not refuse a scheduled run, which has capacity of its own; a scheduled run
// that finds that capacity full waits for it until it must give up, and is
// then reported in its channel, not dropped.
func TestSchedulesHaveTheirOwnCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := defaultConfig()
		cfg.MaxInFlight, cfg.ScheduledInFlight = 1, 1
		cfg.Flows = append(cfg.Flows, bridge.Flow{Name: "slow", UUID: "flow-slow", Timeout: time.Minute, Allow: []string{"everyone"}})
		release := make(chan struct{})
		b, fake := newBubbleBridge(t, cfg, workspacetest.Agent{Reply: func(int, string) string {
			<-release
			return "done"
		}})
		fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "Checked {host}"})
		fake.AddFlow(workspacetest.Flow{UUID: "flow-slow", Template: "slow done", Delay: 3 * time.Second})
		defer close(release)

		// Chat takes the one in-flight slot; a person's flow is refused.
		if err := handle(b, event("c/chat", bridge.KindMessage, "hold on", newRecorder())); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		person := newRecorder()
		done := make(chan struct{})
		ev := command("c/person", bridge.CommandFlow, "healthcheck host=web1", person)
		ev = onDone(ev, func() { close(done) })
		if err := handle(b, ev); err != nil {
			t.Fatal(err)
		}
		<-done
		wantContains(t, "a person's flow under load", person.last(t).Text, "busy")

		// A schedule still runs.
		check := bridge.Scheduled{Name: "check", Flow: "healthcheck", Params: map[string]string{"host": "web7"}, Cron: "@hourly", Platform: "test", Channel: "C1"}
		rec := newRecorder()
		if err := b.RunScheduled(t.Context(), scheduledRun(check, rec, time.Now().Add(time.Hour))); err != nil {
			t.Fatalf("scheduled run under chat load = %v", err)
		}
		wantContains(t, "scheduled result", rec.last(t).Text, "Checked web7")

		// A second schedule waits for the first's slot, then runs.
		slow := bridge.Scheduled{Name: "slow", Flow: "slow", Cron: "@hourly", Platform: "test", Channel: "C1"}
		run := func(giveUp time.Duration) (*recorder, chan error) {
			rec, errc := newRecorder(), make(chan error, 1)
			go func() { errc <- b.RunScheduled(t.Context(), scheduledRun(slow, rec, time.Now().Add(giveUp))) }()
			synctest.Wait()
			return rec, errc
		}
		first, firstErr := run(time.Hour)
		second, secondErr := run(10 * time.Second)
		start := time.Now()
		if err := <-firstErr; err != nil {
			t.Fatal(err)
		}
		if err := <-secondErr; err != nil {
			t.Fatalf("the waiting schedule = %v, want it run once the slot freed", err)
		}
		if took := time.Since(start); took != 6*time.Second {
			t.Errorf("both runs took %v, want 6s: one after the other", took)
		}
		wantContains(t, "first", first.last(t).Text, "slow done")
		wantContains(t, "second", second.last(t).Text, "slow done")

		// One that cannot get a slot before it must give up says so in its channel.
		_, firstErr = run(time.Hour)
		third, thirdErr := run(2 * time.Second)
		if err := <-thirdErr; !errors.Is(err, bridge.ErrScheduleBusy) {
			t.Errorf("schedule past its wait = %v, want ErrScheduleBusy", err)
		}
		wantContains(t, "report", third.last(t).Text, "schedule *slow* did not run this time", "max_scheduled_in_flight")
		<-firstErr
	})
}
