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
	"github.com/flowbridge/flowbridge/testkit/loadkit"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

const (
	longFlowUUID  = "22222222-2222-2222-2222-222222222222"
	quickFlowUUID = "33333333-3333-3333-3333-333333333333"
	guildID       = "500000000000000001"
	cmdChannelID  = "500000000000000002"
	slackCmdChan  = "CLOADCMD01"
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
	bridge  *loadkit.Child
	convs   []*conversation
	// slackHot serves chat.postMessage; kept with -slack-post-limit, for
	// the posts it refused.
	slackHot *slackHot
	// sent and budget count messages of the measured phase.
	sent atomic.Int64
	// dsn is the run's schema with -dsn, and drop removes it.
	dsn  string
	drop func(context.Context) error
}

// runOnce starts everything, measures and tears it all down, whatever happens.
func runOnce(ctx context.Context, p params) (*result, error) {
	if rate := p.slackChannelRate(); p.SlackPostLimit && rate > slacktest.PostsPerSecond {
		fmt.Fprintf(p.tmp.Log, "-slack-post-limit: about %.1f messages a second offered to each Slack channel (-per-channel %d), over Slack's %d: answers queue behind the limit, and the added latency grows with the run\n",
			rate, p.PerChannel, slacktest.PostsPerSecond)
	}
	return loadkit.InTempDir(ctx, p.tmp, func(dir string) *env { return &env{p: p, dir: dir} }, (*env).measure)
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

func (e *env) onReply(m loadkit.Marker, at time.Time) {
	if m.Conv < 0 || m.Conv >= len(e.convs) {
		return
	}
	select {
	case e.convs[m.Conv].replies <- reply{seq: m.Seq, at: at}:
	default:
		// A reply nobody waits for (duplicated or late): dropping it is fine.
	}
}

// Start builds the conversations, the fakes and their fronts, and starts
// the bridge under measurement on them.
func (e *env) Start(ctx context.Context) error {
	e.newConversations()
	if e.p.DSN != "" && !e.p.target.relay { // the floors keep their own files
		dsn, _, drop, err := loadkit.NewSchema(ctx, e.p.DSN)
		if err != nil {
			return err
		}
		e.dsn, e.drop = dsn, drop
	}
	e.ws = newMeteredWorkspace(e.p.APILatency, e.p.LongFlowDuration)
	var slackAPI, discordAPI string
	var err error
	if e.usesSlack() {
		slackAPI = e.startSlack()
	}
	if e.usesDiscord() {
		if discordAPI, err = e.startDiscord(ctx); err != nil {
			return err
		}
	}
	cfgPath := filepath.Join(e.dir, "flowbridge.toml")
	if err := os.WriteFile(cfgPath, []byte(e.config(slackAPI, discordAPI)), 0o600); err != nil {
		return err
	}
	b, err := loadkit.Start(e.p.target.bin, e.p.target.args(cfgPath), filepath.Join(e.dir, "flowbridge.log"))
	if err != nil {
		return err
	}
	e.bridge = b
	return e.waitConnected(ctx)
}

// newConversations spreads the conversations over the platforms, Slack's
// over channels of -per-channel, and the users over the conversations.
func (e *env) newConversations() {
	p := e.p
	for i := range p.Conversations {
		c := &conversation{id: i, platform: "slack", replies: make(chan reply, 4)}
		if p.Platform == "discord" || p.Platform == "both" && i%2 == 1 {
			c.platform = "discord"
		}
		u := i % p.Users
		if c.platform == "slack" {
			c.user = fmt.Sprintf("U%08d", u)
			c.channel = fmt.Sprintf("CLOAD%05d", i/p.PerChannel)
		} else {
			c.user = fmt.Sprintf("6%017d", u)
			c.channel = fmt.Sprintf("7%017d", i)
		}
		e.convs = append(e.convs, c)
	}
}

// startSlack starts the fake Slack and its front, and returns the Web API
// URL the bridge is given.
func (e *env) startSlack() string {
	// Slack pings each socket about every 10 s; the fake's default is far
	// faster (for tests), which would be CPU no real bridge spends. The run
	// measures the bridge, not one workspace's chat.update allowance,
	// which thousands of simulated users would exceed.
	e.slack = slacktest.NewServer(slacktest.Options{Channels: []slacktest.Channel{{ID: slackCmdChan, Name: "load"}}, PingInterval: loadkit.SlackPingInterval, NoRecord: true, UpdatesPerMinute: -1})
	hot := newSlackHot(e.slack.BotUserID(), e.slack.BotID(), e.onReply)
	if e.p.SlackPostLimit {
		hot.limit = slacktest.NewPostLimiter(0)
		e.slackHot = hot
	}
	f := newFront(e.slack.URL(), hot.register)
	e.fronts = append(e.fronts, f)
	return f.URL() + "/api/"
}

// startDiscord starts the fake Discord, with a guild and a command channel,
// and its front, and returns the API URL the bridge is given.
func (e *env) startDiscord(ctx context.Context) (string, error) {
	// As for Slack: the bridge is measured, not the edits per channel.
	e.discord = discordtest.NewServer(discordtest.Options{NoRecord: true, NoEditLimit: true})
	if err := e.discord.AddGuild(ctx, guildID); err != nil {
		return "", err
	}
	if err := e.discord.AddChannel(ctx, discordgo.Channel{ID: cmdChannelID, GuildID: guildID, Type: discordgo.ChannelTypeGuildText, Name: "load"}); err != nil {
		return "", err
	}
	bot := e.discord.BotUser()
	hot := newDiscordHot(bot.ID, bot.Username, e.onReply)
	f := newFront(e.discord.URL, hot.register)
	e.fronts = append(e.fronts, f)
	return f.URL(), nil
}

// config is the bridge's configuration: the fakes' addresses, a store in the
// temporary directory, no console, admin on a free loopback port, and room
// for every conversation and long flow at once (max_in_flight).
func (e *env) config(slackAPI, discordAPI string) string {
	p := e.p
	var b strings.Builder
	storeLines := fmt.Sprintf("path = %q\n", filepath.Join(e.dir, "flowbridge.db"))
	if e.dsn != "" {
		storeLines = fmt.Sprintf("driver = \"postgres\"\ndsn = %q\n", e.dsn)
	}
	b.WriteString(loadkit.BaseConfig(e.ws.URL(), storeLines,
		p.Conversations+p.LongFlows+256, loadkit.IndicatorDelayKey(p.IndicatorDelay), "127.0.0.1:0", "warn"))
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

// waitConnected waits until the bridge has connected to every platform (and
// registered its Discord commands), failing early when the process exits.
func (e *env) waitConnected(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, loadkit.StartTimeout)
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
	case <-e.bridge.Done:
		cancel()
		<-all
		return e.bridge.Exited()
	}
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("waiting for the bridge to connect: %w\n%s", err, e.bridge.LogTail())
		}
	}
	return nil
}

// Close stops the bridge first (so nothing calls the fakes any more), then the
// fronts and fakes.
func (e *env) Close() error {
	var errs []error
	if e.bridge != nil {
		if err := e.bridge.Stop(loadkit.StopTimeout); err != nil {
			errs = append(errs, fmt.Errorf("stopping the bridge: %w\n%s", err, e.bridge.LogTail()))
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
	if e.drop != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errs = append(errs, e.drop(ctx))
	}
	return errors.Join(errs...)
}

// send delivers message seq of conversation c.
func (e *env) send(ctx context.Context, c *conversation, seq int) error {
	text := "hello " + loadkit.Marker{Conv: c.id, Seq: seq}.String() + " how are you"
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
			svc, found := e.ws.service(loadkit.Marker{Conv: c.id, Seq: seq})
			if !found {
				svc = e.p.APILatency
			}
			return sample{e2e: r.at.Sub(start), service: svc, at: r.at}, true, nil
		}
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
// session), starts the long flows, then runs the measured phase while
// probing slash-command acknowledgement, and reads the bridge's CPU,
// memory and syncs.
func (e *env) measure(ctx context.Context) (*result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The bridge dying ends the run with its log.
	stopWatch := e.watch(cancel)
	defer stopWatch()

	pid := e.bridge.PID()
	idle, err := loadkit.ReadMemory(pid)
	if err != nil {
		return nil, err
	}
	warmLost, err := e.warmUp(ctx, cancel)
	if err != nil {
		return nil, err
	}
	longProbes, err := e.startLongFlows(ctx)
	if err != nil {
		return nil, err
	}
	res := &result{params: e.p, WarmupLost: warmLost, IdleRSSMB: mb(idle.RSS), Syncs: -1}
	if err := e.phase(ctx, cancel, res); err != nil {
		return nil, err
	}
	_, longMissing := e.ackLatencies(longProbes)
	res.AcksMissing += longMissing
	// The store's size once the bridge has closed it.
	if err := e.bridge.Stop(loadkit.StopTimeout); err != nil {
		return nil, fmt.Errorf("stopping the bridge: %w\n%s", err, e.bridge.LogTail())
	}
	for _, name := range []string{"flowbridge.db", journalName} {
		if fi, err := os.Stat(filepath.Join(e.dir, name)); err == nil {
			res.StoreBytes += fi.Size()
		}
	}
	return res, nil
}

// watch cancels the run with the bridge's exit should it die; the function
// it returns stops watching.
func (e *env) watch(cancel context.CancelCauseFunc) func() {
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		select {
		case <-e.bridge.Done:
			cancel(e.bridge.Exited())
		case <-stop:
		}
	})
	return func() {
		close(stop)
		wg.Wait()
	}
}

// warmUp sends each conversation's first message, staggered over the think
// time, and returns how many were not answered.
func (e *env) warmUp(ctx context.Context, fail context.CancelCauseFunc) (int, error) {
	var wg sync.WaitGroup
	var lost atomic.Int64
	for _, c := range e.convs {
		wg.Go(func() {
			if !loadkit.Pause(ctx, e.thinkTime()) {
				return
			}
			_, ok, err := e.exchange(ctx, c, 0)
			if err != nil {
				fail(err)
				return
			}
			if !ok {
				lost.Add(1)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	return int(lost.Load()), nil
}

// startLongFlows starts -long-flows flows, alternating between the platforms.
func (e *env) startLongFlows(ctx context.Context) ([]probe, error) {
	var probes []probe
	plats := e.platforms()
	for i := range e.p.LongFlows {
		pr, err := e.slash(ctx, plats[i%len(plats)], "long", i)
		if err != nil {
			return nil, fmt.Errorf("long flow %d: %w", i, err)
		}
		probes = append(probes, pr)
	}
	return probes, nil
}

// use is what the bridge process used by a moment of the measured phase.
type use struct {
	at      time.Time
	cpu     loadkit.CPUUse
	driver  time.Duration // this process's CPU
	written int64         // the bridge's bytes sent to storage (-1: unknown)
}

func (e *env) use() (use, error) {
	u := use{at: time.Now()}
	var err error
	u.cpu, err = loadkit.CPUTime(e.bridge.PID())
	// Unknown where the kernel keeps no I/O accounting; not an error.
	u.written, _ = loadkit.DiskWrites(e.bridge.PID())
	var self syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	u.driver = time.Duration(self.Utime.Nano() + self.Stime.Nano())
	return u, err
}

// phase runs the measured phase: every conversation talks, and a slash
// command probes acknowledgement, until -duration or -messages; then the
// figures go into res.
func (e *env) phase(ctx context.Context, fail context.CancelCauseFunc, res *result) error {
	syncs, syncErr := loadkit.CountSyncs(e.bridge.PID(), e.dir)
	if syncErr == nil {
		defer syncs.Stop() // on the paths that return early
	}
	phase, stopPhase := context.WithTimeout(ctx, e.p.Duration)
	defer stopPhase()
	u0, err := e.use()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, c := range e.convs {
		wg.Go(func() { e.talk(ctx, phase, stopPhase, fail, c) })
	}
	var phaseEnd time.Time
	wg.Go(func() {
		<-phase.Done()
		phaseEnd = time.Now()
	})
	var probes []probe
	wg.Go(func() { probes = e.probe(phase, fail) })
	wg.Wait()
	u1, err := e.use()
	if err != nil {
		return err
	}
	if syncErr == nil {
		res.Syncs, syncErr = syncs.Stop()
	}
	if syncErr != nil {
		res.Notes = append(res.Notes, "syncs not counted: "+syncErr.Error())
		res.Syncs = -1
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	mem, err := loadkit.ReadMemory(e.bridge.PID())
	if err != nil {
		return err
	}
	e.awaitAcks(ctx, probes)
	res.fill(e, u0, u1, phaseEnd, mem)
	res.AckLatencyMS, res.AcksMissing = e.ackQuantiles(probes)
	res.Acks = res.AckLatencyMS.N
	return nil
}

// talk is one conversation's measured phase: think, send, wait for the
// reply, until the phase ends. A reply is awaited even after the phase
// ends, so each message sent is either measured or lost.
func (e *env) talk(ctx, phase context.Context, stopPhase context.CancelFunc, fail context.CancelCauseFunc, c *conversation) {
	for seq := 1; ; seq++ {
		wait := e.thinkTime()
		if seq == 1 {
			wait = e.firstWait()
		}
		if !loadkit.Pause(phase, wait) {
			return
		}
		if e.p.Messages > 0 && e.sent.Add(1) > int64(e.p.Messages) {
			stopPhase()
			return
		}
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
}

// probe sends a "/flow quick" every -ack-interval, alternating platforms,
// until the phase ends, and returns what it sent.
func (e *env) probe(phase context.Context, fail context.CancelCauseFunc) []probe {
	var probes []probe
	plats := e.platforms()
	t := time.NewTicker(e.p.AckInterval)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-phase.Done():
			return probes
		case <-t.C:
		}
		pr, err := e.slash(phase, plats[i%len(plats)], "quick", i)
		if err != nil {
			if phase.Err() == nil {
				fail(fmt.Errorf("slash command probe: %w", err))
			}
			return probes
		}
		probes = append(probes, pr)
	}
}

// ackQuantiles are the probes' acknowledgement latencies and how many were
// not acknowledged.
func (e *env) ackQuantiles(probes []probe) (loadkit.Quantiles, int) {
	lat, missing := e.ackLatencies(probes)
	return loadkit.QuantilesOf(lat), missing
}

// fill puts the phase's figures into r: the conversations' samples, the
// bridge's CPU between u0 and u1, its memory and its syncs.
func (r *result) fill(e *env, u0, u1 use, phaseEnd time.Time, mem loadkit.Memory) {
	var e2e, added, svc []time.Duration
	var minutes minuteBuckets
	inPhase := 0
	for _, c := range e.convs {
		r.Lost += c.lost
		for _, s := range c.samples {
			if !s.at.After(phaseEnd) {
				inPhase++
			}
			e2e = append(e2e, s.e2e)
			svc = append(svc, s.service)
			a := max(s.e2e-s.service, 0)
			added = append(added, a)
			minutes.add(s.at.Sub(u0.at), a)
		}
	}
	if e.p.Duration >= 2*time.Minute {
		r.AddedLatencyByMinute = minutes.quantiles()
	}
	r.Messages = len(e2e)
	r.ElapsedSec = u1.at.Sub(u0.at).Seconds()
	// Replies within the phase over the phase: the tail that waits for the
	// last replies (or for lost ones to time out) does not dilute the rate.
	r.MessagesPerSec = float64(inPhase) / phaseEnd.Sub(u0.at).Seconds()
	r.AddedLatencyMS = loadkit.QuantilesOf(added)
	r.EndToEndMS = loadkit.QuantilesOf(e2e)
	r.APIServiceMS = loadkit.QuantilesOf(svc)
	used := u1.cpu.Sub(u0.cpu)
	r.CPUSec = used.Total().Seconds()
	if r.Messages > 0 {
		r.CPUUSPerMessage = float64(used.Total().Microseconds()) / float64(r.Messages)
		r.CPUSysUSPerMessage = float64(used.Sys.Microseconds()) / float64(r.Messages)
		if r.Syncs >= 0 {
			r.SyncsPerMessage = float64(r.Syncs) / float64(r.Messages)
		}
		if u0.written >= 0 && u1.written >= 0 {
			r.DiskKBPerMessage = float64(u1.written-u0.written) / 1024 / float64(r.Messages)
		}
	}
	r.CPUSecPer1000Messages = r.CPUUSPerMessage / 1000
	r.DriverCPUSec = (u1.driver - u0.driver).Seconds()
	r.RSSMB = mb(mem.RSS)
	r.PeakRSSMB = mb(mem.Peak)
	if e.slackHot != nil {
		r.SlackPostsRefused = int(e.slackHot.refused.Load())
	}
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

func (b minuteBuckets) quantiles() []loadkit.Quantiles {
	out := make([]loadkit.Quantiles, len(b))
	for i, d := range b {
		out[i] = loadkit.QuantilesOf(d)
	}
	return out
}
