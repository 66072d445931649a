package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
)

// Discord allows a bot 1,000 IDENTIFYs a day, all shards and processes
// together, and resets the bot's token past it; RESUMEs are free. It asks
// a client answered with op 9 (Invalid Session) to wait 1 to 5 seconds,
// at random, before it identifies again. discordgo identifies at once on
// every op 9, and a gateway that answers each IDENTIFY with op 9 would
// spend the day's budget in minutes. So every IDENTIFY a shard sends
// passes a gate (identifyConn sees it leave, before a byte of it is
// written):
//
//   - after op 9 it waits Discord's random 1–5 s;
//   - IDENTIFYs that did not lead to a session that stayed up for
//     stableAfter are spaced by a doubling backoff, capped at mostBackoff;
//   - each one is counted against the day's budget, kept in the store
//     (through the core's adapter state, like the gateway session) with
//     what GET /gateway/bot last said of session_start_limit, so that
//     every process of the bot counts, and a restart does not forget;
//     each count is a compare-and-set of the kept record, so replicas
//     identifying at once each count;
//     when only identifyReserve are left it is refused, and the shard
//     stays down until Discord resets the budget, saying so in Ready and
//     the log.
const (
	// identifyReserve is the part of the day's budget never spent
	// unattended: what an operator needs to restart by hand.
	identifyReserve = 20
	// budgetSaveWithin bounds the write of the count before an IDENTIFY.
	budgetSaveWithin = 2 * time.Second
	// budgetState is the name the count is kept under.
	budgetState = "discord/identify-budget"
	// budgetWindow is Discord's budget window, the age past which a kept
	// count means nothing.
	budgetWindow = 24 * time.Hour
)

// identifyTiming is how IDENTIFYs are spaced; tests scale it down.
type identifyTiming struct {
	// invalidMin and invalidMax bound Discord's random wait after op 9.
	invalidMin, invalidMax time.Duration
	// firstBackoff and mostBackoff bound the doubling wait between
	// IDENTIFYs whose sessions did not stay up for stableAfter. The most
	// is also how late, at worst, a shard identifies once the gateway lets
	// it in again.
	firstBackoff, mostBackoff time.Duration
	// stableAfter is how long a session must stay up for the backoffs
	// (this one, and the supervisor's between connections) to start over.
	stableAfter time.Duration
}

var defaultIdentifyTiming = identifyTiming{
	invalidMin: time.Second, invalidMax: 5 * time.Second,
	firstBackoff: time.Second, mostBackoff: 10 * time.Second,
	stableAfter: 30 * time.Second,
}

// scaled returns t with every duration divided by div (tests).
func (t identifyTiming) scaled(div int) identifyTiming {
	d := time.Duration(div)
	return identifyTiming{t.invalidMin / d, t.invalidMax / d, t.firstBackoff / d, t.mostBackoff / d, t.stableAfter / d}
}

// identifyPace is one shard's spacing of IDENTIFYs.
type identifyPace struct {
	mu sync.Mutex
	// streak counts the IDENTIFYs since a session last stayed up for
	// stableAfter; last is when the latest was let through.
	streak int
	last   time.Time
	// liveSince is when the current session became live (READY or
	// RESUMED), zero while there is none; lived is how long the last one
	// lasted.
	liveSince time.Time
	lived     time.Duration
}

// live notes that a session became live.
func (p *identifyPace) live(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.liveSince = now
}

// ended notes that the live session ended (a drop, op 9).
func (p *identifyPace) ended(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.liveSince.IsZero() {
		p.lived, p.liveSince = now.Sub(p.liveSince), time.Time{}
	}
}

// stable reports whether the last session (or the current one) stayed up
// for t.stableAfter.
func (p *identifyPace) stable(now time.Time, t identifyTiming) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.liveSince.IsZero() {
		return now.Sub(p.liveSince) >= t.stableAfter
	}
	return p.lived >= t.stableAfter
}

// next returns how long the IDENTIFY about to leave at now waits, and
// takes its turn: the backoff since the last one, and after op 9 (again)
// at least Discord's random wait.
func (p *identifyPace) next(now time.Time, again bool, t identifyTiming) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	stable := p.lived >= t.stableAfter || !p.liveSince.IsZero() && now.Sub(p.liveSince) >= t.stableAfter
	if stable {
		p.streak = 0
	}
	p.lived, p.liveSince = 0, time.Time{}
	var wait time.Duration
	if p.streak > 0 {
		step := t.firstBackoff << min(p.streak-1, 30)
		if step <= 0 || step > t.mostBackoff {
			step = t.mostBackoff
		}
		wait = max(p.last.Add(step).Sub(now), 0)
	}
	if again {
		jitter := t.invalidMin
		if span := t.invalidMax - t.invalidMin; span > 0 {
			jitter += rand.N(span)
		}
		wait = max(wait, jitter)
	}
	p.streak++
	p.last = now.Add(wait)
	return wait
}

// errIdentifyCut ends an IDENTIFY's wait when its connection is cut or
// the adapter stops.
var errIdentifyCut = errors.New("identify: connection closed while waiting to identify")

// identifyRefusedError refuses an IDENTIFY the day's budget cannot pay for.
type identifyRefusedError struct {
	remaining, total int
	resetAt          time.Time
}

func (e *identifyRefusedError) Error() string {
	return fmt.Sprintf("IDENTIFY budget nearly spent: %d of Discord's %d a day left, kept in reserve; not identifying until Discord resets it at %s",
		e.remaining, e.total, e.resetAt.UTC().Format(time.RFC3339))
}

// beforeHandshake is the gate of a shard's handshakes, called by its
// connection as discordgo writes one (op 2 IDENTIFY, op 6 RESUME), before
// any of it is sent; again is set when the connection sent one before,
// which Discord refused with op 9. An error fails the write and closes the
// connection.
func (a *Adapter) beforeHandshake(sh *shard, op int, again bool, closed <-chan struct{}) error {
	if op != 2 {
		return nil
	}
	now := time.Now()
	if again {
		sh.pace.ended(now)
		sh.connected.Store(false)
		msg := "session invalidated by Discord (op 9); identifying again"
		sh.lastErr.Store(&msg)
	}
	wait := sh.pace.next(now, again, a.idTiming)
	log := a.shardLog(sh)
	if again {
		log.Warn("gateway session invalidated (op 9); identifying again after a wait", zap.Duration("wait", wait))
	} else if wait > 0 {
		log.Info("identifying after a wait: the last sessions did not hold", zap.Duration("wait", wait))
	}
	if wait > 0 {
		resume := sh.gw.pauseOpen()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-closed:
			t.Stop()
			return errIdentifyCut
		case <-sh.gw.halt:
			t.Stop()
			return errIdentifyCut
		}
		resume()
	}
	refused, first := a.budget.spend(a, log)
	if refused == nil {
		return nil
	}
	msg := refused.Error()
	sh.lastErr.Store(&msg)
	if first {
		log.Error("IDENTIFY budget nearly spent: the gateway stays down until Discord resets it",
			zap.Int("remaining", refused.remaining), zap.Int("total", refused.total), zap.Int("reserve", identifyReserve),
			zap.Time("reset_at", refused.resetAt))
	}
	return refused
}

// identifyBudget is the day's IDENTIFY budget of the bot, as last read
// from Discord and counted since; kept in the store.
type identifyBudget struct {
	mu  sync.Mutex
	rec budgetRecord
	// blocked is the refusal while the budget is spent, nil otherwise.
	blocked *identifyRefusedError
	// saveFailing is set while the count cannot be written.
	saveFailing bool
}

// budgetRecord is what the store keeps of the budget.
type budgetRecord struct {
	// Total and Remaining are session_start_limit's, Remaining less the
	// IDENTIFYs sent since it was read; ResetAt is when Discord renews it.
	Total     int       `json:"total"`
	Remaining int       `json:"remaining"`
	ResetAt   time.Time `json:"reset_at"`
	// Identifies counts the IDENTIFYs sent by the bot's processes since
	// the budget was last renewed.
	Identifies int `json:"identifies"`
}

// known reports whether the record says anything: a budget not yet renewed.
func (r budgetRecord) known(now time.Time) bool {
	return r.Total > 0 && now.Before(r.ResetAt)
}

// sameWindow reports whether r and o count the same day of Discord's:
// their reset times, each read as now plus reset_after, agree within a
// minute.
func (r budgetRecord) sameWindow(o budgetRecord) bool {
	d := r.ResetAt.Sub(o.ResetAt)
	return d <= time.Minute && d >= -time.Minute
}

// spend returns the record after one more IDENTIFY at now, or the
// refusal of one the budget cannot pay for, leaving the reserve.
func (r budgetRecord) spend(now time.Time) (budgetRecord, *identifyRefusedError) {
	if r.Total > 0 && !now.Before(r.ResetAt) {
		// Renewed by Discord: the count starts over.
		r = budgetRecord{Total: r.Total, Remaining: r.Total, ResetAt: r.ResetAt.Add(budgetWindow)}
		for !now.Before(r.ResetAt) {
			r.ResetAt = r.ResetAt.Add(budgetWindow)
		}
	}
	if r.Total > 0 && r.Remaining <= identifyReserve {
		return r, &identifyRefusedError{remaining: r.Remaining, total: r.Total, resetAt: r.ResetAt}
	}
	if r.Total > 0 {
		r.Remaining--
	}
	r.Identifies++
	return r, nil
}

// decodeBudget decodes a kept record; one that cannot be read is logged
// and counts as none.
func decodeBudget(log *zap.Logger, text string) budgetRecord {
	var rec budgetRecord
	if text == "" {
		return rec
	}
	if err := json.Unmarshal([]byte(text), &rec); err != nil {
		log.Warn("IDENTIFY count in the store unusable; ignored", zap.String("stored", text), zap.Error(err))
		return budgetRecord{}
	}
	return rec
}

// errBudgetRefused ends a change of the kept count that would spend the
// reserve: nothing is written.
var errBudgetRefused = errors.New("identify budget refused")

// load reads the kept count, then GET /gateway/bot's session_start_limit,
// which is the truth when Discord answers (gb is that answer, nil when it
// could not be read): it is then kept, with the IDENTIFYs counted in its
// window, for every process of the bot to count from.
func (b *identifyBudget) load(ctx context.Context, a *Adapter, gb *discordgo.GatewayBotResponse) {
	now := time.Now()
	apply := func(rec budgetRecord) budgetRecord {
		if !rec.known(now) {
			rec = budgetRecord{}
		}
		if gb != nil && gb.SessionStartLimit.Total > 0 {
			l := gb.SessionStartLimit
			read := budgetRecord{Total: l.Total, Remaining: l.Remaining, ResetAt: now.Add(time.Duration(l.ResetAfter) * time.Millisecond)}
			if rec.known(now) && read.sameWindow(rec) {
				read.Identifies = rec.Identifies
			}
			rec = read
		}
		return rec
	}
	var rec budgetRecord
	rc, ok := a.core.(ResumeCore)
	switch {
	case !ok:
		rec = apply(budgetRecord{})
	case gb != nil && gb.SessionStartLimit.Total > 0:
		_, err := rc.UpdateAdapterState(ctx, budgetState, budgetWindow, func(text string, _ bool) (string, error) {
			rec = apply(decodeBudget(a.log, text))
			out, err := json.Marshal(rec)
			return string(out), err
		})
		if err != nil {
			a.log.Warn("IDENTIFY budget not kept in the store", zap.Error(err))
			rec = apply(budgetRecord{})
		}
	default:
		text, _, err := rc.AdapterState(ctx, budgetState, budgetWindow)
		if err != nil {
			a.log.Warn("IDENTIFY count not read from the store", zap.Error(err))
		}
		rec = apply(decodeBudget(a.log, text))
	}
	b.mu.Lock()
	b.rec = rec
	b.mu.Unlock()
	if rec.known(now) {
		a.log.Info("IDENTIFY budget", zap.Int("remaining", rec.Remaining), zap.Int("total", rec.Total), zap.Time("reset_at", rec.ResetAt), zap.Int("identifies", rec.Identifies))
	}
}

// spend counts one IDENTIFY, and keeps the count in the store before it
// leaves; it refuses one the budget cannot pay for, leaving the reserve,
// first set when the budget was not refusing before. The count is a
// read-modify-write of the kept record by compare-and-set
// (UpdateAdapterState), so that replicas identifying at once each count;
// the kept record is the base, unless this process read a newer window
// from Discord. When the store cannot be written, it counts in memory and
// identifies anyway.
func (b *identifyBudget) spend(a *Adapter, log *zap.Logger) (refused *identifyRefusedError, first bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var next budgetRecord
	rc, ok := a.core.(ResumeCore)
	if !ok {
		next, refused = b.rec.spend(now)
	} else {
		// Not cut by a stop: an IDENTIFY on its way is counted.
		ctx, cancel := context.WithTimeout(context.Background(), budgetSaveWithin)
		_, err := rc.UpdateAdapterState(ctx, budgetState, budgetWindow, func(text string, _ bool) (string, error) {
			base := b.rec
			if kept := decodeBudget(log, text); kept.Total > 0 || kept.Identifies > 0 {
				if !(base.Total > 0 && kept.Total > 0 && base.ResetAt.Sub(kept.ResetAt) > time.Minute) {
					base = kept
				}
			}
			next, refused = base.spend(now)
			if refused != nil {
				return "", errBudgetRefused
			}
			out, err := json.Marshal(next)
			return string(out), err
		})
		cancel()
		switch {
		case errors.Is(err, errBudgetRefused):
		case err != nil:
			if !b.saveFailing {
				log.Warn("IDENTIFY count not saved; identifying anyway", zap.Error(err))
			}
			b.saveFailing = true
			next, refused = b.rec.spend(now)
		default:
			b.saveFailing = false
		}
	}
	b.rec = next
	if refused != nil {
		first = b.blocked == nil
		b.blocked = refused
		return refused, first
	}
	b.blocked = nil
	return nil, false
}

// refused returns the refusal while the budget is spent, nil otherwise.
func (b *identifyBudget) refused() *identifyRefusedError {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocked != nil && !time.Now().Before(b.blocked.resetAt) {
		b.blocked = nil
	}
	return b.blocked
}

// identifyConn watches what discordgo writes on a gateway connection and
// hands each handshake (IDENTIFY, RESUME) to gate before it is written.
// gorilla writes each client frame, header and masked payload, in one
// Write; the HTTP request of the upgrade comes first.
type identifyConn struct {
	net.Conn
	gate func(op int, again bool, closed <-chan struct{}) error

	mu        sync.Mutex // one Write at a time; held while the gate waits
	upgraded  bool
	tail      uint32
	handshook bool // a handshake was written on this connection

	closeOnce sync.Once
	closed    chan struct{}
}

func newIdentifyConn(c net.Conn, gate func(op int, again bool, closed <-chan struct{}) error) *identifyConn {
	return &identifyConn{Conn: c, gate: gate, closed: make(chan struct{})}
}

func (c *identifyConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.upgraded {
		for _, b := range p {
			c.tail = c.tail<<8 | uint32(b)
			if c.tail == 0x0d0a0d0a {
				c.upgraded = true
				break
			}
		}
		return c.Conn.Write(p)
	}
	if op := handshakeOp(p); op != 0 {
		again := c.handshook
		c.handshook = true
		if err := c.gate(op, again, c.closed); err != nil {
			_ = c.Close()
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

func (c *identifyConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// handshakeOp returns 2 or 6 when frame is a client text frame carrying
// IDENTIFY or RESUME as discordgo writes them (the struct's first field,
// "op", first), 0 otherwise.
func handshakeOp(frame []byte) int {
	if len(frame) < 2 || frame[0]&0x0f != 1 || frame[1]&0x80 == 0 {
		return 0
	}
	n := 2
	switch frame[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	const prefix = len(`{"op":2,`)
	if len(frame) < n+4+prefix {
		return 0
	}
	key, payload := frame[n:n+4], frame[n+4:]
	var b [prefix]byte
	for i := range b {
		b[i] = payload[i] ^ key[i%4]
	}
	switch string(b[:]) {
	case `{"op":2,`:
		return 2
	case `{"op":6,`:
		return 6
	}
	return 0
}
