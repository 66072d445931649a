package bridge_test

import (
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

	// A vote on an answer whose record is gone still counts, without the excerpt.
	if _, err := h.store.PruneAnswers(t.Context(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "👍 after the prune", press("U3", up).Text, "Thanks")
	if vs, err := h.store.Votes(t.Context(), store.FeedbackFilter{User: "U3"}); err != nil || len(vs) != 1 || vs[0].Excerpt != "" || vs[0].Agent != "helper" {
		t.Errorf("U3's vote = %+v, %v, want one on helper's reply, without excerpt", vs, err)
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
