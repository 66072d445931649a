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

// Core is what the adapter needs of the bridge core (*bridge.Bridge).
type Core interface {
	Handle(bridge.Event) error
	Flows() []bridge.Flow
	Flow(name string) (bridge.Flow, bool)
	Agents() []bridge.Agent
	FirstDelivery(id string) bool
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
	// maxBackoff caps the wait between reconnection attempts.
	maxBackoff = 2 * time.Minute
	// restTimeout bounds each REST call that has no context of its own.
	restTimeout = 30 * time.Second
	// maxRemembered bounds the in-memory channel and thread caches.
	maxRemembered = 4096
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

	// done is closed when Run shuts down, ending typing indicators.
	done chan struct{}

	mu     sync.Mutex
	closed bool // no more goroutines may start
	wg     sync.WaitGroup

	cacheMu  sync.Mutex
	channels map[string]channelInfo // from REST, when the state lacks a channel
	followed map[string]bool        // threads the bot takes part in

	interMu      sync.Mutex
	interactions map[string]bool // interaction IDs acknowledged by this process
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
		cfg:          cfg,
		core:         core,
		log:          log.Named("discord"),
		gw:           &gatewayConn{timeout: time.Duration(cfg.OpenTimeout)},
		typingEvery:  typingEvery,
		reconnect:    make(chan struct{}, 1),
		done:         make(chan struct{}),
		channels:     make(map[string]channelInfo),
		followed:     make(map[string]bool),
		interactions: make(map[string]bool),
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
	// Handlers run on the read loop and hand work to goroutines Run waits for,
	// instead of discordgo's unowned goroutine per event.
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

// Run connects to the gateway, registers the slash commands where they
// changed, handles events until ctx is done, then closes the connection and
// returns nil once every goroutine it started has ended. A token or intent
// Discord refuses at start-up is returned as an error.
func (a *Adapter) Run(ctx context.Context) error {
	removers := []func(){
		a.session.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { a.onReady(r) }),
		a.session.AddHandler(func(*discordgo.Session, *discordgo.Connect) { a.onConnect() }),
		a.session.AddHandler(func(*discordgo.Session, *discordgo.Resumed) { a.log.Info("gateway session resumed") }),
		a.session.AddHandler(func(*discordgo.Session, *discordgo.Disconnect) { a.onDisconnect() }),
		a.session.AddHandler(func(_ *discordgo.Session, r *discordgo.RateLimit) { a.onRateLimit(r) }),
		a.session.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
			a.spawn(func() { a.onMessage(ctx, m) })
		}),
		a.session.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) {
			a.spawn(func() { a.onInteraction(ctx, i) })
		}),
	}
	defer func() {
		for _, remove := range removers {
			remove()
		}
	}()

	backoff := time.Duration(0)
	if err := a.open(ctx); err != nil {
		if fatal := fatalError(err); fatal != nil {
			a.shutdown()
			return fatal
		}
		a.log.Warn("gateway connection failed; retrying", zap.Error(err))
		backoff = time.Second
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
			if backoff > 0 {
				t := time.NewTimer(backoff)
				select {
				case <-ctx.Done():
					t.Stop()
					a.shutdown()
					return nil
				case <-t.C:
				}
			}
			err := a.open(ctx)
			if err == nil || errors.Is(err, discordgo.ErrWSAlreadyOpen) {
				backoff = 0
				break
			}
			if ctx.Err() != nil {
				break
			}
			backoff = min(max(2*backoff, time.Second), maxBackoff)
			a.log.Warn("gateway reconnection failed", zap.Error(err), zap.Duration("retry_in", backoff))
		}
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

func (a *Adapter) bot() string {
	if id := a.botID.Load(); id != nil {
		return *id
	}
	return ""
}
