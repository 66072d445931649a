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
		CPUUSPerMessage float64 `json:"cpu_us_per_message"`
		PeakRSSMB       float64 `json:"peak_rss_mb"`
		IdleRSSMB       float64 `json:"idle_rss_mb"`
		StoreBytes      int64   `json:"store_bytes"`
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
		{[]string{"-duration", "0s"}, "-duration or -messages"},
		{[]string{"-working-indicator", "spinner"}, "-working-indicator"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-floor", "-long-flows", "2"}, "-floor measures chat only"},
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
	})
}

func TestFindMarker(t *testing.T) {
	tests := []struct {
		in   string
		want marker
		ok   bool
	}{
		{"hello fbl12x3y there", marker{12, 3}, true},
		{`{"content":"[turn 2] You said: hello fbl0x0y"}`, marker{0, 0}, true},
		{"text=%5Bturn+1%5D+You+said%3A+hello+fbl7x41y+how", marker{7, 41}, true},
		{"fblx1y fbl2x fbl3x4y", marker{3, 4}, true},
		{"fbl1234567890x1y", marker{}, false},
		{"Thinking…", marker{}, false},
		{"", marker{}, false},
	}
	for _, tt := range tests {
		got, ok := findMarker([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("findMarker(%q) = %v, %v, want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	for _, m := range []marker{{0, 0}, {9999, 123456}} {
		if got, ok := findMarker([]byte("x " + m.String() + " y")); !ok || got != m {
			t.Errorf("findMarker(%q) = %v, %v, want %v", m.String(), got, ok, m)
		}
	}
}

func TestQuantiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	tests := []struct {
		name string
		in   []time.Duration
		want quantiles
	}{
		{"empty", nil, quantiles{}},
		{"one", ms(7), quantiles{N: 1, P50: 7, P90: 7, P99: 7, Max: 7}},
		{"hundred", ms(hundred...), quantiles{N: 100, P50: 50, P90: 90, P99: 99, Max: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quantilesOf(tt.in); got != tt.want {
				t.Errorf("quantilesOf(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseProc(t *testing.T) {
	stat := []byte("4242 (flow bridge) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 9 0 100 2000000 3000 18446744073709551615\n")
	want := cpuUse{User: 2500 * time.Millisecond, Sys: 500 * time.Millisecond}
	if got, err := parseStat(stat); err != nil || got != want {
		t.Errorf("parseStat(%q) = %+v, %v, want %+v", stat, got, err, want)
	}
	if _, err := parseStat([]byte("4242 (x) S 1")); err == nil {
		t.Errorf("parseStat(short) = nil error, want one")
	}
	status := []byte("Name:\tflowbridge\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t9\n")
	if got, err := parseStatus(status); err != nil || got != (memory{RSS: 10 << 20, Peak: 20 << 20}) {
		t.Errorf("parseStatus(%q) = %+v, %v, want 10 MiB and 20 MiB", status, got, err)
	}
	if _, err := parseStatus([]byte("Name:\tx\n")); err == nil {
		t.Errorf("parseStatus(no Vm lines) = nil error, want one")
	}
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

// TestRunFloorSmoke runs -floor briefly: the relay, started as a child process
// (this test binary, see TestMain), must answer every message and probe.
func TestRunFloorSmoke(t *testing.T) {
	t.Parallel()
	args := []string{"-floor", "-json", "-conversations", "4", "-duration", "1s", "-api-latency", "5ms", "-think", "20ms", "-ack-interval", "100ms"}
	var got struct {
		Floor        bool            `json:"floor"`
		Messages     int             `json:"messages"`
		Lost         int             `json:"lost"`
		AddedLatency struct{ N int } `json:"added_latency_ms"`
		Acks         int             `json:"acks"`
		AcksMissing  int             `json:"acks_missing"`
		CPUSec       float64         `json:"cpu_sec"`
		StoreBytes   int64           `json:"store_bytes"`
	}
	runJSON(t, args, &got)
	if !got.Floor || got.Messages == 0 || got.Lost != 0 || got.AddedLatency.N != got.Messages {
		t.Errorf("floor run: floor %v, %d messages, %d lost, %d latencies; want a lossless floor run", got.Floor, got.Messages, got.Lost, got.AddedLatency.N)
	}
	if got.Acks == 0 || got.AcksMissing != 0 {
		t.Errorf("floor run: %d probes acknowledged, %d missing; want all", got.Acks, got.AcksMissing)
	}
	if got.CPUSec <= 0 || got.StoreBytes != 0 {
		t.Errorf("floor run: CPU %.3f s, store %d bytes; want the relay's CPU measured and no store", got.CPUSec, got.StoreBytes)
	}
}
