// Command flowbridge-chaos breaks flowbridge and checks its delivery promises: several replicas on one PostgreSQL, under load from in-process fakes of the workspace API, Slack and Discord, are killed with SIGKILL and lose their Slack sockets, Discord shards and database connections (or the database restarts), and it exits non-zero when a promise broke. Its tests keep the scenarios that are checks: one process killed in Slack's HTTP mode, its store damaged, a database outage.
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

const usage = `flowbridge-chaos breaks flowbridge under load: several flowbridge processes on
one PostgreSQL, each with its own Slack Socket Mode connection and Discord
shards, are SIGKILLed and restarted and lose their sockets and shards, and
their database connections are terminated or the database restarted, while
simulated users talk. It then counts the delivery promises from what the fakes
of the workspace API, Slack and Discord recorded (no message sent to the agent
twice, none answered twice, none acknowledged and then neither answered nor
told; each conversation's order and session kept) and exits non-zero when one
broke. go test ./cmd/flowbridge-chaos runs it, and the scenarios kept as tests:
one process killed in Slack's HTTP mode, its store damaged, a database outage,
backend kills.
flowbridge-load measures.

Usage: flowbridge-chaos [flags]
`

// params are a run's parameters.
type params struct {
	Replicas         int
	Platform         string
	Conversations    int
	Rate             float64
	Burst            int
	APILatency       time.Duration
	ReplyTimeout     time.Duration
	Duration         time.Duration
	KillEvery        time.Duration
	DropEvery        time.Duration
	PGKillEvery      time.Duration
	PGRestartEvery   time.Duration
	PGRestartCmd     string
	PGDown           time.Duration
	DSN              string
	SlackAckTimeout  time.Duration
	LeaseTTL         time.Duration
	OrderHold        string
	Restart          bool
	WorkingIndicator string
	Cores            int

	// The kill test's (kill_harness_test.go).
	Kills           int
	RedeliverWindow time.Duration
	FlowShare       float64

	flowbridge string
	tmp        loadkit.TempDir
}

// run is the whole program with the OS injected, so tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	p := params{Cores: runtime.NumCPU(), tmp: loadkit.TempDir{Log: stderr}}
	fs := flags(&p)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(stderr, fs) }
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	if err := fs.Parse(args); err != nil {
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
	res, err := runReplicas(ctx, p, p.Replicas, hooks{})
	if err != nil {
		return fmt.Errorf("%d replicas: %w", p.Replicas, err)
	}
	if *asJSON {
		if err := loadkit.WriteJSON(stdout, res); err != nil {
			return err
		}
	} else {
		printReplicaTable(stdout, res)
	}
	return res.broken()
}

// printUsage prints the usage and one line per flag, so -h fits a screen.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, usage)
	fs.VisitAll(func(f *flag.Flag) {
		def := ""
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			def = " (" + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  -%-19s %s%s\n", f.Name, f.Usage, def)
	})
}

// flags are the command's flags.
func flags(p *params) *flag.FlagSet {
	fs := flag.NewFlagSet("flowbridge-chaos", flag.ContinueOnError)
	fs.IntVar(&p.Replicas, "replicas", 2, fmt.Sprintf("flowbridge processes (1 to %d)", maxReplicas))
	fs.StringVar(&p.Platform, "platform", "both", "slack, discord or both (Discord: 2 shards, so at most 2 replicas)")
	fs.IntVar(&p.Conversations, "conversations", 1000, "concurrent conversations")
	fs.Float64Var(&p.Rate, "rate", 100, "messages a second offered in all")
	fs.IntVar(&p.Burst, "burst", 2, "messages a user sends at once (1 to 10)")
	fs.DurationVar(&p.Duration, "duration", time.Minute, "how long the users talk")
	fs.DurationVar(&p.KillEvery, "kill-every", 0, "SIGKILL and restart a replica about this often (0: never)")
	fs.DurationVar(&p.DropEvery, "drop-every", 0, "drop a Slack socket or Discord shard about this often (0: never)")
	fs.DurationVar(&p.PGKillEvery, "pg-kill-every", 0, "pg_terminate_backend the run's replicas' connections (found by application_name) about this often (0: never)")
	fs.DurationVar(&p.PGRestartEvery, "pg-restart-every", 0, "stop and start -dsn's PostgreSQL about this often (0: never; never the shared one on port 5432 without -pg-restart-cmd)")
	fs.StringVar(&p.PGRestartCmd, "pg-restart-cmd", "", "run with \" stop\", then \" start\" appended, through sh (default: pg_ctlcluster of the Debian cluster on -dsn's port)")
	fs.DurationVar(&p.PGDown, "pg-down", time.Second, "how long -pg-restart-every leaves the server stopped")
	fs.StringVar(&p.DSN, "dsn", cmp.Or(os.Getenv("FLOWBRIDGE_TEST_DATABASE_URL"), defaultTestDSN), "PostgreSQL; each run gets a schema of its own")
	fs.DurationVar(&p.SlackAckTimeout, "slack-ack-timeout", slacktest.DefaultAckTimeout, "the fake Slack's wait for an ack before redelivering")
	fs.DurationVar(&p.LeaseTTL, "lease-ttl", 0, "store.lease_ttl (0: flowbridge's default)")
	fs.StringVar(&p.OrderHold, "order-hold", "", "store.order_hold (\"\": flowbridge's default)")
	fs.BoolVar(&p.Restart, "restart", true, "SIGTERM and start every replica again at the end, then count")
	fs.StringVar(&p.WorkingIndicator, "working-indicator", "placeholder", "Slack's working indicator: placeholder, reaction or none")
	fs.DurationVar(&p.APILatency, "api-latency", 50*time.Millisecond, "the fake workspace API's time per chat message")
	fs.DurationVar(&p.ReplyTimeout, "reply-timeout", 10*time.Second, "a user's longest wait for an answer or a notice")
	fs.StringVar(&p.flowbridge, "flowbridge", "", "the flowbridge binary (default: go build ./cmd/flowbridge)")
	fs.StringVar(&p.tmp.Parent, "tmpdir", "", "where the run's temporary directory goes")
	fs.BoolVar(&p.tmp.Keep, "keep", false, "keep the temporary directory (configs, every process's log) and the schema")
	return fs
}

// validate checks each flag alone but one, as validateReplicas says.
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
	check(p.Replicas >= 1 && p.Replicas <= maxReplicas, "-replicas %d: want 1 to %d (Slack's Socket Mode connections per app)", p.Replicas, maxReplicas)
	check(p.Platform == "slack" || p.Platform == "discord" || p.Platform == "both", "-platform %q: want slack, discord or both", p.Platform)
	// The one rule across two flags: Discord alone has a shard for two replicas.
	check(p.Platform != "discord" || p.Replicas <= replicaShards, "-platform discord: at most %d replicas, one per Discord shard (a third would have no platform)", replicaShards)
	check(p.DSN != "", "-dsn: empty")
	check(p.Duration > 0, "-duration %s: must be positive", p.Duration)
	check(p.KillEvery >= 0, "-kill-every %s: must not be negative", p.KillEvery)
	check(p.DropEvery >= 0, "-drop-every %s: must not be negative", p.DropEvery)
	check(p.PGKillEvery >= 0, "-pg-kill-every %s: must not be negative", p.PGKillEvery)
	check(p.PGRestartEvery >= 0, "-pg-restart-every %s: must not be negative", p.PGRestartEvery)
	check(p.PGDown >= 0, "-pg-down %s: must not be negative", p.PGDown)
	_, err := time.ParseDuration(cmp.Or(p.OrderHold, "0s"))
	check(err == nil, "-order-hold %q: want a duration", p.OrderHold)
	check(p.LeaseTTL >= 0, "-lease-ttl %s: must not be negative", p.LeaseTTL)
	check(p.SlackAckTimeout > 0, "-slack-ack-timeout %s: must be positive", p.SlackAckTimeout)
	check(p.Burst >= 1 && p.Burst <= 10, "-burst %d: want 1 to 10", p.Burst)
	check(p.WorkingIndicator == "placeholder" || p.WorkingIndicator == "reaction" || p.WorkingIndicator == "none",
		"-working-indicator %q: want placeholder, reaction or none", p.WorkingIndicator)
	return errors.Join(errs...)
}
