package bridge_test

import (
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/bridge/workspace/workspacetest"
)

// TestRunScheduled: a scheduled run posts its progress and result
// publicly, without a share button, and is audited as the schedule's
// user; a schedule whose parameters no longer fit the flow posts why and
// runs nothing.
func TestRunScheduled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaultConfig(), func(f *workspacetest.Server) {
		f.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "Checked {host}"})
	})
	s := bridge.Scheduled{Name: "nightly", Flow: "healthcheck", Params: map[string]string{"host": "web7"}, Cron: "@daily", Platform: "slack", Channel: "C1"}
	rec := newRecorder()
	if err := h.b.RunScheduled(t.Context(), s, "slack/T1/C1", rec); err != nil {
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
	wantContains(t, "result", all[1].Text, "Checked web7")
	wantContains(t, "footer", all[1].Footer, "run by schedule nightly")
	entries, err := h.store.Audit(store.AuditFilter{User: "schedule:nightly", Outcome: store.OutcomeOK})
	if err != nil || len(entries) != 1 || entries[0].Conversation != "slack/T1/C1" || entries[0].Channel != "C1" {
		t.Errorf("audit = %+v, %v, want one ok run by schedule:nightly in slack/T1/C1", entries, err)
	}

	bad := s
	bad.Params = map[string]string{}
	rec = newRecorder()
	if err := h.b.RunScheduled(t.Context(), bad, "slack/T1/C1", rec); err == nil {
		t.Error("RunScheduled without the required host = nil error")
	}
	wantContains(t, "refusal", rec.last(t).Text, "schedule *nightly* could not run", "host")
	gone := s
	gone.Flow = "removed"
	if err := h.b.RunScheduled(t.Context(), gone, "slack/T1/C1", newRecorder()); err == nil {
		t.Error("RunScheduled of a removed flow = nil error")
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
