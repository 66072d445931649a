package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

const (
	agentUUID     = "11111111-1111-1111-1111-111111111111"
	longFlowUUID  = "22222222-2222-2222-2222-222222222222"
	quickFlowUUID = "33333333-3333-3333-3333-333333333333"
	guildID       = "500000000000000001"
	cmdChannelID  = "500000000000000002"
	slackCmdChan  = "CLOADCMD01"

	// slackPingInterval is about how often Slack pings a Socket Mode socket.
	slackPingInterval = 10 * time.Second

	// startTimeout bounds the bridge's start until both platforms are connected.
	startTimeout = 60 * time.Second
	// shutdownGrace is the bridge's configured grace; stopTimeout is how long
	// it gets to exit before it is killed.
	shutdownGrace = 2 * time.Second
	stopTimeout   = 15 * time.Second
)

// conversation is one simulated conversation: a Slack thread or a Discord DM.
type conversation struct {
	id       int
	platform string
	user     string
	channel  string
	root     string // Slack: the thread's first message
	replies  chan reply

	samples []sample
	lost    int
}

type reply struct {
	seq int
	at  time.Time
}

type sample struct {
	e2e, service time.Duration
	at           time.Time // when the reply came
}

// env is one run's fakes, bridge process and conversations.
type env struct {
	p       params
	dir     string
	ws      *meteredWorkspace
	slack   *slacktest.Server
	discord *discordtest.Server
	fronts  []*front
	bridge  *child
	convs   []*conversation
	// slackHot serves chat.postMessage; kept with -slack-post-limit, for
	// the posts it refused.
	slackHot *slackHot
	// sent and budget count messages of the measured phase.
	sent atomic.Int64
}

// runOnce starts everything, measures and tears it all down, whatever happens.
func runOnce(ctx context.Context, p params) (*result, error) {
	if p.Users == 0 || p.Users > p.Conversations {
		p.Users = p.Conversations
	}
	p.resolve()
	if rate := p.slackChannelRate(); p.SlackPostLimit && rate > slacktest.PostsPerSecond {
		fmt.Fprintf(p.stderr, "-slack-post-limit: about %.1f messages a second offered to each Slack channel (-per-channel %d), over Slack's %d: answers queue behind the limit, and the added latency grows with the run\n",
			rate, p.PerChannel, slacktest.PostsPerSecond)
	}
	return inTempDir(ctx, p, func(dir string) *env { return &env{p: p, dir: dir} }, (*env).measure)
}

// slackChannelRate is about how many messages a second the users offer
// each Slack channel, each of its conversations one per think and API time.
func (p *params) slackChannelRate() float64 {
	perChannel := p.PerChannel
	if p.Platform == "both" {
		perChannel = (perChannel + 1) / 2 // the conversations alternate between the platforms
	}
	each := (p.Think + p.APILatency).Seconds()
	if each == 0 {
		return math.Inf(1)
	}
	return float64(min(perChannel, p.Conversations)) / each
}

func (e *env) usesSlack() bool   { return e.p.Platform != "discord" }
func (e *env) usesDiscord() bool { return e.p.Platform != "slack" }

func (e *env) onReply(m marker, at time.Time) {
	if m.conv < 0 || m.conv >= len(e.convs) {
		return
	}
	select {
	case e.convs[m.conv].replies <- reply{seq: m.seq, at: at}:
	default:
		// A reply nobody waits for (duplicated or late): dropping it is fine.
	}
}

func (e *env) start(ctx context.Context) error {
	p := e.p
	users := p.Users
	for i := range p.Conversations {
		c := &conversation{id: i, platform: "slack", replies: make(chan reply, 4)}
		if p.Platform == "discord" || p.Platform == "both" && i%2 == 1 {
			c.platform = "discord"
		}
		u := i % users
		if c.platform == "slack" {
			c.user = fmt.Sprintf("U%08d", u)
			c.channel = fmt.Sprintf("CLOAD%05d", i/p.PerChannel)
		} else {
			c.user = fmt.Sprintf("6%017d", u)
			c.channel = fmt.Sprintf("7%017d", i)
		}
		e.convs = append(e.convs, c)
	}

	e.ws = newMeteredWorkspace(p.APILatency, p.LongFlowDuration)
	var slackAPI, discordAPI string
	if e.usesSlack() {
		// Slack pings each socket about every 10 s; the fake's default is
		// far faster (for tests), which would be CPU no real bridge spends.
		// The run measures the bridge, not one workspace's chat.update
		// allowance, which thousands of simulated users would exceed.
		e.slack = slacktest.NewServer(slacktest.Options{Channels: []slacktest.Channel{{ID: slackCmdChan, Name: "load"}}, PingInterval: slackPingInterval, NoRecord: true, UpdatesPerMinute: -1})
		hot := newSlackHot(e.slack.BotUserID(), e.slack.BotID(), e.onReply)
		if p.SlackPostLimit {
			hot.limit = slacktest.NewPostLimiter(0)
			e.slackHot = hot
		}
		f, err := newFront(e.slack.URL(), hot.register)
		if err != nil {
			return err
		}
		e.fronts = append(e.fronts, f)
		slackAPI = f.URL() + "/api/"
	}
	if e.usesDiscord() {
		// As for Slack: the bridge is measured, not the edits per channel.
		e.discord = discordtest.NewServer(discordtest.Options{NoRecord: true, NoEditLimit: true})
		if err := e.discord.AddGuild(ctx, guildID); err != nil {
			return err
		}
		if err := e.discord.AddChannel(ctx, discordgo.Channel{ID: cmdChannelID, GuildID: guildID, Type: discordgo.ChannelTypeGuildText, Name: "load"}); err != nil {
			return err
		}
		bot := e.discord.BotUser()
		hot := newDiscordHot(bot.ID, bot.Username, e.onReply)
		f, err := newFront(e.discord.URL, hot.register)
		if err != nil {
			return err
		}
		e.fronts = append(e.fronts, f)
		discordAPI = f.URL()
	}

	cfgPath := filepath.Join(e.dir, "flowbridge.toml")
	if err := os.WriteFile(cfgPath, []byte(e.config(slackAPI, discordAPI)), 0o600); err != nil {
		return err
	}
	args := []string{"run", "-config", cfgPath}
	if p.Floor {
		args[0] = relayCommand
	}
	b, err := startChild(p.flowbridge, args, filepath.Join(e.dir, "flowbridge.log"))
	if err != nil {
		return err
	}
	e.bridge = b
	return e.waitConnected(ctx)
}

// config is the bridge's configuration: the fakes' addresses, a store in the
// temporary directory, no console, admin on a free loopback port, and room
// for every conversation and long flow at once (max_in_flight).
func (e *env) config(slackAPI, discordAPI string) string {
	p := e.p
	var b strings.Builder
	b.WriteString(baseConfig(e.ws.URL(), fmt.Sprintf("path = %q\n", filepath.Join(e.dir, "flowbridge.db")),
		p.Conversations+p.LongFlows+256, indicatorDelayKey(p.IndicatorDelay), "127.0.0.1:0", "warn"))
	fmt.Fprintf(&b, `
[[flows]]
name = "long"
uuid = %q
description = "A flow that runs long"
timeout = %q
allow = ["everyone"]

[[flows]]
name = "quick"
uuid = %q
description = "A flow that returns at once"
timeout = "60s"
allow = ["everyone"]
`, longFlowUUID, (p.LongFlowDuration + time.Minute).Round(time.Second).String(), quickFlowUUID)
	if slackAPI != "" {
		fmt.Fprintf(&b, `
[slack]
enabled = true
mode = "socket"
bot_token = %q
app_token = %q
api_url = %q
working_indicator = %q
`, e.slack.BotToken(), e.slack.AppToken(), slackAPI, p.WorkingIndicator)
	}
	if discordAPI != "" {
		fmt.Fprintf(&b, `
[discord]
enabled = true
token = %q
application_id = %q
guild_ids = [%q]
api_url = %q
`, e.discord.Token(), e.discord.ApplicationID(), guildID, discordAPI)
	}
	return b.String()
}

// baseConfig is the part of the bridge's configuration every mode shares:
// the fake workspace, the store section's lines, room for every
// conversation's work (maxInFlight), the bridge section's other lines, the
// admin listener, the log level and the one agent. Each mode adds its flows
// and platforms after it.
func baseConfig(wsURL, storeLines string, maxInFlight int, bridgeLines, adminListen, logLevel string) string {
	return fmt.Sprintf(`[workspace]
base_url = %q
workspace_uuid = "ws-test"
api_token = "test-token"
chat_timeout = "2m"

[store]
%s
[bridge]
max_in_flight = %d
shutdown_grace = %q
%s
[admin]
listen = %q

[log]
level = %q
format = "json"

[[agents]]
name = "helper"
uuid = %q
default = true
`, wsURL, storeLines, maxInFlight, shutdownGrace.String(), bridgeLines, adminListen, logLevel, agentUUID)
}

// inTempDir gives a run a temporary directory of its own: newEnv builds
// the run's environment in it, which is started, then run, then closed,
// and the directory removed (or kept, with -keep), whatever happened.
func inTempDir[E interface {
	start(context.Context) error
	close() error
}, R any](ctx context.Context, p params, newEnv func(dir string) E, run func(E, context.Context) (R, error)) (res R, err error) {
	dir, err := os.MkdirTemp(p.tempDir, "flowbridge-load-")
	if err != nil {
		return res, err
	}
	e := newEnv(dir)
	defer func() {
		if cerr := e.close(); cerr != nil && err == nil {
			err = cerr
		}
		keepOrRemove(p, dir)
	}()
	if err := e.start(ctx); err != nil {
		return res, err
	}
	return run(e, ctx)
}

// keepOrRemove ends a run's temporary directory: kept and named with -keep,
// else removed.
func keepOrRemove(p params, dir string) {
	if p.keepTemp {
		fmt.Fprintln(p.stderr, "kept", dir)
	} else {
		os.RemoveAll(dir)
	}
}

// defaultIndicatorDelay is flowbridge's default working_indicator_delay.
const defaultIndicatorDelay = 500 * time.Millisecond

// indicatorDelayKey is the config line for the indicator delay, left out at
// flowbridge's default so that builds from before the key can be measured too.
func indicatorDelayKey(d time.Duration) string {
	if d == defaultIndicatorDelay {
		return ""
	}
	return fmt.Sprintf("working_indicator_delay = %q\n", d.String())
}

// waitConnected waits until the bridge has connected to every platform (and
// registered its Discord commands), failing early when the process exits.
func (e *env) waitConnected(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	if e.slack != nil {
		wg.Go(func() { errs <- e.slack.WaitConnections(ctx, 1) })
	}
	if e.discord != nil {
		wg.Go(func() {
			_, err := e.discord.WaitRequest(ctx, func(r discordtest.Request) bool {
				return r.Route == discordtest.RouteGuildCommands && r.Status/100 == 2
			})
			if err == nil {
				_, err = e.discord.WaitReady(ctx)
			}
			errs <- err
		})
	}
	all := make(chan struct{})
	go func() {
		wg.Wait()
		close(all)
	}()
	select {
	case <-all:
	case <-e.bridge.done:
		cancel()
		<-all
		return e.bridge.exited()
	}
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("waiting for the bridge to connect: %w\n%s", err, e.bridge.logTail())
		}
	}
	return nil
}

// close stops the bridge first (so nothing calls the fakes any more), then the
// fronts and fakes.
func (e *env) close() error {
	var errs []error
	if e.bridge != nil {
		if err := e.bridge.stop(stopTimeout); err != nil {
			errs = append(errs, fmt.Errorf("stopping flowbridge: %w\n%s", err, e.bridge.logTail()))
		}
	}
	for _, f := range e.fronts {
		f.Close()
	}
	if e.slack != nil {
		e.slack.Close()
	}
	if e.discord != nil {
		e.discord.Close()
	}
	if e.ws != nil {
		e.ws.Close()
	}
	return errors.Join(errs...)
}

// send delivers message seq of conversation c.
func (e *env) send(ctx context.Context, c *conversation, seq int) error {
	text := "hello " + marker{conv: c.id, seq: seq}.String() + " how are you"
	if c.platform == "slack" {
		d, err := e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: c.channel, User: c.user, Text: text, ThreadTS: c.root})
		if err != nil {
			return err
		}
		if c.root == "" {
			c.root = d.TS
		}
		return nil
	}
	_, err := e.discord.SendMessage(ctx, discordtest.MessageCreate{ChannelID: c.channel, Author: discordgo.User{ID: c.user, Username: "u" + c.user[len(c.user)-6:]}, Content: text})
	return err
}

// exchange sends one message and waits for its reply; ok is false when the
// reply did not come within the reply timeout.
func (e *env) exchange(ctx context.Context, c *conversation, seq int) (s sample, ok bool, err error) {
	start := time.Now()
	if err := e.send(ctx, c, seq); err != nil {
		return sample{}, false, fmt.Errorf("conversation %d: send: %w", c.id, err)
	}
	t := time.NewTimer(e.p.ReplyTimeout)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return sample{}, false, ctx.Err()
		case <-t.C:
			return sample{}, false, nil
		case r := <-c.replies:
			if r.seq != seq {
				continue // a late reply to an earlier message
			}
			svc, found := e.ws.service(marker{conv: c.id, seq: seq})
			if !found {
				svc = e.p.APILatency
			}
			return sample{e2e: r.at.Sub(start), service: svc, at: r.at}, true, nil
		}
	}
}

// pause waits d, or returns false when ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// firstWait is a conversation's pause before its first measured message.
// Every conversation enters the phase at once; drawing this pause from one
// whole cycle (think plus API time) spreads their first messages evenly, so
// the phase sees the steady rate from its start rather than a burst, or a
// lull when think times are long.
func (e *env) firstWait() time.Duration {
	cycle := e.p.Think + e.p.APILatency
	if e.p.Think <= 0 || cycle <= 0 {
		return 0
	}
	return rand.N(cycle)
}

func (e *env) thinkTime() time.Duration {
	if e.p.Think <= 0 {
		return 0
	}
	return rand.N(2 * e.p.Think)
}

// probe is one slash command sent to measure its acknowledgement.
type probe struct {
	platform string
	id       string // Slack envelope ID, Discord interaction ID
}

// slash sends "/flow NAME" on a platform.
func (e *env) slash(ctx context.Context, platform, name string, n int) (probe, error) {
	if platform == "slack" {
		d, err := e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: name, UserID: fmt.Sprintf("UCMD%05d", n%1000), ChannelID: slackCmdChan})
		return probe{platform: platform, id: d.EnvelopeID}, err
	}
	sub := &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionSubCommand}
	sent, err := e.discord.SendInteraction(ctx, discordtest.Interaction{
		GuildID: guildID, ChannelID: cmdChannelID,
		User: discordgo.User{ID: fmt.Sprintf("9%017d", n%1000), Username: "commander"},
		Data: discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub}},
	})
	return probe{platform: platform, id: sent.ID}, err
}

func (e *env) platforms() []string {
	switch e.p.Platform {
	case "slack", "discord":
		return []string{e.p.Platform}
	}
	return []string{"slack", "discord"}
}

// awaitAcks gives the last probes a moment to be acknowledged: a probe sent
// just before the phase ended is not lost.
func (e *env) awaitAcks(ctx context.Context, probes []probe) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	last := map[string]string{}
	for _, pr := range probes {
		last[pr.platform] = pr.id
	}
	if id, ok := last["slack"]; ok {
		_, _ = e.slack.WaitAck(ctx, id)
	}
	if id, ok := last["discord"]; ok {
		_, _ = e.discord.WaitInteractionResponse(ctx, id)
	}
}

// ackLatencies returns the acknowledgement latency of each probe that was
// acknowledged, and how many were not.
func (e *env) ackLatencies(probes []probe) (lat []time.Duration, missing int) {
	acked := map[string]time.Duration{}
	if e.slack != nil {
		for _, a := range e.slack.Acks() {
			if _, seen := acked[a.EnvelopeID]; !seen && a.Type == slacktest.TypeSlashCommands {
				acked[a.EnvelopeID] = a.Delay
			}
		}
	}
	for _, pr := range probes {
		if pr.platform == "slack" {
			if d, ok := acked[pr.id]; ok {
				lat = append(lat, d)
				continue
			}
			missing++
			continue
		}
		found := false
		for _, r := range e.discord.InteractionResponses(pr.id) {
			if r.Code == 0 {
				lat = append(lat, r.Late)
				found = true
				break
			}
		}
		if !found {
			missing++
		}
	}
	return lat, missing
}

// measure warms every conversation up (its first message creates the
// session), starts the long flows, then runs the measured phase while probing
// slash-command acknowledgement, and reads the bridge's CPU and memory.
func (e *env) measure(ctx context.Context) (*result, error) {
	p := e.p
	pid := e.bridge.pid()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The bridge dying ends the run with its log.
	var watch sync.WaitGroup
	defer watch.Wait()
	watchDone := make(chan struct{})
	defer close(watchDone)
	watch.Go(func() {
		select {
		case <-e.bridge.done:
			cancel(e.bridge.exited())
		case <-watchDone:
		}
	})

	idle, err := readMemory(pid)
	if err != nil {
		return nil, err
	}

	// Warm-up: the first message of each conversation, staggered over the think time.
	var wg sync.WaitGroup
	var warmLost atomic.Int64
	// The first failure is the run's error: context.Cause keeps it.
	fail := func(err error) { cancel(err) }
	for _, c := range e.convs {
		wg.Go(func() {
			if !pause(ctx, e.thinkTime()) {
				return
			}
			_, ok, err := e.exchange(ctx, c, 0)
			if err != nil {
				fail(err)
				return
			}
			if !ok {
				warmLost.Add(1)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	// Long flows, then let the bridge settle their acknowledgements.
	var longProbes []probe
	plats := e.platforms()
	for i := range p.LongFlows {
		pr, err := e.slash(ctx, plats[i%len(plats)], "long", i)
		if err != nil {
			return nil, fmt.Errorf("long flow %d: %w", i, err)
		}
		longProbes = append(longProbes, pr)
	}

	phase, stopPhase := context.WithCancel(ctx)
	if p.Duration > 0 {
		var c context.CancelFunc
		phase, c = context.WithTimeout(phase, p.Duration)
		defer c()
	}
	defer stopPhase()
	cpu0, err := cpuTime(pid)
	if err != nil {
		return nil, err
	}
	var self0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	t0 := time.Now()

	for _, c := range e.convs {
		wg.Go(func() {
			for seq := 1; ; seq++ {
				wait := e.thinkTime()
				if seq == 1 {
					wait = e.firstWait()
				}
				if !pause(phase, wait) {
					return
				}
				if p.Messages > 0 && e.sent.Add(1) > int64(p.Messages) {
					stopPhase()
					return
				}
				// A reply is awaited even after the phase ends, so each
				// message sent is either measured or lost.
				s, ok, err := e.exchange(ctx, c, seq)
				if err != nil {
					fail(err)
					return
				}
				if !ok {
					c.lost++
					continue
				}
				c.samples = append(c.samples, s)
			}
		})
	}
	var phaseEnd time.Time
	wg.Go(func() {
		<-phase.Done()
		phaseEnd = time.Now()
	})
	var probes []probe
	wg.Go(func() {
		t := time.NewTicker(p.AckInterval)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-phase.Done():
				return
			case <-t.C:
			}
			pr, err := e.slash(phase, plats[i%len(plats)], "quick", i)
			if err != nil {
				if phase.Err() == nil {
					fail(fmt.Errorf("slash command probe: %w", err))
				}
				return
			}
			probes = append(probes, pr)
		}
	})
	wg.Wait()
	elapsed := time.Since(t0)
	cpu1, err := cpuTime(pid)
	if err != nil {
		return nil, err
	}
	var self1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	mem, err := readMemory(pid)
	if err != nil {
		return nil, err
	}
	e.awaitAcks(ctx, probes)
	ackLat, ackMissing := e.ackLatencies(probes)
	_, longMissing := e.ackLatencies(longProbes)

	res := &result{params: p}
	var e2e, added, svc []time.Duration
	var minutes minuteBuckets
	inPhase := 0
	for _, c := range e.convs {
		res.Lost += c.lost
		for _, s := range c.samples {
			if !s.at.After(phaseEnd) {
				inPhase++
			}
			e2e = append(e2e, s.e2e)
			svc = append(svc, s.service)
			a := max(s.e2e-s.service, 0)
			added = append(added, a)
			minutes.add(s.at.Sub(t0), a)
		}
	}
	if p.Duration >= 2*time.Minute {
		res.AddedLatencyByMinute = minutes.quantiles()
	}
	res.Messages = len(e2e)
	res.WarmupLost = int(warmLost.Load())
	res.ElapsedSec = elapsed.Seconds()
	// Replies within the phase over the phase: the tail that waits for the
	// last replies (or for lost ones to time out) does not dilute the rate.
	res.MessagesPerSec = float64(inPhase) / phaseEnd.Sub(t0).Seconds()
	res.AddedLatencyMS = quantilesOf(added)
	res.EndToEndMS = quantilesOf(e2e)
	res.APIServiceMS = quantilesOf(svc)
	res.AckLatencyMS = quantilesOf(ackLat)
	res.Acks = len(ackLat)
	res.AcksMissing = ackMissing + longMissing
	used := cpu1.sub(cpu0)
	cpu := used.total()
	res.CPUSec = cpu.Seconds()
	if res.Messages > 0 {
		res.CPUUSPerMessage = float64(cpu.Microseconds()) / float64(res.Messages)
		res.CPUSysUSPerMessage = float64(used.Sys.Microseconds()) / float64(res.Messages)
	}
	res.CPUSecPer1000Messages = res.CPUUSPerMessage / 1000
	res.DriverCPUSec = rusageCPU(self1).Seconds() - rusageCPU(self0).Seconds()
	res.IdleRSSMB = mb(idle.RSS)
	res.RSSMB = mb(mem.RSS)
	res.PeakRSSMB = mb(mem.Peak)
	if e.slackHot != nil {
		res.SlackPostsRefused = int(e.slackHot.refused.Load())
	}

	// The store's size once the bridge has closed it.
	if err := e.bridge.stop(stopTimeout); err != nil {
		return nil, fmt.Errorf("stopping flowbridge: %w\n%s", err, e.bridge.logTail())
	}
	if fi, err := os.Stat(filepath.Join(e.dir, "flowbridge.db")); err == nil {
		res.StoreBytes = fi.Size()
	}
	return res, nil
}

// minuteBuckets groups latencies by the minute, since the phase began, in
// which their reply came.
type minuteBuckets [][]time.Duration

func (b *minuteBuckets) add(since, latency time.Duration) {
	m := max(int(since/time.Minute), 0)
	for len(*b) <= m {
		*b = append(*b, nil)
	}
	(*b)[m] = append((*b)[m], latency)
}

func (b minuteBuckets) quantiles() []quantiles {
	out := make([]quantiles, len(b))
	for i, d := range b {
		out[i] = quantilesOf(d)
	}
	return out
}

func rusageCPU(r syscall.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
