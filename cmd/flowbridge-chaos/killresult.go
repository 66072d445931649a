package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

// killResult is a -kill-every run's figures. The three must-be-zero ones
// are duplicate_agent_calls + duplicate_flow_runs, duplicate_replies and
// acked_neither_answered_nor_told.
type killResult struct {
	Mode          string  `json:"mode"`
	Conversations int     `json:"conversations"`
	FlowConvs     int     `json:"flow_conversations"`
	Rate          float64 `json:"offered_rate"`
	KillEveryMS   float64 `json:"kill_every_ms"`
	APILatencyMS  float64 `json:"api_latency_ms"`
	RedeliverSec  float64 `json:"redeliver_window_sec"`
	Cores         int     `json:"cores"`
	ElapsedSec    float64 `json:"elapsed_sec"`
	OfferedPerSec float64 `json:"offered_per_sec"`
	killStats
	// KilledAtSec are the kills' times since the start.
	KilledAtSec []float64 `json:"killed_at_sec"`

	MessagesOffered int `json:"messages_offered"`
	CommandsOffered int `json:"commands_offered"`
	MessagesAcked   int `json:"messages_acked"`
	CommandsAcked   int `json:"commands_acked"`
	AgentCalls      int `json:"agent_calls"`
	FlowRuns        int `json:"flow_runs"`

	// The promises: each must be 0.
	DuplicateAgentCalls int `json:"duplicate_agent_calls"`
	DuplicateFlowRuns   int `json:"duplicate_flow_runs"`
	DuplicateReplies    int `json:"duplicate_replies"`
	AckedSilent         int `json:"acked_neither_answered_nor_told"`

	AnsweredOnce      int `json:"answered_once"`
	ToldRestartedChat int `json:"told_restarted_chat"`
	ToldRestartedFlow int `json:"told_restarted_flow"`
	ToldOther         int `json:"told_other"`
	// AnsweredAndTold were answered, and after a crash told "restarted
	// while…" too: the process died between the answer and recording it.
	// ToldTwice were told more than once: it died between a notice and
	// recording it. Neither breaks a promise; both are counted.
	AnsweredAndTold int `json:"answered_and_told"`
	ToldTwice       int `json:"told_twice"`
	// NotAcked were never answered 200 (Slack gave up, or a slash command
	// the user saw fail); NotAckedAnswered of them were answered or told all
	// the same, having been recorded before the process died.
	NotAcked int `json:"not_acked"`
	// NotAckedDetail shows the first of them.
	NotAckedDetail   []violation `json:"not_acked_detail,omitempty"`
	NotAckedAnswered int         `json:"not_acked_answered_or_told"`
	// StrayAnswers carry a marker nobody offered; UnattributedNotices came
	// in a conversation with no message waiting.
	StrayAnswers        int `json:"stray_answers"`
	UnattributedNotices int `json:"unattributed_notices"`
	// NoticesByConversation named no message's place and were matched to a
	// message of their conversation by ledger.pick.
	NoticesByConversation int `json:"notices_matched_by_conversation"`

	Violations []violation `json:"violations,omitempty"`
	// ToldTwiceDetail shows the messages told more than once (a process
	// killed after it told, before it recorded so): not a broken promise.
	ToldTwiceDetail []violation `json:"told_twice_detail,omitempty"`
	Notes           []string    `json:"notes,omitempty"`
}

// killStats are the run's delivery figures.
type killStats struct {
	Kills             int `json:"kills"`
	KilledBeforeReady int `json:"killed_before_ready"`
	Deliveries        int `json:"deliveries"`
	Redeliveries      int `json:"redeliveries"`
	RedeliveriesAcked int `json:"redeliveries_acked"`
	FailedDeliveries  int `json:"failed_deliveries"`
}

// violation is one broken promise, with what the fakes saw. Times are
// seconds since the start, to set beside killed_at_sec and the processes'
// logs (flowbridge-NN.log with -keep).
type violation struct {
	What        string    `json:"what"`
	Marker      string    `json:"marker"`
	Key         string    `json:"slack_id"` // event_id or trigger_id
	Channel     string    `json:"channel"`
	Place       string    `json:"place,omitempty"` // its thread or user, which its notices name
	OfferedSec  float64   `json:"offered_sec"`
	Deliveries  int       `json:"deliveries"`
	Acked       bool      `json:"acked"`
	AckedSec    float64   `json:"acked_sec,omitempty"`
	AckedBy     int       `json:"acked_by_process"`
	Calls       int       `json:"calls"`
	Answers     []string  `json:"answers,omitempty"`
	AnsweredSec float64   `json:"answered_sec,omitempty"`
	Told        []string  `json:"told,omitempty"`
	ToldSec     []float64 `json:"told_sec,omitempty"`
}

// maxViolations bounds the violations listed; all are counted.
const maxViolations = 50

func newKillResult(p params, l *ledger, t0 time.Time) *killResult {
	r := &killResult{
		Mode: "kill", Conversations: p.Conversations, Rate: p.Rate, KillEveryMS: loadkit.MS(p.KillEvery),
		APILatencyMS: loadkit.MS(p.APILatency), RedeliverSec: p.RedeliverWindow.Seconds(), Cores: p.Cores,
		StrayAnswers: len(l.strays), UnattributedNotices: len(l.unattributed), NoticesByConversation: l.byConv,
	}
	flowConvs := map[int]bool{}
	var all []*tally
	for _, t := range l.offers {
		all = append(all, t)
	}
	slices.SortFunc(all, func(a, b *tally) int { return cmp.Or(cmp.Compare(a.m.Conv, b.m.Conv), cmp.Compare(a.m.Seq, b.m.Seq)) })
	for _, t := range all {
		if t.flow {
			flowConvs[t.m.Conv] = true
		}
		r.tally(t, t0)
	}
	r.FlowConvs = len(flowConvs)
	for _, s := range l.strays {
		r.Notes = append(r.Notes, "stray answer "+s)
	}
	for _, s := range l.unattributed {
		r.Notes = append(r.Notes, "unattributed notice "+s)
	}
	if len(r.Notes) > maxViolations {
		r.Notes = r.Notes[:maxViolations]
	}
	return r
}

// detail is t as a violation of what, times since t0.
func detail(what string, t *tally, t0 time.Time) violation {
	v := violation{What: what, Marker: t.m.String(), Key: t.id, Channel: t.where.channel, Place: t.where.thread + t.where.user,
		OfferedSec: t.offered.Sub(t0).Seconds(), Acked: t.acked, Calls: t.calls, Answers: t.answers}
	if !t.answeredAt.IsZero() {
		v.AnsweredSec = t.answeredAt.Sub(t0).Seconds()
	}
	for i, s := range t.told {
		v.Told = append(v.Told, oneLine(s))
		v.ToldSec = append(v.ToldSec, t.toldAt[i].Sub(t0).Seconds())
	}
	return v
}

// tally counts what became of one offered message.
func (r *killResult) tally(t *tally, t0 time.Time) {
	add := func(what string, t *tally) {
		if len(r.Violations) < maxViolations {
			r.Violations = append(r.Violations, detail(what, t, t0))
		}
	}
	if t.flow {
		r.CommandsOffered++
		if t.acked {
			r.CommandsAcked++
		}
	} else {
		r.MessagesOffered++
		if t.acked {
			r.MessagesAcked++
		}
	}
	switch {
	case t.calls > 1 && t.flow:
		r.DuplicateFlowRuns++
		add(fmt.Sprintf("flow run sent %d times", t.calls), t)
	case t.calls > 1:
		r.DuplicateAgentCalls++
		add(fmt.Sprintf("sent to the agent %d times", t.calls), t)
	}
	if len(t.answers) > 1 {
		r.DuplicateReplies++
		add(fmt.Sprintf("answered in %d messages", len(t.answers)), t)
	}
	if t.acked && !t.resolved() {
		r.AckedSilent++
		add("acknowledged, neither answered nor told", t)
	}
	if !t.acked {
		if len(r.NotAckedDetail) < maxViolations {
			r.NotAckedDetail = append(r.NotAckedDetail, detail("never acknowledged", t, t0))
		}
		r.NotAcked++
		if t.resolved() {
			r.NotAckedAnswered++
		}
	}
	if len(t.answers) == 1 {
		r.AnsweredOnce++
	}
	switch {
	case t.restarted && t.flow:
		r.ToldRestartedFlow++
	case t.restarted:
		r.ToldRestartedChat++
	case len(t.told) > 0:
		r.ToldOther++
	}
	if len(t.answers) > 0 && len(t.told) > 0 {
		r.AnsweredAndTold++
	}
	if len(t.told) > 1 {
		r.ToldTwice++
		if len(r.ToldTwiceDetail) < maxViolations {
			r.ToldTwiceDetail = append(r.ToldTwiceDetail, detail(fmt.Sprintf("told %d times", len(t.told)), t, t0))
		}
	}
}

// broken returns the promises the run saw broken, or nil.
func (r *killResult) broken() error {
	var errs []error
	if n := r.DuplicateAgentCalls + r.DuplicateFlowRuns; n > 0 {
		errs = append(errs, fmt.Errorf("%d messages or flows sent to the workspace more than once", n))
	}
	if r.DuplicateReplies > 0 {
		errs = append(errs, fmt.Errorf("%d messages answered more than once", r.DuplicateReplies))
	}
	if r.AckedSilent > 0 {
		errs = append(errs, fmt.Errorf("%d acknowledged messages neither answered nor told", r.AckedSilent))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("promises broken: %w", errors.Join(errs...))
}

func (v violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s (%s in %s", v.What, v.Marker, v.Key, v.Channel)
	if v.Place != "" {
		fmt.Fprintf(&b, " at %s", v.Place)
	}
	fmt.Fprintf(&b, "), offered at %.3f s, %d deliveries", v.OfferedSec, v.Deliveries)
	if v.Acked {
		fmt.Fprintf(&b, ", acknowledged at %.3f s by process %d", v.AckedSec, v.AckedBy)
	} else {
		b.WriteString(", never acknowledged")
	}
	fmt.Fprintf(&b, ", %d workspace calls", v.Calls)
	if len(v.Answers) > 0 {
		fmt.Fprintf(&b, ", answered at %.3f s in %q", v.AnsweredSec, v.Answers)
	}
	for i, t := range v.Told {
		fmt.Fprintf(&b, ", told at %.3f s %q", v.ToldSec[i], t)
	}
	return b.String()
}
