package bridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// Errors a Receipt reports. The platform is acknowledged in every case but
// ErrNotSaved: the event is recorded, known, or its user has been told why
// not.
var (
	// ErrDuplicate means the inbox holds the event already: a platform retry
	// or redelivery, dropped.
	ErrDuplicate = errors.New("event delivered before")
	// ErrNotSaved means the inbox could not record the event (or cannot
	// tell whether it did: a write whose answer was lost). Its user was not
	// told: the adapter must not acknowledge it (Slack HTTP: an error
	// status; Socket Mode: no ack; Discord: no deferral), so the platform
	// delivers it again, and the inbox answers the event once either way.
	ErrNotSaved = errors.New("event not recorded")
)

// noticeTimeout bounds a notice sent after its work was cut off (shutdown) or
// cut short by a restart: the process is on its way out and must not hang on
// a slow platform.
const noticeTimeout = 1500 * time.Millisecond

// ackTimeout bounds an adapter's acknowledgement (Discord answers an
// interaction within 3 s or never).
const ackTimeout = 3 * time.Second

// Receipt tells an adapter when it may acknowledge an event to its platform.
type Receipt struct {
	once sync.Once
	done chan struct{}
	err  error

	finishOnce sync.Once
	finished   chan struct{}
	// outcome is why a scheduled run did not happen (runSchedule), set
	// before finished is closed; RunScheduled returns it.
	outcome error
}

func newReceipt() *Receipt {
	return &Receipt{done: make(chan struct{}), finished: make(chan struct{})}
}

// SettledReceipt returns a receipt settled with err and finished: what a
// core that has dealt with an event before it returns (an adapter test's
// stand-in for the bridge) hands back.
func SettledReceipt(err error) *Receipt {
	r := newReceipt()
	r.settle(err)
	r.finish()
	return r
}

// finish says the bridge has finished with the event here. The first call
// wins, as with settle.
func (r *Receipt) finish() {
	r.finishOnce.Do(func() { close(r.finished) })
}

// Finished is closed once this process has finished with the event:
// answered it, refused it, found it a duplicate, left it for the next start
// or for the replica that runs its conversation. The console takes one line
// at a time by it.
func (r *Receipt) Finished() <-chan struct{} { return r.finished }

// settle gives the receipt its outcome. The first call wins; a later one
// changes nothing, so no path can close done twice (issue 32's replica
// panic was a second settle of one receipt).
func (r *Receipt) settle(err error) {
	r.once.Do(func() {
		r.err = err
		close(r.done)
	})
}

// Wait blocks until the event is recorded in the inbox (one write shared
// with the events recorded at the same moment), found to be a duplicate, or
// refused with its user told, and returns which: nil (it will be answered),
// ErrDuplicate, ErrBusy, ErrClosed or ErrNotSaved. The platform should be
// acknowledged after Wait whatever it returns but ErrNotSaved, which it must
// deliver again. When ctx ends first, Wait returns ctx's error.
func (r *Receipt) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// entry follows one event's inbox entry. Only the goroutine running the
// event touches it.
type entry struct {
	key  string
	sent bool
	done bool
	// lease, with replicas, is the lease the entry runs under: it is
	// marked sent only while this process holds it. leaseLost says that
	// it did not, and the entry was left to the lease's next holder.
	lease     string
	leaseLost bool
	// stoppedBy is who stopped the entry, as the inbox read it.
	stoppedBy string
}

// storedEvent is an Event as the inbox keeps it: what it takes to run the
// event again after a restart, without the adapter's live callbacks.
type storedEvent struct {
	Kind           Kind              `json:"kind"`
	Platform       string            `json:"platform"`
	Conversation   string            `json:"conversation"`
	Parent         string            `json:"parent,omitempty"`
	Team           string            `json:"team,omitempty"`
	Channel        string            `json:"channel,omitempty"`
	User           User              `json:"user"`
	Text           string            `json:"text,omitempty"`
	Command        string            `json:"command,omitempty"`
	Action         Action            `json:"action,omitzero"`
	Flow           string            `json:"flow,omitempty"`
	Params         map[string]string `json:"params,omitempty"`
	MaxFlowTimeout time.Duration     `json:"max_flow_timeout,omitempty"`
	Route          json.RawMessage   `json:"route,omitempty"`
	Files          []Attachment      `json:"files,omitempty"`
	Alone          bool              `json:"alone,omitempty"`
	Schedule       string            `json:"schedule,omitempty"`
	GiveUp         int64             `json:"give_up,omitempty"`
	Missed         bool              `json:"missed,omitempty"`
}

// encodeEvent returns ev as the inbox keeps it: the JSON of its
// storedEvent (appendStoredEvent writes it without reflection).
func encodeEvent(ev Event) ([]byte, error) {
	return appendStoredEvent(make([]byte, 0, 256+len(ev.Text)+len(ev.Route)), ev)
}

func decodeEvent(key string, data []byte) (Event, error) {
	var s storedEvent
	if err := json.Unmarshal(data, &s); err != nil {
		return Event{}, fmt.Errorf("inbox entry %q: %w", key, err)
	}
	return Event{
		Kind: s.Kind, Platform: s.Platform, Conversation: s.Conversation, Parent: s.Parent, Team: s.Team, Channel: s.Channel,
		User: s.User, Text: s.Text, Command: s.Command, Action: s.Action, Flow: s.Flow, Params: s.Params,
		MaxFlowTimeout: s.MaxFlowTimeout, Route: s.Route, Key: key, Files: s.Files, alone: s.Alone,
		schedule: s.Schedule, giveUp: s.GiveUp, missed: s.Missed,
	}, nil
}

// record writes the job's event to the inbox and, when it is new,
// acknowledges it through its platform. It returns nil when the event may run.
func (b *Bridge) record(j *job) error {
	ev := j.ev
	if ev.Key == "" {
		return b.ack(ev)
	}
	if j.kind == KindAction && ev.Action.ID == ActionStop {
		// Marked before the press is recorded, so that the notification
		// its record brings other replicas finds the mark (see stop.go).
		res, err := b.markStop(recordCtx(b.ctx), ev)
		if err != nil {
			return b.notRecorded(ev, err)
		}
		j.stop = &res
	}
	data, err := encodeEvent(ev)
	if err == nil {
		var fresh bool
		began := b.cfg.Now()
		err = b.noteWrite(func() (err error) {
			fresh, err = b.store.Receive(recordCtx(b.ctx), b.inboxEntry(ev, data))
			return err
		})
		if err == nil {
			// How long recording takes sizes the order hold (orderhold.go).
			b.disp.records.add(began, b.cfg.Now().Sub(began))
		}
		if err == nil && !fresh {
			b.metrics.deduplicated(ev.Platform)
			return ErrDuplicate
		}
	}
	if err != nil {
		return b.notRecorded(ev, err)
	}
	return b.ack(ev)
}

// notRecorded logs an event the inbox could not record and returns
// ErrNotSaved: the platform is not acknowledged and delivers it again. Its
// user is told nothing, since a retry may well be answered (or the write
// may have taken after all, and the event be answered from the inbox).
func (b *Bridge) notRecorded(ev Event, err error) error {
	// Once the store answers again, the adapters read again what was
	// refused (Discord's channels; see OnStoreRecovered): a probe must
	// run for that even when a write begun later has succeeded meanwhile
	// and so no fault is in force (a connection cut under one write only).
	b.probeStore()
	b.log.Error("event not recorded; left to the platform's retry", zap.String("platform", ev.Platform), zap.String("conversation", ev.Conversation), zap.String("event_key", ev.Key), zap.Error(err))
	b.metrics.storeFailed("receive")
	return ErrNotSaved
}

// inboxEntry is ev's inbox entry, its event encoded as data.
func (b *Bridge) inboxEntry(ev Event, data []byte) store.InboxEntry {
	now := b.cfg.Now()
	return store.InboxEntry{Key: ev.Key, Conversation: ev.Conversation, Order: cmp.Or(ev.Order, now.UnixMicro()), Event: data, Received: now}
}

// ack runs the platform's acknowledgement. A failed one is logged: the
// event is recorded and runs all the same, and its reply tells the user more
// than a missing acknowledgement would.
func (b *Bridge) ack(ev Event) error {
	if ev.Kind == KindScheduled {
		// The core's own: no platform delivered it, and none may have
		// attached yet (see receive).
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), ackTimeout)
	defer cancel()
	if err := ev.platform.Acknowledge(ctx, ev); err != nil {
		b.log.Warn("event not acknowledged", zap.String("platform", ev.Platform), zap.String("event_key", ev.Key), zap.Error(err))
	}
	return nil
}

// markSent records that ev's request is about to leave for the workspace, so
// that a crash from here on never sends it twice. It reports false when that
// could not be recorded: the request must then not be sent. While the store
// fails, it retries as long as the conversation is this process's (its
// lease, with replicas) and the bridge runs; when it gives up, the entry
// stays in the inbox for whoever runs the conversation next, and the user
// is told nothing that is not so.
func (b *Bridge) markSent(ctx context.Context, log *zap.Logger, ev Event) bool {
	e := ev.entry
	if e == nil || e.sent || e.done {
		return true
	}
	mark := func() error { return b.disp.markSent(ctx, e) }
	keep := func() bool { return b.disp.holds(e) }
	// After a failed attempt, "sent already" under a lease this process
	// kept throughout is that attempt's own write, committed though its
	// answer was lost: no other process could mark it.
	taken := func(err error) bool { return errors.Is(err, store.ErrAlreadySent) && keep() }
	err := b.retryStore(ctx, log, "mark_sent", mark, taken, keep)
	if errors.Is(err, store.ErrLeaseLost) {
		// This process stalled past its lease (or could not renew it):
		// another may be running the conversation now, so sending would
		// break its order. The entry stays received for the lease's holder.
		log.Warn("lease lapsed before the request left; not sent, left to the lease's holder", zap.String("event_key", e.key), zap.String("lease", e.lease))
		e.done, e.leaseLost = true, true
		b.disp.letGo(e) // so that it is claimed again before anything else runs under it
		return false
	}
	if errors.Is(err, store.ErrAlreadySent) {
		// Another process (a replica, or one started while this one was
		// answering) sent it or answered it: it is that one's to answer,
		// so this one neither sends nor closes the entry.
		log.Info("event taken by another process; not sent", zap.String("event_key", e.key))
		e.done = true
		return false
	}
	if err != nil && (e.lease != "" || ctx.Err() != nil) {
		// The store is still down and the lease has lapsed, or the
		// shutdown grace is over: the entry, still received (or sent by a
		// write whose answer was lost), is answered by whoever runs the
		// conversation next (the lease's next holder, or the next start),
		// so telling its user "not taken" would be untrue.
		log.Warn("inbox state not recorded; request not sent, left in the inbox", zap.String("event_key", e.key), zap.Error(err))
		e.done, e.leaseLost = true, true
		b.disp.letGo(e)
		return false
	}
	if err != nil {
		log.Error("inbox state not recorded; request not sent", zap.Error(err))
		b.metrics.storeFailed("mark_sent")
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgNotSaved})
		return false
	}
	e.sent = true
	return true
}

// recordCtx is the context of a store write that records what happened (an
// event received, a request about to leave, an entry closed, an answer
// kept, an audit entry): ctx's
// values without its end, so that work cut off when the shutdown grace ends
// still leaves its record, as the next start needs it. The store bounds the
// call itself (PostgreSQL's Options.Timeout; a bbolt commit is local).
func recordCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// answered closes ev's inbox entry with its reply and applies turn (a chat
// answer's session and text) in the same write. Events without an entry save
// only the turn.
func (b *Bridge) answered(ctx context.Context, log *zap.Logger, ev Event, ref MessageRef, turn *Turn) {
	e := ev.entry
	if e == nil {
		if turn != nil {
			if _, err := b.store.PutTurns(recordCtx(ctx), []Turn{*turn}); err != nil {
				log.Warn("turn not recorded", zap.Error(err))
				b.metrics.storeFailed("put_turns")
			}
		}
		return
	}
	if e.done {
		return
	}
	e.done = true
	finish := func() error { return b.store.Finish(recordCtx(ctx), e.key, string(ref), turn, b.cfg.Now()) }
	// After a failed attempt, an entry no longer pending is that attempt's
	// own write, committed though its answer was lost.
	taken := func(error) bool { return b.disp.answeredAlready(e.key) }
	err := b.retryStore(b.ctx, log, "finish", finish, taken, func() bool { return true })
	if err != nil {
		// The user has the answer; what is lost is the turn and, after a
		// crash, a needless "restarted while answering" notice.
		log.Warn("inbox entry not closed", zap.Error(err))
		b.metrics.storeFailed("finish")
	}
}

// Attach registers an adapter's Platform under its name and hands the
// platform's unfinished events from before a restart to the dispatcher. An
// adapter calls it once it can answer and before it hands the core events:
// the core refuses events of a platform not attached, and the unfinished
// ones queue ahead of new ones. Events still Received run as if just
// delivered; events already Sent are never sent again: their answers, when
// the outbox kept them, are posted (once), and otherwise their users are
// told flowbridge restarted while answering. Later calls for the same platform
// find nothing more.
//
// Attach takes up the platform's work that no live process holds a lease
// on (on bbolt, all of it; among replicas, entries a live replica is
// answering are left to it) and returns how many entries it found to run
// (resumed, answers kept included) and to tell.
func (b *Bridge) Attach(platform string, p Platform) (resumed, told int, err error) {
	return b.disp.attach(platform, p)
}

// tellRestartedNow is tellRestarted on the caller's goroutine.
func (b *Bridge) tellRestartedNow(log *zap.Logger, ev Event) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 10*time.Second)
	defer cancel()
	text := msgRestartedChat
	name, isFlow := flowOf(ev)
	if isFlow {
		shown := "your flow"
		if name != "" {
			shown = "*" + name + "*"
		}
		text = fmt.Sprintf(msgRestartedFlow, shown)
		if ev.Kind == KindScheduled {
			text = fmt.Sprintf(msgRestartedSchedule, ev.schedule, name)
		}
		entry := b.auditEntry(ev, cmp.Or(name, "your flow"), ev.Params)
		entry.Outcome = OutcomeInterrupted
		b.audit(ctx, log, entry)
	}
	// A chat message's notice stands in for its answer, which everyone in
	// the conversation would have seen: it is posted as the answer would
	// be, where a later send can find it (Reply.Once), not as an ephemeral
	// message, which on Slack nothing can find, so that a process stopped
	// after posting it does not have the next one show it twice. A flow's
	// stays with the user who ran it, as its result would (on Slack a
	// slash command's re-post replaces it through its response_url).
	// A scheduled run's is for its channel, as its result would have been.
	public := classify(ev).kind == KindMessage || ev.Kind == KindScheduled
	b.deliver(ctx, log, ev, "", Reply{Kind: ReplyError, Ephemeral: !public, Text: text}, nil)
}

// storeFault is the latest failed store write, for readiness.
type storeFault struct {
	err   error
	since time.Time
}

// storeWrites numbers store writes as they begin, so that the outcome kept
// for readiness is that of the latest begun write to end. Concurrent writes
// end in any order: a success reported late, by a write (or a commit
// shared with it) begun before the disk refused, must not clear the fault
// of a write begun after it, nor a late failure set one after a later
// write succeeded.
type storeWrites struct {
	begun  atomic.Uint64
	mu     sync.Mutex
	latest uint64 // the number of the write whose outcome fault holds
}

// noteWrite runs a store write and keeps its outcome for readiness
// (noteStore), numbered before it begins; it returns write's error.
func (b *Bridge) noteWrite(write func() error) error {
	w := b.writeBegins()
	err := write()
	b.noteStore(w, err)
	return err
}

// writeBegins numbers a store write about to begin, for noteStore.
func (b *Bridge) writeBegins() uint64 { return b.health.writes.begun.Add(1) }

// noteStore keeps the outcome of store write w (numbered by writeBegins):
// a failure makes StoreReady fail until a write begun later succeeds or
// the store answers a probe. The outcome of a write begun before the one
// kept is stale, and dropped.
func (b *Bridge) noteStore(w uint64, err error) {
	if errors.Is(err, context.Canceled) {
		// Work cut off (the shutdown grace ended) says nothing of the store.
		return
	}
	if f, _ := b.keepOutcome(w, err); f != nil && err != nil {
		b.probeStore()
	}
}

// keepOutcome is noteStore's bookkeeping: it returns the fault in force
// after write w's outcome err, and the fault it cleared, if any.
func (b *Bridge) keepOutcome(w uint64, err error) (fault, cleared *storeFault) {
	b.health.writes.mu.Lock()
	defer b.health.writes.mu.Unlock()
	f := b.health.fault.Load()
	if w < b.health.writes.latest {
		return f, nil
	}
	b.health.writes.latest = w
	switch {
	case err == nil && f != nil:
		b.health.fault.Store(nil)
		return nil, f
	case err != nil && f == nil:
		f = &storeFault{err: err, since: b.cfg.Now()}
		b.health.fault.Store(f)
	}
	return f, nil
}

// StoreReady reports whether the store takes writes: an error from the
// latest write, until one succeeds again. A bridge that cannot record events
// takes none (their users are told), so it must not be sent traffic.
func (b *Bridge) StoreReady() error {
	if f := b.health.fault.Load(); f != nil {
		return fmt.Errorf("store writes failing since %s: %w", f.since.UTC().Format(time.RFC3339), f.err)
	}
	return nil
}
