package discordtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// Defaults used when Options leaves a field empty.
const (
	DefaultToken         = "test-bot-token"
	DefaultApplicationID = "900000000000000001"
	DefaultBotUsername   = "flowbridge"
	// DefaultHeartbeatInterval is what Discord sends today; tests of heartbeats use less.
	DefaultHeartbeatInterval = 41250 * time.Millisecond
)

// Discord's time limits for interactions.
const (
	InteractionDeadline = 3 * time.Second
	InteractionTokenTTL = 15 * time.Minute
)

// discordEpoch is the first millisecond of 2015, where snowflake timestamps start.
const discordEpoch = 1420070400000

// Options configures a Server. The zero value is usable.
type Options struct {
	// NoEditLimit lifts the limit on edits per channel (MaxEditsPerChannel
	// per EditWindow), for load runs that measure the bridge, not Discord.
	NoEditLimit bool
	// Token is the bot token without the "Bot " prefix (default DefaultToken).
	Token string
	// ApplicationID defaults to DefaultApplicationID.
	ApplicationID string
	// BotUserID defaults to ApplicationID, as for every bot created since 2021.
	BotUserID string
	// BotUsername defaults to DefaultBotUsername.
	BotUsername string
	// Now is the clock for interaction deadlines, token expiry, timestamps and snowflakes
	// (default time.Now). A Clock's Now lets a test step past the 3-second deadline.
	Now func() time.Time
	// HeartbeatInterval is sent in HELLO (default DefaultHeartbeatInterval, at least 1 ms).
	HeartbeatInterval time.Duration
	// DenyMessageContent makes IDENTIFY with the message content intent close with 4014, as
	// for an application whose privileged intent is not enabled in the developer portal.
	DenyMessageContent bool
	// Shards is the shard count GET /gateway/bot recommends (default 1). The gateway routes
	// each guild's events to the session that identified as shard ShardOf(guild, count), and
	// DMs to shard 0, whatever this says.
	Shards int
	// NoRecord keeps only what the protocol needs, for load runs that send millions of
	// messages: users' messages are not stored (Messages and the bot's replies cannot refer
	// to them; a reply whose message_reference must exist fails as for an unknown message),
	// and a session's replay log drops the dispatches its client has confirmed by
	// heartbeat, so Dispatches lists only those since the last one.
	NoRecord bool
	// AttachmentSizeLimit is the guild's upload limit per file, which interactions report as
	// attachment_size_limit and uploads may not exceed (default MaxAttachmentBytes, a guild
	// without boosts; boosted guilds allow 50 or 100 MiB).
	AttachmentSizeLimit int
}

// Server is a fake Discord serving the REST API under URL + "/api/v9/" and the gateway at
// URL + "/gw". Its methods are safe for concurrent use.
type Server struct {
	// URL is the base, "http://127.0.0.1:PORT", without trailing slash.
	URL string

	opts      Options
	bot       discordgo.User
	ts        *httptest.Server
	transport http.RoundTripper
	upgrader  websocket.Upgrader

	// gateway connection handlers run after hijacking, which httptest does not wait for.
	wg sync.WaitGroup

	// dispatchMu orders sequence numbers and frames on the wire: a frame is numbered and
	// written while it is held, so discordgo never sees seq N+1 before N.
	dispatchMu sync.Mutex

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change, for the Wait methods
	closed  bool
	lastID  uint64

	requests     []Request
	messages     map[string]*Message
	botMessages  []string            // ids in creation order
	nonces       map[string]nonceUse // by author and nonce, for enforce_nonce
	channels     map[string]*discordgo.Channel
	channelOrder []string
	guilds       []string
	joined       map[string]time.Time // by guild: when the bot joined it (GUILD_CREATE's joined_at)
	typing       map[string]int
	interactions map[string]*interaction // by id
	byToken      map[string]*interaction
	commands     map[string][]*discordgo.ApplicationCommand // by guild id, "" for global
	commandIDs   map[string]string                          // guild + "/" + name -> id, stable across overwrites
	overwrites   []CommandOverwrite
	limits       map[string][]RateLimit // by route
	cdn          map[string]Attachment  // by CDN path
	foreign      map[string]bool        // channels the bot is no member of (user installs)
	cdnGets      int
	cdnBytes     int64
	edits        map[string][]time.Time // recent edits by channel, see editlimit.go
	history      map[string][]time.Time // recent history reads by channel, see history.go

	conns       map[*conn]struct{}
	connRecords []Connection
	handshakes  []Handshake
	sessions    map[string]*gwSession
	routed      map[[2]int]*gwSession // the newest session of each [shard_id, num_shards]
	current     *gwSession            // the newest session: the one faults act on
	noAcks      bool
	// invalidating answers every IDENTIFY and RESUME with op 9 (SetInvalidSessions).
	invalidating bool
	// replayGap says which dispatches a RESUME's replay leaves out (SetReplayGap).
	replayGap func(Dispatch) bool
	// startLimit is GET /gateway/bot's session_start_limit; each IDENTIFY spends one.
	startLimit startLimit
}

// startLimit is the IDENTIFY budget Discord gives a bot: total a day, remaining until
// resetAt.
type startLimit struct {
	total, remaining int
	resetAt          time.Time
}

// NewServer starts a fake Discord on loopback. Close it when done.
func NewServer(opts Options) *Server {
	if opts.Token == "" {
		opts.Token = DefaultToken
	}
	if opts.ApplicationID == "" {
		opts.ApplicationID = DefaultApplicationID
	}
	if opts.BotUserID == "" {
		opts.BotUserID = opts.ApplicationID
	}
	if opts.BotUsername == "" {
		opts.BotUsername = DefaultBotUsername
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AttachmentSizeLimit <= 0 {
		opts.AttachmentSizeLimit = MaxAttachmentBytes
	}
	if opts.Shards < 1 {
		opts.Shards = 1
	}
	if opts.HeartbeatInterval < time.Millisecond {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	s := &Server{
		opts:         opts,
		bot:          discordgo.User{ID: opts.BotUserID, Username: opts.BotUsername, Discriminator: "0", Bot: true},
		changed:      make(chan struct{}),
		messages:     make(map[string]*Message),
		nonces:       make(map[string]nonceUse),
		channels:     make(map[string]*discordgo.Channel),
		joined:       make(map[string]time.Time),
		typing:       make(map[string]int),
		interactions: make(map[string]*interaction),
		byToken:      make(map[string]*interaction),
		commands:     make(map[string][]*discordgo.ApplicationCommand),
		commandIDs:   make(map[string]string),
		limits:       make(map[string][]RateLimit),
		conns:        make(map[*conn]struct{}),
		sessions:     make(map[string]*gwSession),
		routed:       make(map[[2]int]*gwSession),
	}
	s.startLimit = startLimit{total: DefaultSessionStartTotal, remaining: DefaultSessionStartTotal - 1, resetAt: opts.Now().Add(DefaultSessionStartReset)}
	s.upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	s.ts = httptest.NewServer(s.routes())
	s.URL = s.ts.URL
	host := s.ts.Listener.Addr().String()
	s.transport = rewriteTransport{host: host, base: s.ts.Client().Transport}
	return s
}

// Close closes every gateway connection, shuts the HTTP server down and waits for
// everything the server started. Close a discordgo session before its fake, or it keeps
// trying to reconnect.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.NetConn().Close()
	}
	s.ts.Close()
	s.wg.Wait()
}

// Token returns the bot token without the "Bot " prefix.
func (s *Server) Token() string { return s.opts.Token }

// ApplicationID returns the application id, which is also the webhook id of interactions.
func (s *Server) ApplicationID() string { return s.opts.ApplicationID }

// BotUser returns the bot's user, as READY and the echo of its messages carry it.
func (s *Server) BotUser() discordgo.User { return s.bot }

// GatewayURL returns the websocket URL that GET /gateway answers.
func (s *Server) GatewayURL() string { return "ws" + s.URL[len("http"):] + "/gw" }

// Transport returns a RoundTripper that sends requests for discord.com, discordapp.com and
// gateway.discord.gg (any scheme) to the fake, keeping path and query, and refuses every
// other host, so a test can never reach the network.
func (s *Server) Transport() http.RoundTripper { return s.transport }

// Client returns an *http.Client using Transport, with discordgo's default 20 s timeout.
// Assign it to discordgo.Session.Client.
func (s *Server) Client() *http.Client {
	return &http.Client{Transport: s.transport, Timeout: 20 * time.Second}
}

type rewriteTransport struct {
	host string
	base http.RoundTripper
}

// discordHosts are the hosts discordgo v0.29 addresses over HTTP.
var discordHosts = map[string]bool{
	"discord.com": true, "discordapp.com": true, "gateway.discord.gg": true,
	"canary.discord.com": true, "ptb.discord.com": true,
	cdnHost: true, "media.discordapp.net": true,
}

func (t rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != t.host && !discordHosts[r.URL.Hostname()] {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("discordtest: refusing request to %s: only Discord hosts are faked", r.URL.Host)
	}
	r2 := r.Clone(r.Context())
	r2.URL.Scheme = "http"
	r2.URL.Host = t.host
	r2.Host = t.host
	return t.base.RoundTrip(r2)
}

// now returns the injected clock's time.
func (s *Server) now() time.Time { return s.opts.Now() }

// newIDLocked returns a snowflake for the current clock, strictly increasing even when the
// clock stands still.
func (s *Server) newIDLocked() string {
	ms := s.now().UnixMilli() - discordEpoch
	id := uint64(0)
	if ms > 0 {
		id = uint64(ms) << 22
	}
	if id <= s.lastID {
		id = s.lastID + 1
	}
	s.lastID = id
	return strconv.FormatUint(id, 10)
}

// NewID returns a new snowflake for the fake's clock, as Discord would give a message
// posted now, which the fake will not give anything else: for a test that names a message
// before it sends it (MessageCreate.ID).
func (s *Server) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newIDLocked()
}

// notifyLocked wakes every Wait method.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// ErrClosed is returned by dispatch helpers and Wait methods once the Server is closed.
var ErrClosed = errors.New("discordtest: server closed")

// waitFor calls find under the lock until it reports a value, the context ends or the
// server closes.
func waitFor[T any](ctx context.Context, s *Server, what string, find func() (T, bool)) (T, error) {
	for {
		s.mu.Lock()
		v, ok := find()
		ch, closed := s.changed, s.closed
		s.mu.Unlock()
		if ok {
			return v, nil
		}
		if closed {
			return v, fmt.Errorf("wait for %s: %w", what, ErrClosed)
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("wait for %s: %w", what, context.Cause(ctx))
		case <-ch:
		}
	}
}

// firstMatch returns the first element of list that match accepts.
func firstMatch[T any](list []T, match func(T) bool) (T, bool) {
	for _, v := range list {
		if match(v) {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// Clock is a settable clock for Options.Now. The zero value starts at the Unix epoch; use
// NewClock for a realistic time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Requests returns every REST request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// WaitRequest waits for a REST request, already received or to come, that match accepts.
// The request is returned once answered, with its status.
func (s *Server) WaitRequest(ctx context.Context, match func(Request) bool) (Request, error) {
	return waitFor(ctx, s, "request", func() (Request, bool) {
		return firstMatch(s.requests, func(r Request) bool { return r.Status != 0 && match(r) })
	})
}

// Typing returns how many typing indicators were sent to a channel.
func (s *Server) Typing(channelID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.typing[channelID]
}
