// Package discord connects flowbridge to Discord through discordgo: gateway messages and slash-command interactions in, rendered replies out.
package discord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// Platform is the name in Event.Platform and the first part of conversation keys.
const Platform = "discord"

// Core is what the adapter needs of the bridge core (*bridge.Bridge): it
// takes events (Receive, and Attach for those of the previous process),
// decides how visible an answer is (Ephemeral), and serves the catalog that
// becomes the slash commands.
type Core interface {
	Receive(bridge.Event) *bridge.Receipt
	// Refused counts what the adapter refused before the core saw it.
	Refused(reason string)
	Attach(platform string, p bridge.Platform) (resumed, told int, err error)
	Ephemeral(bridge.Event) bool
	Flows() []bridge.Flow
	Flow(name string) (bridge.Flow, bool)
	Agents() []bridge.Agent
}

// Timing the adapter relies on.
const (
	// maxFlowTimeout caps flows started by an interaction below the 15-minute
	// life of its token, so the result can still replace the deferred response.
	maxFlowTimeout = 14 * time.Minute
	// staleAfter is how long the gateway may say nothing (not even a heartbeat
	// ack, due every ~41 s) before Ready reports it.
	staleAfter = 2 * time.Minute
	// typingEvery renews the typing indicator, which Discord shows for ~10 s.
	typingEvery = 8 * time.Second
	// minBackoff and maxBackoff bound the wait between attempts to reach
	// the API at start and to connect the gateway.
	minBackoff = time.Second
	maxBackoff = 2 * time.Minute
	// identifyEvery is Discord's window for identifies: each bucket of
	// shards (shard_id % max_concurrency) may identify once in it.
	identifyEvery = 5 * time.Second
	// restTimeout bounds each REST call that has no context of its own.
	restTimeout = 30 * time.Second
	// maxRemembered bounds the in-memory channel and thread caches.
	maxRemembered = 4096
	// drainWithin bounds the wait, at a stop, for the gateway's events
	// sent before it to be handled (shard.drain).
	drainWithin = time.Second
	// maxAsync bounds the goroutines answering what is not an event of the
	// core (autocomplete, retired commands) at once; beyond it they are
	// skipped, as Discord moves on after 3 seconds anyway.
	maxAsync = 32
)

// Adapter is the Discord side of flowbridge. Create it with New and start it with Run.
type Adapter struct {
	cfg  Config
	core Core
	log  *zap.Logger
	// session makes every REST call, so that one rate limiter sees them all:
	// the session of the first shard held (REST needs no gateway connection).
	session *discordgo.Session
	// shards are the gateway connections, one per shard held, in ID order.
	shards  []*shard
	apiBase *url.URL

	stopping atomic.Bool
	botID    atomic.Pointer[string]

	// identifyEvery spaces the identifies of one bucket of shards
	// (identifyEvery by default; tests shorten it).
	identifyEvery time.Duration

	// typingEvery renews the typing indicator (typingEvery by default; tests shorten it).
	typingEvery time.Duration
	// retryMin is the first wait before another attempt to reach Discord
	// (minBackoff by default; tests shorten it).
	retryMin time.Duration
	// catchUpWithin bounds a scope's catch-up (catchUpWithin by default;
	// tests shorten it).
	catchUpWithin time.Duration
	// saveSessionEvery spaces the writes of a shard's gateway session
	// (saveSessionEvery by default; tests shorten it).
	saveSessionEvery time.Duration
	// idTiming spaces IDENTIFYs (defaultIdentifyTiming; tests scale it).
	idTiming identifyTiming
	// budget is the day's IDENTIFY budget (identify.go).
	budget identifyBudget
	// refused counts events refused at the boundary (invalid IDs, a handler
	// that panicked).
	refused atomic.Uint64
	// async holds a slot per goroutine answering autocomplete or a retired command.
	async chan struct{}
	// readers holds a slot per catch-up history read in flight.
	readers chan struct{}

	// pace keeps progress edits within Discord's edits per channel.
	pace progressPace
	// missed holds the messages the store refused, for catch-up.
	missed missed
	// done is closed when Run shuts down, ending typing indicators.
	done chan struct{}

	mu     sync.Mutex
	closed bool // no more goroutines may start
	wg     sync.WaitGroup

	cacheMu  sync.Mutex
	channels map[string]channelInfo // from REST, when the state lacks a channel
	followed map[string]bool        // threads the bot takes part in
}

// New builds the adapter without touching the network.
func New(cfg Config, core Core, log *zap.Logger) (*Adapter, error) {
	check := cfg
	check.Enabled = true
	if err := check.Validate(); err != nil {
		return nil, err
	}
	if core == nil {
		return nil, errors.New("discord: no core")
	}
	if log == nil {
		log = zap.NewNop()
	}
	cfg = cfg.withDefaults()
	a := &Adapter{
		cfg:              cfg,
		core:             core,
		log:              log.Named("discord"),
		identifyEvery:    identifyEvery,
		typingEvery:      typingEvery,
		retryMin:         minBackoff,
		catchUpWithin:    catchUpWithin,
		saveSessionEvery: saveSessionEvery,
		idTiming:         defaultIdentifyTiming,
		async:            make(chan struct{}, maxAsync),
		readers:          make(chan struct{}, catchUpReaders),
		done:             make(chan struct{}),
		channels:         make(map[string]channelInfo),
		followed:         make(map[string]bool),
	}
	base, err := url.Parse(cfg.APIURL)
	if err != nil {
		return nil, fmt.Errorf("discord.api_url: %w", err)
	}
	if base.Scheme+"://"+base.Host != DefaultAPIURL {
		a.apiBase = base
	}

	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Replies to many channels at once go to one host; the default of 2 idle
	// connections per host would make most of them dial anew.
	transport.MaxIdleConnsPerHost = 64
	// One client for every shard's session, so each one's GET /gateway goes
	// where the REST calls go.
	client := &http.Client{Timeout: restTimeout, Transport: &rewriteTransport{base: a.apiBase, next: transport}}
	for _, id := range cfg.ShardIDs {
		sh, err := a.newShard(client, id)
		if err != nil {
			return nil, err
		}
		a.shards = append(a.shards, sh)
	}
	slices.SortFunc(a.shards, func(x, y *shard) int { return cmp.Compare(x.id, y.id) })
	a.session = a.shards[0].session
	return a, nil
}

// newShard builds the discordgo session of one shard; nothing connects yet.
func (a *Adapter) newShard(client *http.Client, id int) (*shard, error) {
	cfg := a.cfg
	gw := &gatewayConn{timeout: time.Duration(cfg.OpenTimeout), limit: MaxGatewayMessageBytes, oversize: func() {
		a.core.Refused("frame_too_large")
		a.log.Warn("gateway message over the size limit refused; reconnecting", zap.Int("shard", id), zap.Int("limit_bytes", MaxGatewayMessageBytes))
	}}
	sh := &shard{id: id, count: cfg.ShardCount, gw: gw, reconnect: make(chan struct{}, 1), readied: make(chan struct{}, 1)}
	gw.handshake = func(op int, again bool, closed <-chan struct{}) error {
		return a.beforeHandshake(sh, op, again, closed)
	}
	s, err := discordgo.New("Bot " + cfg.Token.Value())
	if err != nil {
		return nil, fmt.Errorf("discord session: %w", err)
	}
	s.Client = client
	// discordgo sends shard [id, count] in IDENTIFY when count > 1.
	s.ShardID, s.ShardCount = id, cfg.ShardCount
	// The gateway's dials go through the proxy themselves (dialTCP), so
	// that the frame limit can sit above TLS.
	s.Dialer = &websocket.Dialer{
		NetDialContext:    sh.gw.dial,
		NetDialTLSContext: sh.gw.dialTLS,
		HandshakeTimeout:  time.Duration(cfg.OpenTimeout),
	}
	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages
	if cfg.MessageContentIntent {
		s.Identify.Intents |= discordgo.IntentMessageContent
	}
	// Run reconnects itself: discordgo's loop cannot be stopped (it sleeps up
	// to 10 minutes between attempts, then reconnects even after Close) and
	// retries a rejected token forever.
	s.ShouldReconnectOnError = false
	// No zlib-compressed payloads: the gateway's frame limit
	// (MaxGatewayMessageBytes) counts the bytes as they arrive, and an
	// inflated payload would not be bounded by it.
	s.Compress = false
	// Handlers run on the shard's read loop, one event after the other, in
	// the order the gateway sent them (discordgo would otherwise start a
	// goroutine per event, and the order is lost). A conversation lives in
	// one guild, or in a DM, so on one shard: its order holds with several.
	// Handlers only translate and hand the event to the core, which returns
	// at once; the REST calls an event needs run later, in the core's order
	// (Prepare, Ack, the responders).
	s.SyncEvents = true
	s.StateEnabled = true
	s.State.TrackMembers = false
	s.State.TrackPresences = false
	s.State.TrackVoice = false
	s.State.TrackEmojis = false
	s.State.TrackRoles = false
	s.State.MaxMessageCount = 0
	// discordgo logs with the standard log package; the adapter logs what
	// matters (connects, drops, rate limits, failed calls) through zap.
	s.LogLevel = -1
	sh.session = s
	if p, err := sequenceOf(s); err == nil {
		sh.seqp = p
	} else {
		a.log.Warn("discordgo's sequence number cannot be read; a gap in it is seen one event late", zap.Error(err))
	}
	return sh, nil
}

// Ready reports nil when the gateway connection of every shard held is up
// and heard from recently; otherwise it names each one that is not.
func (a *Adapter) Ready() error {
	var problems []string
	for _, sh := range a.shards {
		if p := sh.problem(); p != "" {
			problems = append(problems, p)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}

// Run reaches the API (retrying with backoff while Discord is unreachable),
// hands the core the unfinished events of the previous process (Attach),
// connects the gateway of every shard held and keeps each connected,
// registers the slash commands where they changed (when it holds shard 0),
// and handles events until ctx is done; then it closes the connections and
// returns nil once every goroutine it started has ended. Only a token,
// intent or shard Discord refuses is returned as an error.
func (a *Adapter) Run(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var removers []func()
	for _, sh := range a.shards {
		removers = append(removers, a.addHandlers(runCtx, sh)...)
	}
	defer func() {
		for _, remove := range removers {
			remove()
		}
	}()
	if !a.holdsShard(0) {
		a.log.Info("shard 0 is not held here: the process that holds it receives the DMs and registers the slash commands", zap.Ints("shard_ids", a.cfg.ShardIDs), zap.Int("shard_count", a.cfg.ShardCount))
	}

	if err := a.reachAPI(ctx); err != nil {
		a.shutdown(ctx)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// Before the gateway opens: the previous process's unfinished events
	// queue ahead of new ones.
	if resumed, told, err := a.core.Attach(Platform, a); err != nil {
		a.log.Error("unfinished events of the previous run not taken up; they stay for the next start", zap.Error(err))
	} else if resumed+told > 0 {
		a.log.Info("unfinished events of the previous run taken up", zap.Int("resumed", resumed), zap.Int("told", told))
	}

	a.watchStore(runCtx)
	for _, sh := range a.shards {
		sh.gw.halt = runCtx.Done()
	}
	gb, err := a.session.GatewayBot(discordgo.WithContext(ctx))
	if err != nil {
		a.log.Warn("IDENTIFY budget and shard recommendation not read (GET /gateway/bot)", zap.Error(err))
		gb = nil
	}
	a.budget.load(runCtx, a, gb)
	pacer := a.newPacer(gb)
	fatal := make(chan error, len(a.shards))
	var supervisors sync.WaitGroup
	for _, sh := range a.shards {
		// Before the first Open: it resumes the session the store holds.
		a.loadSession(runCtx, sh)
		if rc, ok := a.core.(ResumeCore); ok {
			supervisors.Go(func() { a.keepSession(runCtx, sh, rc) })
		}
		supervisors.Go(func() {
			if err := a.supervise(runCtx, sh, pacer); err != nil {
				fatal <- err
				cancel()
			}
		})
	}
	// Commands are registered over REST, so gateways still connecting do
	// not stop them.
	if err := a.SyncCommands(runCtx); err != nil && runCtx.Err() == nil {
		a.log.Error("slash commands not registered", zap.Error(err))
	}
	<-runCtx.Done()
	supervisors.Wait()
	a.shutdown(ctx)
	select {
	case err := <-fatal:
		return err
	default:
		return nil
	}
}

// addHandlers registers the adapter's gateway handlers on one shard's
// session and returns what removes them.
func (a *Adapter) addHandlers(ctx context.Context, sh *shard) []func() {
	s := sh.session
	return []func(){
		s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { a.onReady(ctx, sh, r) }),
		s.AddHandler(func(*discordgo.Session, *discordgo.Connect) { a.onConnect(sh) }),
		s.AddHandler(func(*discordgo.Session, *discordgo.Resumed) { a.shardLog(sh).Info("gateway session resumed") }),
		s.AddHandler(func(*discordgo.Session, *discordgo.Disconnect) { a.onDisconnect(sh) }),
		s.AddHandler(func(_ *discordgo.Session, r *discordgo.RateLimit) { a.onRateLimit(r) }),
		s.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) { a.onGuildCreate(ctx, sh, g) }),
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { a.onLive(ctx, sh, m) }),
		s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { a.onInteraction(ctx, i) }),
		s.AddHandler(func(_ *discordgo.Session, e *discordgo.Event) { a.onDispatch(ctx, sh, e) }),
		s.AddHandler(func(_ *discordgo.Session, ev any) { a.onAnyEvent(ctx, sh, ev) }),
	}
}

// supervise keeps one shard's gateway connected until ctx ends: it opens
// it, and after a failed attempt or a drop opens it again with backoff. A
// first attempt Discord refuses for good (token, intents, shard) is returned.
func (a *Adapter) supervise(ctx context.Context, sh *shard, pacer *identifyPacer) error {
	log := a.shardLog(sh)
	backoff := time.Duration(0)
	if !a.waitBudget(ctx, sh) {
		return nil
	}
	if err := a.open(ctx, sh, pacer); err != nil {
		if fatal := fatalError(err); fatal != nil {
			if sh.count > 1 {
				fatal = fmt.Errorf("shard %d of %d: %w", sh.id, sh.count, fatal)
			}
			msg := fatal.Error()
			sh.lastErr.Store(&msg)
			return fatal
		}
		if ctx.Err() != nil {
			return nil
		}
		backoff = a.retryMin
		log.Warn("gateway connection failed; retrying", zap.Error(err), zap.Duration("retry_in", backoff))
		sh.signalReconnect()
	}
	opened := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sh.reconnect:
		}
		backoff = a.reconnectBackoff(backoff, time.Since(opened))
		for {
			if !a.waitBudget(ctx, sh) {
				return nil
			}
			if backoff > 0 && !sleep(ctx, backoff) {
				return nil
			}
			err := a.open(ctx, sh, pacer)
			if err == nil || errors.Is(err, discordgo.ErrWSAlreadyOpen) {
				opened = time.Now()
				break
			}
			if ctx.Err() != nil {
				break
			}
			backoff = min(max(2*backoff, a.retryMin), maxBackoff)
			log.Warn("gateway reconnection failed", zap.Error(err), zap.Duration("retry_in", backoff))
		}
	}
}

// reconnectBackoff is the wait before reconnecting a connection that
// lived for lived, the last wait having been backoff: it starts over only
// after a connection that held; one that dies at once (after READY, say)
// is no success, and the wait doubles.
func (a *Adapter) reconnectBackoff(backoff, lived time.Duration) time.Duration {
	if lived >= a.idTiming.stableAfter {
		return 0
	}
	return min(max(2*backoff, a.retryMin), maxBackoff)
}

// waitBudget waits, while the day's IDENTIFY budget is spent, until
// Discord renews it, the shard telling why it is down; then it reads the
// budget again. It reports false when ctx ends first.
func (a *Adapter) waitBudget(ctx context.Context, sh *shard) bool {
	refused := a.budget.refused()
	if refused == nil {
		return ctx.Err() == nil
	}
	msg := refused.Error()
	sh.lastErr.Store(&msg)
	if !sleep(ctx, time.Until(refused.resetAt)) {
		return false
	}
	gb, err := a.session.GatewayBot(discordgo.WithContext(ctx))
	if err != nil {
		gb = nil
	}
	a.budget.load(ctx, a, gb)
	return ctx.Err() == nil
}

// reachAPI waits until Discord's REST API answers for the bot (GET
// /users/@me), retrying with backoff while it cannot be reached: at start
// as after a disconnect, an outage is not a reason to exit. A refused token
// is, and is returned.
func (a *Adapter) reachAPI(ctx context.Context) error {
	backoff := a.retryMin
	for {
		u, err := a.session.User("@me", discordgo.WithContext(ctx))
		if err == nil {
			if u.ID != "" {
				id := u.ID
				a.botID.Store(&id)
			}
			return nil
		}
		if fatal := fatalError(err); fatal != nil {
			a.notConnected(fatal.Error())
			return fatal
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.notConnected("API unreachable: " + err.Error())
		a.log.Warn("discord API unreachable; retrying", zap.Error(err), zap.Duration("retry_in", backoff))
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// notConnected gives every shard the reason it is not connected yet.
func (a *Adapter) notConnected(msg string) {
	for _, sh := range a.shards {
		sh.lastErr.Store(&msg)
	}
}

// newPacer returns what spaces the identifies of the shards held, or
// nil when one is held: Discord lets each bucket of shards (shard_id %
// max_concurrency, from GET /gateway/bot: gb, nil when not read) identify
// once per 5 seconds. It also warns when Discord recommends more shards
// than shard_count.
func (a *Adapter) newPacer(gb *discordgo.GatewayBotResponse) *identifyPacer {
	if a.cfg.ShardCount == 1 {
		return nil
	}
	buckets := 1
	if gb == nil {
		a.log.Warn("identifying one shard at a time: GET /gateway/bot was not read")
	} else {
		if gb.Shards > a.cfg.ShardCount {
			a.log.Warn("Discord recommends more shards than discord.shard_count", zap.Int("recommended", gb.Shards), zap.Int("shard_count", a.cfg.ShardCount))
		}
		buckets = max(gb.SessionStartLimit.MaxConcurrency, 1)
	}
	if len(a.shards) == 1 {
		return nil
	}
	return newIdentifyPacer(buckets, a.identifyEvery)
}

// sleep waits for d, and reports false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// open connects one shard once, when the pacer lets it, cutting the attempt
// when it exceeds the open timeout or ctx ends: discordgo's Open waits for
// Hello and READY with no deadline.
func (a *Adapter) open(ctx context.Context, sh *shard, pacer *identifyPacer) error {
	if !pacer.wait(ctx, sh.id) {
		return ctx.Err()
	}
	stopCtx := context.AfterFunc(ctx, sh.gw.cut)
	defer stopCtx()
	disarm := sh.gw.armOpen(time.Duration(a.cfg.OpenTimeout))
	err := sh.session.Open()
	inTime := disarm()
	if err != nil && !errors.Is(err, discordgo.ErrWSAlreadyOpen) {
		msg := err.Error()
		if refused := a.budget.refused(); refused != nil {
			msg = refused.Error()
		}
		if ctx.Err() == nil && !inTime {
			msg = fmt.Sprintf("no READY within %s (%v)", time.Duration(a.cfg.OpenTimeout), err)
			err = fmt.Errorf("gateway open: no READY within %s: %w", time.Duration(a.cfg.OpenTimeout), err)
		}
		sh.lastErr.Store(&msg)
	}
	return err
}

// fatalError turns start-up failures no retry can fix into a clear error.
func fatalError(err error) error {
	if closeErr, ok := errors.AsType[*websocket.CloseError](err); ok {
		switch closeErr.Code {
		case 4004:
			return fmt.Errorf("discord: the gateway refused the token (close 4004 %q): check discord.token", closeErr.Text)
		case 4014:
			return fmt.Errorf("discord: the gateway refused the message content intent (close 4014): enable it in the Developer Portal or set discord.message_content_intent = false")
		case 4011:
			return fmt.Errorf("discord: the gateway requires more shards (close 4011 %q): a shard takes at most 2,500 guilds; raise discord.shard_count", closeErr.Text)
		case 4010:
			return fmt.Errorf("discord: the gateway refused the shard (close 4010 %q): check discord.shard_count and discord.shard_ids", closeErr.Text)
		case 4013, 4012:
			return fmt.Errorf("discord: the gateway refused the connection (close %d %q)", closeErr.Code, closeErr.Text)
		}
	}
	if restErr, ok := errors.AsType[*discordgo.RESTError](err); ok && restErr.Response != nil && restErr.Response.StatusCode == http.StatusUnauthorized {
		return errors.New("discord: the API refused the token (401 Unauthorized): check discord.token")
	}
	return nil
}

// onConnect is told when discordgo's Open has read the first message after
// the handshake. That may be op 9 rather than READY: the shard is live
// only once READY or RESUMED arrives (onDispatch).
func (a *Adapter) onConnect(sh *shard) {
	a.shardLog(sh).Info("gateway connected")
}

// onSessionLive notes that the shard's session is live: READY or RESUMED.
func (a *Adapter) onSessionLive(sh *shard) {
	sh.pace.live(time.Now())
	sh.connected.Store(true)
	sh.lastErr.Store(nil)
}

func (a *Adapter) onDisconnect(sh *shard) {
	sh.pace.ended(time.Now())
	sh.connected.Store(false)
	if a.stopping.Load() {
		return
	}
	msg := "connection lost"
	sh.lastErr.Store(&msg)
	a.shardLog(sh).Warn("gateway disconnected; reconnecting")
	sh.signalReconnect()
}

func (a *Adapter) onRateLimit(r *discordgo.RateLimit) {
	var after time.Duration
	if r.TooManyRequests != nil {
		after = r.RetryAfter
	}
	a.log.Info("rate limited; waiting", zap.String("url", r.URL), zap.Duration("retry_after", after))
}

// shardLog is the adapter's logger, naming the shard when there are several.
func (a *Adapter) shardLog(sh *shard) *zap.Logger {
	if sh.count == 1 {
		return a.log
	}
	return a.log.With(zap.Int("shard", sh.id))
}

// holdsShard reports whether this process connects shard id.
func (a *Adapter) holdsShard(id int) bool {
	return slices.ContainsFunc(a.shards, func(sh *shard) bool { return sh.id == id })
}

// shutdown closes the gateways, saves their sessions for the next
// process, stops new work and waits for the work started.
func (a *Adapter) shutdown(ctx context.Context) {
	a.stopping.Store(true)
	// discordgo's Close waits a second for the close handshake; the shards
	// wait at once.
	var closing sync.WaitGroup
	for _, sh := range a.shards {
		closing.Go(func() {
			if sh.connected.Load() && !sh.drain(drainWithin) {
				a.shardLog(sh).Info("gateway not drained before closing; what it had sent and was not read yet is left to the next start's catch-up", zap.Duration("within", drainWithin))
			}
			// 1012 (service restart), not Close's 1000, which would end
			// the session: the next process resumes it (resume.go).
			if err := sh.session.CloseWithCode(websocket.CloseServiceRestart); err != nil {
				a.shardLog(sh).Debug("gateway close", zap.Error(err))
			}
		})
	}
	closing.Wait()
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.done)
	}
	a.mu.Unlock()
	a.wg.Wait()
	// Saved once what was handed over has been recorded, or noted as
	// refused (received), and before settleHolds lets go of what is held.
	var saving sync.WaitGroup
	for _, sh := range a.shards {
		saving.Go(func() { a.saveLastSession(ctx, sh) })
	}
	saving.Wait()
	a.settleHolds()
	for _, sh := range a.shards {
		sh.connected.Store(false)
	}
	a.log.Info("stopped")
}

// spawn runs f on a goroutine Run waits for; after shutdown it runs nothing.
func (a *Adapter) spawn(f func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.wg.Go(f)
	return true
}

// spawnLimited runs f like spawn, unless maxAsync such goroutines are
// running already; it reports whether f runs.
func (a *Adapter) spawnLimited(f func()) bool {
	select {
	case a.async <- struct{}{}:
	default:
		return false
	}
	if !a.spawn(func() {
		defer func() { <-a.async }()
		f()
	}) {
		<-a.async
		return false
	}
	return true
}

// Refused returns how many gateway events the adapter refused at the
// boundary: IDs that are not Discord IDs, payloads its handlers could not
// take.
func (a *Adapter) Refused() uint64 { return a.refused.Load() }

// refuse drops one event that cannot be taken, logging and counting it; the
// events around it are not affected.
func (a *Adapter) refuse(event string, err error) {
	a.refused.Add(1)
	a.log.Warn("event refused", zap.String("event", event), zap.Error(err))
}

// recoverEvent, deferred by a gateway handler, turns a panic on one event
// into that event's refusal: the handlers run on discordgo's read loop, and a
// panic there would end the process.
func (a *Adapter) recoverEvent(event string) {
	if r := recover(); r != nil {
		a.refused.Add(1)
		a.log.Error("event handler panicked; event dropped", zap.String("event", event), zap.Any("panic", r), zap.Stack("stack"))
	}
}

func (a *Adapter) bot() string {
	if id := a.botID.Load(); id != nil {
		return *id
	}
	return ""
}
