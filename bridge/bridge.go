package bridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Errors Handle returns after it has told the user.
var (
	ErrBusy   = errors.New("bridge busy")
	ErrClosed = errors.New("bridge shutting down")
)

// Config sets the catalog and the limits of a Bridge. Zero values take the
// defaults documented on each field.
type Config struct {
	Flows  []Flow
	Agents []Agent
	// Admins are the user IDs that may switch a conversation's agent.
	Admins []string
	// QueueSize bounds the events waiting in one conversation (default 16).
	QueueSize int
	// MaxInFlight bounds the API calls running at once (default 256).
	MaxInFlight int
	// DefaultFlowTimeout applies to flows that set none (default 60s).
	DefaultFlowTimeout time.Duration
	// DedupeTTL is how long a platform event ID is remembered (default 10m:
	// Slack retries for about 5 minutes, Discord replays only within a session).
	DedupeTTL time.Duration
	// ShareTTL is how long a private flow result can still be shared (default 24h).
	ShareTTL time.Duration
	// IndicatorDelay is how long an agent may take to answer before the
	// platform's working indicator (Slack's placeholder, Discord's typing)
	// is shown. Zero shows it at once.
	IndicatorDelay time.Duration
	// Limits on user input.
	Limits Limits
	// Metrics, when set, receives the bridge's counters.
	Metrics *Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Limits bound what users may send; each refusal is a clear reply.
type Limits struct {
	MaxMessageBytes int // default 16,000
	MaxParams       int // default 32
	MaxValueBytes   int // default 4,000
	// ChatPerMinute and FlowsPerMinute are per-user rates; 0 means unlimited.
	ChatPerMinute  float64
	FlowsPerMinute float64
	// Burst is how many requests a user may make at once before the rate applies (default 5).
	Burst int
}

func (c *Config) setDefaults() {
	if c.QueueSize <= 0 {
		c.QueueSize = 16
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.DefaultFlowTimeout <= 0 {
		c.DefaultFlowTimeout = 60 * time.Second
	}
	if c.DedupeTTL <= 0 {
		c.DedupeTTL = 10 * time.Minute
	}
	if c.ShareTTL <= 0 {
		c.ShareTTL = 24 * time.Hour
	}
	if c.Limits.MaxMessageBytes <= 0 {
		c.Limits.MaxMessageBytes = 16000
	}
	if c.Limits.MaxParams <= 0 {
		c.Limits.MaxParams = 32
	}
	if c.Limits.MaxValueBytes <= 0 {
		c.Limits.MaxValueBytes = 4000
	}
	if c.Limits.Burst <= 0 {
		c.Limits.Burst = 5
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Bridge routes platform events to the AI workspace and replies.
type Bridge struct {
	cfg     Config
	log     *zap.Logger
	ws      Workspace
	store   Store
	metrics *Metrics
	cat     atomic.Pointer[catalog]
	slots   chan struct{} // in-flight API calls
	shares  *shareCache
	confirm *confirmCache
	limits  *rateLimits
	dedupe  *dedupe
	writer  *writer

	// ctx is the parent of all work; cancel cuts it off when the shutdown grace ends.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	convs  map[string]*conversation // conversations with work queued or running
	wg     sync.WaitGroup

	// handoff passes work to an idle worker goroutine; quit, closed by
	// Shutdown, sends idle workers home.
	handoff chan func()
	quit    chan struct{}
}

// workerIdle is how long a worker goroutine waits for more work once its own
// is done. A new goroutine grows its stack afresh through the API client and
// JSON code, which under load was 5% of the bridge's CPU (pprof); a worker
// kept for a moment is reused with its stack already grown, and one that
// stays idle costs nothing once it is gone.
const workerIdle = 10 * time.Second

// New checks the catalog and returns a Bridge ready for Handle. It starts nothing
// until events arrive; call Shutdown to end it.
func New(cfg Config, ws Workspace, store Store, log *zap.Logger) (*Bridge, error) {
	if ws == nil || store == nil || log == nil {
		return nil, errors.New("bridge: workspace, store and logger are required")
	}
	cfg.setDefaults()
	cat, err := newCatalog(cfg.Flows, cfg.Agents, cfg.Admins)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bridge{
		cfg:     cfg,
		log:     log,
		ws:      ws,
		store:   store,
		metrics: cfg.Metrics,
		slots:   make(chan struct{}, cfg.MaxInFlight),
		shares:  newShareCache(cfg.ShareTTL, 10000),
		confirm: newConfirmCache(5 * time.Minute),
		limits:  newRateLimits(cfg.Limits),
		ctx:     ctx,
		cancel:  cancel,
		convs:   make(map[string]*conversation),
		handoff: make(chan func()),
		quit:    make(chan struct{}),
	}
	b.writer = newWriter(store, cfg.DedupeTTL, log)
	b.dedupe = newDedupe(store, b.writer, cfg.DedupeTTL, log)
	b.cat.Store(cat)
	return b, nil
}

// SetCatalog replaces the flows, agents and admins (on reload). Work already
// running keeps the definitions it started with.
func (b *Bridge) SetCatalog(flows []Flow, agents []Agent, admins []string) error {
	cat, err := newCatalog(flows, agents, admins)
	if err != nil {
		return err
	}
	b.cat.Store(cat)
	return nil
}

// Flows returns the flows users may run, sorted by name.
func (b *Bridge) Flows() []Flow { return b.cat.Load().flowList() }

// Flow returns the flow with the given command word.
func (b *Bridge) Flow(name string) (Flow, bool) {
	f, ok := b.cat.Load().flows[strings.ToLower(name)]
	if !ok {
		return Flow{}, false
	}
	return *f, true
}

// Agents returns the agents, sorted by name.
func (b *Bridge) Agents() []Agent { return b.cat.Load().agentList() }

// FirstDelivery records a platform event ID and reports whether this is its
// first delivery. Platforms redeliver events (Slack retries, one mention sent
// as two events). The answer comes from memory and the store, and the ID is
// written to the store in the background, so a restart does not answer twice
// and the event pays no fsync. When the store fails the event is handled: a
// rare double reply is better than a lost message.
func (b *Bridge) FirstDelivery(id string) bool {
	if b.dedupe.first(id, b.cfg.Now()) {
		return true
	}
	b.metrics.deduplicated(platformOf(id))
	return false
}

func platformOf(id string) string {
	p, _, _ := strings.Cut(id, "/")
	return p
}

// job is an event with its route decided.
type job struct {
	ev   Event
	kind jobKind
	args string // command arguments
}

type jobKind int

const (
	jobChat jobKind = iota + 1
	jobFlow
	jobAgent
	jobAction
)

// classify decides how an event is handled. Text commands (!flow, !agent) work
// in any message the bot reads, because Slack slash commands cannot be used in threads.
func classify(ev Event) job {
	switch ev.Kind {
	case KindAction:
		return job{ev: ev, kind: jobAction}
	case KindCommand:
		if ev.Command == CommandAgent {
			return job{ev: ev, kind: jobAgent, args: ev.Text}
		}
		return job{ev: ev, kind: jobFlow, args: ev.Text}
	}
	text := strings.TrimSpace(ev.Text)
	if rest, ok := textCommand(text, "!flow"); ok {
		return job{ev: ev, kind: jobFlow, args: rest}
	}
	if rest, ok := textCommand(text, "!agent"); ok {
		return job{ev: ev, kind: jobAgent, args: rest}
	}
	return job{ev: ev, kind: jobChat}
}

func textCommand(text, word string) (string, bool) {
	if len(text) < len(word) || !strings.EqualFold(text[:len(word)], word) {
		return "", false
	}
	rest := text[len(word):]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '\n' {
		return "", false
	}
	return strings.TrimSpace(rest), true
}

// ordered reports whether a job touches the conversation's session and so must
// wait its turn behind earlier messages of the conversation.
func (j job) ordered() bool {
	switch j.kind {
	case jobChat:
		return true
	case jobAgent:
		sub, _, _ := strings.Cut(strings.TrimSpace(j.args), " ")
		return !strings.EqualFold(sub, "help") && sub != ""
	}
	return false
}

// Handle takes an event for processing and returns at once. Events of one
// conversation that touch its session are handled one at a time in arrival
// order; flows, help and button presses run beside them. When the bridge is
// closing or a queue is full, Handle tells the user and returns ErrClosed or
// ErrBusy.
func (b *Bridge) Handle(ev Event) error {
	if ev.Reply == nil {
		return errors.New("bridge: event has no responder")
	}
	b.metrics.event(ev.Platform, ev.Kind)
	j := classify(ev)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		b.replyLocked(ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgShuttingDown})
		return ErrClosed
	}
	if !j.ordered() {
		b.goLocked(func() { b.run(j) })
		return nil
	}
	c := b.convs[ev.Conversation]
	if c == nil {
		c = &conversation{key: ev.Conversation}
		b.convs[ev.Conversation] = c
	}
	if len(c.queue) >= b.cfg.QueueSize {
		b.metrics.refused("queue_full")
		b.replyLocked(ev, Reply{Kind: ReplyError, Ephemeral: true, Text: fmt.Sprintf(msgQueueFull, b.cfg.QueueSize)})
		return ErrBusy
	}
	c.queue = append(c.queue, &j)
	b.metrics.queued(1)
	if !c.running {
		c.running = true
		b.goLocked(func() { b.work(c) })
	}
	return nil
}

// goLocked runs f on an idle worker, or on a new one when none is idle. b.mu
// is held, so the goroutine is counted before Shutdown can wait.
func (b *Bridge) goLocked(f func()) {
	select {
	case b.handoff <- f:
	default:
		b.wg.Go(func() { b.worker(f) })
	}
}

// worker runs f, then whatever work is handed to it, until it has been idle
// for workerIdle or the bridge shuts down.
func (b *Bridge) worker(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-b.handoff:
		case <-idle.C:
			return
		case <-b.quit:
			return
		}
	}
}

// replyLocked sends a short reply without blocking the caller; b.mu is held so
// the goroutine is counted before Shutdown can wait.
func (b *Bridge) replyLocked(ev Event, r Reply) {
	b.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 10*time.Second)
		defer cancel()
		b.send(ctx, ev, r)
		if ev.Done != nil {
			ev.Done()
		}
	})
}

// conversation is the ordered queue of one conversation key. It exists only
// while the conversation has work queued or running, and so does its worker
// goroutine: ten thousand quiet conversations cost nothing.
type conversation struct {
	key     string
	queue   []*job // waiting, not counting the one running
	running bool
}

// work runs a conversation's queue one job at a time until it is empty.
func (b *Bridge) work(c *conversation) {
	for {
		b.mu.Lock()
		if len(c.queue) == 0 {
			c.running = false
			delete(b.convs, c.key)
			b.mu.Unlock()
			return
		}
		j := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		b.mu.Unlock()
		b.metrics.queued(-1)
		b.run(*j)
	}
}

func (b *Bridge) run(j job) {
	// WithLazy: most events log nothing, so the fields are encoded only if they do.
	log := b.log.WithLazy(zap.String("platform", j.ev.Platform), zap.String("conversation", j.ev.Conversation), zap.String("user", j.ev.User.ID))
	if j.ev.Done != nil {
		defer j.ev.Done()
	}
	defer func() {
		// A bug in one event's handling must not take the bridge down with it.
		if r := recover(); r != nil {
			log.Error("panic while handling event", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	ctx := b.ctx
	switch j.kind {
	case jobChat:
		b.chat(ctx, log, j.ev)
	case jobFlow:
		b.flow(ctx, log, j.ev, j.args)
	case jobAgent:
		b.agentCommand(ctx, log, j.ev, j.args)
	case jobAction:
		b.action(ctx, log, j.ev)
	}
}

// acquire takes an in-flight API slot, or reports false when all are taken.
func (b *Bridge) acquire() bool {
	select {
	case b.slots <- struct{}{}:
		b.metrics.inflight(1)
		return true
	default:
		b.metrics.refused("in_flight_limit")
		return false
	}
}

func (b *Bridge) release() {
	<-b.slots
	b.metrics.inflight(-1)
}

// send delivers a reply and logs (never returns) a delivery failure: by then the
// user cannot be told anything else either.
func (b *Bridge) send(ctx context.Context, ev Event, r Reply) MessageRef {
	ref, err := ev.Reply.Send(ctx, r)
	if err != nil {
		b.log.Warn("reply not delivered", zap.String("platform", ev.Platform), zap.String("conversation", ev.Conversation), zap.Error(err))
	}
	return ref
}

// replace updates a sent message where the platform can, and sends otherwise.
func (b *Bridge) replace(ctx context.Context, ev Event, ref MessageRef, r Reply) {
	if u, ok := ev.Reply.(Updater); ok && ref != "" {
		if err := u.Update(ctx, ref, r); err == nil {
			return
		} else {
			b.log.Debug("update failed; sending instead", zap.Error(err))
		}
	}
	b.send(ctx, ev, r)
}

// Shutdown stops taking events and waits for work in flight. When ctx ends
// first, the remaining work is cancelled, its users are told, and Shutdown
// returns ctx's error once that is done.
func (b *Bridge) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.quit)
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		b.cancel()
		b.writer.close()
		return nil
	case <-ctx.Done():
		b.cancel()
		<-done
		b.writer.close()
		return fmt.Errorf("shutdown: %w", ctx.Err())
	}
}
