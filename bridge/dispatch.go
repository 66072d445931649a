package bridge

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// dispatcher is what differs between a bridge that has its store to itself
// (local) and one whose store replicas share (replicas): how work is taken
// in and who may run it. Both hand the work to the same inbox → agent →
// outbox path (run, markSent, deliver, answered); New picks one.
type dispatcher interface {
	// receiveLocked takes in and queues an event Receive accepted; b.mu is held.
	receiveLocked(j *job)
	// alone runs f as the one worker on the inbox entry key and reports
	// true, or reports false when another process is that worker.
	alone(key string, f func()) bool
	// markSent records that e's request is about to leave.
	markSent(ctx context.Context, e *entry) error
	// holds reports whether e is still this process's to run: false once
	// its lease has lapsed. letGo gives e's lapsed lease up.
	holds(e *entry) bool
	letGo(e *entry)
	// answeredAlready reports whether the inbox holds key of conv as
	// answered after a write that failed: then that write committed,
	// though its answer was lost.
	answeredAlready(conv, key string) bool
	// attach hands a platform's unfinished work to the bridge (see Attach).
	attach(platform string, r Restorer) (resumed, told int, err error)
	// shutdown stops the dispatcher once no work is left running.
	shutdown()
}

var (
	_ dispatcher = local{}
	_ dispatcher = (*replicas)(nil)
)

// local is the dispatcher of a bridge that has its store to itself: it
// runs every event in this process, in the order Receive took them.
type local struct{ b *Bridge }

// receiveLocked runs an event outside its conversation's order at once,
// once recorded, and queues any other behind its conversation's work.
func (l local) receiveLocked(j *job) {
	b := l.b
	if !j.ordered() {
		b.goLocked(func() {
			err := b.record(j)
			j.rec.settle(err)
			if err == nil {
				b.run(*j)
			} else if j.ev.Done != nil {
				j.ev.Done()
			}
		})
		return
	}
	if c := b.convs[j.ev.Conversation]; c != nil && len(c.queue) >= b.cfg.QueueSize {
		b.metrics.refused("queue_full")
		b.wg.Go(func() { b.busy(j) })
		return
	}
	b.wg.Go(func() { j.rec.settle(b.record(j)) })
	b.enqueueLocked(j)
}

func (local) alone(_ string, f func()) bool {
	f()
	return true
}

func (l local) markSent(ctx context.Context, e *entry) error {
	return l.b.store.MarkSent(recordCtx(ctx), e.key, l.b.cfg.Now())
}

func (local) holds(*entry) bool { return true }

func (local) letGo(*entry) {}

// answeredAlready is false: no other process answers this one's entries,
// and a store without replicas is not asked.
func (local) answeredAlready(string, string) bool { return false }

// attach resumes the platform's unfinished events of the previous process
// (see Attach).
func (l local) attach(platform string, r Restorer) (resumed, told int, err error) {
	b := l.b
	entries, err := b.takeRecovered(platform)
	if err != nil {
		return 0, 0, err
	}
	log := b.log.With(zap.String("platform", platform))
	// Queued all at once, under one hold of b.mu: a conversation's worker
	// that drained its queue between two of these would forget its busy
	// notice, and a flood's kept refusals would be told by several.
	var queue []func()
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, f := range queue {
			f()
		}
	}()
	for _, e := range entries {
		ev, err := decodeEvent(e.Key, e.Event)
		if err == nil {
			err = r.Restore(&ev)
		}
		if err == nil && ev.Reply == nil {
			err = errors.New("restored without a responder")
		}
		if err != nil {
			// Nothing can answer it; keeping it would only replay the failure.
			log.Error("unfinished event cannot be resumed; dropped", zap.String("event_key", e.Key), zap.Error(err))
			if ferr := b.store.Finish(recordCtx(b.ctx), e.Key, "", nil, b.cfg.Now()); ferr != nil {
				log.Warn("inbox entry not closed", zap.Error(ferr))
			}
			continue
		}
		ev.entry = &entry{key: e.Key}
		if j, ok := b.outboxJob(log, ev, e); ok {
			resumed++
			b.metrics.recoveredEvent(platform, "reposted")
			queue = append(queue, func() { b.enqueueLocked(j) })
			continue
		}
		switch e.State {
		case store.Sent:
			ev.entry.sent = true
			told++
			b.metrics.recoveredEvent(platform, "told")
			queue = append(queue, func() { b.tellRestartedLocked(log, ev) })
		default:
			resumed++
			b.metrics.recoveredEvent(platform, "resumed")
			queue = append(queue, func() { b.resumeLocked(ev) })
		}
	}
	if resumed+told > 0 {
		log.Info("unfinished events from before the restart", zap.Int("resumed", resumed), zap.Int("told", told))
	}
	return resumed, told, nil
}

// shutdown has nothing to stop.
func (local) shutdown() {}
