package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// quantiles summarise a latency distribution in milliseconds.
type quantiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// quantilesOf uses the nearest-rank method; it sorts d.
func quantilesOf(d []time.Duration) quantiles {
	if len(d) == 0 {
		return quantiles{}
	}
	slices.Sort(d)
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(d)))) - 1
		return ms(d[max(i, 0)])
	}
	return quantiles{N: len(d), P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: ms(d[len(d)-1])}
}

// result is one run's figures with the parameters that produced them.
type result struct {
	params
	Messages       int       `json:"messages"`
	Lost           int       `json:"lost"`
	WarmupLost     int       `json:"warmup_lost"`
	ElapsedSec     float64   `json:"elapsed_sec"`
	MessagesPerSec float64   `json:"messages_per_sec"`
	AddedLatencyMS quantiles `json:"added_latency_ms"`
	// AddedLatencyByMinute splits AddedLatencyMS by the minute of the
	// measured phase, for runs of two minutes or more (soaks).
	AddedLatencyByMinute []quantiles `json:"added_latency_ms_by_minute,omitempty"`
	EndToEndMS           quantiles   `json:"end_to_end_ms"`
	APIServiceMS         quantiles   `json:"api_service_ms"`
	AckLatencyMS         quantiles   `json:"ack_latency_ms"`
	Acks                 int         `json:"acks"`
	AcksMissing          int         `json:"acks_missing"`
	CPUSec               float64     `json:"cpu_sec"`
	CPUUSPerMessage      float64     `json:"cpu_us_per_message"`
	// CPUSysUSPerMessage is the kernel's part of CPUUSPerMessage: mostly TCP,
	// which on loopback includes delivering to the fakes' side of the socket.
	CPUSysUSPerMessage    float64 `json:"cpu_sys_us_per_message"`
	CPUSecPer1000Messages float64 `json:"cpu_sec_per_1000_messages"`
	DriverCPUSec          float64 `json:"driver_cpu_sec"`
	IdleRSSMB             float64 `json:"idle_rss_mb"`
	RSSMB                 float64 `json:"rss_mb"`
	PeakRSSMB             float64 `json:"peak_rss_mb"`
	StoreBytes            int64   `json:"store_bytes"`
	// SlackPostsRefused counts the chat.postMessage calls answered 429
	// with -slack-post-limit.
	SlackPostsRefused int `json:"slack_posts_refused,omitempty"`
}

func printTable(w io.Writer, r *result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	if r.Floor {
		fmt.Fprintf(tw, "measured\tthe bare relay (-floor), not flowbridge\n")
	}
	fmt.Fprintf(tw, "parameters\t%s, %d conversations, %d users, %.0f s, API %.0f ms, think %.0f ms, %d long flows of %.0f s, indicator after %.0f ms, %d cores\n",
		r.Platform, r.Conversations, r.Users, r.DurationSec, r.APILatencyMS, r.ThinkMS, r.LongFlows, r.LongFlowSec, r.IndicatorDelayMS, r.Cores)
	fmt.Fprintf(tw, "messages\t%d (lost %d, warm-up lost %d) in %.1f s\n", r.Messages, r.Lost, r.WarmupLost, r.ElapsedSec)
	fmt.Fprintf(tw, "messages/s\t%.1f\n", r.MessagesPerSec)
	fmt.Fprintf(tw, "\tp50\tp90\tp99\tmax\n")
	for _, row := range []struct {
		name string
		q    quantiles
	}{
		{"added latency ms", r.AddedLatencyMS},
		{"end-to-end ms", r.EndToEndMS},
		{"API service ms", r.APIServiceMS},
		{fmt.Sprintf("ack latency ms (%d, %d missing)", r.Acks, r.AcksMissing), r.AckLatencyMS},
	} {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\n", row.name, row.q.P50, row.q.P90, row.q.P99, row.q.Max)
	}
	for i, q := range r.AddedLatencyByMinute {
		fmt.Fprintf(tw, "  minute %d (%d)\t%.3f\t%.3f\t%.3f\t%.3f\n", i+1, q.N, q.P50, q.P90, q.P99, q.Max)
	}
	fmt.Fprintf(tw, "bridge CPU\t%.2f s, %.1f µs/message (%.1f in the kernel), %.3f s per 1000 messages\n", r.CPUSec, r.CPUUSPerMessage, r.CPUSysUSPerMessage, r.CPUSecPer1000Messages)
	fmt.Fprintf(tw, "driver CPU\t%.2f s (this process: fakes and users)\n", r.DriverCPUSec)
	fmt.Fprintf(tw, "bridge RSS MB\tidle %.1f, end %.1f, peak %.1f\n", r.IdleRSSMB, r.RSSMB, r.PeakRSSMB)
	fmt.Fprintf(tw, "store bytes\t%d\n", r.StoreBytes)
	if r.SlackPostLimit {
		fmt.Fprintf(tw, "Slack posts refused\t%d (429 past a message a second per channel; their waits are in the added latency)\n", r.SlackPostsRefused)
	}
}

// sweep is -sweep's output: every run, and each figure relative to the run
// with sweepBase conversations.
type sweep struct {
	Runs   []*result            `json:"runs"`
	Ratios []map[string]float64 `json:"ratios_to_10"`
}

// sweepFigures are the figures whose growth -sweep shows.
var sweepFigures = []struct {
	key string
	get func(*result) float64
}{
	{"messages_per_sec", func(r *result) float64 { return r.MessagesPerSec }},
	{"added_p50_ms", func(r *result) float64 { return r.AddedLatencyMS.P50 }},
	{"added_p99_ms", func(r *result) float64 { return r.AddedLatencyMS.P99 }},
	{"ack_p99_ms", func(r *result) float64 { return r.AckLatencyMS.P99 }},
	{"cpu_us_per_message", func(r *result) float64 { return r.CPUUSPerMessage }},
	{"peak_rss_mb", func(r *result) float64 { return r.PeakRSSMB }},
	{"store_bytes", func(r *result) float64 { return float64(r.StoreBytes) }},
}

func newSweep(runs []*result) *sweep {
	s := &sweep{Runs: runs}
	var base *result
	for _, r := range runs {
		if r.Conversations == sweepBase {
			base = r
		}
	}
	for _, r := range runs {
		m := map[string]float64{"conversations": float64(r.Conversations)}
		for _, f := range sweepFigures {
			m[f.key] = ratio(f.get(r), base, f.get)
		}
		s.Ratios = append(s.Ratios, m)
	}
	return s
}

func ratio(v float64, base *result, get func(*result) float64) float64 {
	if base == nil || get(base) == 0 {
		return 0
	}
	return v / get(base)
}

func printSweep(w io.Writer, s *sweep) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer tw.Flush()
	fmt.Fprint(tw, "conversations\t")
	for _, f := range sweepFigures {
		fmt.Fprintf(tw, "%s\t", f.key)
	}
	fmt.Fprintln(tw)
	for i, r := range s.Runs {
		fmt.Fprintf(tw, "%d\t", r.Conversations)
		for _, f := range sweepFigures {
			fmt.Fprintf(tw, "%.3g (x%.2f)\t", f.get(r), s.Ratios[i][f.key])
		}
		fmt.Fprintln(tw)
	}
}

// printKillTable prints a -kill-every run's figures.
func printKillTable(w io.Writer, r *killResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "parameters\tSlack HTTP mode, %d conversations (%d run /flow slow), %.0f messages/s offered, API %.0f ms, a kill about every %.0f ms, redelivery window %.0f s, %d cores\n",
		r.Conversations, r.FlowConvs, r.Rate, r.APILatencyMS, r.KillEveryMS, r.RedeliverSec, r.Cores)
	fmt.Fprintf(tw, "kills\t%d (%d before the process listened), in %.1f s\n", r.Kills, r.KilledBeforeReady, r.ElapsedSec)
	if len(r.Damaged) > 0 {
		counts := map[string][2]int{}
		for _, d := range r.Damaged {
			c := counts[d.Kind]
			if d.Refused {
				c[0]++
			} else {
				c[1]++
			}
			counts[d.Kind] = c
		}
		var parts []string
		for _, kind := range damageKinds {
			if c, ok := counts[kind]; ok {
				parts = append(parts, fmt.Sprintf("%s: %d refused, %d served", kind, c[0], c[1]))
			}
		}
		fmt.Fprintf(tw, "starts on a damaged store\t%s\n", strings.Join(parts, "; "))
	}
	fmt.Fprintf(tw, "offered\t%d messages, %d /flow commands (%.1f messages/s while the users talked)\n", r.MessagesOffered, r.CommandsOffered, r.OfferedPerSec)
	fmt.Fprintf(tw, "acknowledged (200, at least once)\t%d messages, %d commands; %d never (%d of them answered or told all the same)\n", r.MessagesAcked, r.CommandsAcked, r.NotAcked, r.NotAckedAnswered)
	fmt.Fprintf(tw, "deliveries\t%d first, %d redeliveries with X-Slack-Retry-Num (%d acknowledged), %d failed\n", r.Deliveries, r.Redeliveries, r.RedeliveriesAcked, r.FailedDeliveries)
	fmt.Fprintf(tw, "workspace calls\t%d chat, %d flow runs\n", r.AgentCalls, r.FlowRuns)
	fmt.Fprintf(tw, "sent to the agent more than once (must be 0)\t%d\n", r.DuplicateAgentCalls)
	fmt.Fprintf(tw, "flow runs sent more than once (must be 0)\t%d\n", r.DuplicateFlowRuns)
	fmt.Fprintf(tw, "answered in more than one message (must be 0)\t%d\n", r.DuplicateReplies)
	fmt.Fprintf(tw, "acknowledged, neither answered nor told (must be 0)\t%d\n", r.AckedSilent)
	fmt.Fprintf(tw, "answered exactly once\t%d\n", r.AnsweredOnce)
	fmt.Fprintf(tw, "told \"restarted while…\"\t%d messages, %d flows\n", r.ToldRestartedChat, r.ToldRestartedFlow)
	fmt.Fprintf(tw, "told something else\t%d\n", r.ToldOther)
	fmt.Fprintf(tw, "answered and told\t%d (told twice: %d)\n", r.AnsweredAndTold, r.ToldTwice)
	fmt.Fprintf(tw, "stray answers, unattributed notices\t%d, %d (%d notices matched by conversation, not by place)\n", r.StrayAnswers, r.UnattributedNotices, r.NoticesByConversation)
	tw.Flush()
	for _, v := range r.Violations {
		fmt.Fprintf(w, "BROKEN: %s\n", v)
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(w, "kills at (s): %.3f\n", r.KilledAtSec)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
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
