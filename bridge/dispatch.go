package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// ReplicaConfig tunes how replicas sharing a store (a store.Shared) split
// the work. Zero values take the defaults.
type ReplicaConfig struct {
	// Holder names this process in its leases (default: the host name, the
	// process ID and a random suffix, so a restarted process inherits none).
	Holder string
	// LeaseTTL is how long a lease lasts unless renewed (default
	// DefaultConfig's, at least 30ms): how long a dead replica's conversations wait for
	// another. Leases are renewed every third of it.
	LeaseTTL time.Duration
	// SweepEvery is how often unleased work is looked for (default a third of LeaseTTL).
	SweepEvery time.Duration
	// ClaimGrace is how old an entry must be before a replica that did not
	// record it takes it without being signalled (default DefaultConfig's): the
	// recording replica claims it in far less.
	ClaimGrace time.Duration
	// OrderHold is how long, at least, the holder of a conversation's
	// lease lets an entry it has just seen wait before running it while
	// another replica is live (0: never), so that an earlier message of
	// the conversation that the other replica is recording at the same
	// moment is seen too, and runs first in the platform's order. The
	// holder adds how long its own recent inbox writes took (see
	// orderhold.go). A process alone never waits. It delays the first
	// message of a burst; the others wait for that one anyway.
	OrderHold time.Duration
}

func (c *ReplicaConfig) setDefaults() {
	if c.Holder == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	d := DefaultConfig().Replicas
	orDefault(&c.LeaseTTL, d.LeaseTTL)
	c.LeaseTTL = max(c.LeaseTTL, 30*time.Millisecond) // renewed every third of it
	if c.SweepEvery <= 0 {
		c.SweepEvery = c.LeaseTTL / 3
	}
	orDefault(&c.ClaimGrace, d.ClaimGrace)
}

// dispatcher takes events in and runs them, on every store: the
// conversations this process records or runs, the leases it holds, and the
// loops that renew them and find work. One process on bbolt is the
// one-replica case of it (every lease it claims is granted); replicas on
// PostgreSQL compete for the leases. Its maps are guarded by Bridge.mu.
type dispatcher struct {
	b   *Bridge
	st  store.Store
	cfg ReplicaConfig

	convs map[string]*leasedConv
	held  map[string]time.Time // lease name -> when it lapses unless renewed
	// alones are the entries this process runs on their own (runAlone,
	// busy) from before they are recorded until they are done: the
	// conversation's holder here leaves them be, since a lease does not
	// tell apart two goroutines of one holder.
	alones    map[string]bool
	platforms map[string]Platform // by name, from Attach
	// running are the runs under way here that a Stop cancels, by entry key.
	running map[string]*runningWork
	// stopChecks are the conversations whose stops are being read
	// (checkStopsLocked): true when a notification came meanwhile.
	stopChecks map[string]bool
	// keys numbers the keys given to events that came without one.
	keys atomic.Uint64
	// peers and records size the order hold (orderhold.go).
	peers   peerView
	records recordTimes

	start sync.Once
	stop  context.CancelFunc // ends the loops
	loops sync.WaitGroup
	sweep chan struct{} // asks the loop for a sweep now
}

// leasedConv is one conversation this process records events for or runs.
type leasedConv struct {
	key       string
	recording []*job          // in Receive order; the first is being recorded
	recorder  bool            // a goroutine records them (recordInOrder)
	refusing  int             // busy refusals of it being told
	live      map[string]*job // recorded here, by entry key, with the adapter's callbacks
	running   bool            // a process goroutine works on it
	again     bool            // signalled while running: look at the inbox once more
}

// storeOpTimeout bounds one store call of the replica machinery.
const storeOpTimeout = 10 * time.Second

func newDispatcher(b *Bridge, st store.Store, cfg ReplicaConfig) *dispatcher {
	cfg.setDefaults()
	return &dispatcher{
		b: b, st: st, cfg: cfg,
		convs:      make(map[string]*leasedConv),
		held:       make(map[string]time.Time),
		alones:     make(map[string]bool),
		platforms:  make(map[string]Platform),
		running:    make(map[string]*runningWork),
		stopChecks: make(map[string]bool),
		sweep:      make(chan struct{}, 1),
	}
}

// opCtx is the context of one store call: bounded, and not cut by the end
// of the shutdown grace (a lease is still released then).
func (r *dispatcher) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.b.ctx), storeOpTimeout)
}

// startReplicas starts the loops that renew leases, listen for new entries
// and sweep for unleased work, once.
func (r *dispatcher) startReplicas() {
	b := r.b
	r.start.Do(func() {
		ctx, cancel := context.WithCancel(context.WithoutCancel(b.ctx))
		r.stop = cancel
		r.loops.Go(func() { r.heartbeat(ctx) })
		r.loops.Go(func() { r.listen(ctx) })
		b.log.Info("sharing the store with other replicas", zap.String("holder", r.cfg.Holder), zap.Duration("lease_ttl", r.cfg.LeaseTTL))
	})
}

// stopReplicas ends the loops, once no work of this process holds a lease.
func (r *dispatcher) stopReplicas() {
	r.start.Do(func() {}) // never start them after this
	if r.stop != nil {
		r.stop()
	}
	r.loops.Wait()
	r.leavePeers()
}

// heartbeat renews the leases this process holds every third of their
// TTL, and looks for unleased work every SweepEvery or when asked.
func (r *dispatcher) heartbeat(ctx context.Context) {
	renew := time.NewTicker(r.cfg.LeaseTTL / 3)
	defer renew.Stop()
	sweep := time.NewTicker(r.cfg.SweepEvery)
	defer sweep.Stop()
	peers := time.NewTicker(r.peersEvery())
	defer peers.Stop()
	r.lookAtPeers(ctx)
	r.sweepUnleased(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-peers.C:
			r.lookAtPeers(ctx)
		case <-renew.C:
			r.renewLeases(ctx)
		case <-sweep.C:
			r.sweepUnleased(ctx)
		case <-r.sweep:
			r.sweepUnleased(ctx)
		}
	}
}

func (r *dispatcher) renewLeases(ctx context.Context) {
	b := r.b
	b.mu.Lock()
	names := make([]string, 0, len(r.held))
	was := make(map[string]time.Time, len(r.held))
	for n, until := range r.held {
		names = append(names, n)
		was[n] = until
	}
	b.mu.Unlock()
	if len(names) == 0 {
		return
	}
	at := r.b.cfg.Now()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.LeaseTTL/3)
	defer cancel()
	renewed, err := r.st.Renew(ctx, r.cfg.Holder, names, r.cfg.LeaseTTL)
	if err != nil {
		// Each lease lapses at its own deadline unless a later renewal
		// succeeds; the work under it stops before its next step.
		b.log.Warn("leases not renewed", zap.Int("leases", len(names)), zap.Error(err))
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// A lease released or claimed afresh meanwhile (its deadline changed)
	// is left as it is now.
	kept := make(map[string]bool, len(renewed))
	for _, n := range renewed {
		kept[n] = true
		if until, ok := r.held[n]; ok && until.Equal(was[n]) {
			r.held[n] = at.Add(r.cfg.LeaseTTL)
		}
	}
	for _, n := range names {
		if until, ok := r.held[n]; ok && !kept[n] && until.Equal(was[n]) {
			b.log.Warn("lease lost to another replica", zap.String("lease", n))
			delete(r.held, n)
		}
	}
}

// sweepUnleased starts work on the conversations whose entries no live
// replica holds: those of a replica that died, or that a missed signal
// left waiting.
func (r *dispatcher) sweepUnleased(ctx context.Context) {
	b := r.b
	b.mu.Lock()
	closed := b.closingLocked()
	b.mu.Unlock()
	if closed {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	convs, err := r.st.Unleased(ctx, r.cfg.ClaimGrace, 1000)
	if err != nil {
		b.log.Warn("unleased work not looked for", zap.Error(err))
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closingLocked() {
		return
	}
	for _, key := range convs {
		r.kickLocked(r.conv(key))
	}
}

// listen keeps a Listen running, so the holder of a conversation's lease
// learns at once of an entry another replica recorded.
func (r *dispatcher) listen(ctx context.Context) {
	b := r.b
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		began := r.b.cfg.Now()
		err := r.st.Listen(ctx, func(conv string) {
			if conv == "" {
				select { // notifications may have been missed
				case r.sweep <- struct{}{}:
				default:
				}
				return
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			// Only a running holder needs telling: a replica that records an
			// entry claims the conversation itself, and a holder that stops
			// looks at the inbox once more after it lets go (see process).
			if c := r.convs[conv]; c != nil && c.running {
				c.again = true
			}
			// A Stop recorded by another replica marks its target
			// before its own record brings this notification.
			if r.runsInLocked(conv) {
				r.checkStopsLocked(ctx, conv)
			}
		})
		if err == nil || ctx.Err() != nil {
			return
		}
		if r.b.cfg.Now().Sub(began) > time.Minute {
			wait = 100 * time.Millisecond
		}
		b.log.Warn("not listening for new inbox entries; retrying", zap.Duration("in", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (r *dispatcher) conv(key string) *leasedConv {
	c := r.convs[key]
	if c == nil {
		c = &leasedConv{key: key, live: make(map[string]*job)}
		r.convs[key] = c
	}
	return c
}

// dropIdleLocked forgets c once nothing of it is left in this process.
func (r *dispatcher) dropIdleLocked(c *leasedConv) {
	if !c.running && !c.recorder && c.refusing == 0 && len(c.recording) == 0 && len(c.live) == 0 && r.convs[c.key] == c {
		delete(r.convs, c.key)
		r.b.notices.forget(c.key)
	}
}

// receiveLeasedLocked takes an event of a conversation's order: it is
// recorded in Receive order with the conversation's other events of this
// process, then run by whichever process holds the conversation's lease
// (on bbolt, this one), in the inbox's order.
func (r *dispatcher) receiveLeasedLocked(j *job) {
	b := r.b
	r.startReplicas()
	c := r.conv(j.ev.Conversation)
	if len(c.recording)+len(c.live) >= b.cfg.QueueSize {
		b.metrics.refused("queue_full")
		j.ev.alone = true
		r.alones[j.ev.Key] = true
		// The conversation stays known while its refusals are told, so
		// that they share its one busy notice: forgotten earlier (its
		// worker done, as at a shutdown), a late refusal would send a
		// notice of its own.
		c.refusing++
		b.work.wg.Go(func() {
			b.busy(j)
			b.mu.Lock()
			c.refusing--
			r.dropIdleLocked(c)
			b.mu.Unlock()
		})
		return
	}
	c.recording = append(c.recording, j)
	if !c.recorder {
		c.recorder = true
		b.work.wg.Go(func() { r.recordInOrder(c) })
	}
}

// recordInOrder records c's events one after another, so that the inbox's
// order (Seq) is the order Receive took them in, and signals the
// conversation's work after each. It is c's one recorder (c.recorder) from
// when it is started until it finds the list empty, under the same hold of
// b.mu that lets the next Receive start another: two recorders of one list
// would settle its first receipt twice.
func (r *dispatcher) recordInOrder(c *leasedConv) {
	b := r.b
	b.mu.Lock()
	for len(c.recording) > 0 {
		j := c.recording[0]
		b.mu.Unlock()
		err := b.record(j)
		j.rec.settle(err)
		b.mu.Lock()
		c.recording[0] = nil
		c.recording = c.recording[1:]
		if err == nil {
			c.live[j.ev.Key] = j
			r.kickLocked(c)
		} else {
			j.rec.finish()
		}
	}
	c.recorder = false
	r.dropIdleLocked(c)
	b.mu.Unlock()
}

// recordingKey reports whether this process is recording the event key
// of c; b.mu is held.
func (c *leasedConv) recordingKey(key string) bool {
	for _, j := range c.recording {
		if j != nil && j.ev.Key == key {
			return true
		}
	}
	return false
}

// kickLocked makes sure c's inbox entries are looked at: by its running
// process goroutine once more, or by a new one.
func (r *dispatcher) kickLocked(c *leasedConv) {
	b := r.b
	if c.running {
		c.again = true
		return
	}
	c.running = true
	b.goLocked(func() { r.process(c) })
}

// holdsLocked reports whether this process holds the lease name and may
// still count on it.
func (r *dispatcher) holdsLocked(name string) bool {
	until, ok := r.held[name]
	return ok && r.b.cfg.Now().Before(until)
}

// claimLease takes the lease name for this process and reports whether it has it.
func (r *dispatcher) claimLease(name string) bool {
	b := r.b
	ctx, cancel := r.opCtx()
	defer cancel()
	at := r.b.cfg.Now()
	ok, err := r.st.Claim(ctx, name, r.cfg.Holder, r.cfg.LeaseTTL)
	if err != nil {
		b.log.Warn("lease not claimed", zap.String("lease", name), zap.Error(err))
		return false
	}
	if ok {
		b.mu.Lock()
		r.held[name] = at.Add(r.cfg.LeaseTTL)
		b.mu.Unlock()
	} else {
		r.othersSeen() // another holds it
	}
	return ok
}

// releaseLease gives up the lease name.
func (r *dispatcher) releaseLease(name string) {
	b := r.b
	b.mu.Lock()
	delete(r.held, name)
	b.mu.Unlock()
	ctx, cancel := r.opCtx()
	defer cancel()
	if err := r.st.Release(ctx, name, r.cfg.Holder); err != nil {
		// It lapses at the end of its TTL instead.
		b.log.Warn("lease not released", zap.String("lease", name), zap.Error(err))
	}
}

// process runs c's entries under c's lease, in the inbox's order, until
// none is left, then lets the lease go. When another replica holds the
// lease, the entries are that one's to run, and this process lets go of
// its own events of c.
func (r *dispatcher) process(c *leasedConv) {
	b := r.b
	log := b.log.With(zap.String("conversation", c.key))
	handled := make(map[string]bool) // run or set aside by this goroutine
	var wait time.Duration           // awaitOwn's backoff
	var seen map[string]time.Time    // when this goroutine first saw each pending entry
	var pw parentWait                // the wait of an entry for its parent's
	var readWait time.Duration       // backoff of failed reads of the inbox
	var recWait time.Duration        // the wait for an earlier entry recorded here
	for {
		b.mu.Lock()
		c.again = false
		holds := r.holdsLocked(c.key)
		b.mu.Unlock()
		if b.ctx.Err() != nil {
			// The shutdown grace has ended: what is left is the others'.
			r.endProcess(c)
			return
		}
		if !holds && (!r.runsNext(c, handled) || !r.claimLease(c.key)) {
			// Left to a replica that runs the platform, or to the
			// lease's holder. An event recorded since the claim failed (c.again): the
			// holder may have let go before it was committed, so claim
			// once more. A holder that still has the lease then looks at
			// the inbox after letting go, and finds it.
			// While events this process recorded are still unanswered,
			// it waits for the lease rather than let them go at once: the
			// holder lets go once it has drained, and its own adapter's
			// callbacks (the console's end of a line) then follow the
			// answer, not the hand-over.
			if d := r.awaitOwn(c, &wait); d > 0 {
				r.pause(d)
				continue
			}
			if r.endUnlessAgain(c) {
				continue
			}
			return
		}
		wait = 0
		ctx, cancel := r.opCtx()
		entries, err := r.st.PendingOf(ctx, c.key)
		cancel()
		if err != nil {
			b.mu.Lock()
			closing := b.closingLocked()
			b.mu.Unlock()
			if closing {
				log.Warn("pending entries not read while shutting down; left for the next start", zap.Error(err))
				r.endProcess(c)
				return
			}
			// A store fault (a database restarted, a connection cut): the
			// lease stays this process's (the heartbeat renews it once the
			// store answers; a lapsed one is claimed again above), and the
			// inbox is read again. Ending here left the lease to lapse
			// unreleased and the conversation to a sweep after it: its
			// messages waited LeaseTTL longer than the fault.
			readWait = min(max(2*readWait, 50*time.Millisecond), 2*time.Second)
			log.Warn("pending entries not read; reading again", zap.Duration("in", readWait), zap.Error(err))
			r.pause(readWait)
			continue
		}
		readWait = 0
		var hold time.Duration
		if seen, hold = r.orderHold(entries, handled, seen); hold > 0 {
			r.pause(hold)
			continue // read again: an earlier entry may have come in
		}
		j, next := r.nextEntry(log, c, entries, handled)
		switch next {
		case entryRun:
			recWait = 0
			if d := r.parentFirst(log, j, entries, &pw); d > 0 {
				// Kept for the next look, with the adapter's callbacks.
				b.mu.Lock()
				c.live[j.ev.Key] = j
				b.mu.Unlock()
				r.pause(d)
				continue
			}
			b.mu.Lock()
			holds = r.holdsLocked(c.key)
			closed := b.closingLocked()
			b.mu.Unlock()
			if closed && startsWork(j) {
				// Shutting down: only work already under way gets the
				// grace. The entry stays received, for the next start or
				// another replica, and its user is told nothing untrue.
				log.Debug("shutting down; the next message is left for the next start", zap.String("event_key", j.ev.Key))
				j.rec.finish()
				r.endProcess(c)
				return
			}
			if !holds {
				// The lease lapsed (renewals went unanswered): the entry,
				// still pending, is whoever's claims the conversation next.
				log.Warn("conversation lease lapsed; its work is left to the next holder")
				j.rec.finish()
				r.endProcess(c)
				return
			}
			handled[j.ev.Key] = true
			j.ev.entry.lease = c.key
			r.runTaken(log, j)
			if j.ev.entry.leaseLost {
				// Not sent: whoever holds the lease now runs it, this
				// process too if it claims the lease again.
				delete(handled, j.ev.Key)
			}
			continue
		case entryStop:
			r.endProcess(c)
			return
		case entryWait:
			recWait = min(max(2*recWait, time.Millisecond), 20*time.Millisecond)
			r.pause(recWait)
			continue
		}
		b.mu.Lock()
		again := c.again
		b.mu.Unlock()
		if again {
			continue
		}
		// Drained. An entry another replica recorded while this one held
		// the lease, and whose signal came too late, is found by one more
		// look once the lease is free: that replica's own claim failed.
		r.releaseLease(c.key)
		ctx, cancel = r.opCtx()
		entries, err = r.st.PendingOf(ctx, c.key)
		cancel()
		if err == nil && hasWork(entries, handled) && b.ctx.Err() == nil {
			continue
		}
		if r.endUnlessAgain(c) {
			continue
		}
		return
	}
}

// startsWork reports whether running j would start work in the AI
// workspace: not an answer kept in the outbox, nor an entry sent already
// (its user is told), nor a busy refusal.
func startsWork(j *job) bool {
	return j.out == nil && (j.ev.entry == nil || !j.ev.entry.sent)
}

// parentWait is how a thread's entry has waited for its parent's earlier
// inherited entries (see parentFirst).
type parentWait struct {
	key   string // the entry waiting
	since time.Time
	poll  time.Duration // until the next look
}

// How often a thread's entry looks again at its parent's entries while it
// waits for them: soon at first (an open or a context event takes a few
// milliseconds), then less often.
const (
	parentPollMin = 5 * time.Millisecond
	parentPollMax = 200 * time.Millisecond
)

// parentFirst returns how long j, the next entry of its conversation, must
// wait before it may run because its parent still has inherited entries
// (open, context, "/agent use"; see job.inherited) received before it,
// and 0 when it may run: the rule of job.waitsForParent.
//
// The parent's entries may be another replica's to run, so j's holder
// does not wait on them in memory: it reads the parent's pending entries
// from the inbox, and those recorded
// before j's (a lower Seq: acknowledged before j was received, they were
// committed before it) and still Received hold j back. A Sent one has
// made its change already (it writes before it answers). The holder kicks
// the parent's processing here once, so that a parent nobody holds (its
// replica died, or its signal was missed) is run at once rather than
// after a sweep; one another replica holds is left to it. The wait ends,
// logged, after LeaseTTL+SweepEvery+ClaimGrace, by when a dead holder's
// parent has been taken up by a live replica: a parent that is stuck
// longer does not hold its threads' messages for ever, which are then
// answered without what it would have told.
func (r *dispatcher) parentFirst(log *zap.Logger, j *job, entries []store.InboxEntry, w *parentWait) time.Duration {
	if !j.waitsForParent() || j.ev.entry == nil || j.ev.entry.sent {
		return 0
	}
	var seq uint64
	for _, e := range entries {
		if e.Key == j.ev.Key {
			seq = e.Seq
		}
	}
	ctx, cancel := r.opCtx()
	pending, err := r.st.PendingOf(ctx, j.ev.Parent)
	cancel()
	if err == nil && !inheritedBefore(pending, seq) {
		return 0
	}
	now := r.b.cfg.Now()
	if w.key != j.ev.Key {
		*w = parentWait{key: j.ev.Key, since: now, poll: parentPollMin}
		b := r.b
		b.mu.Lock()
		if !b.closingLocked() {
			r.kickLocked(r.conv(j.ev.Parent))
		}
		b.mu.Unlock()
	}
	if now.Sub(w.since) >= r.cfg.LeaseTTL+r.cfg.SweepEvery+r.cfg.ClaimGrace {
		log.Warn("the parent's earlier events are still not done; the thread's runs without them",
			zap.String("event_key", j.ev.Key), zap.String("parent", j.ev.Parent), zap.Error(err))
		return 0
	}
	d := w.poll
	w.poll = min(2*w.poll, parentPollMax)
	return d
}

// inheritedBefore reports whether entries hold one still Received, with a
// Seq below seq, that the parent's threads inherit from.
func inheritedBefore(entries []store.InboxEntry, seq uint64) bool {
	for _, e := range entries {
		if e.Seq >= seq || e.State != store.Received {
			continue
		}
		ev, err := decodeEvent(e.Key, e.Event)
		if err != nil {
			continue // dropped by whoever runs it
		}
		if classify(ev).inherited() {
			return true
		}
	}
	return false
}

// pause waits d, or less if the bridge stops meanwhile.
func (r *dispatcher) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.b.ctx.Done():
	}
}

// runsNext reports whether this process may claim c's lease to run its
// next entry, read without the lease: false when it holds none of c's
// events and that entry's platform is not attached here (a replica
// without the platform's adapter, or whose adapter has not attached yet).
// Such a replica must not take the lease even for the moment it takes to
// find that out: the replicas' sweeps come together, and one that runs
// the platform finds the lease taken, leaves the entry to its next sweep,
// and may lose the race again there, sweep after sweep, while the entry
// waits unanswered.
func (r *dispatcher) runsNext(c *leasedConv, handled map[string]bool) bool {
	b := r.b
	b.mu.Lock()
	mine := len(c.live) > 0 || len(c.recording) > 0
	b.mu.Unlock()
	if mine {
		return true
	}
	ctx, cancel := r.opCtx()
	entries, err := r.st.PendingOf(ctx, c.key)
	cancel()
	if err != nil {
		return true // the read under the lease reports it
	}
	for _, e := range entries {
		if handled[e.Key] {
			continue
		}
		ev, err := decodeEvent(e.Key, e.Event)
		if err != nil {
			return true // dropped, logged, by whoever runs it
		}
		b.mu.Lock()
		runs := r.platforms[ev.Platform] != nil
		b.mu.Unlock()
		return runs
	}
	return true
}

// awaitOwn returns how long c's process should wait before it claims c's
// lease again, or 0 to let c go: while events this process recorded (c.live)
// are unanswered and the bridge takes work, it waits, backing off to
// LeaseTTL/3; those answered meanwhile (by the lease's holder) are done
// here.
func (r *dispatcher) awaitOwn(c *leasedConv, wait *time.Duration) time.Duration {
	b := r.b
	b.mu.Lock()
	keys := make([]string, 0, len(c.live))
	for k := range c.live {
		keys = append(keys, k)
	}
	closing := b.closingLocked()
	b.mu.Unlock()
	if closing || len(keys) == 0 {
		return 0
	}
	pending := 0
	for _, k := range keys {
		if _, ok := r.entryState(k); ok {
			pending++
			continue
		}
		b.mu.Lock()
		j := c.live[k]
		delete(c.live, k)
		b.mu.Unlock()
		if j != nil {
			j.rec.finish() // answered by the holder
		}
	}
	if pending == 0 {
		return 0
	}
	*wait = min(max(2**wait, 5*time.Millisecond), r.cfg.LeaseTTL/3)
	return *wait
}

// endUnlessAgain ends c's process and reports false, or reports true (look
// again) when an event of c came in meanwhile and the bridge still runs.
func (r *dispatcher) endUnlessAgain(c *leasedConv) bool {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.again && b.ctx.Err() == nil {
		return true
	}
	r.endLocked(c)
	return false
}

// endProcess ends c's process goroutine and releases c's lease. A lease
// this process counts as lapsed is released too: a renewal may have kept
// it in the database, and nothing here would run its work. The events of c
// this process recorded and has not run are another replica's now: it runs
// them from the inbox.
func (r *dispatcher) endProcess(c *leasedConv) {
	b := r.b
	r.releaseLease(c.key)
	b.mu.Lock()
	defer b.mu.Unlock()
	r.endLocked(c)
}

func (r *dispatcher) endLocked(c *leasedConv) {
	for key, j := range c.live {
		delete(c.live, key)
		j.rec.finish()
	}
	c.running = false
	r.dropIdleLocked(c)
}

// hasWork reports whether entries hold one not yet run or set aside.
func hasWork(entries []store.InboxEntry, handled map[string]bool) bool {
	for _, e := range entries {
		if !handled[e.Key] {
			return true
		}
	}
	return false
}

// What nextEntry found.
const (
	entryNone = iota // nothing of the conversation's order is left
	entryRun         // the job to run next
	entryStop        // the next entry cannot run here; let the conversation go
	entrySkip        // the entry is left for another process; go on with the next
	entryWait        // an earlier entry is being recorded here; look again shortly
)

// nextEntry returns the job of the first entry of c's order not yet run,
// with the adapter's callbacks when this process recorded it, restored from
// its route otherwise. Entries that run on their own (flows, button
// presses, busy refusals) are run by the process that recorded them, under
// their entry's lease; one whose lease is free and that this process does
// not run was left by a process that went away (a restart, a dead
// replica), and runs here first.
func (r *dispatcher) nextEntry(log *zap.Logger, c *leasedConv, entries []store.InboxEntry, handled map[string]bool) (*job, int) {
	b := r.b
	for _, e := range entries {
		if handled[e.Key] {
			continue
		}
		b.mu.Lock()
		j := c.live[e.Key]
		delete(c.live, e.Key)
		ownRun := r.alones[e.Key]
		recording := j == nil && c.recordingKey(e.Key)
		behind := !ownRun && c.recordingBefore(e.Order)
		b.mu.Unlock()
		if behind {
			// An earlier event of the conversation is being recorded
			// here: it goes first once committed.
			if j != nil {
				b.mu.Lock()
				c.live[e.Key] = j
				b.mu.Unlock()
			}
			return nil, entryWait
		}
		if recording {
			// Committed, and this process's recorder is about to hand it
			// over with its callbacks (and kick this worker): taken now,
			// it would be restored instead, or, where this process has no
			// platform attached, stop the conversation.
			return nil, entryNone
		}
		if ownRun {
			// This process runs it on its own already (a flow, a press, a
			// busy refusal): it is neither this conversation's turn nor
			// to be restored.
			handled[e.Key] = true
			continue
		}
		if j == nil {
			var next int
			if j, next = r.restoreEntry(log, e); next == entryStop {
				return nil, entryStop
			} else if next == entrySkip {
				handled[e.Key] = true // left as it is
				continue
			} else if j == nil {
				handled[e.Key] = true // dropped
				continue
			}
		}
		if oj, ok := b.outboxJob(log, j.ev, e); ok {
			j = oj
		}
		j.ev.entry.sent = e.State == store.Sent
		j.ev.entry.stoppedBy = e.StoppedBy
		if j.ordered() && !j.ev.alone {
			return j, entryRun
		}
		handled[e.Key] = true
		name := store.EntryLease(e.Key)
		if !r.claimLease(name) {
			continue
		}
		// The lease may have been let go because the entry was just
		// answered: only what is still pending runs.
		if state, ok := r.entryState(e.Key); ok {
			j.ev.entry.sent = state == store.Sent
			j.ev.entry.lease = name
			r.runTaken(log, j)
		}
		r.releaseLease(name)
	}
	return nil, entryNone
}

// entryState returns the state of the unanswered entry key; ok is false
// when it is answered (or cannot be read).
func (r *dispatcher) entryState(key string) (store.InboxState, bool) {
	ctx, cancel := r.opCtx()
	defer cancel()
	state, ok, err := r.st.EntryState(ctx, key)
	return state, err == nil && ok && state != store.Answered
}

// answeredAlready reports whether the inbox holds key as answered.
func (r *dispatcher) answeredAlready(key string) bool {
	ctx, cancel := r.opCtx()
	defer cancel()
	state, ok, err := r.st.EntryState(ctx, key)
	return err == nil && ok && state == store.Answered
}

// restoreEntry rebuilds the job of an entry this process did not record,
// through its platform, as after a restart. It returns nil and
// entryStop when the platform does not run here, nil and entryNone when
// the entry could not be restored and was dropped.
func (r *dispatcher) restoreEntry(log *zap.Logger, e store.InboxEntry) (*job, int) {
	b := r.b
	ev, err := decodeEvent(e.Key, e.Event)
	if err != nil {
		log.Error("inbox entry unreadable; dropped", zap.String("event_key", e.Key), zap.Error(err))
		r.finishDropped(log, e.Key)
		return nil, entryNone
	}
	b.mu.Lock()
	p := r.platforms[ev.Platform]
	b.mu.Unlock()
	if p == nil && ev.alone {
		// An entry outside the conversation's order (a refusal kept for
		// its busy notice) this process cannot answer: it is left for one
		// that can, and the conversation's own events go on here.
		return nil, entrySkip
	}
	if p == nil {
		// This process does not run the platform (or not yet): a replica
		// that does takes the conversation in a sweep.
		return nil, entryStop
	}
	if err = bind(p, &ev); err != nil {
		log.Error("inbox entry cannot be resumed; dropped", zap.String("event_key", e.Key), zap.Error(err))
		r.finishDropped(log, e.Key)
		return nil, entryNone
	}
	if r.b.cfg.Now().Sub(e.Received) < r.cfg.ClaimGrace {
		// Recorded just now, not by this process: by a live one.
		r.othersSeen()
	}
	ev.entry = &entry{key: e.Key}
	j := classify(ev)
	j.rec = newReceipt()
	j.rec.settle(nil)
	return &j, entryRun
}

func (r *dispatcher) finishDropped(log *zap.Logger, key string) {
	b := r.b
	if err := b.store.Finish(recordCtx(b.ctx), key, "", nil, b.cfg.Now()); err != nil {
		log.Warn("inbox entry not closed", zap.Error(err))
	}
}

// runTaken runs a job whose lease this process holds, with the inbox's
// crash policy: an entry sent by a replica that went away is not sent
// again, its user is told; an answer it kept is posted, once.
func (r *dispatcher) runTaken(log *zap.Logger, j *job) {
	b := r.b
	if by := j.ev.entry.stoppedBy; by != "" {
		// Stopped before this process (or the one that ran it) could end
		// it: nothing of it runs or is posted.
		b.metrics.recoveredEvent(j.ev.Platform, "stopped")
		b.stoppedEarlier(log, j.ev, by)
		j.rec.finish()
		return
	}
	if j.out != nil {
		b.metrics.recoveredEvent(j.ev.Platform, "reposted")
	} else if j.ev.entry != nil && j.ev.entry.sent {
		b.metrics.recoveredEvent(j.ev.Platform, "told")
		b.tellRestartedNow(log.With(zap.String("platform", j.ev.Platform)), j.ev)
		j.rec.finish()
		return
	}
	if b.ctx.Err() != nil {
		b.leave(*j)
		return
	}
	b.run(*j)
}

// runAlone runs an event outside its conversation's order (a flow, a
// button press, a busy reply) when replicas share the store: recorded, then
// run under its entry's own lease, so that a replica starting meanwhile
// leaves it alone and one that finds it after this process died takes it.
func (r *dispatcher) runAlone(j *job) {
	b := r.b
	defer r.disown(j.ev.Key)
	err := b.record(j)
	j.rec.settle(err)
	if err != nil {
		j.rec.finish()
		return
	}
	r.startReplicas()
	ran := r.alone(j.ev.Key, func() {
		if j.ev.entry != nil {
			j.ev.entry.lease = store.EntryLease(j.ev.Key)
		}
		b.mu.Lock()
		closed := b.closingLocked()
		b.mu.Unlock()
		if closed && startsWork(j) {
			// Received as the shutdown began: left for the next start.
			b.leave(*j)
			return
		}
		b.run(*j)
	})
	if !ran {
		// Taken by a sweep of another replica: that one answers it.
		j.rec.finish()
	}
}

// attach registers the platform and takes up at once the
// platform's work that no live process holds a lease on: a previous
// process's unfinished entries (on bbolt, all of them) or a dead replica's.
// It reports how many of them run (resumed, or a kept answer posted) and
// how many are told the request may have been lost. Entries a live replica
// works on are left to it, so no user hears of a restart that did not
// happen.
func (r *dispatcher) attach(name string, p Platform) (resumed, told int, err error) {
	b := r.b
	b.mu.Lock()
	r.platforms[name] = p
	closed := b.closingLocked()
	b.mu.Unlock()
	if closed {
		return 0, 0, nil
	}
	r.startReplicas()
	ctx, cancel := r.opCtx()
	defer cancel()
	// No grace: what was received before this process attached is not
	// being claimed by it, and a replica that is claiming an entry this
	// moment loses nothing but the adapter's callbacks if this one wins.
	convs, err := r.st.Unleased(ctx, 0, math.MaxInt)
	if err == nil && len(convs) > 0 {
		var pending []store.InboxEntry
		if pending, err = r.st.Pending(ctx); err == nil {
			resumed, told, convs = platformWork(name, convs, pending)
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read unfinished events: %w", err)
	}
	b.mu.Lock()
	for _, conv := range convs {
		if !b.closingLocked() {
			r.kickLocked(r.conv(conv))
		}
	}
	b.mu.Unlock()
	if resumed+told > 0 {
		b.log.Info("unfinished events from before the restart", zap.String("platform", name), zap.Int("resumed", resumed), zap.Int("told", told))
	}
	return resumed, told, nil
}

// platformWork counts, among pending, the entries of platform in the
// conversations convs: those to run and those to tell. It returns the
// conversations that hold any.
func platformWork(platform string, convs []string, pending []store.InboxEntry) (resumed, told int, mine []string) {
	free := make(map[string]bool, len(convs))
	for _, c := range convs {
		free[c] = true
	}
	found := make(map[string]bool)
	for _, e := range pending {
		if !free[e.Conversation] {
			continue
		}
		var head struct {
			Platform string `json:"platform"`
		}
		_ = json.Unmarshal(e.Event, &head) // an undecodable entry is dropped, logged, by whoever runs it
		if head.Platform != platform {
			continue
		}
		if e.State == store.Sent && e.Outbox == nil {
			told++
		} else {
			resumed++
		}
		if !found[e.Conversation] {
			found[e.Conversation] = true
			mine = append(mine, e.Conversation)
		}
	}
	return resumed, told, mine
}

// receiveLocked takes an event of a conversation's order into the
// inbox's order (receiveLeasedLocked), and runs any other under its
// entry's own lease (runAlone); b.mu is held.
func (r *dispatcher) receiveLocked(j *job) {
	switch {
	case j.ordered():
		r.receiveLeasedLocked(j)
	default:
		r.alones[j.ev.Key] = true
		r.b.goLocked(func() { r.runAlone(j) })
	}
}

// disown ends this process's hold of an entry it ran on its own (alones).
func (r *dispatcher) disown(key string) {
	r.b.mu.Lock()
	delete(r.alones, key)
	r.b.mu.Unlock()
}

// alone runs f under the entry's own lease: recorded as an entry of its
// own (ev.alone), the replica holding the conversation leaves it to this
// one. When another replica holds it, that one answers and f does not run.
func (r *dispatcher) alone(key string, f func()) bool {
	name := store.EntryLease(key)
	if !r.claimLease(name) {
		return false
	}
	defer r.releaseLease(name)
	f()
	return true
}

// markSent marks e sent under its lease, when it runs under one.
func (r *dispatcher) markSent(ctx context.Context, e *entry) error {
	if e.lease != "" {
		return r.st.MarkSentUnder(recordCtx(ctx), e.key, e.lease, r.cfg.Holder, r.b.cfg.Now())
	}
	return r.st.MarkSent(recordCtx(ctx), e.key, r.b.cfg.Now())
}

// holds reports whether this process still holds the lease e runs under.
func (r *dispatcher) holds(e *entry) bool {
	if e.lease == "" {
		return true
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return r.holdsLocked(e.lease)
}

// letGo forgets e's lease, so that it is claimed again before anything
// else runs under it.
func (r *dispatcher) letGo(e *entry) {
	r.b.mu.Lock()
	delete(r.held, e.lease)
	r.b.mu.Unlock()
}

// shutdown ends the loops; only now, since the leases of the work that
// ran until here were renewed.
func (r *dispatcher) shutdown() { r.stopReplicas() }

// bind gives ev what its platform derives from its route: its responder
// and the platform that prepares and acknowledges it. A live event and a
// restored one are bound alike.
func bind(p Platform, ev *Event) error {
	reply, err := p.Responder(*ev)
	if err == nil && reply == nil {
		err = errors.New("no responder")
	}
	if err != nil {
		return fmt.Errorf("route of %s: %w", ev.Key, err)
	}
	ev.platform, ev.reply = p, reply
	return nil
}

// platform returns the platform attached under name, or nil.
func (r *dispatcher) platform(name string) Platform {
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return r.platforms[name]
}
