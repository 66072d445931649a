package bridge

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// The order hold: two messages of a conversation sent at once may reach two
// replicas and be committed in either order, and the later one in the
// platform's order must not run before the other is seen. The holder of the
// conversation's lease lets an entry it has just seen wait for that, but
// only while another process shares the store (store.Holders): a process
// alone records every event of its conversations itself, and knows which
// of them it has not committed yet (leasedConv.recording), so nothing of
// the conversation can be in another's hands and nothing waits. The wait
// is ReplicaConfig.OrderHold, for the messages' arrivals apart, plus how
// long this process's recent inbox writes took (their 99th percentile), for
// the other replica's recording of the earlier one.

// maxRecordHold bounds the measured part of the order hold: a store that
// takes longer to record an event holds up every conversation of the
// replicas no further.
const maxRecordHold = 2 * time.Second

// recordWindow is how long a recording time counts toward the hold, and
// recordSamples how many of them are kept.
const (
	recordWindow  = time.Minute
	recordSamples = 256
)

// recordTimes keeps how long this process's recent inbox writes took.
type recordTimes struct {
	mu   sync.Mutex
	at   [recordSamples]time.Time
	took [recordSamples]time.Duration
	next int // where the next sample goes
}

func (t *recordTimes) add(at time.Time, took time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.at[t.next], t.took[t.next] = at, took
	t.next = (t.next + 1) % recordSamples
}

// p99 returns the 99th percentile of the writes of the last recordWindow
// before now (0 when there were none).
func (t *recordTimes) p99(now time.Time) time.Duration {
	t.mu.Lock()
	recent := make([]time.Duration, 0, recordSamples)
	for i, at := range t.at {
		if !at.IsZero() && now.Sub(at) < recordWindow {
			recent = append(recent, t.took[i])
		}
	}
	t.mu.Unlock()
	if len(recent) == 0 {
		return 0
	}
	slices.Sort(recent)
	return recent[(len(recent)*99+99)/100-1]
}

// peerView is what this process knows of the other processes sharing its
// store: whether one was live when it last looked.
type peerView struct {
	mu     sync.Mutex // held across a look, so that one look serves every caller
	known  bool       // a look succeeded
	others bool       // another process held a lease then
	at     time.Time  // when
	lease  bool       // this process may hold its ReplicaLease
}

// lookAtPeers claims (or renews) this process's own lease and reads which
// processes hold one; p.mu is held.
func (r *dispatcher) lookAtPeersLocked(ctx context.Context) {
	p := &r.peers
	ctx, cancel := context.WithTimeout(ctx, r.cfg.LeaseTTL/3)
	defer cancel()
	at := r.b.cfg.Now()
	p.lease = true
	_, err := r.st.Claim(ctx, store.ReplicaLease(r.cfg.Holder), r.cfg.Holder, r.cfg.LeaseTTL)
	var holders []string
	if err == nil {
		holders, err = r.st.Holders(ctx)
	}
	if err != nil {
		// Not known: entries are held back, as with another replica live.
		r.b.log.Warn("other replicas not looked for; holding entries for the platform's order", zap.Error(err))
		p.known = false
		return
	}
	others := slices.ContainsFunc(holders, func(h string) bool { return h != r.cfg.Holder })
	if others != p.others || !p.known {
		r.b.log.Info("replicas sharing the store", zap.Bool("others", others), zap.Int("holders", len(holders)))
	}
	p.known, p.others, p.at = true, others, at
}

// lookAtPeers is lookAtPeersLocked for the heartbeat.
func (r *dispatcher) lookAtPeers(ctx context.Context) {
	r.peers.mu.Lock()
	defer r.peers.mu.Unlock()
	r.lookAtPeersLocked(ctx)
}

// peersEvery is how often the heartbeat looks at the processes sharing the
// store: a replica that joins is noticed by the others within it.
func (r *dispatcher) peersEvery() time.Duration { return min(r.cfg.LeaseTTL/3, time.Second) }

// othersLive reports whether another process may be recording events of
// this process's conversations: it was live when last looked at (the
// heartbeat looks every peersEvery), or that is not known.
func (r *dispatcher) othersLive() bool {
	p := &r.peers
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.known || r.b.cfg.Now().Sub(p.at) > 2*r.peersEvery() {
		ctx, cancel := r.opCtx()
		defer cancel()
		r.lookAtPeersLocked(ctx)
	}
	return !p.known || p.others
}

// othersSeen notes that another process is live, found before the next
// look: it holds a lease this process could not claim, or recorded an
// entry this process runs.
func (r *dispatcher) othersSeen() {
	p := &r.peers
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known && !p.others {
		r.b.log.Info("replicas sharing the store", zap.Bool("others", true))
	}
	p.known, p.others, p.at = true, true, r.b.cfg.Now()
}

// leavePeers gives up this process's own lease, so that a replica left
// alone stops holding entries back at once rather than when it expires.
func (r *dispatcher) leavePeers() {
	p := &r.peers
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.lease {
		return
	}
	ctx, cancel := r.opCtx()
	defer cancel()
	if err := r.st.Release(ctx, store.ReplicaLease(r.cfg.Holder), r.cfg.Holder); err != nil {
		r.b.log.Warn("replica lease not released", zap.Error(err))
	}
	p.lease, p.known = false, false
}

// holdFor returns how long an entry just seen waits before it runs: 0
// when order is at no risk (no other process is live, or the hold is off).
func (r *dispatcher) holdFor() time.Duration {
	if r.cfg.OrderHold <= 0 || !r.othersLive() {
		return 0
	}
	return r.cfg.OrderHold + min(r.records.p99(r.b.cfg.Now()), maxRecordHold)
}

// orderHold notes when each of entries was first seen (seen holds the
// notes of the previous look) and returns the new notes and how long the
// first entry not yet handled must still wait before it may run: until
// holdFor has passed since it was first seen.
func (r *dispatcher) orderHold(entries []store.InboxEntry, handled map[string]bool, seen map[string]time.Time) (map[string]time.Time, time.Duration) {
	now := r.b.cfg.Now()
	next := make(map[string]time.Time, len(entries))
	var first *time.Time
	for _, e := range entries {
		at, ok := seen[e.Key]
		if !ok {
			at = now
		}
		next[e.Key] = at
		if first == nil && !handled[e.Key] {
			first = &at
		}
	}
	if first == nil {
		return next, 0
	}
	hold := r.holdFor()
	return next, hold - now.Sub(*first)
}

// recordingBefore reports whether this process is recording an event of c
// that comes before order in the platform's order (an Order the adapter
// gave, lower): received here after an entry of c that follows it, it is
// committed after that one, which must wait for it; b.mu is held.
func (c *leasedConv) recordingBefore(order int64) bool {
	for _, j := range c.recording {
		if j != nil && j.ev.Order != 0 && j.ev.Order < order {
			return true
		}
	}
	return false
}
