package discord

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
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
// start of a session: the DMs' (shard 0) and those of each guild the
// state knows; their gateway messages are held until it has. Every other
// channel is probed at its next message (probeLocked).
func (a *Adapter) catchUpGap(ctx context.Context, sh *shard) {
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
	last := a.beginCatchUp(ctx, sh, nil)
	if last == nil {
		return
	}
	// A message the gap hid in a channel not served lately is found when
	// the channel's next message comes.
	a.startProbe(sh, true)
	holds := sh.holdScopes(nil, guilds...)
	for _, g := range guilds {
		h := holds[g]
		a.spawn(func() { a.catchUpGuild(ctx, sh, g, zeroTime, nil, h, last) })
	}
}
