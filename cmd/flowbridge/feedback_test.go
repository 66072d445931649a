package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// TestFeedbackEndToEnd: with [bridge] feedback = true, a Slack answer
// carries 👍 / 👎; a press is stored, counted in /metrics by agent, and
// listed by flowbridge feedback — through the admin API while the bridge
// holds the store, and from the file once it stopped.
func TestFeedbackEndToEnd(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{slack: true})
	cfg := strings.Replace(s.config(stackOptions{}), "[bridge]\n", "[bridge]\nfeedback = true\n", 1)
	if err := os.WriteFile(s.path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.start(t)
	ctx := waitCtx(t)
	if _, err := s.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: slackChannel, User: slackUser, Text: "rate me"}); err != nil {
		t.Fatal(err)
	}
	answer, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "You said: rate me") })
	if err != nil {
		t.Fatalf("Slack chat reply: %v", err)
	}
	d, err := s.slack.PressButton(ctx, answer, bridge.ActionVoteUp, slackUser)
	if err != nil {
		t.Fatalf("press 👍: %v", err)
	}
	if _, err := s.slack.WaitResponse(ctx, func(p slacktest.ResponsePost) bool {
		return p.URL == d.ResponseURL && strings.Contains(p.Text, "Thanks for the feedback")
	}); err != nil {
		t.Fatalf("acknowledgement of 👍: %v", err)
	}

	if code, body := adminGet(t, s.admin, "/metrics", ""); code != http.StatusOK || !strings.Contains(body, `flowbridge_feedback_total{agent="helper",vote="up"} 1`) {
		t.Errorf("/metrics = %d, want flowbridge_feedback_total{agent=\"helper\",vote=\"up\"} 1 in:\n%s", code, grepLines(body, "feedback"))
	}
	check := func(via string) {
		t.Helper()
		out, errOut, err := runCmd(t, s.env, "", "feedback", "-config", s.path, "-json", "-agent", "helper")
		if err != nil {
			t.Fatalf("%s: feedback -json: %v\n%s", via, err, errOut)
		}
		var v store.Vote
		if err := json.Unmarshal([]byte(out), &v); err != nil || strings.Count(out, "\n") != 1 {
			t.Fatalf("%s: feedback -json = %q (%v), want one vote as one JSON line", via, out, err)
		}
		if v.Value != store.VoteUp || v.Agent != "helper" || v.Platform != "slack" || v.User != slackUser || v.Session == "" || v.Reply == "" {
			t.Errorf("%s: vote = %+v, want %s's 👍 for helper on Slack", via, v, slackUser)
		}
		// It names the answer it rates.
		if v.Message != slackChannel+"/"+answer.TS || !strings.Contains(v.Link, "/archives/"+slackChannel+"/p") ||
			!strings.HasPrefix(v.Turn, "slack/msg/"+slackChannel+"/") || !strings.Contains(v.Excerpt, "You said: rate me") {
			t.Errorf("%s: vote traces to message %q, link %q, turn %q, excerpt %q; want the answer %s", via, v.Message, v.Link, v.Turn, v.Excerpt, answer.TS)
		}
		out, _, err = runCmd(t, s.env, "", "feedback", "-config", s.path, "-csv")
		if err != nil {
			t.Fatalf("%s: feedback -csv: %v", via, err)
		}
		rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil || len(rows) != 2 || !slices.Equal(rows[0], voteColumns) {
			t.Fatalf("%s: feedback -csv = %q (%v), want the header and one row", via, out, err)
		}
		row := map[string]string{}
		for i, c := range rows[0] {
			row[c] = rows[1][i]
		}
		if row["vote"] != "up" || row["message"] != v.Message || row["link"] != v.Link || row["turn"] != v.Turn || row["excerpt"] != v.Excerpt {
			t.Errorf("%s: feedback -csv row = %v, want the vote %+v", via, row, v)
		}
		out, _, err = runCmd(t, s.env, "", "feedback", "-config", s.path, "-vote", "down")
		if err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, "VOTE") {
			t.Errorf("%s: feedback -vote down = %q, %v, want only the header", via, out, err)
		}
	}
	check("admin API")
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	check("file")
	out, _, err := runCmd(t, s.env, "", "feedback", "-config", s.path)
	if err != nil || !strings.Contains(out, "helper") || !strings.Contains(out, " up ") || !strings.Contains(out, "You said: rate me") {
		t.Errorf("feedback table = %q, %v, want a row of helper's up vote with the answer", out, err)
	}
	for _, bad := range [][]string{{"-vote", "sideways"}, {"-since", "yesterday"}, {"-limit", "-1"}, {"-csv", "-json"}} {
		_, _, err := runCmd(t, s.env, "", append([]string{"feedback", "-config", s.path}, bad...)...)
		var ue *usageError
		if !errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
			t.Errorf("feedback %v = %v, want a usage error", bad, err)
		}
	}
}

// TestVotesCSVNoFormula: free text that a spreadsheet would run as a
// formula is exported with a leading apostrophe; the rest as written.
func TestVotesCSVNoFormula(t *testing.T) {
	var b strings.Builder
	votes := []store.Vote{
		{Value: store.VoteUp, UserName: "=cmd", Excerpt: "+SUM(A1)"},
		{Value: store.VoteDown, UserName: "Ann, \"A\"", Excerpt: "line one\nline two"},
	}
	if err := writeVotesCSV(&b, votes); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("writeVotesCSV() = %q (%v), want a header and two rows", b.String(), err)
	}
	col := func(name string) int { return slices.Index(voteColumns, name) }
	for i, want := range [][2]string{{"'=cmd", "'+SUM(A1)"}, {"Ann, \"A\"", "line one\nline two"}} {
		if got := [2]string{rows[i+1][col("user_name")], rows[i+1][col("excerpt")]}; got != want {
			t.Errorf("row %d user_name, excerpt = %q, want %q", i+1, got, want)
		}
	}
}
