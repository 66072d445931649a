package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// comparison is the output of several modes (or rounds) at one size: every
// run, and for each mode the range of each figure over the rounds and its
// ratio to every other mode's in the same round.
type comparison struct {
	Modes []modeSummary `json:"modes"`
	Runs  []*result     `json:"runs"`
}

// modeSummary is one mode's figures over the rounds, each [min, max].
type modeSummary struct {
	Mode            string     `json:"mode"`
	Rounds          int        `json:"rounds"`
	Lost            int        `json:"lost"`
	MessagesPerSec  [2]float64 `json:"messages_per_sec"`
	AddedP50MS      [2]float64 `json:"added_p50_ms"`
	AddedP99MS      [2]float64 `json:"added_p99_ms"`
	CPUUSPerMessage [2]float64 `json:"cpu_us_per_message"`
	CPUSysUS        [2]float64 `json:"cpu_sys_us_per_message"`
	SyncsPerMessage [2]float64 `json:"syncs_per_message"`
	DiskKBPerMsg    [2]float64 `json:"disk_kb_per_message"`
	PeakRSSMB       [2]float64 `json:"peak_rss_mb"`
	StoreMB         [2]float64 `json:"store_mb"`
	// CPURatio and AddedP50Ratio are this mode's figure over each other
	// mode's in the same round, by that mode.
	CPURatio      map[string][2]float64 `json:"cpu_ratio_to"`
	AddedP50Ratio map[string][2]float64 `json:"added_p50_ratio_to"`
}

func newComparison(modes []string, runs []*result) *comparison {
	c := &comparison{Runs: runs}
	for _, m := range modes {
		mine := byMode(runs, m)
		s := modeSummary{Mode: m, Rounds: len(mine), CPURatio: map[string][2]float64{}, AddedP50Ratio: map[string][2]float64{}}
		span := func(get func(*result) float64) [2]float64 { return spanOf(mine, get) }
		s.MessagesPerSec = span(func(r *result) float64 { return r.MessagesPerSec })
		s.AddedP50MS = span(func(r *result) float64 { return r.AddedLatencyMS.P50 })
		s.AddedP99MS = span(func(r *result) float64 { return r.AddedLatencyMS.P99 })
		s.CPUUSPerMessage = span(func(r *result) float64 { return r.CPUUSPerMessage })
		s.CPUSysUS = span(func(r *result) float64 { return r.CPUSysUSPerMessage })
		s.SyncsPerMessage = span(func(r *result) float64 { return r.SyncsPerMessage })
		s.DiskKBPerMsg = span(func(r *result) float64 { return r.DiskKBPerMessage })
		s.PeakRSSMB = span(func(r *result) float64 { return r.PeakRSSMB })
		s.StoreMB = span(func(r *result) float64 { return mb(r.StoreBytes) })
		for _, r := range mine {
			s.Lost += r.Lost + r.WarmupLost
		}
		for _, other := range modes {
			if other == m {
				continue
			}
			s.CPURatio[other] = ratioSpan(runs, m, other, func(r *result) float64 { return r.CPUUSPerMessage })
			s.AddedP50Ratio[other] = ratioSpan(runs, m, other, func(r *result) float64 { return r.AddedLatencyMS.P50 })
		}
		c.Modes = append(c.Modes, s)
	}
	return c
}

// spanOf is the least and the greatest of get over runs.
func spanOf(runs []*result, get func(*result) float64) [2]float64 {
	var vals []float64
	for _, r := range runs {
		vals = append(vals, get(r))
	}
	if len(vals) == 0 {
		return [2]float64{}
	}
	return [2]float64{slices.Min(vals), slices.Max(vals)}
}

// ratioSpan is the span of mode's figure over other's, round by round.
func ratioSpan(runs []*result, mode, other string, get func(*result) float64) [2]float64 {
	var ratios []float64
	for _, r := range byMode(runs, mode) {
		for _, o := range byMode(runs, other) {
			if o.Round == r.Round && o.Conversations == r.Conversations && get(o) > 0 {
				ratios = append(ratios, get(r)/get(o))
			}
		}
	}
	if len(ratios) == 0 {
		return [2]float64{}
	}
	return [2]float64{slices.Min(ratios), slices.Max(ratios)}
}

// fmtSpan prints a span as "a" or "a–b".
func fmtSpan(s [2]float64, format string) string {
	lo, hi := fmt.Sprintf(format, s[0]), fmt.Sprintf(format, s[1])
	if lo == hi {
		return lo
	}
	return lo + "–" + hi
}

func printComparison(w io.Writer, c *comparison) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\trounds\tmessages/s\tadded p50 / p99 ms\tCPU µs/message (kernel)\tsyncs/message\tdisk KiB/message\tpeak RSS MB\tstore MB\tlost")
	for _, s := range c.Modes {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s / %s\t%s (%s)\t%s\t%s\t%s\t%s\t%d\n", s.Mode, s.Rounds, fmtSpan(s.MessagesPerSec, "%.0f"),
			fmtSpan(s.AddedP50MS, "%.2f"), fmtSpan(s.AddedP99MS, "%.1f"), fmtSpan(s.CPUUSPerMessage, "%.0f"), fmtSpan(s.CPUSysUS, "%.0f"),
			fmtSpan(s.SyncsPerMessage, "%.2f"), fmtSpan(s.DiskKBPerMsg, "%.1f"), fmtSpan(s.PeakRSSMB, "%.0f"), fmtSpan(s.StoreMB, "%.1f"), s.Lost)
	}
	tw.Flush()
	if len(c.Modes) < 2 {
		return
	}
	for _, table := range []struct {
		title string
		get   func(modeSummary) map[string][2]float64
	}{
		{"CPU per message, × the column's (same round)", func(s modeSummary) map[string][2]float64 { return s.CPURatio }},
		{"added p50, × the column's (same round)", func(s modeSummary) map[string][2]float64 { return s.AddedP50Ratio }},
	} {
		fmt.Fprintf(w, "\n%s\n", table.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		var head []string
		for _, s := range c.Modes {
			head = append(head, s.Mode)
		}
		fmt.Fprintf(tw, "\t%s\n", strings.Join(head, "\t"))
		for _, s := range c.Modes {
			fmt.Fprintf(tw, "%s", s.Mode)
			for _, o := range c.Modes {
				cell := "1"
				if o.Mode != s.Mode {
					cell = "×" + fmtSpan(table.get(s)[o.Mode], "%.2f")
				}
				fmt.Fprintf(tw, "\t%s", cell)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	for _, r := range c.Runs {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "note: %s round %d: %s\n", r.Mode, r.Round, n)
		}
	}
}
