package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// runJSON runs the command with args, decodes its one JSON object into v
// and returns the output.
func runJSON(t *testing.T, args []string, v any) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(t.Context(), args, &out, &errOut); err != nil {
		t.Fatalf("run(%q) = %v\nstderr:\n%s", args, err, errOut.String())
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	return out.String()
}

// TestRunSmoke runs the whole command briefly with small numbers: it must
// work and report sane figures. Nothing here is a timed assertion. The long
// flows outlast the measured second.
func TestRunSmoke(t *testing.T) {
	t.Parallel()
	args := []string{
		"-json", "-platform", "both", "-conversations", "4", "-users", "2",
		"-duration", "1s", "-api-latency", "5ms", "-think", "20ms",
		"-long-flows", "2", "-long-flow-duration", "1500ms", "-ack-interval", "100ms",
		"-flowbridge", flowbridgeBin(t),
	}
	var got struct {
		Platform       string  `json:"platform"`
		Conversations  int     `json:"conversations"`
		Users          int     `json:"users"`
		Messages       int     `json:"messages"`
		MessagesPerSec float64 `json:"messages_per_sec"`
		AddedLatency   struct {
			N                  int
			P50, P90, P99, Max float64
		} `json:"added_latency_ms"`
		AckLatency struct {
			N   int
			P50 float64
			Max float64
		} `json:"ack_latency_ms"`
		CPUUSPerMessage float64  `json:"cpu_us_per_message"`
		PeakRSSMB       float64  `json:"peak_rss_mb"`
		IdleRSSMB       float64  `json:"idle_rss_mb"`
		StoreBytes      int64    `json:"store_bytes"`
		DiskKB          *float64 `json:"disk_kb_per_message"`
	}
	out := runJSON(t, args, &got)
	checks := []struct {
		name string
		ok   bool
	}{
		{"parameters reported", got.Platform == "both" && got.Conversations == 4 && got.Users == 2},
		{"messages > 0", got.Messages > 0 && got.AddedLatency.N == got.Messages},
		{"messages_per_sec > 0", got.MessagesPerSec > 0},
		{"added latency ordered", 0 <= got.AddedLatency.P50 && got.AddedLatency.P50 <= got.AddedLatency.P90 && got.AddedLatency.P90 <= got.AddedLatency.P99 && got.AddedLatency.P99 <= got.AddedLatency.Max},
		{"acks measured", got.AckLatency.N > 0 && got.AckLatency.P50 > 0 && got.AckLatency.P50 <= got.AckLatency.Max},
		{"cpu_us_per_message >= 0", got.CPUUSPerMessage >= 0},
		{"rss", got.IdleRSSMB > 0 && got.PeakRSSMB >= got.IdleRSSMB},
		{"store_bytes > 0", got.StoreBytes > 0},
		// 0 on a tmpfs or without the kernel's I/O accounting.
		{"disk_kb_per_message reported", got.DiskKB != nil && *got.DiskKB >= 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not so in %s", c.name, out)
		}
	}
}

func TestRunFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-platform", "irc"}, `-platform "irc"`},
		{[]string{"-conversations", "0"}, "-conversations 0"},
		{[]string{"-duration", "0s"}, "-duration 0s"},
		{[]string{"-mode", "ceiling"}, `-mode "ceiling"`},
		{[]string{"-rounds", "0"}, "-rounds 0"},
		{[]string{"-working-indicator", "spinner"}, "-working-indicator"},
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
	t.Run("help", func(t *testing.T) {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), []string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("run(-h) = %v, want flag.ErrHelp", err)
		}
		if !strings.Contains(errOut.String(), "-conversations") {
			t.Errorf("run(-h) printed %q, want the flags", errOut.String())
		}
		if n := strings.Count(errOut.String(), "\n"); n > 40 {
			t.Errorf("run(-h) printed %d lines, want a screen (40 at most):\n%s", n, errOut.String())
		}
	})
}

func TestSweepRatios(t *testing.T) {
	runs := []*result{
		{params: params{Conversations: 1}, MessagesPerSec: 10, PeakRSSMB: 20},
		{params: params{Conversations: 10}, MessagesPerSec: 100, PeakRSSMB: 20},
		{params: params{Conversations: 100}, MessagesPerSec: 1000, PeakRSSMB: 40},
	}
	s := newSweep(runs)
	if got := s.Ratios[2]["messages_per_sec"]; got != 10 {
		t.Errorf("messages_per_sec ratio at 100 = %v, want 10", got)
	}
	if got := s.Ratios[2]["peak_rss_mb"]; got != 2 {
		t.Errorf("peak_rss_mb ratio at 100 = %v, want 2", got)
	}
	if got := s.Ratios[0]["added_p50_ms"]; got != 0 {
		t.Errorf("ratio of a zero base = %v, want 0", got)
	}
}

func TestMinuteBuckets(t *testing.T) {
	var b minuteBuckets
	b.add(10*time.Second, 1*time.Millisecond)
	b.add(59*time.Second, 3*time.Millisecond)
	b.add(2*time.Minute+time.Second, 7*time.Millisecond)
	b.add(-time.Second, 2*time.Millisecond) // a reply just before the phase counts as its first minute
	q := b.quantiles()
	if len(q) != 3 || q[0].N != 3 || q[1].N != 0 || q[2].N != 1 || q[0].Max != 3 || q[2].P50 != 7 {
		t.Errorf("per-minute quantiles = %+v", q)
	}
}

// TestRunFloorsSmoke runs the floor and the durable floor briefly, in
// turn, twice: the relay, started as a child process (this test binary, see
// TestMain), must answer every message and probe; the durable floor must
// keep its journal beside the store, and sync at most four times a message
// (writers share syncs) and at least once; the plain floor not at all.
func TestRunFloorsSmoke(t *testing.T) {
	t.Parallel()
	args := []string{"-mode", "floor,durable-floor", "-rounds", "2", "-json", "-conversations", "4", "-duration", "500ms", "-api-latency", "5ms", "-think", "20ms", "-ack-interval", "100ms"}
	var got comparison
	runJSON(t, args, &got)
	if len(got.Runs) != 4 || len(got.Modes) != 2 {
		t.Fatalf("%d runs, %d modes; want 4 runs of 2 modes", len(got.Runs), len(got.Modes))
	}
	for i, r := range got.Runs {
		wantMode := []string{"floor", "durable-floor"}[i%2]
		if r.Mode != wantMode || r.Round != i/2+1 {
			t.Errorf("run %d: %s round %d, want %s round %d: the modes in turn", i, r.Mode, r.Round, wantMode, i/2+1)
		}
		if r.Messages == 0 || r.Lost != 0 || r.AddedLatencyMS.N != r.Messages || r.Acks == 0 || r.AcksMissing != 0 || r.CPUSec <= 0 {
			t.Errorf("%s: %d messages, %d lost, %d latencies, %d probes acknowledged, %d missing, CPU %.3f s; want a lossless run, measured",
				r.Mode, r.Messages, r.Lost, r.AddedLatencyMS.N, r.Acks, r.AcksMissing, r.CPUSec)
		}
		durable := r.Mode == "durable-floor"
		if (r.StoreBytes > 0) != durable {
			t.Errorf("%s: store %d bytes; want a journal with the durable floor alone", r.Mode, r.StoreBytes)
		}
		if r.Syncs < 0 {
			t.Logf("%s: syncs not counted: %q", r.Mode, r.Notes)
			continue
		}
		if durable && (r.SyncsPerMessage <= 0 || r.SyncsPerMessage > 4.5) || !durable && r.Syncs != 0 {
			t.Errorf("%s: %d syncs, %.2f a message; want 0 for the floor, 0 to 4 for the durable floor", r.Mode, r.Syncs, r.SyncsPerMessage)
		}
	}
	if c := got.Modes[1].CPURatio["floor"]; c[0] <= 0 {
		t.Errorf("the durable floor's CPU ratio to the floor = %v, want it measured", c)
	}
}

// TestComparison: each mode's figures span its rounds, and its ratios are
// taken against the other modes' runs of the same round only.
func TestComparison(t *testing.T) {
	run := func(mode string, round int, cpu, p50 float64) *result {
		r := &result{params: params{Mode: mode, Round: round, Conversations: 1000}, CPUUSPerMessage: cpu}
		r.AddedLatencyMS.P50 = p50
		return r
	}
	runs := []*result{
		run("floor", 1, 100, 1), run("flowbridge", 1, 300, 4),
		run("floor", 2, 200, 2), run("flowbridge", 2, 500, 6),
	}
	c := newComparison([]string{"floor", "flowbridge"}, runs)
	fb := c.Modes[1]
	if fb.CPUUSPerMessage != [2]float64{300, 500} || fb.Rounds != 2 {
		t.Errorf("flowbridge's CPU span = %v over %d rounds, want [300 500] over 2", fb.CPUUSPerMessage, fb.Rounds)
	}
	// Round by round: 300/100 and 500/200, not 500/100.
	if got := fb.CPURatio["floor"]; got != [2]float64{2.5, 3} {
		t.Errorf("flowbridge's CPU over the floor's = %v, want [2.5 3]", got)
	}
	if got := fb.AddedP50Ratio["floor"]; got != [2]float64{3, 4} {
		t.Errorf("flowbridge's added p50 over the floor's = %v, want [3 4]", got)
	}
	var out bytes.Buffer
	printComparison(&out, c)
	for _, want := range []string{"300–500", "×2.50–3.00", "×3.00–4.00"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed comparison lacks %q:\n%s", want, out.String())
		}
	}
}
