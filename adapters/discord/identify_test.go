package discord

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/pgtest"
)

// stormScale divides the identify timing and the storm of
// TestInvalidSessionStorm: Discord's 30 s storm, 1–5 s wait after op 9 and
// 20 s to be back become 3 s, 100–500 ms and 2 s.
const stormScale = 10

// TestInvalidSessionStorm: a gateway that answers every IDENTIFY and RESUME
// with op 9 for 30 s (scaled) gets at most 10 IDENTIFYs, each after op 9
// waiting at least Discord's 1 s (scaled); once the gateway lets it in,
// the bridge is live again within 20 s (scaled) and answers.
func TestInvalidSessionStorm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.tune = func(a *Adapter) { a.idTiming = defaultIdentifyTiming.scaled(stormScale) }
	r := e.start(t)
	ctx := testCtx(t)
	timing := defaultIdentifyTiming.scaled(stormScale)
	storm := 30 * time.Second / stormScale

	e.fake.SetInvalidSessions(true)
	// The connection drops: the bridge RESUMEs, is answered op 9, identifies…
	if err := e.fake.DropConnection(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := e.fake.WaitHandshake(ctx, func(h discordtest.Handshake) bool { return h.Invalidated })
	if err != nil {
		t.Fatal(err)
	}
	start := first.At
	select { // the storm's length, as the scenario says; nothing is awaited
	case <-time.After(storm - time.Since(start)):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	e.fake.SetInvalidSessions(false)
	end := time.Now()

	var identifies []discordtest.Handshake
	for _, h := range e.fake.Handshakes() {
		if h.Op == 2 && !h.At.Before(start) && !h.At.After(end) {
			identifies = append(identifies, h)
		}
	}
	if len(identifies) > 10 {
		t.Errorf("%d IDENTIFYs in a %s op 9 storm, want at most 10", len(identifies), storm)
	}
	for i := 1; i < len(identifies); i++ {
		if gap := identifies[i].At.Sub(identifies[i-1].At); gap < timing.invalidMin {
			t.Errorf("IDENTIFY %d came %s after the one op 9 refused, want at least %s", i+1, gap, timing.invalidMin)
			break
		}
	}

	live, err := e.fake.WaitHandshake(ctx, func(h discordtest.Handshake) bool { return h.Op == 2 && !h.Invalidated && h.At.After(end) })
	if err != nil {
		t.Fatal(err)
	}
	if back := live.At.Sub(end); back > 20*time.Second/stormScale {
		t.Errorf("a session identified %s after the gateway let the bridge in, want within %s", back, 20*time.Second/stormScale)
	}
	if _, err := e.fake.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	post(t, e, discordtest.MessageCreate{ChannelID: "77", Content: "back?"})
	e.waitBot(t, "77", "You said: back?")
	if err := r.a.Ready(); err != nil {
		t.Errorf("Ready() = %v once a session is live again", err)
	}
}

// TestIdentifyBudgetStops: with the day's IDENTIFY budget down to its
// reserve and two more, an op 9 storm gets two IDENTIFYs; then the shard
// stops identifying, and says why in Ready and the log. The count is kept
// in the store: a restart that cannot read GET /gateway/bot does not
// identify either.
func TestIdentifyBudgetStops(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	e := newEnv(t, func(e *env) { e.log = zap.New(core) })
	e.fake.SetSessionStartLimit(identifyReserve+2, time.Hour)
	r := e.start(t) // one IDENTIFY: one left above the reserve
	ctx := testCtx(t)
	e.fake.SetInvalidSessions(true)
	if err := e.fake.InvalidateSession(ctx, false); err != nil {
		t.Fatal(err)
	}
	waitLog(t, logs, "IDENTIFY budget nearly spent")
	if err := r.a.Ready(); err == nil || !strings.Contains(err.Error(), "IDENTIFY budget nearly spent") {
		t.Errorf("Ready() = %v, want the IDENTIFY budget named", err)
	}
	if got := e.fake.SessionStartRemaining(); got != identifyReserve {
		t.Errorf("the fake's budget: %d left, want the reserve, %d", got, identifyReserve)
	}
	text, ok, err := r.core.AdapterState(ctx, budgetState, budgetWindow)
	if err != nil || !ok {
		t.Fatalf("budget not kept: %q, %v, %v", text, ok, err)
	}
	var rec budgetRecord
	if err := json.Unmarshal([]byte(text), &rec); err != nil || rec.Remaining != identifyReserve || rec.Identifies != 2 {
		t.Errorf("kept budget %q (%v), want %d remaining after 2 IDENTIFYs", text, err, identifyReserve)
	}
	r.stop(t)

	// The next process cannot ask Discord: the kept count stops it.
	e.fake.SetInvalidSessions(false)
	e.fake.SetSessionStartLimit(identifyReserve+2, time.Hour) // what it would not read
	core, logs = observer.New(zapcore.InfoLevel)
	e.log = zap.New(core)
	e.discordRT = func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.HasSuffix(req.URL.Path, "/gateway/bot") {
				return nil, errors.New("unreachable")
			}
			return next.RoundTrip(req)
		})
	}
	conns := len(e.fake.Connections())
	r = e.build(t)
	r.run(t)
	waitLog(t, logs, "IDENTIFY budget nearly spent")
	if err := r.a.Ready(); err == nil || !strings.Contains(err.Error(), "IDENTIFY budget nearly spent") {
		t.Errorf("restarted: Ready() = %v, want the IDENTIFY budget named", err)
	}
	r.stop(t)
	for _, h := range handshakesAfter(e, conns) {
		if h.Op == 2 {
			t.Errorf("restarted with the kept budget spent: IDENTIFY sent (%v)", brief([]discordtest.Handshake{h}))
		}
	}
}

// waitLog waits for a log entry whose message starts with msg.
func waitLog(t *testing.T, logs *observer.ObservedLogs, msg string) {
	t.Helper()
	ctx := testCtx(t)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if logs.FilterMessageSnippet(msg).Len() > 0 {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("no log %q", msg)
		}
	}
}

// TestIdentifyPace: IDENTIFYs whose sessions die at once (right after
// READY) are spaced by a doubling backoff up to its most; one after op 9
// waits Discord's 1–5 s at least; only a session that stayed up for
// stableAfter starts the backoff over.
func TestIdentifyPace(t *testing.T) {
	tm := defaultIdentifyTiming
	var p identifyPace
	now := time.Unix(1_700_000_000, 0)
	// Each session lives 10 ms after READY, and the next IDENTIFY leaves
	// as soon as it may.
	var waits []time.Duration
	for range 7 {
		w := p.next(now, false, tm)
		waits = append(waits, w)
		now = now.Add(w)
		p.live(now)
		now = now.Add(10 * time.Millisecond)
		p.ended(now)
	}
	want := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		// Each wait counts from the last IDENTIFY, 10 ms ago.
		if w := want[i] - 10*time.Millisecond; i > 0 && waits[i] != w || i == 0 && waits[i] != 0 {
			t.Errorf("IDENTIFY %d waits %s, want %s", i+1, waits[i], max(w, 0))
		}
	}
	// After op 9: at least Discord's wait, even with the backoff over.
	p = identifyPace{}
	p.next(now, false, tm)
	for range 50 {
		if w := p.next(now.Add(time.Hour), true, tm); w < tm.invalidMin || w > tm.invalidMax {
			t.Fatalf("after op 9, IDENTIFY waits %s, want within [%s, %s]", w, tm.invalidMin, tm.invalidMax)
		}
		p = identifyPace{}
		p.next(now, false, tm)
	}
	// A session that held starts the backoff over.
	p = identifyPace{}
	p.next(now, false, tm)
	p.next(now, false, tm)
	p.live(now)
	now = now.Add(tm.stableAfter)
	p.ended(now)
	if w := p.next(now, false, tm); w != 0 {
		t.Errorf("after a session that held %s, IDENTIFY waits %s, want 0", tm.stableAfter, w)
	}
}

// TestReconnectBackoff: the wait between gateway connections starts over
// only after one that stayed up stableAfter; connections that die right
// after READY double it, up to its most.
func TestReconnectBackoff(t *testing.T) {
	a := &Adapter{retryMin: time.Second, idTiming: defaultIdentifyTiming}
	var backoff time.Duration
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		if backoff = a.reconnectBackoff(backoff, 50*time.Millisecond); backoff != want {
			t.Fatalf("reconnection %d after a connection that died at once: wait %s, want %s", i+1, backoff, want)
		}
	}
	for range 20 {
		backoff = a.reconnectBackoff(backoff, time.Millisecond)
	}
	if backoff != maxBackoff {
		t.Errorf("after many: wait %s, want the most, %s", backoff, maxBackoff)
	}
	if got := a.reconnectBackoff(backoff, defaultIdentifyTiming.stableAfter); got != 0 {
		t.Errorf("after a connection that held %s: wait %s, want 0", defaultIdentifyTiming.stableAfter, got)
	}
}

// TestIdentifyBudgetCountsEveryReplica: two processes of one bot (two
// adapters on one store: on bbolt one core, on PostgreSQL two replicas)
// identify at once, many times; every IDENTIFY is counted in the kept
// budget, none lost to the other's write.
func TestIdentifyBudgetCountsEveryReplica(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		name := "bbolt"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(e *env) {
				if pg {
					e.dsn = pgtest.Schema(t)
				}
			})
			var adapters []*Adapter
			for range 2 {
				if !pg && len(adapters) == 1 {
					a, err := New(e.cfg, adapters[0].core, zaptest.NewLogger(t))
					if err != nil {
						t.Fatal(err)
					}
					adapters = append(adapters, a)
					continue
				}
				r := e.build(t)
				t.Cleanup(func() {
					r.core.Close()
					if err := r.store.Close(); err != nil {
						t.Error(err)
					}
				})
				adapters = append(adapters, r.a)
			}
			ctx := testCtx(t)
			gb := &discordgo.GatewayBotResponse{SessionStartLimit: discordgo.SessionInformation{Total: 1000, Remaining: 1000, ResetAfter: int(time.Hour / time.Millisecond)}}
			for _, a := range adapters {
				a.budget.load(ctx, a, gb)
			}
			const each = 15
			var wg sync.WaitGroup
			for _, a := range adapters {
				wg.Go(func() {
					for range each {
						if refused, _ := a.budget.spend(a, a.log); refused != nil {
							t.Error(refused)
							return
						}
					}
				})
			}
			wg.Wait()
			text, ok, err := adapters[0].core.(ResumeCore).AdapterState(ctx, budgetState, budgetWindow)
			if err != nil || !ok {
				t.Fatalf("budget not kept: %q, %v, %v", text, ok, err)
			}
			var rec budgetRecord
			if err := json.Unmarshal([]byte(text), &rec); err != nil || rec.Identifies != 2*each || rec.Remaining != 1000-2*each {
				t.Errorf("kept budget %q (%v) after %d IDENTIFYs by two processes at once, want each counted: %d identifies, %d remaining",
					text, err, 2*each, 2*each, 1000-2*each)
			}
		})
	}
}
