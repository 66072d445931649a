package discord

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
)

// Discord numbers a session's dispatches (s) one by one, and a RESUME
// replays those after the sequence number it carries. A jump in s (a
// replay that lost some, a dispatch the read loop never saw) means
// messages that will never arrive: the shard catches up from history, as a
// new session does, from the moment it notices, holding its scopes'
// gateway messages meanwhile (catchup.go). discordgo stores s before it
// runs the handlers, so the jump is seen, on the read loop, before the
// first event after it is handed over: nothing after the gap overtakes
// what the gap hid.
//
// The catch-up reads from where the gap began: after the newest message
// the session was handed before it (lastMsg), rather than the catch-up
// age back, which would miss a gap that began earlier and spend a busy
// channel's pages on messages answered already. That may be further back
// than the catch-up age: nothing after lastMsg reached this session, so
// nothing there can be one it answered and forgot. It is bounded by
// gapReadMost, and by the pages read per channel. A gap before the first
// message of a session (or of a process: a RESUME whose replay starts
// with it) starts the catch-up age back, as the session's catch-up does.

// gapReadMost bounds how far back a gap's catch-up reads.
const gapReadMost = 24 * time.Hour

// sequenceOf returns discordgo's sequence number of s, the s of the
// dispatch being handled; discordgo v0.29.0 keeps it in an unexported
// *int64 it never replaces (see setResume). It fails when the field
// changes, and the gap is then seen one event later (onDispatch).
func sequenceOf(s *discordgo.Session) (*int64, error) {
	f := reflect.ValueOf(s).Elem().FieldByName("sequence")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*int64]() || f.IsNil() {
		return nil, errors.New("discordgo.Session has no sequence *int64")
	}
	return *(**int64)(unsafe.Pointer(f.UnsafeAddr())), nil
}

// onAnyEvent runs on the read loop before the typed handlers of every
// event discordgo decodes, and notes the dispatch's sequence number.
func (a *Adapter) onAnyEvent(ctx context.Context, sh *shard, ev any) {
	switch ev.(type) {
	case *discordgo.Event, *discordgo.Connect, *discordgo.Disconnect, *discordgo.RateLimit:
		return // not a dispatch, or the raw copy of one (onDispatch)
	}
	if sh.seqp == nil {
		return
	}
	_, ready := ev.(*discordgo.Ready)
	a.noteSeq(ctx, sh, atomic.LoadInt64(sh.seqp), ready)
	switch ev := ev.(type) {
	case *discordgo.MessageCreate:
		// After noteSeq: a gap this message reveals starts before it.
		if ev.Message != nil {
			noteMax(&sh.lastMsg, snowflakeOrder(ev.ID))
		}
	case *discordgo.Ready:
		// A new session: what was posted before it is its catch-up's,
		// and a gap before its first message starts the catch-up age
		// back, as that catch-up does.
		sh.lastMsg.Store(0)
	}
}

// noteMax raises v to n.
func noteMax(v *atomic.Int64, n int64) {
	for {
		cur := v.Load()
		if n <= cur || v.CompareAndSwap(cur, n) {
			return
		}
	}
}

// noteSeq notes the sequence number of a dispatch, and catches up when it
// jumped past the last one; ready (READY) starts a new numbering.
func (a *Adapter) noteSeq(ctx context.Context, sh *shard, seq int64, ready bool) {
	if seq <= 0 {
		return
	}
	prev := sh.lastSeq.Swap(seq)
	if ready || prev <= 0 || seq <= prev+1 {
		return
	}
	a.shardLog(sh).Warn("gateway sequence gap: dispatches missed; catching up from history",
		zap.Int64("after_seq", prev), zap.Int64("seq", seq), zap.Int64("missed", seq-prev-1))
	a.catchUpGap(ctx, sh)
}

// catchUpGap catches up the shard's conversations served lately, as at the
// start of a session, from where the gap began: the DMs' (shard 0) and
// those of each guild the state knows; their gateway messages are held
// until it has. Every other channel is probed at its next message
// (probeLocked), from there too.
func (a *Adapter) catchUpGap(ctx context.Context, sh *shard) {
	floor := a.catchUpFloor()
	if from := sh.lastMsg.Load(); from > 0 {
		floor = max(from, snowflakeAt(time.Now().Add(-gapReadMost)))
	}
	var guilds []string
	if st := sh.session.State; st != nil {
		st.RLock()
		for _, g := range st.Guilds {
			if g != nil && g.ID != "" {
				guilds = append(guilds, g.ID)
			}
		}
		st.RUnlock()
	}
	last := a.beginCatchUpFrom(ctx, sh, nil, floor)
	if last == nil {
		return
	}
	// A message the gap hid in a channel not served lately is found when
	// the channel's next message comes.
	a.startProbeFrom(sh, true, floor)
	holds := sh.holdScopes(nil, guilds...)
	for _, g := range guilds {
		h := holds[g]
		a.spawn(func() { a.catchUpGuildFrom(ctx, sh, g, zeroTime, nil, h, last, floor) })
	}
}
