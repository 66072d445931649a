package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Outcomes a Receipt reports beside nil. ErrBusy: refused, its user told
// (the conversation's queue is full). ErrClosed: the bridge is shutting
// down; the event is recorded and left for the next start (or another
// replica), and nothing of it runs in this process. Either way the platform
// is acknowledged.
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
	// QueueSize bounds the events waiting in one conversation.
	QueueSize int
	// MaxInFlight bounds the API calls running at once for people.
	MaxInFlight int
	// ScheduledInFlight bounds the scheduled flow runs at once, apart from
	// MaxInFlight, so that chat cannot starve schedules, nor they chat.
	ScheduledInFlight int
	// DefaultFlowTimeout applies to flows that set none.
	DefaultFlowTimeout time.Duration
	// ShareTTL is how long a private flow result can still be shared.
	ShareTTL time.Duration
	// IndicatorDelay is how long an agent may take to answer before the
	// platform's working indicator (Slack's placeholder, Discord's typing)
	// is shown. Zero shows it at once.
	IndicatorDelay time.Duration
	// ProgressInterval is how often a running flow's message and a slow
	// answer's placeholder show the time elapsed; zero never does.
	ProgressInterval time.Duration
	// Feedback puts 👍 / 👎 buttons on agent replies and stores the votes.
	Feedback bool
	// Limits on user input.
	Limits Limits
	// ThreadContext bounds what the agent hears of a thread its
	// conversation starts in (see Platform.Earlier); Messages 0 turns it off.
	ThreadContext ThreadContext
	// Files is the policy for attached files and replies posted as files.
	Files FileLimits
	// Replicas tunes the sharing of work between replicas, when the store
	// is one they share (a store.Shared).
	Replicas ReplicaConfig
	// Metrics, when set, receives the bridge's counters.
	Metrics *Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Limits bound what users may send; each refusal is a clear reply.
type Limits struct {
	MaxMessageBytes int
	MaxParams       int
	MaxValueBytes   int
	// ChatPerMinute and FlowsPerMinute are per-user rates; 0 means unlimited.
	ChatPerMinute  float64
	FlowsPerMinute float64
	// Burst is how many requests a user may make at once before the rate applies.
	Burst int
}

// DefaultConfig is the core's configuration unless told otherwise: the one
// place its defaults are written (cmd/flowbridge's config reads them too).
// New fills a field left zero from it where zero is not a setting of its
// own: sizes, counts and timeouts, not IndicatorDelay (zero: at once),
// ProgressInterval (zero: never), the rates (zero: unlimited),
// Files.ReplyOver (zero: never) or Replicas.OrderHold (zero: no wait).
//
// ProgressInterval: Slack's chat.update (about 50 a minute per workspace)
// and Discord's edits (5 per 5 seconds per channel) both leave room for
// many runs at one update each 15 seconds.
func DefaultConfig() Config {
	return Config{
		QueueSize:          16,
		MaxInFlight:        256,
		ScheduledInFlight:  16,
		DefaultFlowTimeout: 60 * time.Second,
		ShareTTL:           24 * time.Hour,
		IndicatorDelay:     500 * time.Millisecond,
		ProgressInterval:   15 * time.Second,
		Limits:             Limits{MaxMessageBytes: 16000, MaxParams: 32, MaxValueBytes: 4000, Burst: 5},
		Files:              FileLimits{MaxFiles: 5, MaxFileBytes: 100_000, ReplyOver: 4000},
		Replicas:           ReplicaConfig{LeaseTTL: 15 * time.Second, ClaimGrace: 2 * time.Second, OrderHold: 250 * time.Millisecond},
		ThreadContext:      ThreadContext{Messages: 20, Chars: 4000},
	}
}

func (c *Config) setDefaults() {
	d := DefaultConfig()
	orDefault(&c.QueueSize, d.QueueSize)
	orDefault(&c.MaxInFlight, d.MaxInFlight)
	orDefault(&c.ScheduledInFlight, d.ScheduledInFlight)
	orDefault(&c.DefaultFlowTimeout, d.DefaultFlowTimeout)
	orDefault(&c.ShareTTL, d.ShareTTL)
	c.Limits.setDefaults()
	orDefault(&c.Files.MaxFiles, d.Files.MaxFiles)
	orDefault(&c.Files.MaxFileBytes, d.Files.MaxFileBytes)
	orDefault(&c.ThreadContext.Chars, d.ThreadContext.Chars)
	if c.Now == nil {
		c.Now = time.Now
	}
}

func (l *Limits) setDefaults() {
	d := DefaultConfig().Limits
	orDefault(&l.MaxMessageBytes, d.MaxMessageBytes)
	orDefault(&l.MaxParams, d.MaxParams)
	orDefault(&l.MaxValueBytes, d.MaxValueBytes)
	orDefault(&l.Burst, d.Burst)
}

// orDefault sets *v to def when it is zero or negative.
func orDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Bridge routes platform events to the AI workspace and replies.
type Bridge struct {
	cfg     Config
	log     *zap.Logger
	ws      Workspace
	store   Store
	metrics *Metrics
	set     settings    // what a reload replaces
	slots   slots       // bounds on the API calls running at once
	health  storeHealth // whether the store takes writes
	disp    *dispatcher // takes events in and runs them under their leases
	notices busyNotices // one "still working" notice per conversation and user
	// contextMu makes a context record's read and write one step, for
	// keepContext and the told mark of withContext, which a thread's
	// message makes on its parent's record outside the parent's order.
	contextMu sync.Mutex

	// ctx is the parent of all work; cancel cuts it off when the shutdown grace ends.
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex // guards the start of work against Shutdown, and the dispatcher's maps
	work workers
}

// settings are what SetCatalog, SetLimits and SetSchedules replace while the
// bridge runs; work already running keeps what it started with.
type settings struct {
	cat    atomic.Pointer[catalog]
	lim    atomic.Pointer[Limits]     // the limits in force
	limits atomic.Pointer[rateLimits] // their per-user buckets
	// schedules are listed for admins in /flow help.
	schedules atomic.Pointer[[]Scheduled]
}

// slots bound the API calls running at once: people's, and scheduled
// runs' apart, so that neither can starve the other.
type slots struct {
	api, scheduled chan struct{}
}

// storeHealth is whether the store takes writes, for readiness.
type storeHealth struct {
	fault  atomic.Pointer[storeFault] // set while the latest begun store write to end failed
	writes storeWrites                // numbers store writes, for fault
	outage outage                     // the probe of a failing store
}

// workers are the goroutines the bridge owns, and what ends them.
type workers struct {
	wg sync.WaitGroup
	// late counts the events recorded after Shutdown began, for the next
	// start to answer; Close waits for them.
	late sync.WaitGroup
	// handoff passes work to an idle worker goroutine; quit, closed by
	// Shutdown, sends idle workers home and says the bridge is closing.
	handoff chan func()
	quit    chan struct{}
}

// closingLocked reports whether Shutdown has begun; b.mu is held, so no
// work can start after Shutdown began.
func (b *Bridge) closingLocked() bool {
	select {
	case <-b.work.quit:
		return true
	default:
		return false
	}
}

// workerIdle is how long a worker goroutine waits for more work once its own
// is done. A new goroutine grows its stack afresh through the API client and
// JSON code, which under load was 5% of the bridge's CPU (pprof); a worker
// kept for a moment is reused with its stack already grown, and one that
// stays idle costs nothing once it is gone.
const workerIdle = 10 * time.Second

// New checks the catalog and returns a Bridge ready for Handle. It starts nothing
// until events arrive; call Shutdown to end it.
func New(cfg Config, ws Workspace, st Store, log *zap.Logger) (*Bridge, error) {
	if ws == nil || st == nil || log == nil {
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
		store:   st,
		metrics: cfg.Metrics,
		slots:   slots{api: make(chan struct{}, cfg.MaxInFlight), scheduled: make(chan struct{}, cfg.ScheduledInFlight)},
		ctx:     ctx,
		cancel:  cancel,
		work:    workers{handoff: make(chan func()), quit: make(chan struct{})},
	}
	b.disp = newDispatcher(b, st, cfg.Replicas)
	b.set.cat.Store(cat)
	b.SetLimits(cfg.Limits)
	return b, nil
}

// SetLimits replaces the limits on user input (on reload). Zero fields take
// their defaults. Per-user rate buckets start afresh.
func (b *Bridge) SetLimits(l Limits) {
	l.setDefaults()
	b.set.lim.Store(&l)
	b.set.limits.Store(newRateLimits(l, b.cfg.Now))
}

func (b *Bridge) limitsNow() Limits { return *b.set.lim.Load() }

// SetCatalog replaces the flows, agents and admins (on reload). Work already
// running keeps the definitions it started with.
func (b *Bridge) SetCatalog(flows []Flow, agents []Agent, admins []string) error {
	cat, err := newCatalog(flows, agents, admins)
	if err != nil {
		return err
	}
	b.set.cat.Store(cat)
	return nil
}

// Refused counts a platform event an adapter refused before it reached the
// core (an invalid ID, an unverifiable request), by reason, beside the
// core's own refusals.
func (b *Bridge) Refused(reason string) { b.metrics.refused(reason) }

// Flows returns the flows users may run, sorted by name.
func (b *Bridge) Flows() []Flow { return b.set.cat.Load().flowList() }

// Flow returns the flow with the given command word.
func (b *Bridge) Flow(name string) (Flow, bool) {
	f, ok := b.set.cat.Load().flows[strings.ToLower(name)]
	if !ok {
		return Flow{}, false
	}
	return *f, true
}

// Agents returns the agents, sorted by name.
func (b *Bridge) Agents() []Agent { return b.set.cat.Load().agentList() }

// job is an event with its route decided.
type job struct {
	ev Event
	// kind is the event's Kind, except that a message holding a text
	// command (!flow, !agent) is a KindCommand here.
	kind Kind
	// command is CommandFlow or CommandAgent for a KindCommand, else "".
	command string
	args    string   // command arguments
	rec     *Receipt // settled once the event is recorded: it may run when rec.err is nil
	// out, when set, is the answer a stopped process kept in the outbox:
	// the job posts it and runs nothing else.
	out *outbound
	// stop is what a Stop press did when it was recorded (markStop).
	stop *stopResult
}

// classify decides how an event is handled. Text commands (!flow, !agent) work
// in any message the bot reads, because Slack slash commands cannot be used in threads.
func classify(ev Event) job {
	switch ev.Kind {
	case KindAction, KindOpen, KindContext, KindTitle, KindScheduled:
		return job{ev: ev, kind: ev.Kind}
	case KindCommand:
		switch {
		case ev.Flow != "":
			return job{ev: ev, kind: KindCommand, command: CommandFlow}
		case ev.Command == CommandAgent:
			return job{ev: ev, kind: KindCommand, command: CommandAgent, args: ev.Text}
		}
		return job{ev: ev, kind: KindCommand, command: CommandFlow, args: ev.Text}
	}
	if cmd, rest := TextCommand(ev.Text); cmd != "" {
		return job{ev: ev, kind: KindCommand, command: cmd, args: rest}
	}
	return job{ev: ev, kind: KindMessage}
}

// TextCommand recognises a text command ("!flow …", "!agent …") at the start
// of a message and returns its command word (CommandFlow or CommandAgent) and
// arguments, or "" for a chat message. It is the one detector every adapter
// and the core use.
func TextCommand(text string) (command, args string) {
	text = strings.TrimSpace(text)
	if rest, ok := textCommand(text, "!flow"); ok {
		return CommandFlow, rest
	}
	if rest, ok := textCommand(text, "!agent"); ok {
		return CommandAgent, rest
	}
	return "", ""
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
	switch {
	case j.out != nil:
		return true
	case j.kind == KindMessage, j.kind == KindOpen, j.kind == KindContext, j.kind == KindTitle:
		return true
	case j.command == CommandAgent:
		sub, _, _ := strings.Cut(strings.TrimSpace(j.args), " ")
		return !strings.EqualFold(sub, "help") && sub != ""
	}
	return false
}

// inherited reports whether the job changes what the conversation's
// threads take from it when they have none of their own: what the user
// views beside it (an open or a context event; see withContext) or its
// agent ("/agent use"; see conversationAgent).
func (j job) inherited() bool {
	switch {
	case j.out != nil || j.ev.alone:
		return false
	case j.kind == KindOpen, j.kind == KindContext:
		return true
	case j.command == CommandAgent:
		sub, _, _ := strings.Cut(strings.TrimSpace(j.args), " ")
		return strings.EqualFold(sub, "use")
	}
	return false
}

// waitsForParent reports whether the job reads what its conversation
// inherits from its parent (Event.Parent), and so must not run before the
// parent's inherited jobs received before it have made their change (kept
// the context; an open event's greeting is not waited for).
//
// A thread is a conversation of its own, ordered apart from its parent:
// without this, a user who changes what they view (Slack's
// app_context_changed, acknowledged once recorded) and then asks in a
// thread of the DM may be answered about the old view, the thread's
// message having overtaken the DM's queued context event. The core orders
// the one against the other rather than writing the context when it is
// received: a context record has one writer at a time, its conversation's
// worker (or, among replicas, the holder of its lease), which keeps "told
// once per change" and the open event's greeting decided in the
// conversation's order, and it costs the acknowledgement no second write.
// The wait is only for the parent's inherited jobs, and what is queued
// before them: an agent_view DM queues nothing else, a channel in thread
// scope its "/agent" commands.
func (j job) waitsForParent() bool {
	return j.ev.Parent != "" && j.out == nil && !j.ev.alone && j.ordered()
}

// Receive takes an event from an adapter and returns at once, without
// waiting for the store: an adapter may call it from the loop that reads its
// platform's events. Events of one conversation that touch its session run
// one at a time in the order Receive was called; flows, help and button
// presses run beside them. An event with a Key is first recorded in the inbox
// (concurrent events share one write); the Receipt says when that is done and
// the platform may be acknowledged. A full conversation queue answers the
// user that it is busy; nothing is dropped in silence.
func (b *Bridge) Receive(ev Event) *Receipt {
	if ev.Kind == KindScheduled {
		// Only the core makes a scheduled run (RunScheduled): one handed in
		// by a platform would run a flow no access rule was asked about.
		return SettledReceipt(fmt.Errorf("bridge: %s event: %w", ev.Platform, errScheduledFromPlatform))
	}
	return b.receive(ev)
}

// errScheduledFromPlatform refuses a KindScheduled event an adapter
// handed in.
var errScheduledFromPlatform = errors.New("a scheduled run comes from the core only")

// receive is Receive for every event, the core's scheduled runs included.
func (b *Bridge) receive(ev Event) *Receipt {
	rec := newReceipt()
	if ev.Key == "" {
		// The same path for every event: one the platform gave no key of
		// its own (the console's lines) gets one no other event has.
		ev.Key = fmt.Sprintf("%s/local/%s/%d", ev.Platform, b.disp.cfg.Holder, b.disp.keys.Add(1))
	}
	p := b.disp.platform(ev.Platform)
	err := ErrNotAttached
	if p != nil {
		err = bind(p, &ev)
	} else if ev.Kind == KindScheduled {
		// Its adapter is still connecting: the run is recorded all the
		// same, and Attach takes it up with the platform's other work.
		err = nil
	}
	if err != nil {
		rec.settle(fmt.Errorf("bridge: %s event: %w", ev.Platform, err))
		rec.finish()
		return rec
	}
	b.metrics.event(ev.Platform, ev.Kind)
	ev.entry = &entry{key: ev.Key}
	j := classify(ev)
	j.rec = rec
	b.mu.Lock()
	defer b.mu.Unlock()
	if closing := b.closingLocked(); closing || p == nil {
		// Recorded and left Received: the next start answers it (or
		// Attach, for a platform not attached yet).
		b.work.late.Go(func() {
			err := b.record(&j)
			if err == nil && closing {
				err = ErrClosed
			}
			rec.settle(err)
			rec.finish()
		})
		return rec
	}
	b.disp.receiveLocked(&j)
	return rec
}

// busy answers an event its conversation's full queue cannot take. It is
// recorded first, so a platform retry of it is not answered a second time,
// and its entry is closed only once its user's busy notice was delivered.
func (b *Bridge) busy(j *job) {
	ev := j.ev
	defer j.rec.finish()
	defer b.disp.disown(ev.Key)
	if err := b.record(j); err != nil {
		j.rec.settle(err)
		return
	}
	j.rec.settle(ErrBusy)
	if j.kind == KindOpen || j.kind == KindContext || j.kind == KindTitle {
		// Nobody sent it: a platform's opening or a change of what the
		// user views, in a storm (Slack's Messages tab opened again and
		// again). Told "busy", its user would hear of messages they never
		// sent; the next change, or opening, brings the view anew.
		b.disp.alone(ev.Key, func() { b.answered(b.ctx, b.log, ev, "", nil) })
		return
	}
	// Not run when taken by another replica's sweep: that one answers it.
	b.disp.alone(ev.Key, func() {
		if b.keepBusy(b.ctx, b.log, ev) {
			if ref, told := b.tellBusy(ev); told {
				b.answered(b.ctx, b.log, ev, ref, nil)
			} else {
				b.keptBusy(b.log, ev)
			}
		}
	})
}

// goLocked runs f on an idle worker, or on a new one when none is idle. b.mu
// is held, so the goroutine is counted before Shutdown can wait.
func (b *Bridge) goLocked(f func()) {
	select {
	case b.work.handoff <- f:
	default:
		b.work.wg.Go(func() { b.worker(f) })
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
		case f = <-b.work.handoff:
		case <-idle.C:
			return
		case <-b.work.quit:
			return
		}
	}
}

// leave gives up on a job that was never started because the shutdown grace
// ended first.
func (b *Bridge) leave(j job) {
	j.rec.finish()
}

func (b *Bridge) run(j job) {
	// WithLazy: most events log nothing, so the fields are encoded only if they do.
	log := b.log.WithLazy(zap.String("platform", j.ev.Platform), zap.String("conversation", j.ev.Conversation), zap.String("user", j.ev.User.ID))
	defer j.rec.finish()
	defer func() {
		// A bug in one event's handling must not take the bridge down with it.
		if r := recover(); r != nil {
			log.Error("panic while handling event", zap.Any("panic", r), zap.Stack("stack"))
			b.answered(b.ctx, log, j.ev, "", nil)
		}
	}()
	ctx := b.ctx
	if startsWork(&j) && (j.kind != KindAction || j.ev.Action.ID == ActionConfirm) {
		var end func()
		ctx, end = b.disp.working(ctx, &j)
		defer end()
	}
	if j.out != nil {
		// Prepared and run by the process that kept the answer.
		if j.out.Busy {
			b.retellBusy(ctx, log, j.ev)
			return
		}
		b.post(ctx, log, j.ev, *j.out, true)
		return
	}
	// A scheduled run is the core's own event: its platform has nothing
	// to complete (no user to look up, no thread to check).
	if j.kind != KindScheduled && !b.prepare(ctx, log, &j.ev) {
		b.answered(ctx, log, j.ev, "", nil) // not for the bot, or its route is broken
		return
	}
	switch {
	case j.kind == KindScheduled:
		j.rec.outcome = b.runSchedule(ctx, log, j.ev)
	case j.kind == KindAction && j.ev.Action.ID == ActionStop:
		b.stopPressed(ctx, log, j)
	case j.kind == KindTitle:
		b.keepTitle(ctx, log, j.ev)
	case j.kind == KindMessage:
		b.chat(ctx, log, j.ev)
	case j.command == CommandFlow:
		b.flow(ctx, log, j.ev, j.args)
	case j.command == CommandAgent:
		b.agentCommand(ctx, log, j.ev, j.args)
	case j.kind == KindAction:
		b.action(ctx, log, j.ev)
	case j.kind == KindOpen:
		b.open(ctx, log, j.ev)
	case j.kind == KindContext:
		b.keepContext(ctx, log, j.ev)
	}
	// Whatever did not close its entry with a reply of its own is done now.
	b.answered(ctx, log, j.ev, "", nil)
}

// prepare has the event's platform complete it before it runs, and binds
// it anew when that changed its route (a thread started for the answer).
// It reports false when the event is not for the bot, or its new route
// cannot be answered.
func (b *Bridge) prepare(ctx context.Context, log *zap.Logger, ev *Event) bool {
	route := ev.Route
	if !ev.platform.Prepare(ctx, ev) {
		return false
	}
	if bytes.Equal(route, ev.Route) {
		return true
	}
	if err := bind(ev.platform, ev); err != nil {
		log.Error("event prepared with a route it cannot be answered by; dropped", zap.Error(err))
		return false
	}
	return true
}

// acquire takes an in-flight API slot, or reports false when all are taken.
func (b *Bridge) acquire() bool {
	select {
	case b.slots.api <- struct{}{}:
		b.metrics.inflight(1)
		return true
	default:
		b.metrics.refused("in_flight_limit")
		return false
	}
}

func (b *Bridge) release() {
	<-b.slots.api
	b.metrics.inflight(-1)
}

// send posts r directly, without the outbox: a working message (a flow's
// "Running…"), or a notice that must not wait on the path that failed
// (README, Delivery: what does not go through the outbox). A delivery
// failure is logged, never returned: by then the user cannot be told
// anything else either. Work cut off by the end of the shutdown grace
// still tells its user, on a fresh context bounded by noticeTimeout; a
// stopped run sends nothing more.
func (b *Bridge) send(ctx context.Context, ev Event, r Reply) MessageRef {
	if _, stopped := stoppedBy(ctx); stopped {
		return ""
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
		defer cancel()
	}
	ref, err := ev.reply.Send(ctx, r)
	if err != nil {
		b.log.Warn("reply not delivered", zap.String("platform", ev.Platform), zap.String("conversation", ev.Conversation), zap.Error(err))
	}
	return ref
}

// replace updates a sent message where the platform can, and sends otherwise.
func (b *Bridge) replace(ctx context.Context, ev Event, ref MessageRef, r Reply) MessageRef {
	if u, ok := ev.reply.(Updater); ok && ref != "" {
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
			defer cancel()
		}
		if err := u.Update(ctx, ref, r); err == nil {
			return ref
		} else {
			b.log.Debug("update failed; sending instead", zap.Error(err))
		}
	}
	return b.send(ctx, ev, r)
}

// Shutdown stops taking events and waits for work in flight. Events received
// from then on are recorded for the next start. When ctx ends first, the work
// still running is cancelled, its users are told (each notice bounded by
// noticeTimeout), the work not yet started stays in the inbox for the next
// start, and Shutdown returns ctx's error once that is done.
func (b *Bridge) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if !b.closingLocked() {
		close(b.work.quit)
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.work.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		b.cancel()
		<-done
		err = fmt.Errorf("shutdown: %w", ctx.Err())
	}
	b.disp.shutdown()
	b.cancel()
	return err
}

// ClosingSignal is closed when Shutdown begins: from then on no new work
// starts.
func (b *Bridge) ClosingSignal() <-chan struct{} { return b.work.quit }

// Close waits for the events recorded after Shutdown began. Call it after
// the adapters have stopped and before the store closes.
func (b *Bridge) Close() {
	b.work.late.Wait()
	b.health.outage.probes.Wait()
}
