package main

import (
	"github.com/flowbridge/flowbridge/testkit/loadkit"

	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRunKill runs the kill scenario (kill_harness_test.go) against the
// real binary: flowbridge in Slack's HTTP mode under load, -kills SIGKILLs
// about -kill-every apart, Slack's redeliveries after each restart. The
// promises must hold (the three zeros), the kills and redeliveries must have
// happened, and the run must leave no process and no file behind. Briefly
// by default; the README's longer run:
//
//	go test ./cmd/flowbridge-chaos -run 'TestRunKill$' -v -args -kill-every 2s -kills 25 -kill-conversations 300 -kill-rate 100
func TestRunKill(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	p := killParams(t, tmp)
	p.KillEvery, p.Kills, p.Conversations, p.Rate = *killEvery, *kills, *killConversations, *killRate
	got, err := runKill(t.Context(), p, nil)
	if err != nil {
		t.Fatalf("runKill: %v", err)
	}
	var out bytes.Buffer
	printKillTable(&out, got)
	t.Logf("\n%s", out.String())
	checkKill(t, got, p.Kills, tmp)
}

var (
	killEvery         = flag.Duration("kill-every", 300*time.Millisecond, "TestRunKill: mean time to a SIGKILL (exponential, at most 3x)")
	kills             = flag.Int("kills", 3, "TestRunKill: how many SIGKILLs")
	killConversations = flag.Int("kill-conversations", 30, "TestRunKill: concurrent conversations")
	killRate          = flag.Float64("kill-rate", 30, "TestRunKill: messages a second offered in all")
)

// killParams are the kill scenario's parameters for a short test run in tmp.
func killParams(t *testing.T, tmp string) params {
	return params{Conversations: 30, Rate: 30, APILatency: 50 * time.Millisecond, ReplyTimeout: 5 * time.Second,
		KillEvery: 300 * time.Millisecond, Kills: 3, RedeliverWindow: 10 * time.Second, FlowShare: 0.1, Platform: "slack",
		Cores: runtime.NumCPU(), flowbridge: flowbridgeBin(t), tmp: loadkit.TempDir{Parent: tmp, Log: t.Output()}}
}

// checkKill fails t for a kill run that broke a promise, did not make its
// kills, or left a file in tmp or a process behind.
func checkKill(t *testing.T, got *killResult, kills int, tmp string) {
	t.Helper()
	for _, v := range got.Violations {
		t.Errorf("broken: %s", v)
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{fmt.Sprintf("%d kills", kills), got.Kills == kills && len(got.KilledAtSec) == kills},
		{"messages and commands offered", got.MessagesOffered > 0 && got.CommandsOffered > 0},
		{"messages acknowledged", got.MessagesAcked > 0},
		{"redeliveries sent", got.Redeliveries > 0},
		{"answered", got.AnsweredOnce > 0 && got.AgentCalls > 0},
		{"no message sent to the agent twice", got.DuplicateAgentCalls == 0},
		{"no flow run twice", got.DuplicateFlowRuns == 0},
		{"no message answered twice", got.DuplicateReplies == 0},
		{"no acknowledged message left without answer or notice", got.AckedSilent == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not so in %+v", c.name, got)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
	// Every process of the run names its configuration under tmp, so the
	// processes of the tests running beside this one are not taken for
	// its own; one that exited unreaped would leave loadkit.Start's Wait
	// goroutine behind, which TestMain's goleak fails on.
	if procs := processesUnder(t, tmp); len(procs) > 0 {
		t.Errorf("processes left behind: %v", procs)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-replicas", "0"}, "-replicas 0: want 1 to 10"},
		{[]string{"-replicas", "11"}, "-replicas 11: want 1 to 10"},
		{[]string{"-burst", "0"}, "-burst 0"},
		{[]string{"-kills", "2"}, "flag provided but not defined: -kills"},
		{[]string{"-replicas", "3", "-platform", "discord"}, "at most 2 replicas"},
		{[]string{"-order-hold", "soon"}, `-order-hold "soon"`},
		{[]string{"-rate", "0"}, "-rate 0"},
		{[]string{"extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(t.Context(), append(tt.args, "-flowbridge", "/nonexistent"), &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run(-h) = %v, want flag.ErrHelp", err)
	}
	if n := strings.Count(errOut.String(), "\n"); n < 10 || n > 40 {
		t.Errorf("run(-h) printed %d lines, want a screen (40 at most):\n%s", n, errOut.String())
	}
}

// TestLedger feeds the ledger what the fakes would record and checks what it
// makes of each message.
func TestLedger(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const restarted = "flowbridge restarted while it was answering your message, so there is no answer to it. Please send it again."
	// Conversation 1 is a DM (a thread per message), 2 a channel thread (a
	// user per message), 3 runs flows (a response_url per command).
	dm := func(seq int) *tally {
		return &tally{m: marker{Conv: 1, Seq: seq}, offered: at(seq * 100), acked: true, where: where{channel: "D1", thread: fmt.Sprintf("1600000000.%06d", seq)}}
	}
	th := func(seq int) *tally {
		return &tally{m: marker{Conv: 2, Seq: seq}, offered: at(seq * 100), acked: true, where: where{channel: "C2", user: fmt.Sprintf("U2X%d", seq)}}
	}
	fl := func(seq int) *tally {
		return &tally{m: marker{Conv: 3, Seq: seq}, flow: true, offered: at(seq * 100), acked: true, where: where{channel: "CF3", responseURL: fmt.Sprintf("http://front/response/commands-%d", seq)}}
	}
	answer := func(m marker) string { return "[turn 1] You said: hello " + m.String() + " how are you" }

	l := newLedger()
	ts := []*tally{dm(0), dm(1), dm(2), th(0), th(1), th(2), fl(0), fl(1), fl(2)}
	for _, tt := range ts {
		l.add(tt)
	}
	// dm 0: answered once, through a placeholder replaced in place.
	l.call(marker{Conv: 1, Seq: 0})
	l.reply(where{channel: "D1", thread: "1600000000.000000"}, "D1:1", "_Thinking…_", at(50))
	l.reply(where{channel: "D1"}, "D1:1", answer(marker{Conv: 1, Seq: 0}), at(60))
	l.reply(where{channel: "D1"}, "D1:1", answer(marker{Conv: 1, Seq: 0}), at(61)) // the same message again: not a duplicate
	// dm 1: answered, then needlessly told after a crash. dm 2: sent when
	// the process died, told. The notices name their threads, so each goes
	// to its own message although dm 1 waits too.
	l.call(marker{Conv: 1, Seq: 1})
	l.call(marker{Conv: 1, Seq: 2})
	l.reply(where{channel: "D1", thread: "1600000000.000001"}, "D1:2", answer(marker{Conv: 1, Seq: 1}), at(150))
	l.reply(where{channel: "D1", thread: "1600000000.000002", user: "U1"}, "D1:3", restarted, at(400))
	l.reply(where{channel: "D1", thread: "1600000000.000001", user: "U1"}, "D1:4", restarted, at(401))
	// thread 0: sent to the agent twice and answered in two messages.
	l.call(marker{Conv: 2, Seq: 0})
	l.call(marker{Conv: 2, Seq: 0})
	l.reply(where{channel: "C2", thread: "1.0"}, "C2:1", answer(marker{Conv: 2, Seq: 0}), at(50))
	l.reply(where{channel: "C2", thread: "1.0"}, "C2:2", answer(marker{Conv: 2, Seq: 0}), at(70))
	// thread 1: acknowledged and never heard of again. thread 2: told twice.
	l.reply(where{channel: "C2", thread: "1.0", user: "U2X2"}, "C2:3", restarted, at(300))
	l.reply(where{channel: "C2", thread: "1.0", user: "U2X2"}, "C2:4", restarted, at(350))
	// flow 0: progress, then the result replacing it. flow 1: progress, then
	// told. flow 2: a notice naming no place, matched by its conversation.
	l.call(marker{Conv: 3, Seq: 0})
	l.reply(where{responseURL: "http://fake/response/commands-0"}, "url:1", "Running *slow*…", at(10))
	l.reply(where{responseURL: "http://fake/response/commands-0"}, "url:1", "slow flow done "+marker{Conv: 3, Seq: 0}.String(), at(1500))
	l.reply(where{responseURL: "http://fake/response/commands-1"}, "url:2", "Running *slow*…", at(110))
	l.reply(where{responseURL: "http://fake/response/commands-1"}, "url:2", "flowbridge restarted while *slow* was running. It may or may not have run: check before running it again.", at(900))
	l.reply(where{channel: "CF3"}, "CF3:9", "The AI workspace could not be reached. Please try again in a moment.", at(950))
	// Strays and notices nobody waits for.
	l.reply(where{channel: "C9"}, "C9:1", answer(marker{Conv: 9, Seq: 9}), at(10))
	l.reply(where{channel: "C9"}, "C9:2", "busy", at(10))

	r := newKillResult(params{}, l, t0)
	want := map[string][2]int{ // figure: got, want
		"duplicate_agent_calls":           {r.DuplicateAgentCalls, 1},
		"duplicate_flow_runs":             {r.DuplicateFlowRuns, 0},
		"duplicate_replies":               {r.DuplicateReplies, 1},
		"acked_neither_answered_nor_told": {r.AckedSilent, 1},
		"answered_once":                   {r.AnsweredOnce, 3}, // dm 0, dm 1, flow 0
		"told_restarted_chat":             {r.ToldRestartedChat, 3},
		"told_restarted_flow":             {r.ToldRestartedFlow, 1},
		"told_other":                      {r.ToldOther, 1},
		"answered_and_told":               {r.AnsweredAndTold, 1},
		"told_twice":                      {r.ToldTwice, 1},
		"stray_answers":                   {r.StrayAnswers, 1},
		"unattributed_notices":            {r.UnattributedNotices, 1},
		"notices_matched_by_conversation": {r.NoticesByConversation, 1},
		"messages_offered":                {r.MessagesOffered, 6},
		"commands_offered":                {r.CommandsOffered, 3},
	}
	for name, gw := range want {
		if gw[0] != gw[1] {
			t.Errorf("%s = %d, want %d", name, gw[0], gw[1])
		}
	}
	if err := r.broken(); err == nil {
		t.Errorf("broken() = nil with duplicates and a silent message")
	}
	for _, tt := range ts[:3] {
		if tt.m.Seq == 2 && (len(tt.told) != 1 || !tt.restarted || len(tt.answers) != 0) {
			t.Errorf("dm 2: told %q, answers %q; want the restart notice alone", tt.told, tt.answers)
		}
	}
	if got := (&killResult{}).broken(); got != nil {
		t.Errorf("broken() of a clean run = %v, want nil", got)
	}
}

func TestPick(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const restarted = "flowbridge restarted while it was answering your message"
	tests := []struct {
		name    string
		tallies []*tally
		text    string
		at      int
		want    int // seq picked, -1 for none
	}{
		{"sent and unanswered first", []*tally{
			{m: marker{Conv: 1, Seq: 0}, offered: at(0), calls: 1, answers: []string{"a"}},
			{m: marker{Conv: 1, Seq: 1}, offered: at(10), calls: 1},
		}, restarted, 100, 1},
		{"then answered but not told", []*tally{
			{m: marker{Conv: 1, Seq: 0}, offered: at(0), calls: 1, answers: []string{"a"}},
			{m: marker{Conv: 1, Seq: 1}, offered: at(10)},
		}, restarted, 100, 0},
		{"not offered yet", []*tally{
			{m: marker{Conv: 1, Seq: 0}, offered: at(200)},
		}, restarted, 100, -1},
		{"other notices go to the oldest waiting", []*tally{
			{m: marker{Conv: 1, Seq: 0}, offered: at(0), calls: 1, answers: []string{"a"}},
			{m: marker{Conv: 1, Seq: 1}, offered: at(10)},
			{m: marker{Conv: 1, Seq: 2}, offered: at(20)},
		}, "busy", 100, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger()
			for _, x := range tt.tallies {
				l.add(x)
			}
			got := l.pick(1, tt.text, at(tt.at))
			switch {
			case tt.want < 0 && got != nil:
				t.Errorf("pick = %v, want none", got.m)
			case tt.want >= 0 && (got == nil || got.m.Seq != tt.want):
				t.Errorf("pick = %v, want seq %d", got, tt.want)
			}
		})
	}
}

// TestLedgerCountsWhatUsersSee: a notice is counted once per message its
// user sees: one rewritten in place (a response_url post with
// replace_original, which the fake records under the message it replaced)
// is one, two messages are two. A notice marked with its message's inbox
// key (Slack metadata) goes to that message, though others wait in the
// same thread.
func TestLedgerCountsWhatUsersSee(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const restarted = "flowbridge restarted while it was answering your message"
	flowRestarted := "flowbridge restarted while *slow* was running. It may or may not have run: check before running it again."
	l := newLedger()
	replaced := &tally{m: marker{Conv: 1, Seq: 0}, flow: true, offered: at(0), acked: true, where: where{channel: "CF1", responseURL: "http://front/response/commands-0", key: "slack/cmd/T0"}}
	doubled := &tally{m: marker{Conv: 2, Seq: 0}, flow: true, offered: at(0), acked: true, where: where{channel: "CF2", responseURL: "http://front/response/commands-1", key: "slack/cmd/T1"}}
	first := &tally{m: marker{Conv: 3, Seq: 0}, offered: at(0), acked: true, calls: 1, where: where{channel: "C3", user: "U3X0", key: "slack/msg/C3/1.000001"}}
	second := &tally{m: marker{Conv: 3, Seq: 1}, offered: at(10), acked: true, calls: 1, where: where{channel: "C3", user: "U3X1", key: "slack/msg/C3/1.000002"}}
	for _, tt := range []*tally{replaced, doubled, first, second} {
		l.add(tt)
	}
	l.reply(where{responseURL: "http://fake/response/commands-0"}, "url:5", flowRestarted, at(100))
	l.reply(where{responseURL: "http://fake/response/commands-0"}, "url:5", flowRestarted, at(200)) // re-posted, replacing it
	l.reply(where{responseURL: "http://fake/response/commands-1"}, "url:6", flowRestarted, at(100))
	l.reply(where{responseURL: "http://fake/response/commands-1"}, "url:7", flowRestarted, at(200)) // re-posted beside it
	// Both wait in thread 1.0; the notice is marked with the second's key.
	l.reply(where{channel: "C3", thread: "1.0", key: "slack/msg/C3/1.000002"}, "C3:9", restarted, at(300))

	r := newKillResult(params{}, l, t0)
	if r.ToldTwice != 1 || len(r.ToldTwiceDetail) != 1 || r.ToldTwiceDetail[0].Marker != doubled.m.String() {
		t.Errorf("told twice = %d (%+v), want 1: the notice posted beside the first, not the one replacing it", r.ToldTwice, r.ToldTwiceDetail)
	}
	if len(second.told) != 1 || len(first.told) != 0 || r.NoticesByConversation != 0 {
		t.Errorf("told: first %q, second %q, %d matched by conversation; want the marked notice on the second alone", first.told, second.told, r.NoticesByConversation)
	}
}
