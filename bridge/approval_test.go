package bridge_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
)

// statusRecorder is a recorder on a platform that shows the conversation's
// agent session, and keeps the statuses it was given.
type statusRecorder struct {
	*recorder
	mu       sync.Mutex
	statuses []bridge.SessionStatus
}

var _ bridge.SessionStatuser = (*statusRecorder)(nil)

func newStatusRecorder() *statusRecorder { return &statusRecorder{recorder: newRecorder()} }

func (s *statusRecorder) SetSessionStatus(_ context.Context, st bridge.SessionStatus) {
	s.mu.Lock()
	s.statuses = append(s.statuses, st)
	s.mu.Unlock()
}

// saw reports whether the statuses given include want, in its order.
func (s *statusRecorder) saw(want ...bridge.SessionStatus) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	for _, st := range s.statuses {
		if i < len(want) && st == want[i] {
			i++
		}
	}
	return i == len(want)
}

// testClock is a Config.Now a test moves on.
type testClock struct{ offset atomic.Int64 }

var clockStart = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func (c *testClock) now() time.Time          { return clockStart.Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// approvalConfig is the default catalog with healthcheck waiting for the
// approval of U-boss or of anyone in the group G-ops.
func approvalConfig(clock *testClock) bridge.Config {
	cfg := defaultConfig()
	cfg.Flows[0].Confirm = true
	cfg.Flows[0].Approvers = []string{"U-boss", "group:G-ops"}
	if clock != nil {
		cfg.Now = clock.now
	}
	return cfg
}

// askApproval has ann (U1) ask for healthcheck host=host in c/1 through
// req, and returns the request posted.
func (h *harness) askApproval(req bridge.Responder, host string) bridge.Reply {
	h.t.Helper()
	ev := via(command("c/1", bridge.CommandFlow, "healthcheck host="+host, nil), req)
	if err := h.do(ev); err != nil {
		h.t.Fatal(err)
	}
	var ask bridge.Reply
	switch r := req.(type) {
	case *statusRecorder:
		ask = r.last(h.t)
	case *recorder:
		ask = r.last(h.t)
	}
	if ask.Kind != bridge.ReplyConfirm || len(ask.Buttons) != 2 || ask.Ephemeral {
		h.t.Fatalf("request = %+v, want one for everyone with Approve and Refuse", ask)
	}
	return ask
}

// press has user (in groups) press b in c/1, and returns its answers.
func (h *harness) press(user string, groups []string, b bridge.Button) *recorder {
	h.t.Helper()
	rec := newRecorder()
	ev := event("c/1", bridge.KindAction, "", rec)
	ev.User = bridge.User{ID: user, Name: strings.ToLower(user), Groups: groups}
	ev.Action = b.Action
	if err := h.do(ev); err != nil {
		h.t.Fatal(err)
	}
	return rec
}

func (h *harness) flowRuns() int {
	n := 0
	for _, r := range h.fake.Requests() {
		if strings.Contains(r.Path, "/run/sync") {
			n++
		}
	}
	return n
}

func (h *harness) audited(outcome string) []bridge.AuditEntry {
	h.t.Helper()
	all, err := h.store.Audit(h.t.Context(), auditAll())
	if err != nil {
		h.t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(e bridge.AuditEntry) bool { return e.Outcome != outcome })
}

func TestApprovalByNamedApprover(t *testing.T) {
	h := newHarness(t, approvalConfig(nil), nil)
	req := newStatusRecorder()
	ask := h.askApproval(req, "web1")
	wantContains(t, "request", ask.Text, "ann asks to run *healthcheck*", "`host` = `web1`", "`U-boss`, `group:G-ops`", "24 hours")
	if strings.Contains(ask.Text, "<@") {
		t.Errorf("request = %q, mentions someone", ask.Text)
	}
	if !req.saw(bridge.SessionSuspended) {
		t.Errorf("statuses = %v, want suspended while the request waits", req.statuses)
	}
	approve, refuse := ask.Buttons[0], ask.Buttons[1]

	// Neither a stranger nor the requester may answer it; it stays open.
	r := h.press("U2", nil, approve).last(t)
	wantContains(t, "stranger's press", r.Text, "Only these may approve", "`U-boss`, `group:G-ops`")
	if !r.Ephemeral || r.Replace {
		t.Errorf("stranger's answer = %+v, want private, leaving the request in place", r)
	}
	wantContains(t, "requester's press", h.press("U1", nil, approve).last(t).Text, "You asked for this run", "someone else must approve")
	wantContains(t, "requester's refuse", h.press("U1", nil, refuse).last(t).Text, "You asked for this run")
	if n := h.flowRuns(); n != 0 {
		t.Fatalf("%d runs before an approver answered, want 0", n)
	}

	// A member of an approving group runs it, for the requester.
	pressed := h.press("U3", []string{"G-ops"}, approve)
	all := pressed.all()
	if len(all) < 2 || !all[0].Replace {
		t.Fatalf("answers to Approve = %+v, want the run in place of the request", all)
	}
	wantContains(t, "progress", all[0].Text, "Approved by u3")
	res := pressed.last(t)
	wantContains(t, "result", res.Text, "checked web1")
	wantContains(t, "footer", res.Footer, "run by ann")
	if res.Ephemeral {
		t.Error("result of an approved run is private; want it in the conversation, where the request was")
	}
	wantContains(t, "requester told", req.last(t).Text, "was approved by u3")
	if !req.saw(bridge.SessionSuspended, bridge.SessionProcessing) {
		t.Errorf("statuses = %v, want suspended, then processing", req.statuses)
	}
	if n := h.flowRuns(); n != 1 {
		t.Errorf("%d runs after Approve, want 1", n)
	}
	for _, outcome := range []string{bridge.OutcomeStarted, bridge.OutcomeOK} {
		es := h.audited(outcome)
		if len(es) != 1 || es[0].User != "U1" || es[0].Approver != "U3" {
			t.Errorf("audit %s = %+v, want one run by U1 approved by U3", outcome, es)
		}
	}
	wantContains(t, "second press", h.press("U-boss", nil, approve).last(t).Text, "expired or was already answered")
	if n := h.flowRuns(); n != 1 {
		t.Errorf("%d runs after a second Approve, want still 1", n)
	}

	// Refuse: nothing runs, the requester hears who refused.
	ask = h.askApproval(req, "web2")
	r = h.press("U-boss", nil, ask.Buttons[1]).last(t)
	wantContains(t, "refusal", r.Text, "Refused by u-boss", "*healthcheck* was not run")
	if !r.Replace || r.Ephemeral {
		t.Errorf("refusal = %+v, want it in place of the request, for everyone", r)
	}
	wantContains(t, "requester told", req.last(t).Text, "was refused by u-boss")
	if n := h.flowRuns(); n != 1 {
		t.Errorf("%d runs after Refuse, want still 1", n)
	}
	es := h.audited(bridge.OutcomeRefused)
	if len(es) != 1 || es[0].User != "U1" || es[0].Approver != "U-boss" || !strings.Contains(es[0].Detail, "refused by") {
		t.Errorf("audit refused = %+v, want one of U1's refused by U-boss", es)
	}
	if es := h.audited(bridge.OutcomeConfirm); len(es) != 2 {
		t.Errorf("audit confirm_asked = %+v, want the two requests", es)
	}
}

// TestApprovalWithoutApproversAsksTheCaller: a flow's confirmation without
// approvers is the caller's own, private, as before.
func TestApprovalWithoutApproversAsksTheCaller(t *testing.T) {
	cfg := defaultConfig()
	cfg.Flows[0].Confirm = true
	h := newHarness(t, cfg, nil)
	_, ask := h.command("c/1", bridge.CommandFlow, "healthcheck host=web1")
	if !ask.Ephemeral || ask.Buttons[0].Label != "Run" {
		t.Errorf("confirmation = %+v, want the caller's own Run / Cancel", ask)
	}
	if h.b.Ephemeral(command("c/1", bridge.CommandFlow, "healthcheck host=web1", nil)) != true {
		t.Error("Ephemeral(a private flow without approvers) = false")
	}
	h = newHarness(t, approvalConfig(nil), nil)
	if h.b.Ephemeral(command("c/1", bridge.CommandFlow, "healthcheck host=web1", nil)) {
		t.Error("Ephemeral(a flow with approvers) = true, want its request posted for the approvers")
	}
}

// TestApprovalSurvivesRestart: a request asked before a restart (the store
// closed and opened again) is approved after it, and runs once.
func TestApprovalSurvivesRestart(t *testing.T) {
	cfg := approvalConfig(nil)
	h := newHarness(t, cfg, nil)
	req := newStatusRecorder()
	ask := h.askApproval(req, "web1")
	h.reopen(cfg)
	pressed := h.press("U-boss", nil, ask.Buttons[0])
	wantContains(t, "result after a restart", pressed.last(t).Text, "checked web1")
	wantContains(t, "requester told", req.last(t).Text, "was approved by u-boss")
	if n := h.flowRuns(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// TestApprovalExpires: a request nobody answers is told to its requester
// once it expires, after a restart in between too, and only once however
// many sweeps (bridges on the store) look; a press after that runs nothing.
func TestApprovalExpires(t *testing.T) {
	var clock testClock
	cfg := approvalConfig(&clock)
	cfg.Flows[0].ApprovalTimeout = 2 * time.Hour
	h := newHarness(t, cfg, nil)
	req := newStatusRecorder()
	ask := h.askApproval(req, "web1")
	wantContains(t, "request", ask.Text, "stays open for 2 hours")
	h.reopen(cfg)

	clock.advance(2*time.Hour - time.Second)
	if n, err := h.b.ExpireApprovals(t.Context()); n != 0 || err != nil {
		t.Fatalf("ExpireApprovals before its time = %d, %v, want 0", n, err)
	}
	clock.advance(2 * time.Second)
	// A token written after the expiry (another request) sweeps expired
	// tokens: not this one.
	other := newRecorder()
	ev := command("c/2", bridge.CommandFlow, "healthcheck host=web9", other)
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}

	// Two bridges on the store sweep at once: one tells.
	second := h.sibling(cfg)
	var wg sync.WaitGroup
	var told atomic.Int64
	for _, b := range []*bridge.Bridge{h.b, second} {
		wg.Go(func() {
			n, err := b.ExpireApprovals(t.Context())
			if err != nil {
				t.Errorf("ExpireApprovals = %v", err)
			}
			told.Add(int64(n))
		})
	}
	wg.Wait()
	if n := told.Load(); n != 1 {
		t.Fatalf("requests expired = %d, want 1", n)
	}
	req.waitReplies(t, 1, "Nobody approved your request")
	wantContains(t, "requester told", req.last(t).Text, "*healthcheck* within 2 hours, so it was not run")
	if !req.saw(bridge.SessionSuspended, bridge.SessionActive) {
		t.Errorf("statuses = %v, want suspended, then active", req.statuses)
	}
	if n := strings.Count(joinTexts(req.all()), "Nobody approved"); n != 1 {
		t.Errorf("requester told %d times, want once", n)
	}
	if es := h.audited(bridge.OutcomeExpired); len(es) != 1 || es[0].User != "U1" || !strings.Contains(es[0].Detail, "2 hours") {
		t.Errorf("audit expired = %+v, want the request of U1", es)
	}
	if n, err := h.b.ExpireApprovals(t.Context()); n != 0 || err != nil {
		t.Errorf("ExpireApprovals again = %d, %v, want 0", n, err)
	}
	wantContains(t, "press after expiry", h.press("U-boss", nil, ask.Buttons[0]).last(t).Text, "expired or was already answered")
	if n := h.flowRuns(); n != 0 {
		t.Errorf("%d runs, want 0", n)
	}
}

// TestApprovalPressedAfterItsTime: an Approve pressed after the request
// expired, before a sweep found it, runs nothing and tells the requester
// it expired.
func TestApprovalPressedAfterItsTime(t *testing.T) {
	var clock testClock
	cfg := approvalConfig(&clock)
	h := newHarness(t, cfg, nil)
	req := newStatusRecorder()
	ask := h.askApproval(req, "web1")
	clock.advance(25 * time.Hour)
	wantContains(t, "late press", h.press("U-boss", nil, ask.Buttons[0]).last(t).Text, "expired before it was answered")
	wantContains(t, "requester told", req.last(t).Text, "Nobody approved your request", "within 24 hours")
	if n, _ := h.b.ExpireApprovals(t.Context()); n != 0 {
		t.Errorf("ExpireApprovals after the press = %d, want 0: told already", n)
	}
	if n := h.flowRuns(); n != 0 {
		t.Errorf("%d runs, want 0", n)
	}
}

// TestApprovalRechecksTheCatalog: the approvers and the requester's access
// in force when the button is pressed decide.
func TestApprovalRechecksTheCatalog(t *testing.T) {
	cfg := approvalConfig(nil)
	h := newHarness(t, cfg, nil)
	req := newRecorder()
	ask := h.askApproval(req, "web1")
	narrowed := approvalConfig(nil)
	narrowed.Flows[0].Approvers = []string{"user:U-new"}
	if err := h.b.SetCatalog(narrowed.Flows, cfg.Agents, cfg.Admins); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "former approver", h.press("U-boss", nil, ask.Buttons[0]).last(t).Text, "Only these may approve", "`user:U-new`")
	narrowed.Flows[0].Allow = []string{"user:U-other"}
	if err := h.b.SetCatalog(narrowed.Flows, cfg.Agents, cfg.Admins); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "requester without access", h.press("U-new", nil, ask.Buttons[0]).last(t).Text, "ann may no longer run *healthcheck*")
	wantContains(t, "requester told", req.last(t).Text, "may no longer run")
	if n := h.flowRuns(); n != 0 {
		t.Errorf("%d runs, want 0", n)
	}
}

func TestApproversChecked(t *testing.T) {
	base := healthcheck()
	for _, tc := range []struct {
		name string
		edit func(*bridge.Flow)
		want string
	}{
		{"without confirm", func(f *bridge.Flow) { f.Approvers = []string{"U1"} }, "set confirm = true"},
		{"everyone", func(f *bridge.Flow) { f.Confirm, f.Approvers = true, []string{"everyone"} }, "cannot approve"},
		{"a channel", func(f *bridge.Flow) { f.Confirm, f.Approvers = true, []string{"channel:C1"} }, "an approver is a user ID"},
		{"empty", func(f *bridge.Flow) { f.Confirm, f.Approvers = true, []string{"group:"} }, "needs an ID"},
		{"timeout without approvers", func(f *bridge.Flow) { f.Confirm, f.ApprovalTimeout = true, time.Hour }, "approvers is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			tc.edit(&f)
			err := bridge.CheckFlows([]bridge.Flow{f})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckFlows = %v, want %q", err, tc.want)
			}
		})
	}
	f := base
	f.Confirm, f.Approvers, f.ApprovalTimeout = true, []string{"U1", "user:U2", "group:S1", "role:123"}, time.Hour
	if err := bridge.CheckFlows([]bridge.Flow{f}); err != nil {
		t.Errorf("CheckFlows(valid approvers) = %v", err)
	}
}

// reopen restarts the bridge on its store closed and opened again, as a
// process restart does.
func (h *harness) reopen(cfg bridge.Config) {
	h.t.Helper()
	if err := h.b.Shutdown(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.b.Close()
	if err := h.store.Close(); err != nil {
		h.t.Fatal(err)
	}
	st, err := sessionmap.Open(h.path, sessionmap.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { st.Close() })
	h.store = st
	h.restart(cfg)
}

// sibling is a second bridge on h's store and API, with the test platform
// attached, as a replica on a shared store is.
func (h *harness) sibling(cfg bridge.Config) *bridge.Bridge {
	h.t.Helper()
	ws, err := workspace.New(workspace.Config{BaseURL: h.fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := bridge.New(cfg, ws, h.store, zaptest.NewLogger(h.t))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { b.Shutdown(context.Background()) })
	attachTest(h.t, b)
	return b
}

func joinTexts(rs []bridge.Reply) string {
	var s strings.Builder
	for _, r := range rs {
		s.WriteString(r.Text)
		s.WriteString("\n")
	}
	return s.String()
}
