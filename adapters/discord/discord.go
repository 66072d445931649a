// Package discord connects flowbridge to Discord through discordgo: gateway messages and slash-command interactions in, rendered replies out.
package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	Attach(platform string, r bridge.Restorer) (resumed, told int, err error)
	Ephemeral(bridge.Event) bool
	Flows() []bridge.Flow
	Flow(name string) (bridge.Flow, bool)
	Agents() []bridge.Agent
}

var _ bridge.Restorer = (*Adapter)(nil)

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
	// restTimeout bounds each REST call that has no context of its own.
	restTimeout = 30 * time.Second
	// maxRemembered bounds the in-memory channel and thread caches.
	maxRemembered = 4096
	// maxAsync bounds the goroutines answering what is not an event of the
	// core (autocomplete, retired commands) at once; beyond it they are
	// skipped, as Discord moves on after 3 seconds anyway.
	maxAsync = 32
)

// Adapter is the Discord side of flowbridge. Create it with New and start it with Run.
type Adapter struct {
	cfg     Config
	core    Core
	log     *zap.Logger
	session *discordgo.Session
	gw      *gatewayConn
	apiBase *url.URL

	// reconnect is signalled when the gateway connection ended unasked.
	reconnect chan struct{}
	stopping  atomic.Bool
	connected atomic.Bool
	botID     atomic.Pointer[string]
	lastErr   atomic.Pointer[string] // why the gateway is not connected

	// typingEvery renews the typing indicator (typingEvery by default; tests shorten it).
	typingEvery time.Duration
	// retryMin is the first wait before another attempt to reach Discord
	// (minBackoff by default; tests shorten it).
	retryMin time.Duration
	// refused counts events refused at the boundary (invalid IDs, a handler
	// that panicked).
	refused atomic.Uint64
	// async holds a slot per goroutine answering autocomplete or a retired command.
	async chan struct{}

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
		cfg:         cfg,
		core:        core,
		log:         log.Named("discord"),
		gw:          &gatewayConn{timeout: time.Duration(cfg.OpenTimeout)},
		typingEvery: typingEvery,
		retryMin:    minBackoff,
		async:       make(chan struct{}, maxAsync),
		reconnect:   make(chan struct{}, 1),
		done:        make(chan struct{}),
		channels:    make(map[string]channelInfo),
		followed:    make(map[string]bool),
	}
	base, err := url.Parse(cfg.APIURL)
	if err != nil {
		return nil, fmt.Errorf("discord.api_url: %w", err)
	}
	if base.Scheme+"://"+base.Host != DefaultAPIURL {
		a.apiBase = base
	}

	s, err := discordgo.New("Bot " + cfg.Token.Value())
	if err != nil {
		return nil, fmt.Errorf("discord session: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Replies to many channels at once go to one host; the default of 2 idle
	// connections per host would make most of them dial anew.
	transport.MaxIdleConnsPerHost = 64
	s.Client = &http.Client{Timeout: restTimeout, Transport: &rewriteTransport{base: a.apiBase, next: transport}}
	s.Dialer = &websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		NetDialContext:   a.gw.dial,
		HandshakeTimeout: time.Duration(cfg.OpenTimeout),
	}
	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages
	if cfg.MessageContentIntent {
		s.Identify.Intents |= discordgo.IntentMessageContent
	}
	// Run reconnects itself: discordgo's loop cannot be stopped (it sleeps up
	// to 10 minutes between attempts, then reconnects even after Close) and
	// retries a rejected token forever.
	s.ShouldReconnectOnError = false
	// Handlers run on the read loop, one event after the other, in the order
	// the gateway sent them (discordgo would otherwise start a goroutine per
	// event, and the order is lost). They only translate and hand the event
	// to the core, which returns at once; the REST calls an event needs run
	// later, in the core's order (Prepare, Ack, the responders).
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
	a.session = s
	return a, nil
}

// Ready reports nil when the gateway is connected and heard from recently.
func (a *Adapter) Ready() error {
	if !a.connected.Load() {
		if msg := a.lastErr.Load(); msg != nil {
			return fmt.Errorf("discord gateway not connected: %s", *msg)
		}
		return errors.New("discord gateway not connected")
	}
	if last := a.gw.lastActivity(); !last.IsZero() && time.Since(last) > staleAfter {
		return fmt.Errorf("discord gateway silent for %s", time.Since(last).Round(time.Second))
	}
	return nil
}

// Run reaches the API (retrying with backoff while Discord is unreachable),
// hands the core the unfinished events of the previous process (Attach),
// connects to the gateway, registers the slash commands where they changed,
// and handles events until ctx is done; then it closes the connection and
// returns nil once every goroutine it started has ended. Only a token or
// intent Discord refuses is returned as an error.
func (a *Adapter) Run(ctx context.Context) error {
	removers := []func(){
		a.session.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { a.onReady(r) }),
		a.session.AddHandler(func(*discordgo.Session, *discordgo.Connect) { a.onConnect() }),
		a.session.AddHandler(func(*discordgo.Session, *discordgo.Resumed) { a.log.Info("gateway session resumed") }),
		a.session.AddHandler(func(*discordgo.Session, *discordgo.Disconnect) { a.onDisconnect() }),
		a.session.AddHandler(func(_ *discordgo.Session, r *discordgo.RateLimit) { a.onRateLimit(r) }),
		a.session.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { a.onMessage(m) }),
		a.session.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { a.onInteraction(ctx, i) }),
	}
	defer func() {
		for _, remove := range removers {
			remove()
		}
	}()

	if err := a.reachAPI(ctx); err != nil {
		a.shutdown()
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

	backoff := time.Duration(0)
	if err := a.open(ctx); err != nil {
		if fatal := fatalError(err); fatal != nil {
			a.shutdown()
			return fatal
		}
		backoff = a.retryMin
		a.log.Warn("gateway connection failed; retrying", zap.Error(err), zap.Duration("retry_in", backoff))
		a.signalReconnect()
	}
	// Commands are registered over REST, so a gateway still connecting does
	// not stop them.
	if err := a.SyncCommands(ctx); err != nil {
		a.log.Error("slash commands not registered", zap.Error(err))
	}

	for {
		select {
		case <-ctx.Done():
			a.shutdown()
			return nil
		case <-a.reconnect:
		}
		for {
			if backoff > 0 && !sleep(ctx, backoff) {
				a.shutdown()
				return nil
			}
			err := a.open(ctx)
			if err == nil || errors.Is(err, discordgo.ErrWSAlreadyOpen) {
				backoff = 0
				break
			}
			if ctx.Err() != nil {
				break
			}
			backoff = min(max(2*backoff, a.retryMin), maxBackoff)
			a.log.Warn("gateway reconnection failed", zap.Error(err), zap.Duration("retry_in", backoff))
		}
	}
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
			msg := fatal.Error()
			a.lastErr.Store(&msg)
			return fatal
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := "API unreachable: " + err.Error()
		a.lastErr.Store(&msg)
		a.log.Warn("discord API unreachable; retrying", zap.Error(err), zap.Duration("retry_in", backoff))
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, maxBackoff)
	}
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

// open connects once, cutting the attempt when it exceeds the open timeout
// or ctx ends: discordgo's Open waits for Hello and READY with no deadline.
func (a *Adapter) open(ctx context.Context) error {
	stopCtx := context.AfterFunc(ctx, a.gw.cut)
	defer stopCtx()
	timer := time.AfterFunc(time.Duration(a.cfg.OpenTimeout), a.gw.cut)
	defer timer.Stop()
	err := a.session.Open()
	if err != nil && !errors.Is(err, discordgo.ErrWSAlreadyOpen) {
		msg := err.Error()
		if ctx.Err() == nil && !timer.Stop() {
			msg = fmt.Sprintf("no READY within %s (%v)", time.Duration(a.cfg.OpenTimeout), err)
			err = fmt.Errorf("gateway open: no READY within %s: %w", time.Duration(a.cfg.OpenTimeout), err)
		}
		a.lastErr.Store(&msg)
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
		case 4013, 4010, 4011, 4012:
			return fmt.Errorf("discord: the gateway refused the connection (close %d %q)", closeErr.Code, closeErr.Text)
		}
	}
	if restErr, ok := errors.AsType[*discordgo.RESTError](err); ok && restErr.Response != nil && restErr.Response.StatusCode == http.StatusUnauthorized {
		return errors.New("discord: the API refused the token (401 Unauthorized): check discord.token")
	}
	return nil
}

func (a *Adapter) onReady(r *discordgo.Ready) {
	if r.User != nil {
		id := r.User.ID
		a.botID.Store(&id)
	}
	a.log.Info("gateway ready", zap.Int("guilds", len(r.Guilds)))
}

func (a *Adapter) onConnect() {
	a.connected.Store(true)
	a.lastErr.Store(nil)
	a.log.Info("gateway connected")
}

func (a *Adapter) onDisconnect() {
	a.connected.Store(false)
	if a.stopping.Load() {
		return
	}
	msg := "connection lost"
	a.lastErr.Store(&msg)
	a.log.Warn("gateway disconnected; reconnecting")
	a.signalReconnect()
}

func (a *Adapter) onRateLimit(r *discordgo.RateLimit) {
	var after time.Duration
	if r.TooManyRequests != nil {
		after = r.RetryAfter
	}
	a.log.Info("rate limited; waiting", zap.String("url", r.URL), zap.Duration("retry_after", after))
}

func (a *Adapter) signalReconnect() {
	select {
	case a.reconnect <- struct{}{}:
	default:
	}
}

// shutdown closes the gateway, stops new work and waits for the work started.
func (a *Adapter) shutdown() {
	a.stopping.Store(true)
	if err := a.session.Close(); err != nil {
		a.log.Debug("gateway close", zap.Error(err))
	}
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.done)
	}
	a.mu.Unlock()
	a.wg.Wait()
	a.connected.Store(false)
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
