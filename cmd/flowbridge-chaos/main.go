// Command flowbridge-chaos breaks flowbridge and checks its delivery promises: it kills its processes with SIGKILL and drops its Slack sockets and Discord shards, under load from in-process fakes of the workspace API, Slack and Discord, and exits non-zero when a promise broke.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "flowbridge-chaos:", err)
		os.Exit(1)
	}
}

const usage = `flowbridge-chaos breaks flowbridge under load and counts its delivery promises
from what the fakes of the workspace API, Slack and Discord recorded: no message
sent to the agent twice, none answered twice, none acknowledged and then neither
answered nor told. It exits non-zero when one broke. flowbridge-load measures.

Usage:
  flowbridge-chaos kill [flags]      one process, Slack's HTTP mode: SIGKILLs and
                                     restarts, with Slack's redeliveries
  flowbridge-chaos replicas [flags]  several processes on PostgreSQL, Slack and
                                     Discord: SIGKILLs, socket and shard drops;
                                     order and sessions kept too

'flowbridge-chaos kill -h' and 'flowbridge-chaos replicas -h' list their flags.
`

// params are a scenario's parameters: each scenario sets those it reads.
type params struct {
	Conversations int
	Rate          float64
	APILatency    time.Duration
	ReplyTimeout  time.Duration
	Duration      time.Duration
	Cores         int

	// kill
	KillEvery       time.Duration
	Kills           int
	RedeliverWindow time.Duration
	FlowShare       float64

	// replicas
	Replicas         int
	Platform         string
	DSN              string
	DropEvery        time.Duration
	Burst            int
	SlackAckTimeout  time.Duration
	LeaseTTL         time.Duration
	OrderHold        string
	Restart          bool
	WorkingIndicator string

	scenario   string // kill or replicas
	flowbridge string
	tmp        loadkit.TempDir
}

// run is the whole program with the OS injected, so tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return errors.New("name a scenario: kill or replicas")
		}
		return flag.ErrHelp
	}
	var scenario func(context.Context, params, io.Writer, bool) error
	var fs *flag.FlagSet
	p := params{scenario: args[0], Cores: runtime.NumCPU(), tmp: loadkit.TempDir{Log: stderr}}
	switch args[0] {
	case "kill":
		fs, scenario = killFlags(&p), runKillMode
	case "replicas":
		fs, scenario = replicaFlags(&p), runReplicaMode
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown scenario %q: want kill or replicas", args[0])
	}
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(stderr, fs) }
	fs.StringVar(&p.flowbridge, "flowbridge", "", "the flowbridge binary (default: go build ./cmd/flowbridge)")
	fs.StringVar(&p.tmp.Parent, "tmpdir", "", "where the run's temporary directory goes")
	fs.BoolVar(&p.tmp.Keep, "keep", false, "keep the temporary directory (config, store, every process's log)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := p.validate(); err != nil {
		return err
	}
	if p.flowbridge == "" {
		dir, err := os.MkdirTemp("", "flowbridge-chaos-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if p.flowbridge, err = loadkit.Build(ctx, dir); err != nil {
			return err
		}
	}
	return scenario(ctx, p, stdout, *asJSON)
}

// printUsage prints a scenario's flags, one line each.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: flowbridge-chaos %s [flags]\n", fs.Name())
	fs.VisitAll(func(f *flag.Flag) {
		def := ""
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			def = " (" + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  -%-19s %s%s\n", f.Name, f.Usage, def)
	})
}

// common are the flags both scenarios have.
func common(fs *flag.FlagSet, p *params, conversations int, rate float64, replyTimeout time.Duration) {
	fs.IntVar(&p.Conversations, "conversations", conversations, "concurrent conversations")
	fs.Float64Var(&p.Rate, "rate", rate, "messages a second offered in all")
	fs.DurationVar(&p.APILatency, "api-latency", 50*time.Millisecond, "the fake workspace API's time per chat message")
	fs.DurationVar(&p.ReplyTimeout, "reply-timeout", replyTimeout, "a user's longest wait for an answer or a notice")
}

// killFlags are the kill scenario's flags.
func killFlags(p *params) *flag.FlagSet {
	fs := flag.NewFlagSet("kill", flag.ContinueOnError)
	fs.DurationVar(&p.KillEvery, "every", 2*time.Second, "mean time to a SIGKILL (exponential, at most 3x)")
	fs.IntVar(&p.Kills, "kills", 20, "how many SIGKILLs")
	fs.DurationVar(&p.RedeliverWindow, "redeliver-window", 10*time.Second, "redeliver half the events acknowledged within this")
	fs.Float64Var(&p.FlowShare, "flow-share", 0.1, "share of conversations that run /flow slow (1.5 s)")
	common(fs, p, 300, 100, 30*time.Second)
	p.Platform = "slack"
	return fs
}

// replicaFlags are the replicas scenario's flags.
func replicaFlags(p *params) *flag.FlagSet {
	fs := flag.NewFlagSet("replicas", flag.ContinueOnError)
	fs.IntVar(&p.Replicas, "n", 2, fmt.Sprintf("flowbridge processes (1 to %d)", maxReplicas))
	fs.StringVar(&p.Platform, "platform", "both", "slack, discord or both (Discord: 2 shards, so at most 2 replicas)")
	fs.StringVar(&p.DSN, "dsn", cmp.Or(os.Getenv("FLOWBRIDGE_TEST_DATABASE_URL"), defaultTestDSN), "PostgreSQL; each run gets a schema of its own")
	fs.DurationVar(&p.Duration, "duration", time.Minute, "how long the users talk")
	fs.DurationVar(&p.KillEvery, "kill-every", 0, "SIGKILL and restart a replica about this often (0: never)")
	fs.DurationVar(&p.DropEvery, "drop-every", 0, "drop a Slack socket or Discord shard about this often (0: never)")
	fs.IntVar(&p.Burst, "burst", 2, "messages a user sends at once (1 to 10)")
	fs.DurationVar(&p.SlackAckTimeout, "slack-ack-timeout", slacktest.DefaultAckTimeout, "the fake Slack's wait for an ack before redelivering")
	fs.DurationVar(&p.LeaseTTL, "lease-ttl", 0, "store.lease_ttl (0: flowbridge's default)")
	fs.StringVar(&p.OrderHold, "order-hold", "", "store.order_hold (\"\": flowbridge's default)")
	fs.BoolVar(&p.Restart, "restart", true, "SIGTERM and start every replica again at the end, then count")
	fs.StringVar(&p.WorkingIndicator, "working-indicator", "placeholder", "Slack's working indicator: placeholder, reaction or none")
	common(fs, p, 1000, 100, 10*time.Second)
	return fs
}

// validate checks each flag alone.
func (p *params) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(p.Conversations >= 1, "-conversations %d: want at least 1", p.Conversations)
	check(p.Rate > 0, "-rate %g: must be positive", p.Rate)
	check(p.APILatency >= 0, "-api-latency %s: must not be negative", p.APILatency)
	check(p.ReplyTimeout > 0, "-reply-timeout %s: must be positive", p.ReplyTimeout)
	if p.scenario == "kill" {
		check(p.KillEvery > 0, "-every %s: must be positive", p.KillEvery)
		check(p.Kills >= 1, "-kills %d: want at least 1", p.Kills)
		check(p.FlowShare >= 0 && p.FlowShare <= 1, "-flow-share %g: want 0 to 1", p.FlowShare)
		check(p.RedeliverWindow >= 0, "-redeliver-window %s: must not be negative", p.RedeliverWindow)
		return errors.Join(errs...)
	}
	return errors.Join(append(errs, p.validateReplicas())...)
}

// validateReplicas checks the replicas scenario's flags.
func (p *params) validateReplicas() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(p.Replicas >= 1 && p.Replicas <= maxReplicas, "-n %d: want 1 to %d (Slack's Socket Mode connections per app)", p.Replicas, maxReplicas)
	check(p.Platform == "slack" || p.Platform == "discord" || p.Platform == "both", "-platform %q: want slack, discord or both", p.Platform)
	// The one rule across two flags: Discord alone has a shard for two replicas.
	check(p.Platform != "discord" || p.Replicas <= replicaShards, "-platform discord: at most %d replicas, one per Discord shard (a third would have no platform)", replicaShards)
	check(p.DSN != "", "-dsn: empty")
	check(p.Duration > 0, "-duration %s: must be positive", p.Duration)
	check(p.KillEvery >= 0, "-kill-every %s: must not be negative", p.KillEvery)
	check(p.DropEvery >= 0, "-drop-every %s: must not be negative", p.DropEvery)
	_, err := time.ParseDuration(cmp.Or(p.OrderHold, "0s"))
	check(err == nil, "-order-hold %q: want a duration", p.OrderHold)
	check(p.LeaseTTL >= 0, "-lease-ttl %s: must not be negative", p.LeaseTTL)
	check(p.SlackAckTimeout > 0, "-slack-ack-timeout %s: must be positive", p.SlackAckTimeout)
	check(p.Burst >= 1 && p.Burst <= 10, "-burst %d: want 1 to 10", p.Burst)
	check(p.WorkingIndicator == "placeholder" || p.WorkingIndicator == "reaction" || p.WorkingIndicator == "none",
		"-working-indicator %q: want placeholder, reaction or none", p.WorkingIndicator)
	return errors.Join(errs...)
}

// runKillMode runs the kill scenario and prints its figures.
func runKillMode(ctx context.Context, p params, stdout io.Writer, asJSON bool) error {
	res, err := runKill(ctx, p, nil)
	if err != nil {
		return err
	}
	if asJSON {
		if err := loadkit.WriteJSON(stdout, res); err != nil {
			return err
		}
	} else {
		printKillTable(stdout, res)
	}
	return res.broken()
}

// runReplicaMode runs the replicas scenario and prints its figures.
func runReplicaMode(ctx context.Context, p params, stdout io.Writer, asJSON bool) error {
	res, err := runReplicas(ctx, p, p.Replicas, hooks{})
	if err != nil {
		return fmt.Errorf("%d replicas: %w", p.Replicas, err)
	}
	if asJSON {
		if err := loadkit.WriteJSON(stdout, res); err != nil {
			return err
		}
	} else {
		printReplicaTable(stdout, res)
	}
	return res.broken()
}
