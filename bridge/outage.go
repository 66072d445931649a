package bridge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// Probe timing: how often a failing store is probed, and how long a probe
// may take.
const (
	probeEvery   = time.Second
	probeTimeout = time.Second
)

// storeRetry bounds the waits between attempts of a store write that must
// not be given up while the store is down (an entry marked sent, or closed).
const (
	storeRetryMin = 100 * time.Millisecond
	storeRetryMax = 2 * time.Second
)

// outage follows a store that fails: the probe that looks for its return,
// and who to tell when it is back.
type outage struct {
	probing   atomic.Bool
	probes    sync.WaitGroup
	mu        sync.Mutex
	recovered []func()
}

// OnStoreRecovered registers f, called (on a goroutine of the bridge's) each
// time the store answers again after failed writes: the Discord adapter
// then fetches what it could not record meanwhile.
func (b *Bridge) OnStoreRecovered(f func()) {
	b.health.outage.mu.Lock()
	defer b.health.outage.mu.Unlock()
	b.health.outage.recovered = append(b.health.outage.recovered, f)
}

// probeStore starts, once per outage, the probe that clears the store fault
// when the store answers again.
func (b *Bridge) probeStore() {
	if !b.health.outage.probing.CompareAndSwap(false, true) {
		return
	}
	b.health.outage.probes.Go(func() {
		t := time.NewTicker(probeEvery)
		defer t.Stop()
		for {
			select {
			case <-b.work.quit:
				b.health.outage.probing.Store(false)
				return
			case <-t.C:
			}
			w := b.writeBegins()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), probeTimeout)
			err := b.store.Ping(ctx)
			cancel()
			if err != nil {
				continue
			}
			_, cleared := b.keepOutcome(w, nil)
			b.health.outage.probing.Store(false)
			if b.health.fault.Load() != nil {
				// A write begun after this probe's failed: the outage goes
				// on, and so does a probe (this one, unless that write's
				// started another meanwhile).
				if b.health.outage.probing.CompareAndSwap(false, true) {
					continue
				}
				return
			}
			if cleared != nil {
				b.log.Info("store answers again", zap.Duration("after", b.cfg.Now().Sub(cleared.since)))
			}
			b.health.outage.mu.Lock()
			hooks := append([]func(){}, b.health.outage.recovered...)
			b.health.outage.mu.Unlock()
			for _, f := range hooks {
				f()
			}
			return
		}
	})
}

// storeRetries is how many attempts a store write gets when the store gives
// no sign of being down (it answers a probe): its
// failure is then no outage to wait out.
const storeRetries = 3

// retryStore runs write until it succeeds or reports an outcome that is no
// failure of the store (a lease lost, an entry taken by another process or
// unknown), waiting between attempts while the store is down, as long as
// keep reports true and ctx lives. taken reports whether err, met after a
// failed attempt, may be the effect of that attempt (a write that committed
// though its answer was lost): then retryStore returns nil. It returns the
// last error when it gives up.
func (b *Bridge) retryStore(ctx context.Context, log *zap.Logger, op string, write func() error, taken func(error) bool, keep func() bool) error {
	return b.retryWrite(ctx, log, op, write, taken, keep, storeRetries)
}

// retryWrite is retryStore giving up after attempts when the store gives no
// sign of being down; attempts 0 never gives up for that (a write that
// must wait for the store however it fails: an answer kept in the outbox).
func (b *Bridge) retryWrite(ctx context.Context, log *zap.Logger, op string, write func() error, taken func(error) bool, keep func() bool, attemptsMax int) error {
	wait := storeRetryMin
	attempts := 0
	for {
		w := b.writeBegins()
		err := write()
		attempts++
		if err == nil {
			b.noteStore(w, nil)
		}
		// Neither an attempt that failed as its earlier one's effect
		// (taken) nor a refusal of the store's own (a lease lost, an entry
		// sent or unknown) is noted: both may have written nothing, and
		// say nothing of whether the store takes writes.
		if attempts > 1 && err != nil && taken(err) {
			err = nil
		}
		if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrAlreadySent) || errors.Is(err, store.ErrUnknownEntry) {
			if attempts > 1 && err == nil {
				log.Info("store write done once the store came back", zap.String("op", op), zap.Int("attempts", attempts))
			}
			return err
		}
		b.noteStore(w, err)
		if attempts == 1 {
			log.Warn("store write failed; retrying while the store is down", zap.String("op", op), zap.Error(err))
			b.metrics.storeFailed(op)
		}
		if attemptsMax > 0 && attempts >= attemptsMax && !b.storeDown(ctx) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil || !keep() {
			return err
		}
		wait = min(2*wait, storeRetryMax)
	}
}

// storeDown reports whether the store fails a probe now.
func (b *Bridge) storeDown(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return b.store.Ping(ctx) != nil
}

// errLeft says that a read the store did not answer was given up because
// the entry is no longer this process's to run (its lease lapsed, or the
// shutdown grace ended): the entry stays received for whoever runs it
// next, and its user is told nothing.
var errLeft = errors.New("left in the inbox")

// readStore runs read, a lookup an entry's run needs before anything of it
// leaves (its conversation's agent, its session), with the patience of a
// write: while the store is down (it fails a probe) it is tried again as
// long as the entry is this process's and the bridge runs, so a database
// restart costs a wait, not a "try again". A failure of a store that
// answers probes is returned after a few attempts, as before. When the wait
// is given up, the entry is left in the inbox (errLeft).
func (b *Bridge) readStore(ctx context.Context, log *zap.Logger, ev Event, op string, read func() error) error {
	e := ev.entry
	keep := func() bool { return e == nil || b.disp.holds(e) }
	wait := storeRetryMin
	for attempt := 1; ; attempt++ {
		// A read's outcome is not noted for readiness: a read that works
		// says nothing of whether the store takes writes.
		err := read()
		if err == nil {
			if attempt > 1 {
				log.Info("store read done once the store came back", zap.String("op", op), zap.Int("attempts", attempt))
			}
			return nil
		}
		if attempt == 1 {
			log.Warn("store read failed; retrying while the store is down", zap.String("op", op), zap.Error(err))
			b.metrics.storeFailed(op)
		}
		if attempt >= storeRetries && !b.storeDown(ctx) {
			return err // the store answers: no outage to wait out
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil || !keep() {
			log.Warn("store read not answered; the message is left in the inbox for whoever runs it next", zap.String("op", op), zap.Error(err))
			if e != nil {
				e.done, e.leaseLost = true, true
				b.disp.letGo(e)
			}
			return errLeft
		}
		wait = min(2*wait, storeRetryMax)
	}
}
