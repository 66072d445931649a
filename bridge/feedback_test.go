package bridge_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// feedbackButtons returns the vote buttons of r, failing unless there are both.
func feedbackButtons(t *testing.T, r bridge.Reply) (up, down bridge.Action) {
	t.Helper()
	for _, b := range r.Buttons {
		switch b.Action.ID {
		case bridge.ActionVoteUp:
			up = b.Action
		case bridge.ActionVoteDown:
			down = b.Action
		}
	}
	if up.ID == "" || down.ID == "" {
		t.Fatalf("reply buttons = %+v, want 👍 and 👎", r.Buttons)
	}
	return up, down
}

func TestFeedbackVotes(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := bridge.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.Feedback = true
	cfg.Metrics = m
	h := newHarness(t, cfg, func(f *workspacetest.Server) {
		f.AddAgent(workspacetest.Agent{UUID: agentUUID})
	})
	rec := newRecorder()
	q := event("c/fb", bridge.KindMessage, "hello", rec)
	q.Key = "test/msg/1"
	if err := h.do(q); err != nil {
		t.Fatal(err)
	}
	answer := rec.last(t)
	if answer.Kind != bridge.ReplyAgent {
		t.Fatalf("answer = %+v, want an agent reply", answer)
	}
	up, down := feedbackButtons(t, answer)
	sess, ok, err := h.store.Session(t.Context(), "c/fb")
	if err != nil || !ok {
		t.Fatalf("Session(c/fb) = %v, %v", ok, err)
	}

	press := func(user string, a bridge.Action) bridge.Reply {
		t.Helper()
		rec := newRecorder()
		ev := event("c/fb", bridge.KindAction, "", rec)
		ev.User = bridge.User{ID: user, Name: "name of " + user}
		ev.Action = a
		ev.Action.Message, ev.Action.Link = "C1/2.0", "https://t.example/archives/C1/p20"
		if err := h.do(ev); err != nil {
			t.Fatalf("press %s: %v", a.ID, err)
		}
		r := rec.last(t)
		if !r.Ephemeral || len(rec.all()) != 1 {
			t.Errorf("press %s: replies %+v, want one ephemeral acknowledgement", a.ID, rec.all())
		}
		return r
	}
	count := func(vote string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "flowbridge_feedback_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["agent"] == "helper" && labels["vote"] == vote {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}

	wantContains(t, "first 👍", press("U1", up).Text, "Thanks", "👍")
	wantContains(t, "second 👍", press("U1", up).Text, "already", "👍")
	wantContains(t, "then 👎", press("U1", down).Text, "Changed", "👎")
	wantContains(t, "another user's 👍", press("U2", up).Text, "Thanks")

	votes, err := h.store.Votes(t.Context(), store.FeedbackFilter{})
	if err != nil || len(votes) != 2 {
		t.Fatalf("Votes() = %+v, %v, want 2", votes, err)
	}
	byUser := map[string]store.Vote{votes[0].User: votes[0], votes[1].User: votes[1]}
	v := byUser["U1"]
	if v.Value != store.VoteDown || v.Agent != "helper" || v.Session != sess.SessionUUID || v.Conversation != "c/fb" ||
		v.Platform != "test" || v.UserName != "name of U1" || v.Reply == "" || v.Time.IsZero() {
		t.Errorf("U1's vote = %+v, want down on helper's reply in session %s of c/fb", v, sess.SessionUUID)
	}
	// The vote says which answer it rates: the message, the turn, the text.
	if v.Message != "C1/2.0" || v.Link != "https://t.example/archives/C1/p20" || v.Turn != "test/msg/1" || v.Excerpt != answer.Text {
		t.Errorf("U1's vote traces to message %q, link %q, turn %q, excerpt %q; want C1/2.0, its link, test/msg/1 and %q",
			v.Message, v.Link, v.Turn, v.Excerpt, answer.Text)
	}
	if byUser["U2"].Value != store.VoteUp || byUser["U2"].Reply != v.Reply {
		t.Errorf("U2's vote = %+v, want up on the same reply %s", byUser["U2"], v.Reply)
	}
	// First votes and changes count; the repeated press does not.
	if up, down := count(store.VoteUp), count(store.VoteDown); up != 2 || down != 1 {
		t.Errorf("flowbridge_feedback_total{agent=helper} up=%v down=%v, want 2 and 1", up, down)
	}

	// Another answer is another reply to vote on.
	up2, _ := feedbackButtons(t, h.ask("c/fb", "again"))
	if up2.Value == up.Value {
		t.Errorf("two answers carry the same vote value %q", up.Value)
	}
	wantContains(t, "👍 on the second answer", press("U1", up2).Text, "Thanks")

	// A vote on an answer whose record is gone is refused: nothing says
	// the value was one the bridge gave.
	if _, err := h.store.PruneAnswers(t.Context(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r := press("U3", up); r.Kind != bridge.ReplyError {
		t.Errorf("press after the prune = %+v, want it refused", r)
	}
	if vs, err := h.store.Votes(t.Context(), store.FeedbackFilter{User: "U3"}); err != nil || len(vs) != 0 {
		t.Errorf("U3's votes = %+v, %v, want none", vs, err)
	}

	bad := bridge.Action{ID: bridge.ActionVoteUp, Value: "no-dots"}
	if r := press("U1", bad); r.Kind != bridge.ReplyError {
		t.Errorf("press of a malformed vote = %+v, want an error", r)
	}
}

func TestFeedbackOffByDefault(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaultConfig(), func(f *workspacetest.Server) {
		f.AddAgent(workspacetest.Agent{UUID: agentUUID})
	})
	if r := h.ask("c/nofb", "hello"); len(r.Buttons) != 0 {
		t.Errorf("answer buttons = %+v, want none with feedback off", r.Buttons)
	}
}

// TestFeedbackForgedVotes: a button value comes back from the platform as
// any user may write it. Presses naming agents the config does not have,
// or answers the bridge never gave, are refused: they add no series to
// flowbridge_feedback_total and no vote to the store.
func TestFeedbackForgedVotes(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := bridge.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.Feedback = true
	cfg.Metrics = m
	h := newHarness(t, cfg, func(f *workspacetest.Server) {
		f.AddAgent(workspacetest.Agent{UUID: agentUUID})
	})
	up, _ := feedbackButtons(t, h.ask("c/forged", "hello"))
	agent, rest, _ := strings.Cut(up.Value, ".")
	session, ref, _ := strings.Cut(rest, ".")
	series := func() int {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "flowbridge_feedback_total" {
				return len(f.GetMetric())
			}
		}
		return 0
	}
	press := func(value string) bridge.Reply {
		t.Helper()
		rec := newRecorder()
		ev := event("c/forged", bridge.KindAction, "", rec)
		ev.User = bridge.User{ID: "U1"}
		ev.Action = bridge.Action{ID: bridge.ActionVoteUp, Value: value}
		if err := h.do(ev); err != nil {
			t.Fatal(err)
		}
		return rec.last(t)
	}

	// 200 presses, 50 of each forgery: each is a recorded event with its
	// synced writes, so 2,000 (the figure) cost the suite 13 s
	// and prove no more.
	const presses = 200
	before := series()
	for i := range presses {
		var value string
		switch i % 4 {
		case 0: // a new agent on a real answer
			value = fmt.Sprintf("agent%d.%s.%s", i, session, ref)
		case 1: // a new agent on a new answer
			value = fmt.Sprintf("agent%d.%s.r%d", i, session, i)
		case 2: // the real agent on an answer never given
			value = fmt.Sprintf("%s.%s.r%d", agent, session, i)
		case 3: // the real answer in another session
			value = fmt.Sprintf("%s.s%d.%s", agent, i, ref)
		}
		if r := press(value); r.Kind != bridge.ReplyError {
			t.Fatalf("press of forged %q = %+v, want it refused", value, r)
		}
	}
	if got := series(); got != before {
		t.Errorf("flowbridge_feedback_total series after %d forged presses = %d, want %d", presses, got, before)
	}
	if vs, err := h.store.Votes(t.Context(), store.FeedbackFilter{}); err != nil || len(vs) != 0 {
		t.Errorf("Votes() after forged presses = %d votes, %v; want none", len(vs), err)
	}
	// The real button still counts, under the configured agent.
	if r := press(up.Value); r.Kind != bridge.ReplyInfo {
		t.Errorf("press of the real button = %+v, want it thanked", r)
	}
	if got := series(); got != before+1 {
		t.Errorf("series after the real press = %d, want %d", got, before+1)
	}
}
