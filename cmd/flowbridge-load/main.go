// Command flowbridge-load runs flowbridge as a separate process against in-process fakes of the workspace API, Slack and Discord, drives simulated conversations through it and reports the bridge's added latency, acknowledgement latency, CPU, memory and store size, or, with -kill-every, whether its delivery promises hold across SIGKILLs and Slack's redeliveries.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
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

const usage = `flowbridge-load measures flowbridge: it starts fakes of the workspace API,
Slack (Socket Mode) and Discord in this process, runs flowbridge as a separate
process against them, drives simulated conversations and reports the bridge's
added latency, slash-command acknowledgement latency, CPU, memory and store size.

With -kill-every D it tests delivery instead: flowbridge in Slack's HTTP mode
under -rate messages a second is killed with SIGKILL about every D (-kills
times), restarted on the same store, and sent Slack's redeliveries; it then
counts, from the fakes' records, messages sent to the agent twice, replies
posted twice and acknowledged messages neither answered nor told, and exits
non-zero unless all three are 0.

Usage:
  flowbridge-load [flags]

Flags:
`

// sweepSizes are the conversation counts -sweep runs; ratios are relative to sweepBase.
var sweepSizes = []int{1, 10, 100, 1000, 10000}

const sweepBase = 10

// params are the load's parameters; they are reported with the results.
type params struct {
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
	IndicatorDelayMS float64       `json:"working_indicator_delay_ms"`
	// SlackPostLimit holds the load run's chat.postMessage to Slack's
	// limit per channel (-kill-every and -replicas always do).
	SlackPostLimit bool `json:"slack_post_limit,omitempty"`
	// Floor runs this command's relay in flowbridge's place (see relay.go).
	Floor bool `json:"floor,omitempty"`
	// KillEvery, when positive, runs the crash test instead (kill.go):
	// Kills SIGKILLs about KillEvery apart under load over Slack's HTTP
	// mode, Slack's redeliveries after each restart, and the promises counted.
	KillEvery time.Duration `json:"-"`
	Kills     int           `json:"-"`
	// Damage damages the store after each kill (damage.go).
	Damage          bool          `json:"-"`
	RedeliverWindow time.Duration `json:"-"`
	FlowShare       float64       `json:"-"`
	// Replicas, when set, runs several flowbridge processes on one
	// PostgreSQL instead (replicas.go): replicaCounts are its counts, one
	// run each; DSN the database; DropEvery the socket and shard drops;
	// Burst the messages a user sends at once.
	Replicas      string `json:"-"`
	replicaCounts []int
	Store         string        `json:"-"`
	DSN           string        `json:"-"`
	DropEvery     time.Duration `json:"-"`
	Burst         int           `json:"-"`
	// SlackAckTimeout is how long the fake Slack waits for a Socket Mode
	// ack before it redelivers.
	SlackAckTimeout time.Duration `json:"-"`
	// LeaseTTL is the replicas' store.lease_ttl, 0 for flowbridge's default.
	LeaseTTL time.Duration `json:"-"`
	// OrderHold is the replicas' store.order_hold, "" for flowbridge's default.
	OrderHold string `json:"-"`
	// PGOutage, with -replicas, stops a throwaway PostgreSQL for this long
	// mid-run; PGBin holds its initdb and pg_ctl.
	PGOutage time.Duration `json:"-"`
	PGBin    string        `json:"-"`
	// Restart, with -replicas, starts every replica again after the
	// SIGTERM at the end, so that answers kept in the outbox are posted.
	Restart bool `json:"-"`

	DurationSec   float64 `json:"duration_sec"`
	APILatencyMS  float64 `json:"api_latency_ms"`
	ThinkMS       float64 `json:"think_ms"`
	LongFlowSec   float64 `json:"long_flow_sec"`
	AckIntervalMS float64 `json:"ack_interval_ms"`
	Cores         int     `json:"cores"`
	flowbridge    string
	keepTemp      bool
	tempDir       string
	stderr        io.Writer
}

// resolve derives what other flags imply for one run: the think time that
// offers -rate messages a second over this run's conversations (each
// conversation sends one message per think time plus API time), and the
// probe interval.
func (p *params) resolve() {
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
	p.fillReported()
}

func (p *params) fillReported() {
	p.IndicatorDelayMS = ms(p.IndicatorDelay)
	p.DurationSec = p.Duration.Seconds()
	p.APILatencyMS = ms(p.APILatency)
	p.ThinkMS = ms(p.Think)
	p.LongFlowSec = p.LongFlowDuration.Seconds()
	p.AckIntervalMS = ms(p.AckInterval)
	p.Cores = runtime.NumCPU()
}

func (p *params) validate() error {
	var errs []error
	switch p.Platform {
	case "slack", "discord", "both":
	default:
		errs = append(errs, fmt.Errorf("-platform %q: want slack, discord or both", p.Platform))
	}
	if p.Conversations < 1 {
		errs = append(errs, fmt.Errorf("-conversations %d: want at least 1", p.Conversations))
	}
	if p.Users < 0 {
		errs = append(errs, fmt.Errorf("-users %d: want 0 (one per conversation) or more", p.Users))
	}
	if p.Floor && p.LongFlows > 0 {
		errs = append(errs, errors.New("-floor measures chat only: its relay runs no flows, so -long-flows would measure nothing"))
	}
	if p.PerChannel < 1 {
		errs = append(errs, fmt.Errorf("-per-channel %d: want at least 1", p.PerChannel))
	}
	if p.Duration <= 0 && p.Messages <= 0 {
		errs = append(errs, errors.New("-duration or -messages must be positive"))
	}
	if p.Duration > time.Hour {
		errs = append(errs, fmt.Errorf("-duration %s: at most 1h", p.Duration))
	}
	if p.APILatency < 0 || p.Think < 0 || p.LongFlowDuration < 0 || p.LongFlows < 0 {
		errs = append(errs, errors.New("-api-latency, -think, -long-flows and -long-flow-duration must not be negative"))
	}
	if p.AckInterval < 0 {
		errs = append(errs, errors.New("-ack-interval must not be negative"))
	}
	if p.Rate < 0 {
		errs = append(errs, errors.New("-rate must not be negative"))
	}
	if p.IndicatorDelay < 0 {
		errs = append(errs, errors.New("-working-indicator-delay must not be negative"))
	}
	if p.KillEvery < 0 {
		errs = append(errs, errors.New("-kill-every must not be negative"))
	}
	if p.Damage && p.KillEvery <= 0 {
		errs = append(errs, errors.New("-damage needs -kill-every"))
	}
	if p.Replicas != "" {
		return errors.Join(append(errs, p.validateReplicas())...)
	}
	if p.DropEvery != 0 {
		errs = append(errs, errors.New("-drop-every needs -replicas"))
	}
	if p.KillEvery > 0 {
		if p.Platform != "slack" {
			errs = append(errs, fmt.Errorf("-kill-every runs Slack in HTTP mode: -platform %q does not apply", p.Platform))
		}
		if p.Floor || p.LongFlows > 0 {
			errs = append(errs, errors.New("-kill-every tests delivery: -floor and -long-flows do not apply"))
		}
		if p.Kills < 1 {
			errs = append(errs, fmt.Errorf("-kills %d: want at least 1", p.Kills))
		}
		if p.FlowShare < 0 || p.FlowShare > 1 {
			errs = append(errs, fmt.Errorf("-flow-share %g: want 0 to 1", p.FlowShare))
		}
		if p.RedeliverWindow < 0 {
			errs = append(errs, errors.New("-redeliver-window must not be negative"))
		}
	}
	if p.ReplyTimeout <= 0 {
		errs = append(errs, errors.New("-reply-timeout must be positive"))
	}
	switch p.WorkingIndicator {
	case "placeholder", "reaction", "none":
	default:
		errs = append(errs, fmt.Errorf("-working-indicator %q: want placeholder, reaction or none", p.WorkingIndicator))
	}
	return errors.Join(errs...)
}

// validateReplicas checks what -replicas needs.
func (p *params) validateReplicas() error {
	var errs []error
	counts, err := parseReplicas(p.Replicas)
	if err != nil {
		errs = append(errs, err)
	}
	p.replicaCounts = counts
	if p.Platform == "discord" && slices.Max(append(counts, 0)) > replicaShards {
		errs = append(errs, fmt.Errorf("-platform discord: at most %d replicas, one per Discord shard (a third would have no platform)", replicaShards))
	}
	if p.Store != "postgres" {
		errs = append(errs, fmt.Errorf("-store %q: -replicas share one PostgreSQL database, want -store postgres", p.Store))
	}
	if p.DSN == "" {
		errs = append(errs, errors.New("-dsn: empty"))
	}
	if len(counts) > 1 && (p.KillEvery > 0 || p.DropEvery > 0) {
		errs = append(errs, errors.New("-replicas with several counts compares throughput and latency: -kill-every and -drop-every do not apply"))
	}
	if p.KillEvery < 0 || p.DropEvery < 0 {
		errs = append(errs, errors.New("-kill-every and -drop-every must not be negative"))
	}
	if p.Floor || p.LongFlows > 0 || p.Messages > 0 {
		errs = append(errs, errors.New("-replicas runs chat for -duration: -floor, -long-flows and -messages do not apply"))
	}
	if p.Duration <= 0 {
		errs = append(errs, errors.New("-replicas needs a positive -duration"))
	}
	if _, err := time.ParseDuration(cmp.Or(p.OrderHold, "0s")); err != nil {
		errs = append(errs, fmt.Errorf("-order-hold: %w", err))
	}
	if p.LeaseTTL < 0 {
		errs = append(errs, errors.New("-lease-ttl must not be negative"))
	}
	if p.SlackAckTimeout <= 0 {
		errs = append(errs, errors.New("-slack-ack-timeout must be positive"))
	}
	if p.Burst < 1 || p.Burst > 10 {
		errs = append(errs, fmt.Errorf("-burst %d: want 1 to 10", p.Burst))
	}
	if p.Rate <= 0 {
		errs = append(errs, errors.New("-rate must be positive with -replicas"))
	}
	return errors.Join(errs...)
}

// run is the whole program with the OS injected, so tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flowbridge-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	p := params{stderr: stderr}
	fs.StringVar(&p.Platform, "platform", "both", "slack, discord or both (conversations alternate)")
	fs.IntVar(&p.Users, "users", 0, "simulated users, spread over the conversations (0: one per conversation)")
	fs.IntVar(&p.Conversations, "conversations", 100, "concurrent conversations (each sends, waits for the reply, thinks, sends again); with -kill-every default 300")
	fs.IntVar(&p.PerChannel, "per-channel", 10, "Slack conversations (threads) per channel")
	fs.BoolVar(&p.SlackPostLimit, "slack-post-limit", false, "hold the fake Slack's chat.postMessage to Slack's limit, a message a second per channel after a burst of 3 (429 with Retry-After past it), as -kill-every and -replicas always do; off by default, so figures stay comparable with earlier runs: -per-channel 10 at about a message a second each offers ten times the limit to every channel, so use -per-channel 1 with it")
	fs.DurationVar(&p.Duration, "duration", 10*time.Second, "measured phase (after every conversation has its session)")
	fs.IntVar(&p.Messages, "messages", 0, "stop the measured phase after this many messages (0: -duration only)")
	fs.DurationVar(&p.APILatency, "api-latency", 50*time.Millisecond, "the fake workspace API's time per chat message")
	fs.DurationVar(&p.Think, "think", time.Second, "mean pause of a user between a reply and the next message (uniform 0..2x; 0: closed loop)")
	fs.IntVar(&p.LongFlows, "long-flows", 0, "flows kept running in the API during the measured phase")
	fs.DurationVar(&p.LongFlowDuration, "long-flow-duration", 30*time.Second, "how long each long flow runs")
	fs.Float64Var(&p.Rate, "rate", 0, "offer this many messages a second in total, whatever the number of conversations: sets each run's think time (conversations/rate - API latency, at least 0) and overrides -think; with -kill-every default 100")
	fs.DurationVar(&p.AckInterval, "ack-interval", 0, "how often a slash command probes acknowledgement latency (0: 100ms with -long-flows, else 1s)")
	fs.DurationVar(&p.ReplyTimeout, "reply-timeout", 30*time.Second, "a reply later than this counts as lost; with -kill-every, the longest wait for the last answers (at least 65s then: a re-post after a crash first looks for the answer with a Tier 3 call, 50 a minute)")
	fs.DurationVar(&p.KillEvery, "kill-every", 0, "test delivery: SIGKILL flowbridge at random moments about this far apart (exponential, at most 3x) under load over Slack's HTTP mode, restart it, redeliver as Slack does, and count duplicates and silent drops")
	fs.IntVar(&p.Kills, "kills", 20, "with -kill-every: how many times to kill flowbridge")
	fs.BoolVar(&p.Damage, "damage", false, "with -kill-every: after each kill, damage the store file (cut short, emptied, one byte changed, deleted, in turn); each start must refuse naming the file and the backup (the file is then put back) or serve with the promises kept")
	fs.DurationVar(&p.RedeliverWindow, "redeliver-window", 10*time.Second, "with -kill-every: after a restart, Slack redelivers every event not acknowledged and a random half of those acknowledged within this window")
	fs.Float64Var(&p.FlowShare, "flow-share", 0.1, "with -kill-every: the share of conversations that run /flow slow (1.5 s) instead of chatting")
	fs.StringVar(&p.WorkingIndicator, "working-indicator", "placeholder", "the Slack working indicator configured: placeholder, reaction or none")
	fs.DurationVar(&p.IndicatorDelay, "working-indicator-delay", defaultIndicatorDelay, "the bridge's working_indicator_delay: answers quicker than this show no indicator")
	fs.StringVar(&p.flowbridge, "flowbridge", "", "a prebuilt flowbridge binary (default: go build ./cmd/flowbridge)")
	fs.BoolVar(&p.Floor, "floor", false, "measure a bare relay on the same libraries (slack-go, discordgo, net/http) instead of flowbridge: what a message costs before flowbridge's own work")
	fs.StringVar(&p.tempDir, "tmpdir", "", "where the temporary directory (config, store, bridge log) goes; e.g. /dev/shm to take fsync out of the picture")
	fs.BoolVar(&p.keepTemp, "keep", false, "keep the temporary directory (config, store, bridge log) and print its path; with -replicas, keep the PostgreSQL schema too")
	fs.StringVar(&p.Replicas, "replicas", "", "run N flowbridge processes on one PostgreSQL (-store postgres), each with its own Slack socket and Discord shards (2 shards), and count the delivery promises across them, with -kill-every (SIGKILL and restart one replica about this often) and -drop-every; \"1,3\" runs 1 then 3 replicas without faults and compares throughput and added latency")
	fs.StringVar(&p.Store, "store", "bbolt", "with -replicas: the store the replicas share, postgres")
	fs.StringVar(&p.DSN, "dsn", cmp.Or(os.Getenv("FLOWBRIDGE_TEST_DATABASE_URL"), defaultTestDSN), "with -replicas: the PostgreSQL database (a postgres:// URL); each run gets a schema of its own, dropped afterwards")
	fs.DurationVar(&p.DropEvery, "drop-every", 0, "with -replicas: about this often, close one live Slack socket or one Discord shard's gateway connection (in turn) while its process lives")
	fs.DurationVar(&p.SlackAckTimeout, "slack-ack-timeout", slacktest.DefaultAckTimeout, "with -replicas: how long the fake Slack waits for a Socket Mode ack before it redelivers the event on another socket (Slack: 3s)")
	fs.StringVar(&p.OrderHold, "order-hold", "", "with -replicas: the replicas' store.order_hold, how long a conversation's first message of a burst waits for an earlier one another replica received (e.g. \"100ms\", \"0s\" for none; default: flowbridge's)")
	fs.DurationVar(&p.PGOutage, "pg-outage", 0, "with -replicas: run on a throwaway PostgreSQL the harness starts itself (initdb and pg_ctl from -pg-bin, a free port, a temporary directory; -dsn is not used), stop it for this long a third of the way into -duration, start it again, and check that no user is told \"try again\" and then answered, nothing is lost, and /readyz is 200 within 5s of its return; -slack-ack-timeout defaults to 5s then, so that Slack's three retries outlast a 10s outage as its real minutes-apart retries do")
	fs.StringVar(&p.PGBin, "pg-bin", "/usr/lib/postgresql/15/bin", "with -pg-outage: where initdb and pg_ctl are")
	fs.DurationVar(&p.LeaseTTL, "lease-ttl", 0, "with -replicas: the replicas' store.lease_ttl, how long a dead replica's conversations wait for another (0: flowbridge's default)")
	fs.BoolVar(&p.Restart, "restart", true, "with -replicas: SIGTERM every replica as soon as the users stop (answers in flight, messages queued), start them again on the same database and wait for what they left (answers kept in the outbox, messages not yet run) before counting; -restart=false waits for the answers first and ends there")
	fs.IntVar(&p.Burst, "burst", 2, "with -replicas: messages a user sends at once before waiting for the answers, so one conversation's messages reach several replicas")
	sweep := fs.Bool("sweep", false, "run with 1, 10, 100, 1000 and 10000 conversations and show how each figure grows (relative to 10); with -rate, at the same total message rate")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if p.KillEvery > 0 && *sweep {
		return errors.New("-kill-every and -sweep do not combine")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if p.Replicas != "" {
		if *sweep {
			return errors.New("-replicas and -sweep do not combine")
		}
		if !set["conversations"] {
			p.Conversations = defaultReplicaConversations
		}
		if !set["duration"] && (p.KillEvery > 0 || p.DropEvery > 0) {
			p.Duration = defaultReplicaKillDuration
		}
		if !set["reply-timeout"] {
			p.ReplyTimeout = defaultReplicaReplyTimeout
		}
		if !set["rate"] {
			p.Rate = defaultKillRate
		}
		if p.PGOutage > 0 && !set["slack-ack-timeout"] {
			p.SlackAckTimeout = 5 * time.Second
		}
	}
	if p.KillEvery > 0 && p.Replicas == "" {
		if !set["conversations"] {
			p.Conversations = defaultKillConversations
		}
		if !set["platform"] {
			p.Platform = "slack"
		}
		if p.Rate == 0 {
			p.Rate = defaultKillRate
		}
	}
	if err := p.validate(); err != nil {
		return err
	}

	if p.Floor {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		p.flowbridge = self
	} else if p.flowbridge == "" {
		dir, err := os.MkdirTemp("", "flowbridge-load-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin, err := buildFlowbridge(ctx, dir)
		if err != nil {
			return err
		}
		p.flowbridge = bin
	}

	if p.Replicas != "" {
		p.fillReported()
		return runReplicaMode(ctx, p, stdout, *asJSON)
	}
	if p.KillEvery > 0 {
		p.fillReported()
		res, err := runKill(ctx, p)
		if err != nil {
			return err
		}
		if *asJSON {
			if err := writeJSON(stdout, res); err != nil {
				return err
			}
		} else {
			printKillTable(stdout, res)
		}
		return res.broken()
	}

	if !*sweep {
		res, err := runOnce(ctx, p)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, res)
		}
		printTable(stdout, res)
		return nil
	}

	var runs []*result
	for _, m := range sweepSizes {
		q := p
		q.Conversations = m
		fmt.Fprintf(stderr, "sweep: %d conversations…\n", m)
		res, err := runOnce(ctx, q)
		if err != nil {
			return fmt.Errorf("sweep at %d conversations: %w", m, err)
		}
		runs = append(runs, res)
	}
	sw := newSweep(runs)
	if *asJSON {
		return writeJSON(stdout, sw)
	}
	printSweep(stdout, sw)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
