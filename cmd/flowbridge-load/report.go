package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

// result is one run's figures with the parameters that produced them.
type result struct {
	params
	Messages       int               `json:"messages"`
	Lost           int               `json:"lost"`
	WarmupLost     int               `json:"warmup_lost"`
	ElapsedSec     float64           `json:"elapsed_sec"`
	MessagesPerSec float64           `json:"messages_per_sec"`
	AddedLatencyMS loadkit.Quantiles `json:"added_latency_ms"`
	// AddedLatencyByMinute splits AddedLatencyMS by the minute of the
	// measured phase, for runs of two minutes or more (soaks).
	AddedLatencyByMinute []loadkit.Quantiles `json:"added_latency_ms_by_minute,omitempty"`
	EndToEndMS           loadkit.Quantiles   `json:"end_to_end_ms"`
	APIServiceMS         loadkit.Quantiles   `json:"api_service_ms"`
	AckLatencyMS         loadkit.Quantiles   `json:"ack_latency_ms"`
	Acks                 int                 `json:"acks"`
	AcksMissing          int                 `json:"acks_missing"`
	CPUSec               float64             `json:"cpu_sec"`
	CPUUSPerMessage      float64             `json:"cpu_us_per_message"`
	// CPUSysUSPerMessage is the kernel's part of CPUUSPerMessage: mostly TCP,
	// which on loopback includes delivering to the fakes' side of the socket.
	CPUSysUSPerMessage    float64 `json:"cpu_sys_us_per_message"`
	CPUSecPer1000Messages float64 `json:"cpu_sec_per_1000_messages"`
	DriverCPUSec          float64 `json:"driver_cpu_sec"`
	IdleRSSMB             float64 `json:"idle_rss_mb"`
	RSSMB                 float64 `json:"rss_mb"`
	PeakRSSMB             float64 `json:"peak_rss_mb"`
	// StoreBytes is the store file's size, or the durable floor's journal's.
	StoreBytes int64 `json:"store_bytes"`
	// Syncs are the bridge's fsync and fdatasync calls in the measured
	// phase, counted by perf (-1: not counted, see Notes).
	Syncs           int64   `json:"syncs"`
	SyncsPerMessage float64 `json:"syncs_per_message"`
	// DiskKBPerMessage is what the bridge sent to storage in the measured
	// phase (write_bytes of /proc/PID/io), in KiB a message: the pages its
	// commits wrote; 0 on a tmpfs or where the kernel keeps no I/O
	// accounting.
	DiskKBPerMessage float64  `json:"disk_kb_per_message"`
	Notes            []string `json:"notes,omitempty"`
	// SlackPostsRefused counts the chat.postMessage calls answered 429
	// with -slack-post-limit.
	SlackPostsRefused int `json:"slack_posts_refused,omitempty"`
}

func printTable(w io.Writer, r *result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "measured\t%s\n", r.Mode)
	fmt.Fprintf(tw, "parameters\t%s, %d conversations, %d users, %.0f s, API %.0f ms, think %.0f ms, %d long flows of %.0f s, indicator after %.0f ms, %d cores\n",
		r.Platform, r.Conversations, r.Users, r.DurationSec, r.APILatencyMS, r.ThinkMS, r.LongFlows, r.LongFlowSec, r.IndicatorDelayMS, r.Cores)
	fmt.Fprintf(tw, "messages\t%d (lost %d, warm-up lost %d) in %.1f s\n", r.Messages, r.Lost, r.WarmupLost, r.ElapsedSec)
	fmt.Fprintf(tw, "messages/s\t%.1f\n", r.MessagesPerSec)
	fmt.Fprintf(tw, "\tp50\tp90\tp99\tmax\n")
	for _, row := range []struct {
		name string
		q    loadkit.Quantiles
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
	fmt.Fprintf(tw, "syncs\t%s\n", syncsText(r))
	fmt.Fprintf(tw, "written to disk\t%.1f KiB a message\n", r.DiskKBPerMessage)
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
	{"syncs_per_message", func(r *result) float64 { return r.SyncsPerMessage }},
	{"disk_kb_per_message", func(r *result) float64 { return r.DiskKBPerMessage }},
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

// syncsText is a run's syncs per message, or why they were not counted.
func syncsText(r *result) string {
	if r.Syncs < 0 {
		return "not counted"
	}
	return fmt.Sprintf("%.2f a message (%d)", r.SyncsPerMessage, r.Syncs)
}
