// Command flowbridge-load measures flowbridge: it runs the bridge as a separate process against in-process fakes of the workspace API, Slack and Discord, drives simulated conversations through it and reports the bridge's added latency, acknowledgement latency, CPU, syncs, memory and store size, beside a bare relay (the floor) and the relay with the promises' synced writes (the durable floor).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == relayCommand {
		if err := runRelay(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "flowbridge-load relay:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "flowbridge-load:", err)
		os.Exit(1)
	}
}

const usage = `flowbridge-load measures flowbridge as a separate process against fakes of the
workspace API, Slack (Socket Mode) and Discord in this process: simulated users
each send, wait for the reply and think. It reports added latency (end to end
minus the API's time), slash-command acknowledgement, CPU, syncs, memory and
store size. -mode floor runs a bare relay on the same libraries instead;
-mode durable-floor the relay plus the synced writes the promises need. Several
modes run interleaved, -rounds times, side by side. flowbridge-chaos breaks things.

Usage: flowbridge-load [flags]
`

// sweepSizes are the conversation counts -sweep runs; ratios are relative to sweepBase.
var sweepSizes = []int{1, 10, 100, 1000, 10000}

const sweepBase = 10

// params are one run's parameters; they are reported with its results.
type params struct {
	Mode             string        `json:"mode"`
	Round            int           `json:"round,omitempty"`
	Platform         string        `json:"platform"`
	Users            int           `json:"users"`
	Conversations    int           `json:"conversations"`
	PerChannel       int           `json:"conversations_per_channel"`
	Duration         time.Duration `json:"-"`
	Messages         int           `json:"message_limit"`
	APILatency       time.Duration `json:"-"`
	Think            time.Duration `json:"-"`
	Rate             float64       `json:"offered_rate,omitempty"`
	LongFlows        int           `json:"long_flows"`
	LongFlowDuration time.Duration `json:"-"`
	AckInterval      time.Duration `json:"-"`
	ReplyTimeout     time.Duration `json:"-"`
	WorkingIndicator string        `json:"working_indicator"`
	IndicatorDelay   time.Duration `json:"-"`
	// SlackPostLimit holds chat.postMessage to Slack's limit per channel.
	SlackPostLimit bool `json:"slack_post_limit,omitempty"`
	// DSN puts flowbridge's store on PostgreSQL, in a schema of its own
	// there (one replica); "": a bbolt file. The floors ignore it.
	DSN string `json:"-"`

	IndicatorDelayMS float64 `json:"working_indicator_delay_ms"`
	DurationSec      float64 `json:"duration_sec"`
	APILatencyMS     float64 `json:"api_latency_ms"`
	ThinkMS          float64 `json:"think_ms"`
	LongFlowSec      float64 `json:"long_flow_sec"`
	AckIntervalMS    float64 `json:"ack_interval_ms"`
	Cores            int     `json:"cores"`

	target target
	tmp    loadkit.TempDir
}

// resolve derives what other flags imply for one run: the users (one per
// conversation unless fewer), the think time that offers -rate messages a
// second over this run's conversations (each sends one message per think
// time plus API time), and the probe interval.
func (p *params) resolve() {
	if p.Users == 0 || p.Users > p.Conversations {
		p.Users = p.Conversations
	}
	if p.Rate > 0 {
		perConversation := time.Duration(float64(p.Conversations) / p.Rate * float64(time.Second))
		p.Think = max(perConversation-p.APILatency, 0)
	}
	if p.AckInterval == 0 {
		// Each probe runs a flow (an API call and an fsynced audit record):
		// often enough for ack percentiles while long flows run, otherwise
		// rare, so chat's CPU per message is not mostly probes at low rates.
		p.AckInterval = time.Second
		if p.LongFlows > 0 {
			p.AckInterval = 100 * time.Millisecond
		}
	}
	p.IndicatorDelayMS = loadkit.MS(p.IndicatorDelay)
	p.DurationSec = p.Duration.Seconds()
	p.APILatencyMS = loadkit.MS(p.APILatency)
	p.ThinkMS = loadkit.MS(p.Think)
	p.LongFlowSec = p.LongFlowDuration.Seconds()
	p.AckIntervalMS = loadkit.MS(p.AckInterval)
	p.Cores = runtime.NumCPU()
}

// validate checks each flag alone: no flag's meaning depends on another's.
func (p *params) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(p.Platform == "slack" || p.Platform == "discord" || p.Platform == "both", "-platform %q: want slack, discord or both", p.Platform)
	check(p.Conversations >= 1, "-conversations %d: want at least 1", p.Conversations)
	check(p.Users >= 0, "-users %d: want 0 (one per conversation) or more", p.Users)
	check(p.PerChannel >= 1, "-per-channel %d: want at least 1", p.PerChannel)
	check(p.Duration > 0 && p.Duration <= time.Hour, "-duration %s: want more than 0, at most 1h", p.Duration)
	check(p.Messages >= 0, "-messages %d: want 0 (no limit) or more", p.Messages)
	for name, d := range map[string]time.Duration{"-api-latency": p.APILatency, "-think": p.Think, "-long-flow-duration": p.LongFlowDuration, "-ack-interval": p.AckInterval, "-working-indicator-delay": p.IndicatorDelay} {
		check(d >= 0, "%s %s: must not be negative", name, d)
	}
	check(p.LongFlows >= 0, "-long-flows %d: must not be negative", p.LongFlows)
	check(p.Rate >= 0, "-rate %g: must not be negative", p.Rate)
	check(p.ReplyTimeout > 0, "-reply-timeout %s: must be positive", p.ReplyTimeout)
	check(p.WorkingIndicator == "placeholder" || p.WorkingIndicator == "reaction" || p.WorkingIndicator == "none",
		"-working-indicator %q: want placeholder, reaction or none", p.WorkingIndicator)
	return errors.Join(errs...)
}

// options are the command's flags: the runs' parameters, and what to run.
type options struct {
	p          params
	modes      []string
	flowbridge string
	rounds     int
	sweep      bool
	json       bool
}

// parseFlags reads the command line.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("flowbridge-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(stderr, fs) }
	o := &options{}
	p := &o.p
	fs.StringVar(&p.Platform, "platform", "both", "slack, discord or both (conversations alternate)")
	fs.IntVar(&p.Conversations, "conversations", 100, "concurrent conversations")
	fs.IntVar(&p.Users, "users", 0, "simulated users over the conversations (0: one each)")
	fs.IntVar(&p.PerChannel, "per-channel", 10, "Slack conversations (threads) per channel")
	fs.BoolVar(&p.SlackPostLimit, "slack-post-limit", false, "hold chat.postMessage to Slack's 1/s per channel (429 past it)")
	fs.DurationVar(&p.Duration, "duration", 10*time.Second, "measured phase, after every conversation has its session")
	fs.IntVar(&p.Messages, "messages", 0, "end the measured phase after this many messages (0: no limit)")
	fs.DurationVar(&p.APILatency, "api-latency", 50*time.Millisecond, "the fake workspace API's time per chat message")
	fs.DurationVar(&p.Think, "think", time.Second, "a user's mean pause between a reply and the next message")
	fs.Float64Var(&p.Rate, "rate", 0, "offer this many messages/s in all: sets the think time (0: -think)")
	fs.IntVar(&p.LongFlows, "long-flows", 0, "flows kept running during the measured phase (flowbridge)")
	fs.DurationVar(&p.LongFlowDuration, "long-flow-duration", 30*time.Second, "how long each long flow runs")
	fs.DurationVar(&p.AckInterval, "ack-interval", 0, "slash-command probe interval (0: 100ms with long flows, else 1s)")
	fs.DurationVar(&p.ReplyTimeout, "reply-timeout", 30*time.Second, "a reply later than this counts as lost")
	fs.StringVar(&p.WorkingIndicator, "working-indicator", "placeholder", "Slack's working indicator: placeholder, reaction or none")
	fs.DurationVar(&p.IndicatorDelay, "working-indicator-delay", loadkit.DefaultIndicatorDelay, "answers quicker than this show no indicator")
	mode := fs.String("mode", "flowbridge", "flowbridge, floor, durable-floor or a flowbridge binary's path; several: comma-separated")
	fs.IntVar(&o.rounds, "rounds", 1, "run the modes in turn this many times")
	fs.StringVar(&o.flowbridge, "flowbridge", "", "the flowbridge binary (default: go build ./cmd/flowbridge)")
	fs.BoolVar(&o.sweep, "sweep", false, "run at 1, 10, 100, 1000 and 10000 conversations, figures relative to 10")
	fs.StringVar(&p.DSN, "dsn", "", "flowbridge's store: PostgreSQL at this postgres:// URL, in a fresh schema (one replica; the floors keep their files)")
	fs.StringVar(&p.tmp.Parent, "tmpdir", "", "where the run's temporary directory goes (e.g. /dev/shm: no real syncs)")
	fs.BoolVar(&p.tmp.Keep, "keep", false, "keep the temporary directory (config, store, logs) and print its path")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	p.tmp.Log = stderr
	modes, err := parseModes(*mode)
	o.modes = modes
	errs := []error{err, p.validate()}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if o.rounds < 1 {
		errs = append(errs, fmt.Errorf("-rounds %d: want at least 1", o.rounds))
	}
	return o, errors.Join(errs...)
}

// printUsage prints the usage and one line per flag, so -h fits a screen.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, usage)
	fs.VisitAll(func(f *flag.Flag) {
		def := ""
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			def = " (" + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  -%-24s %s%s\n", f.Name, f.Usage, def)
	})
}

// run is the whole program with the OS injected, so tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	targets, cleanup, err := resolveTargets(ctx, o.modes, o.flowbridge)
	if err != nil {
		return err
	}
	defer cleanup()
	runs, err := runAll(ctx, o, targets, stderr)
	if err != nil {
		return err
	}
	return o.report(stdout, runs)
}

// runAll runs every mode at every size, -rounds times, the modes in turn
// within a round, so that what the machine does meanwhile touches all alike.
func runAll(ctx context.Context, o *options, targets []target, stderr io.Writer) ([]*result, error) {
	sizes := []int{o.p.Conversations}
	if o.sweep {
		sizes = sweepSizes
	}
	several := len(sizes)*o.rounds*len(targets) > 1
	var runs []*result
	for _, size := range sizes {
		for round := 1; round <= o.rounds; round++ {
			for _, t := range targets {
				q := o.p
				q.Conversations, q.target, q.Mode = size, t, t.name
				if o.rounds > 1 {
					q.Round = round
				}
				q.resolve()
				if several {
					fmt.Fprintf(stderr, "%s, %d conversations, round %d…\n", t.name, size, round)
				}
				res, err := runOnce(ctx, q)
				if err != nil {
					return nil, fmt.Errorf("%s at %d conversations, round %d: %w", t.name, size, round, err)
				}
				runs = append(runs, res)
			}
		}
	}
	return runs, nil
}

// report prints the runs: one run's table, a sweep per mode, or the modes
// side by side.
func (o *options) report(w io.Writer, runs []*result) error {
	switch {
	case len(runs) == 1 && o.json:
		return loadkit.WriteJSON(w, runs[0])
	case len(runs) == 1:
		printTable(w, runs[0])
		return nil
	case o.sweep:
		sweeps := map[string]*sweep{}
		for _, m := range o.modes {
			sweeps[m] = newSweep(byMode(runs, m))
		}
		if o.json {
			return loadkit.WriteJSON(w, sweeps)
		}
		for _, m := range o.modes {
			fmt.Fprintf(w, "%s:\n", m)
			printSweep(w, sweeps[m])
		}
		return nil
	}
	c := newComparison(o.modes, runs)
	if o.json {
		return loadkit.WriteJSON(w, c)
	}
	printComparison(w, c)
	return nil
}

func byMode(runs []*result, mode string) []*result {
	var out []*result
	for _, r := range runs {
		if r.Mode == mode {
			out = append(out, r)
		}
	}
	return out
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// target is what a run measures: a flowbridge binary, or this command's
// relay (the floors).
type target struct {
	name    string
	bin     string
	relay   bool
	durable bool
}

// args are the child's arguments for the configuration at cfg.
func (t target) args(cfg string) []string {
	if !t.relay {
		return []string{"run", "-config", cfg}
	}
	if t.durable {
		return []string{relayCommand, "-config", cfg, "-durable"}
	}
	return []string{relayCommand, "-config", cfg}
}

// parseModes reads -mode: names, or paths to flowbridge binaries.
func parseModes(s string) ([]string, error) {
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		m = strings.TrimSpace(m)
		switch {
		case m == "flowbridge" || m == "floor" || m == "durable-floor" || strings.Contains(m, "/"):
			out = append(out, m)
		default:
			return nil, fmt.Errorf("-mode %q: want flowbridge, floor, durable-floor or a binary's path (with a /), separated by commas", s)
		}
	}
	return out, nil
}

// resolveTargets finds each mode's binary, building flowbridge if a mode
// needs it and -flowbridge names none; cleanup removes what was built.
func resolveTargets(ctx context.Context, modes []string, flowbridge string) ([]target, func(), error) {
	cleanup := func() {}
	self, err := os.Executable()
	if err != nil {
		return nil, cleanup, err
	}
	var targets []target
	for _, m := range modes {
		t := target{name: m, bin: m}
		switch m {
		case "floor", "durable-floor":
			t.bin, t.relay, t.durable = self, true, m == "durable-floor"
		case "flowbridge":
			if flowbridge == "" {
				dir, err := os.MkdirTemp("", "flowbridge-load-bin-")
				if err != nil {
					return nil, cleanup, err
				}
				cleanup = func() { os.RemoveAll(dir) }
				if flowbridge, err = loadkit.Build(ctx, dir); err != nil {
					return nil, cleanup, err
				}
			}
			t.bin = flowbridge
		}
		targets = append(targets, t)
	}
	return targets, cleanup, nil
}
