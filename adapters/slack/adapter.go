package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	slackgo "github.com/slack-go/slack"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/flowbridge/flowbridge/bridge"
)

// Core is what the adapter needs of the bridge core (*bridge.Bridge).
type Core interface {
	// Receive takes an event in arrival order and returns at once; its
	// receipt says when Slack may be acknowledged.
	Receive(ev bridge.Event) *bridge.Receipt
	// Attach registers the adapter as the core's platform for Slack and
	// hands the core's unfinished events of the previous process to the
	// dispatcher, to run ahead of new ones.
	Attach(platform string, p bridge.Platform) (resumed, told int, err error)
	// Refused counts an event or request the adapter refused before it
	// reached the core, by reason.
	Refused(reason string)
}

const (
	// apiTimeout bounds each Web API call; slack-go's default client has none.
	apiTimeout = 30 * time.Second
	// staleAfter is how long Ready accepts silence on the socket; Slack pings
	// about every 10 s and slack-go reconnects after 30 s without a ping.
	staleAfter = 90 * time.Second
	// firstRetry and maxRetry bound the wait between start-up attempts to
	// reach Slack.
	firstRetry = 500 * time.Millisecond
	maxRetry   = time.Minute
)

// Adapter connects Slack to the core: it acknowledges Slack's envelopes and
// requests, turns them into bridge events and renders the core's replies.
type Adapter struct {
	cfg  Config
	core Core
	log  *zap.Logger
	http *http.Client
	api  *slackgo.Client
	// history reads threads (conversations.replies) through historyHTTP,
	// within maxThreadPage bytes an answer.
	history     *slackgo.Client
	historyHTTP *http.Client
	now         func() time.Time

	started      atomic.Bool
	ready        chan struct{} // closed when first connected or listening, for tests
	readyOnce    sync.Once
	self         atomic.Pointer[identity]
	connected    atomic.Bool
	lastActivity atomic.Int64 // unix nanoseconds
	addr         atomic.Pointer[string]

	locks   *channelLocks
	users   *userCache
	threads *threadCache
	// down is why Slack could not be reached at start, while it is retried.
	down atomic.Pointer[error]
	// firstRetry is the first wait after a failed start-up attempt (tests shorten it).
	firstRetry time.Duration

	// HTTP mode: the signing secret (SetSigningSecret replaces it), and the
	// limits on what unauthenticated requests may hold.
	secret   atomic.Pointer[string]
	bodies   *byteBudget
	maxConns int
	// refusals paces the info logs of refused HTTP requests.
	refusals *rate.Sometimes
	// updatesUntil is when chat.update's rate tier lets calls through
	// again after a 429 (unix nanoseconds): until then no placeholder is
	// posted, and an answer is posted anew rather than in a placeholder.
	updatesUntil atomic.Int64
	// sessionRefused and stopUnsubscribed make the agent session problems
	// that repeat on every turn (the app not declared an agent, not
	// subscribed to agent_session_stopped) a warning once.
	sessionRefused   atomic.Bool
	stopUnsubscribed atomic.Bool
}

// identity is the bot as auth.test describes it.
type identity struct {
	userID, botID, teamID string
}

// New builds an adapter from a validated configuration. It opens no connection.
func New(cfg Config, core Core, log *zap.Logger) (*Adapter, error) {
	if core == nil {
		return nil, errors.New("nil core")
	}
	if log == nil {
		log = zap.NewNop()
	}
	cfg.Enabled = true
	cfg, err := cfg.resolve(forAdapter)
	if err != nil {
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
		locks: newChannelLocks(),

		firstRetry: firstRetry,
		bodies:     newByteBudget(maxBodiesInFlight),
		maxConns:   maxConns,
		refusals:   &rate.Sometimes{First: 1, Interval: 10 * time.Second},
	}
	a.historyHTTP = &http.Client{Timeout: apiTimeout, Transport: cappedTransport{base: transport, max: maxThreadPage}}
	a.history = slackgo.New(cfg.BotToken.Value(), append(opts, slackgo.OptionHTTPClient(a.historyHTTP))...)
	secret := cfg.SigningSecret.Value()
	a.secret.Store(&secret)
	a.users = newUserCache(a.api, cfg.UserGroups, a.now, a.log)
	a.threads = newThreadCache(a.now)
	return a, nil
}

// Run connects to Slack and serves it until ctx is done, then waits for every
// goroutine it started and returns nil. Slack unreachable at start is retried
// with backoff, as after a disconnect; a token Slack refuses, or a listener
// that cannot open, is returned as an error.
func (a *Adapter) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("Run called twice")
	}
	defer a.http.CloseIdleConnections()
	if err := a.authenticate(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// The previous process's unfinished events queue ahead of new ones.
	if _, _, err := a.core.Attach(platform, a); err != nil {
		a.log.Error("unfinished events of the previous run not read", zap.Error(err))
	}
	if a.cfg.Mode == ModeHTTP {
		return a.runHTTP(ctx)
	}
	return a.runSocket(ctx)
}

// authenticate learns the bot's identity (auth.test). Until Slack answers,
// it retries with backoff while Ready reports why; only a token Slack
// refuses ends it.
func (a *Adapter) authenticate(ctx context.Context) error {
	wait := a.firstRetry
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		res, err := a.api.AuthTestContext(actx)
		cancel()
		if err == nil {
			a.down.Store(nil)
			a.self.Store(&identity{userID: res.UserID, botID: res.BotID, teamID: res.TeamID})
			a.log.Info("authenticated", zap.String("bot_user", res.UserID), zap.String("bot_id", res.BotID),
				zap.String("team", res.TeamID), zap.String("mode", a.cfg.Mode))
			return nil
		}
		err = fmt.Errorf("auth.test with slack.bot_token: %w", err)
		if tokenRefused(err) || ctx.Err() != nil {
			return err
		}
		a.down.Store(&err)
		if rl, ok := errors.AsType[*slackgo.RateLimitedError](err); ok {
			wait = max(wait, rl.RetryAfter)
		}
		a.log.Warn("Slack not reachable; retrying", zap.Int("attempt", attempt), zap.Duration("backoff", wait), zap.Error(err))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		wait = min(wait*2, maxRetry)
	}
}

// tokenRefused reports an answer of Slack's that no retry changes.
func tokenRefused(err error) bool {
	switch errorCode(err) {
	case "invalid_auth", "not_authed", "account_inactive", "token_revoked":
		return true
	}
	return false
}

// SetSigningSecret replaces the secret HTTP-mode requests are verified
// with, for a reload after the secret was rotated.
func (a *Adapter) SetSigningSecret(secret string) { a.secret.Store(&secret) }

// Ready reports whether the adapter is connected and heard from Slack recently.
func (a *Adapter) Ready() error {
	if a.self.Load() == nil {
		if err := a.down.Load(); err != nil {
			return fmt.Errorf("not connected: %w", *err)
		}
		return errors.New("not connected yet")
	}
	if a.cfg.Mode == ModeHTTP {
		if a.addr.Load() == nil {
			return errors.New("HTTP listener not open")
		}
		return nil
	}
	if !a.connected.Load() {
		return errors.New("socket mode not connected")
	}
	if idle := a.now().Sub(time.Unix(0, a.lastActivity.Load())); idle > staleAfter {
		return fmt.Errorf("nothing heard on the socket for %s", idle.Round(time.Second))
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
