package slack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// Core is what the adapter needs of the bridge core (*bridge.Bridge).
type Core interface {
	// Handle takes an event after the platform has been acknowledged.
	Handle(ev bridge.Event) error
	// FirstDelivery reports whether id is seen for the first time (persisted).
	FirstDelivery(id string) bool
}

const (
	// apiTimeout bounds each Web API call; slack-go's default client has none.
	apiTimeout = 30 * time.Second
	// staleAfter is how long Ready accepts silence on the socket; Slack pings
	// about every 10 s and slack-go reconnects after 30 s without a ping.
	staleAfter = 90 * time.Second
)

// Adapter connects Slack to the core: it acknowledges Slack's envelopes and
// requests, turns them into bridge events and renders the core's replies.
type Adapter struct {
	cfg  Config
	core Core
	log  *zap.Logger
	http *http.Client
	api  *slackgo.Client
	now  func() time.Time

	started      atomic.Bool
	ready        chan struct{} // closed when first connected or listening, for tests
	readyOnce    sync.Once
	self         atomic.Pointer[identity]
	connected    atomic.Bool
	lastActivity atomic.Int64 // unix nanoseconds
	addr         atomic.Pointer[string]

	work    *serial
	locks   *channelLocks
	users   *userCache
	threads *threadCache
}

// identity is the bot as auth.test describes it.
type identity struct {
	userID, botID, teamID string
}

// New builds an adapter from a validated configuration. It opens no connection.
func New(cfg Config, core Core, log *zap.Logger) (*Adapter, error) {
	if core == nil {
		return nil, errors.New("slack: nil core")
	}
	if log == nil {
		log = zap.NewNop()
	}
	cfg = cfg.withDefaults()
	cfg.Enabled = true
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// An own transport, so Run can close its idle connections when it ends.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Replies to many conversations at once go to one host; the default of 2
	// idle connections per host would make most of them dial anew.
	transport.MaxIdleConnsPerHost = 64
	hc := &http.Client{Timeout: apiTimeout, Transport: transport}
	opts := []slackgo.Option{
		slackgo.OptionHTTPClient(hc),
		slackgo.OptionAPIURL(cfg.APIURL),
	}
	if !cfg.AppToken.IsZero() {
		opts = append(opts, slackgo.OptionAppLevelToken(cfg.AppToken.Value()))
	}
	a := &Adapter{
		cfg:   cfg,
		core:  core,
		log:   log.Named("slack"),
		http:  hc,
		api:   slackgo.New(cfg.BotToken.Value(), opts...),
		now:   time.Now,
		ready: make(chan struct{}),
		work:  newSerial(),
		locks: newChannelLocks(),
	}
	a.users = newUserCache(a.api, cfg.UserGroups, a.now, a.log)
	a.threads = newThreadCache(a.now)
	return a, nil
}

// Run connects to Slack and serves it until ctx is done, then waits for every
// goroutine it started and returns nil. A bad token or a listener that cannot
// open is returned as an error.
func (a *Adapter) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("slack: Run called twice")
	}
	defer a.http.CloseIdleConnections()
	defer a.work.wait()
	if err := a.authenticate(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if a.cfg.Mode == ModeHTTP {
		return a.runHTTP(ctx)
	}
	return a.runSocket(ctx)
}

func (a *Adapter) authenticate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	res, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return fmt.Errorf("slack: auth.test with slack.bot_token: %w", err)
	}
	a.self.Store(&identity{userID: res.UserID, botID: res.BotID, teamID: res.TeamID})
	a.log.Info("authenticated", zap.String("bot_user", res.UserID), zap.String("bot_id", res.BotID),
		zap.String("team", res.TeamID), zap.String("mode", a.cfg.Mode))
	return nil
}

// Ready reports whether the adapter is connected and heard from Slack recently.
func (a *Adapter) Ready() error {
	if a.self.Load() == nil {
		return errors.New("slack: not connected yet")
	}
	if a.cfg.Mode == ModeHTTP {
		if a.addr.Load() == nil {
			return errors.New("slack: HTTP listener not open")
		}
		return nil
	}
	if !a.connected.Load() {
		return errors.New("slack: socket mode not connected")
	}
	if idle := a.now().Sub(time.Unix(0, a.lastActivity.Load())); idle > staleAfter {
		return fmt.Errorf("slack: nothing heard on the socket for %s", idle.Round(time.Second))
	}
	return nil
}

// Addr is the HTTP-mode listener's address once it is open, else "".
func (a *Adapter) Addr() string {
	if p := a.addr.Load(); p != nil {
		return *p
	}
	return ""
}

func (a *Adapter) markReady() { a.readyOnce.Do(func() { close(a.ready) }) }

func (a *Adapter) touch() { a.lastActivity.Store(a.now().UnixNano()) }

func (a *Adapter) identity() identity {
	if id := a.self.Load(); id != nil {
		return *id
	}
	return identity{}
}

// runSocket serves Socket Mode until ctx is done.
func (a *Adapter) runSocket(ctx context.Context) error {
	sm := socketmode.New(a.api, socketmode.OptionDialer(a.dialer()))
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	defer a.connected.Store(false)

	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- sm.RunContext(ctx) })
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-runErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack: socket mode with slack.app_token: %w", err)
		case evt := <-sm.Events:
			a.onSocketEvent(ctx, sm, evt)
		}
	}
}

// dialer is slack-go's default websocket dialer, with connections that
// record when anything (an envelope or a ping) was last read, for Ready.
func (a *Adapter) dialer() *websocket.Dialer {
	nd := &net.Dialer{Timeout: apiTimeout, KeepAlive: 30 * time.Second}
	return &websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: 45 * time.Second,
		WriteBufferSize:  32 << 10,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &activityConn{Conn: c, touch: a.touch}, nil
		},
	}
}

type activityConn struct {
	net.Conn
	touch func()
}

func (c *activityConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}
