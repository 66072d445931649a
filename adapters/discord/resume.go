package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
)

// A shard's gateway session outlives the process that holds it. Discord
// replays every dispatch a session missed to a client that RESUMEs it (op
// 6: session_id and the last sequence number, on the session's
// resume_gateway_url), and keeps a session whose socket merely dropped
// resumable for a while. So each shard keeps its session in the store,
// through the core (ResumeCore): its ID and URL when READY arrives, its
// sequence number at most every saveSessionEvery and at stop. The next
// process that holds the shard (a restart, or the replica that takes the
// shard over) resumes it when it is younger than resumeWithin, and gets
// what was posted meanwhile, a new DM's first message included, which no
// history read can find (catchup.go). A session is saved at once at READY,
// marked as not caught up: a process that dies before the session's
// catch-up has handed over what was posted before it leaves the next one
// to resume the session and run the catch-up again (Discord replays the
// GUILD_CREATEs that start the guilds'). A stop closes with 1012, which
// keeps the session resumable (1000 would end it). When Discord answers
// that the session cannot be resumed (op 9), discordgo identifies afresh
// and the new session catches up from history as before.
const (
	// resumeWithin bounds the age of a stored session the next process
	// tries to resume. Discord does not say how long it keeps a session
	// whose connection dropped (minutes, in practice); past this a RESUME
	// would most likely earn op 9, a round trip lost before IDENTIFY, and
	// the history catch-up reads what was missed anyway.
	resumeWithin = 3 * time.Minute
	// saveSessionEvery spaces the writes of a shard's sequence number. A
	// resume from an older one only replays events the inbox has already
	// (every event is keyed), so one write a second is enough; one per
	// event would double the store's writes.
	saveSessionEvery = time.Second
	// saveSessionWithin bounds the last write, at stop.
	saveSessionWithin = 2 * time.Second
)

// ResumeCore is implemented by a core that keeps state for the adapter
// in the store (*bridge.Bridge).
type ResumeCore interface {
	AdapterState(ctx context.Context, name string, maxAge time.Duration) (string, bool, error)
	SaveAdapterState(ctx context.Context, name, text string) error
	// UpdateAdapterState is a read-modify-write of name's text by
	// compare-and-set: change is called again with what another process
	// wrote in between, so that a count every replica adds to loses no
	// addition.
	UpdateAdapterState(ctx context.Context, name string, maxAge time.Duration, change func(text string, ok bool) (string, error)) (string, error)
}

// gatewaySession is what RESUMEs a shard's session.
type gatewaySession struct {
	ID  string `json:"session_id"`
	URL string `json:"resume_gateway_url"`
	Seq int64  `json:"seq"`
	// CaughtUp is set once the session's catch-up has handed over what
	// was posted before the session; until then Seq is READY's.
	CaughtUp bool `json:"caught_up"`
}

// stateName is the name the shard's session is kept under: a session
// belongs to one shard of one shard count.
func (sh *shard) stateName() string {
	return fmt.Sprintf("discord/gateway/%d-of-%d", sh.id, sh.count)
}

// current returns the shard's session with the latest sequence number,
// caught up.
func (sh *shard) current() gatewaySession {
	sh.sessMu.Lock()
	defer sh.sessMu.Unlock()
	s := sh.sess
	if s.ID != "" {
		s.Seq, s.CaughtUp = sh.seq.Load(), true
	}
	return s
}

// ready returns the shard's session as READY left it: at READY's
// sequence number, not caught up.
func (sh *shard) ready() gatewaySession {
	sh.sessMu.Lock()
	defer sh.sessMu.Unlock()
	return sh.sess
}

// holding reports whether some scope's gateway messages are held for a
// catch-up: a sequence number past them must not be saved, or a resume
// would skip what a process dying meanwhile never handed over.
func (sh *shard) holding() bool {
	sh.holdMu.Lock()
	defer sh.holdMu.Unlock()
	return len(sh.held) > 0
}

// onDispatch notes the sequence number of every dispatch, and the new
// session of a READY (the payload's resume_gateway_url, which discordgo
// does not keep); it runs on the read loop after the event's handlers.
func (a *Adapter) onDispatch(ctx context.Context, sh *shard, e *discordgo.Event) {
	if e == nil || e.Operation != 0 || e.Sequence == 0 {
		return
	}
	// Events discordgo does not decode reach no typed handler.
	a.noteSeq(ctx, sh, e.Sequence, e.Type == "READY")
	if e.Type == "READY" || e.Type == "RESUMED" {
		a.onSessionLive(sh)
	}
	if e.Type != "READY" {
		sh.seq.Store(e.Sequence)
		return
	}
	var r gatewaySession
	if err := json.Unmarshal(e.RawData, &r); err != nil || r.ID == "" {
		r = gatewaySession{}
	}
	r.Seq, r.CaughtUp = e.Sequence, false
	sh.sessMu.Lock()
	sh.sess = r
	sh.seq.Store(e.Sequence)
	sh.sessMu.Unlock()
	select {
	case sh.readied <- struct{}{}:
	default:
	}
}

// keepSession saves the shard's session until ctx ends: a new one (READY)
// at once, not caught up; then, every saveSessionEvery, the sequence
// number seen one tick earlier, whose events have been handed to the core
// and recorded since; none while the shard holds messages for a catch-up,
// or messages the store refused are to be read again.
func (a *Adapter) keepSession(ctx context.Context, sh *shard, rc ResumeCore) {
	tick := time.NewTicker(a.saveSessionEvery)
	defer tick.Stop()
	var prev gatewaySession
	for {
		select {
		case <-ctx.Done():
			return
		case <-sh.readied:
			prev = gatewaySession{}
			a.saveSession(ctx, sh, rc, sh.ready())
		case <-tick.C:
			cur := sh.current()
			save := prev
			prev = cur
			if sh.holding() || a.missed.pending() {
				prev = gatewaySession{}
				// A READY whose save failed is tried again: the store
				// must not name an older session the next process would
				// resume instead of this one.
				if r := sh.ready(); r.ID != sh.saved.ID {
					a.saveSession(ctx, sh, rc, r)
				}
				continue
			}
			if save.ID != "" && save.ID == cur.ID {
				a.saveSession(ctx, sh, rc, save)
			}
		}
	}
}

// saveSession writes s as the shard's session (none: forgets it), unless
// it was the last written.
func (a *Adapter) saveSession(ctx context.Context, sh *shard, rc ResumeCore, s gatewaySession) {
	if s == sh.saved {
		return
	}
	var text []byte
	var err error
	if s.ID != "" {
		text, err = json.Marshal(s)
	}
	if err == nil {
		err = rc.SaveAdapterState(ctx, sh.stateName(), string(text))
	}
	if err != nil {
		if !sh.saveFailing {
			a.shardLog(sh).Warn("gateway session not saved; the next process may not resume it", zap.Error(err))
		}
		sh.saveFailing = true
		return
	}
	sh.saved, sh.saveFailing = s, false
}

// saveLastSession saves the session of a shard whose gateway is closed,
// with its last sequence number, so that the next process resumes after
// what this one handed over; not when messages were held for a catch-up,
// nor while messages the store refused are still to be read again
// (missed), as the next process would skip them (what was saved before
// stays, and the resume replays them).
func (a *Adapter) saveLastSession(ctx context.Context, sh *shard) {
	rc, ok := a.core.(ResumeCore)
	if !ok || sh.holding() || a.missed.pending() {
		return
	}
	s := sh.current()
	if s.ID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveSessionWithin)
	defer cancel()
	a.saveSession(ctx, sh, rc, s)
}

// loadSession prepares the shard's first Open to resume the session the
// store holds for it, when one was saved within resumeWithin, and starts
// the catch-up of a session whose catch-up never ended.
func (a *Adapter) loadSession(ctx context.Context, sh *shard) {
	rc, ok := a.core.(ResumeCore)
	if !ok {
		return
	}
	log := a.shardLog(sh)
	text, ok, err := rc.AdapterState(ctx, sh.stateName(), resumeWithin)
	if err != nil {
		log.Warn("stored gateway session not read; identifying", zap.Error(err))
		return
	}
	if !ok {
		return
	}
	var s gatewaySession
	if err := json.Unmarshal([]byte(text), &s); err != nil || s.ID == "" || s.URL == "" || s.Seq <= 0 {
		log.Warn("stored gateway session unusable; identifying", zap.String("stored", text), zap.Error(err))
		return
	}
	if err := setResume(sh.session, s.ID, s.URL+"?v="+discordgo.APIVersion+"&encoding=json", s.Seq); err != nil {
		resumeUnsupported.Do(func() {
			log.Warn("discordgo cannot be made to resume a stored gateway session; identifying, and catching up from history", zap.Error(err))
		})
		return
	}
	sh.sessMu.Lock()
	sh.sess = s
	sh.seq.Store(s.Seq)
	sh.sessMu.Unlock()
	sh.lastSeq.Store(s.Seq)
	sh.saved = s
	log.Info("resuming the stored gateway session", zap.String("session_id", s.ID), zap.Int64("seq", s.Seq), zap.Bool("caught_up", s.CaughtUp))
	if !s.CaughtUp {
		// Held before Open: Discord replays what the session missed
		// before RESUMED.
		a.beginCatchUp(ctx, sh, nil)
	}
}

// resumeUnsupported logs once per process that setResume failed.
var resumeUnsupported sync.Once

// setResume makes discordgo's next Open send op 6 RESUME for session id at
// seq, on gateway (a URL with the query discordgo adds), instead of op 2
// IDENTIFY. discordgo v0.29.0 resumes when its unexported sessionID is set
// and *sequence is not 0, and offers no way to set them
// (bwmarrin/discordgo#1502): this writes them, and gateway, through
// reflect and unsafe, after checking each field exists with the type
// v0.29.0 gives it. Anything else (a discordgo upgrade that renamed them)
// is an error, and s is left alone: the caller identifies.
// TestSetResumePinsDiscordgo fails when the fields change. Call it before
// Open, while nothing else uses s.
func setResume(s *discordgo.Session, id, gateway string, seq int64) error {
	v := reflect.ValueOf(s).Elem()
	sessionID, gw, sequence := v.FieldByName("sessionID"), v.FieldByName("gateway"), v.FieldByName("sequence")
	switch {
	case sessionID.Kind() != reflect.String, gw.Kind() != reflect.String:
		return errors.New("discordgo.Session has no sessionID and gateway strings")
	case !sequence.IsValid() || sequence.Type() != reflect.TypeFor[*int64]() || sequence.IsNil():
		return errors.New("discordgo.Session has no sequence *int64")
	}
	s.Lock()
	defer s.Unlock()
	*(*string)(unsafe.Pointer(sessionID.UnsafeAddr())) = id
	*(*string)(unsafe.Pointer(gw.UnsafeAddr())) = gateway
	atomic.StoreInt64(*(**int64)(unsafe.Pointer(sequence.UnsafeAddr())), seq)
	return nil
}
