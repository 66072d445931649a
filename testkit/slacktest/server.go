package slacktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// ErrClosed is returned by waits and sends once the server has been closed.
var ErrClosed = errors.New("slacktest: server closed")

// Defaults used when the matching Options field is empty.
const (
	DefaultBotToken  = "xoxb-1-fake-bot-token"
	DefaultAppToken  = "xapp-1-fake-app-token"
	DefaultTeamID    = "T0FAKE0001"
	DefaultTeamName  = "fake"
	DefaultBotUserID = "UBOT00001"
	DefaultBotID     = "BBOT00001"
	DefaultAppID     = "AFAKE00001"

	// DefaultPingInterval is how often the fake pings each socket. slack-go
	// reconnects when it sees no PING for its OptionPingInterval (30s by
	// default), so this must stay well below any interval a test configures.
	DefaultPingInterval = 200 * time.Millisecond

	// MaxSocketConnections is how many Socket Mode connections Slack keeps open per app.
	MaxSocketConnections = 10

	// DefaultAckTimeout is how long Slack waits for a Socket Mode envelope's ack.
	DefaultAckTimeout = 3 * time.Second

	// MaxRetries is how many times Slack redelivers an event the app did not acknowledge
	// (Socket Mode) or answer in time (HTTP), after the first delivery.
	MaxRetries = 3

	// ResponseURLUses and ResponseURLLifetime are Slack's limits on a response_url.
	ResponseURLUses     = 5
	ResponseURLLifetime = 30 * time.Minute

	// Slack's message limits enforced by the fake.
	MaxBlocks          = 50
	MaxSectionText     = 3000
	MaxMarkdownText    = 12000
	MaxTextLength      = 40000
	MaxHeaderText      = 150
	MaxSectionFields   = 10
	MaxFieldText       = 2000
	MaxBlockID         = 255
	MaxButtonText      = 75
	MaxButtonValue     = 2000
	MaxActionsElements = 25
	MaxContextElements = 10
)

// Options configure a Server. The zero value is usable: every identity
// field falls back to the matching Default constant.
type Options struct {
	BotToken  string // accepted for every Web API method except apps.connections.open
	AppToken  string // the app-level token apps.connections.open requires
	TeamID    string
	TeamName  string
	BotUserID string // auth.test user_id: the bot user
	BotID     string // auth.test bot_id, stamped on messages the app posts
	AppID     string

	// Channels are known from the start. Channels used by the Send* helpers
	// and AddChannel are learnt; chat methods on any other channel fail with
	// channel_not_found, as in a workspace the bot is not part of.
	Channels []Channel

	// UserGroups answer usergroups.list and usergroups.users.list.
	UserGroups []UserGroup

	// UpdatesPerMinute caps chat.update calls per minute in the workspace
	// (DefaultUpdatesPerMinute when zero; negative: no cap). Past it, or past
	// MaxUpdatesPerMessage of one message within UpdateWindowPerMessage,
	// chat.update answers 429 ratelimited with Retry-After.
	UpdatesPerMinute int

	// PostBurst is how many chat.postMessage calls one channel takes at once
	// before Slack's limit of PostsPerSecond per channel holds them back
	// with 429 ratelimited and Retry-After (DefaultPostBurst when zero;
	// negative: no limit, for tests that are not about delivery and post
	// into one channel faster than Slack allows).
	PostBurst int

	// Now is the clock for timestamps, ack times and response_url expiry.
	// Defaults to time.Now; inject one to test expiry without waiting.
	Now func() time.Time

	// PingInterval between WebSocket PINGs on every socket; zero means
	// DefaultPingInterval, negative disables pings (slack-go then times out).
	PingInterval time.Duration

	// MaxConnections caps the open Socket Mode connections as Slack does: one more socket
	// gets {"type":"disconnect","reason":"too_many_websockets"} instead of hello and is
	// closed. Zero means MaxSocketConnections; negative, no cap.
	MaxConnections int

	// Delivery chooses the live socket each envelope goes to: DeliverRoundRobin (the
	// default) spreads them over every live connection, as Slack does for an app with
	// several, each envelope to one of them.
	Delivery DeliveryPolicy

	// AckTimeout is how long an envelope waits for its ack before Slack counts it as
	// undelivered (DefaultAckTimeout when zero). It matters only with Redeliver.
	AckTimeout time.Duration

	// Redeliver makes the fake do what Slack does with an events_api envelope not acked
	// within AckTimeout: deliver it again, on the socket Delivery picks next, with a new
	// envelope ID, the same payload, retry_attempt one higher and retry_reason "timeout",
	// up to MaxRetries times (an ack of any delivery stops the retries). Off by default:
	// tests that hold acks back on purpose, and load runs whose bridge falls behind, would
	// see envelopes they did not send. The Redeliver method does one retry by hand.
	Redeliver bool

	// NoRecord keeps only what the protocol needs, for load runs that send
	// millions of events: an events_api envelope is forgotten once acked and
	// its ack is not kept (Acks, WaitAck and Redeliver do not see it), and
	// users' messages are not remembered for threads, reactions and
	// conversations.replies. Other envelopes' acks are still kept.
	NoRecord bool

	// RestrictedHistory applies the limits Slack sets since 2025-05-29 for
	// a commercially distributed app outside the Slack Marketplace:
	// conversations.replies once a minute, at most 15 messages a page.
	RestrictedHistory bool

	// UserNames are users' display names for users.info; a user not named
	// here is called by their ID in lower case.
	UserNames map[string]string

	// AgentView makes the fake an app with the Agent messaging experience
	// (features.agent_view) rather than assistant_view: app_context_changed
	// can be sent, and setSuggestedPrompts with a thread_ts does nothing (it
	// succeeds), as Slack documents, while without one it sets the DM's prompts.
	AgentView bool

	// Scopes are the bot token's scopes the file methods and downloads check
	// (files:read, files:write), and the agent sessions methods (chat:write;
	// chat:write.customize for icon and username overrides), answering
	// missing_scope without them. Nil grants every scope.
	Scopes []string

	// Agent declares the app an agent (App settings, Agents & AI Apps; it
	// adds the assistant:write scope): only then do agents.sessions.setStatus
	// and agents.sessions.rename work, else they answer not_authorized. It is
	// apart from AgentView, which is how the agent shows in Slack: a test of
	// sessions in agent view sets both. SetAgent changes it.
	Agent bool

	// BotEvents are the bot events the app subscribes to (the manifest's
	// settings.event_subscriptions.bot_events); nil subscribes it to every
	// event. Without agent_session_stopped, setStatus warns
	// missing_agent_session_stopped_event_subscription and PressStop finds
	// no Stop button; without agent_session_title_changed, RenameSession
	// delivers nothing. SetBotEvents changes them.
	BotEvents []string
}

// DeliveryPolicy chooses the live socket an envelope goes to.
type DeliveryPolicy int

// Delivery policies.
const (
	// DeliverRoundRobin sends each envelope to the next live socket, in connection order.
	DeliverRoundRobin DeliveryPolicy = iota
	// DeliverNewest sends every envelope to the newest live socket.
	DeliverNewest
)

// Channel is a conversation the fake knows.
type Channel struct {
	ID   string // C…, G… or D…
	Name string
	IsIM bool
	User string // an IM's other member; learnt from the first event in it when empty
}

// UserGroup is a Slack user group (subteam).
type UserGroup struct {
	ID     string // S…
	Handle string
	Name   string
	Users  []string
}

// Server is a fake Slack on a loopback httptest.Server. All methods are safe
// for concurrent use.
type Server struct {
	opts     Options
	now      func() time.Time
	started  time.Time        // when the workspace's channels, users and groups were "created"
	srv      *httptest.Server // nil until Start
	mux      *http.ServeMux
	base     string // URL
	upgrader websocket.Upgrader
	wg       sync.WaitGroup // socket goroutines: httptest does not track hijacked connections
	stop     context.CancelFunc
	stopped  context.Context // done once Close begins
	kick     chan struct{}   // wakes the redelivery loop

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every recorded change
	closed  bool
	seq     uint64
	lastSec int64
	lastUS  int64
	counter int

	calls    []Call
	faults   map[string][]fault
	channels map[string]Channel
	groups   []UserGroup

	files           map[string]File    // shared and uploaded files, by ID
	uploads         map[string]*upload // open upload URLs, by key
	downloads       int
	downloadedBytes int64

	// recent chat.update calls, see ratelimit.go
	updates updateLimits
	// chat.postMessage allowances per channel, see ratelimit.go; nil: no limit
	posts *PostLimiter
	// recent conversations.replies calls, see history.go
	repliesAt []time.Time
	historyAt []time.Time // conversations.history calls of the last minute

	msgs    map[msgKey]*stored // current state, app messages and user messages
	order   []msgKey
	history []Message // every version of every app message

	tickets    map[string]bool // unused socket tickets
	conns      []*socket       // open sockets, in connection order
	nconns     int
	refused    int // sockets turned away with too_many_websockets
	lastConn   int // the socket the last envelope went to, for round robin
	envelopes  map[string]*envelope
	pending    []*envelope // delivered events_api envelopes awaiting their ack, for Redeliver
	deliveries []Delivery
	acks       []Ack
	frames     []Frame
	pings      bool

	responseURLs  map[string]*responseURL
	responsePosts []ResponsePost

	assistant map[msgKey]*AssistantThread // see assistant.go

	sessions     map[msgKey]*AgentSession // agent sessions by thread, see sessions.go
	sessionOrder []msgKey

	triggers  map[string]*trigger // trigger IDs handed to the app, see views.go
	views     map[string]*View
	viewOrder []string
}

// UnstartedURL is Server.URL before Start: only Transport and Client reach
// the server then.
const UnstartedURL = "http://slacktest.invalid"

// NewServer starts a fake Slack on loopback. Close it when done.
func NewServer(opts Options) *Server {
	s := New(opts)
	s.Start()
	return s
}

// New returns a fake Slack that is not listening: its Web API, response
// URLs and files are reached in memory through Transport or Client, with
// URL (UnstartedURL) as their base, and so also inside a testing/synctest
// bubble, where loopback sockets stall the clock. Socket Mode needs Start.
// Close it when done.
func New(opts Options) *Server {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&opts.BotToken, DefaultBotToken)
	def(&opts.AppToken, DefaultAppToken)
	def(&opts.TeamID, DefaultTeamID)
	def(&opts.TeamName, DefaultTeamName)
	def(&opts.BotUserID, DefaultBotUserID)
	def(&opts.BotID, DefaultBotID)
	def(&opts.AppID, DefaultAppID)
	if opts.PingInterval == 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = MaxSocketConnections
	}
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = DefaultAckTimeout
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Server{
		opts:    opts,
		now:     now,
		started: now(),
		changed: make(chan struct{}),
		// slack-go dials with Origin https://api.slack.com, which gorilla's
		// default same-origin check rejects.
		upgrader:     websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		faults:       make(map[string][]fault),
		channels:     make(map[string]Channel),
		groups:       append([]UserGroup(nil), opts.UserGroups...),
		msgs:         make(map[msgKey]*stored),
		tickets:      make(map[string]bool),
		envelopes:    make(map[string]*envelope),
		responseURLs: make(map[string]*responseURL),
		pings:        opts.PingInterval > 0,
		kick:         make(chan struct{}, 1),
	}
	if opts.PostBurst >= 0 {
		s.posts = NewPostLimiter(opts.PostBurst)
	}
	s.stopped, s.stop = context.WithCancel(context.Background())
	opts.BotEvents = slices.Clone(opts.BotEvents)
	for _, c := range opts.Channels {
		s.channels[c.ID] = c
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", s.handleAPI)
	mux.HandleFunc("GET /link/", s.handleSocket)
	mux.HandleFunc("POST /response/{id}", s.handleResponseURL)
	mux.HandleFunc("POST /upload/v1/{key}", s.handleUpload)
	mux.HandleFunc("GET /files-pri/{teamfile}/{name}", s.serveFile)
	mux.HandleFunc("GET /files-pri/{teamfile}/download/{name}", s.serveFile)
	mux.HandleFunc("GET /signin", s.serveSignin)
	s.mux, s.base = mux, UnstartedURL
	if opts.Redeliver {
		s.wg.Go(s.redeliverLoop)
	}
	return s
}

// Start serves the server on a loopback port, which URL then names. Call it
// before anything uses the server; calling it again does nothing.
func (s *Server) Start() {
	if s.srv != nil {
		return
	}
	s.srv = httptest.NewUnstartedServer(s.mux)
	s.srv.Listener = countingListener{s.srv.Listener}
	s.srv.Start()
	s.base = s.srv.URL
}

// URL is the server's base URL, e.g. "http://127.0.0.1:34567", or
// UnstartedURL before Start.
func (s *Server) URL() string { return s.base }

// APIURL is the Web API base for slack.OptionAPIURL; it ends in "/api/".
func (s *Server) APIURL() string { return s.base + "/api/" }

// Client returns an HTTP client for the server: plain loopback (no proxy)
// once started, in memory before.
func (s *Server) Client() *http.Client {
	if s.srv == nil {
		return &http.Client{Transport: s.Transport()}
	}
	return s.srv.Client()
}

// Transport returns a RoundTripper that serves each request in memory, in
// the calling goroutine, whatever its host: it works inside testing/synctest
// bubbles. Socket Mode's WebSocket cannot be reached through it.
func (s *Server) Transport() http.RoundTripper { return memTransport{s} }

// memTransport serves requests through the server's handler without sockets.
type memTransport struct{ s *Server }

func (t memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body := req.Body
	if body == nil {
		body = http.NoBody
	}
	defer body.Close()
	t.s.mu.Lock()
	closed := t.s.closed
	t.s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL, ErrClosed)
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	sr := req.Clone(req.Context())
	sr.Body = body
	sr.RequestURI = req.URL.RequestURI()
	sr.RemoteAddr = "192.0.2.1:1234"
	sr.Host = req.URL.Host
	rec := httptest.NewRecorder()
	t.s.mux.ServeHTTP(rec, sr)
	res := rec.Result()
	res.Request = req
	return res, nil
}

// BotToken is the bot token the server accepts.
func (s *Server) BotToken() string { return s.opts.BotToken }

// AppToken is the app-level token apps.connections.open accepts.
func (s *Server) AppToken() string { return s.opts.AppToken }

// TeamID is the fake workspace's ID.
func (s *Server) TeamID() string { return s.opts.TeamID }

// BotUserID is the bot user's ID, as auth.test reports it.
func (s *Server) BotUserID() string { return s.opts.BotUserID }

// BotID is the bot's ID, as auth.test reports it.
func (s *Server) BotID() string { return s.opts.BotID }

// AppID is the app's ID.
func (s *Server) AppID() string { return s.opts.AppID }

// Close closes every socket, waits for everything the server started and
// shuts the HTTP server down. Pending waits return ErrClosed.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	conns := append([]*socket(nil), s.conns...)
	s.bumpLocked()
	s.mu.Unlock()
	s.stop()
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
	if s.srv != nil {
		s.srv.Close()
	}
}

// AddChannel makes a channel known, so chat methods accept it.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[c.ID] = c
}

// AddUserGroup adds or replaces a user group.
func (s *Server) AddUserGroup(g UserGroup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.groups {
		if s.groups[i].ID == g.ID {
			s.groups[i] = g
			return
		}
	}
	s.groups = append(s.groups, g)
}

// learnChannelLocked records a channel an event by user mentioned: a real workspace has it.
func (s *Server) learnChannelLocked(id string, im bool, user string) {
	if id == "" {
		return
	}
	c, ok := s.channels[id]
	if !ok {
		c = Channel{ID: id, Name: strings.ToLower(id), IsIM: im || strings.HasPrefix(id, "D")}
	}
	if c.IsIM && c.User == "" && user != s.opts.BotUserID {
		c.User = user
	}
	s.channels[id] = c
}

// bumpLocked wakes every waiter and hands out the next sequence number.
func (s *Server) bumpLocked() uint64 {
	s.seq++
	close(s.changed)
	s.changed = make(chan struct{})
	return s.seq
}

// waitFor blocks until check, called under s.mu, returns true.
func (s *Server) waitFor(ctx context.Context, what string, check func() bool) error {
	for {
		s.mu.Lock()
		ok := check()
		closed := s.closed
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		if closed {
			return fmt.Errorf("wait for %s: %w", what, ErrClosed)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-ch:
		}
	}
}

// nextTSLocked mints a Slack timestamp ("1716212345.000100") from the clock,
// strictly increasing even when the clock stands still.
func (s *Server) nextTSLocked() string {
	t := s.now()
	sec, us := t.Unix(), int64(t.Nanosecond()/1000)
	if sec < s.lastSec || (sec == s.lastSec && us <= s.lastUS) {
		sec, us = s.lastSec, s.lastUS+1
		if us >= 1_000_000 {
			sec, us = sec+1, 0
		}
	}
	s.lastSec, s.lastUS = sec, us
	return fmt.Sprintf("%d.%06d", sec, us)
}

// nextIDLocked mints an opaque ID with a prefix, e.g. "Ev0000000A".
func (s *Server) nextIDLocked(prefix string) string {
	s.counter++
	return fmt.Sprintf("%s%08X", prefix, s.counter)
}
