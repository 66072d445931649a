package bridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// A Stop is one more fact of an inbox entry (store.Stops), kept and
// honoured by the same code on every store:
//
//   - The press is recorded like any event; before its record is written,
//     its target entry is marked stopped in the store (markStop), so that
//     the notification the record brings to other replicas (Listen) comes
//     after the mark.
//   - The process that runs the target, here or on another replica, cancels
//     the run's context with a stopError (cancelRun; checkStops on a
//     replica's notification). Its workspace call ends; nothing of its
//     answer is posted: deliver drops it, and the store refuses to keep an
//     answer of a stopped entry (store.ErrStopped) even when the answer
//     came first and the stop reached the store before the answer's write.
//   - An entry read back stopped (a restart, another replica's sweep) is
//     closed without running or posting anything (runTaken).
//   - The press itself is answered by one short line (stopNotice).

// stopError is the cause of a run's context canceled by a Stop.
type stopError struct{ by string }

func (e stopError) Error() string { return "stopped by " + e.by }

// stoppedBy reports who stopped the run ctx belongs to.
func stoppedBy(ctx context.Context) (string, bool) {
	var se stopError
	if errors.As(context.Cause(ctx), &se) {
		return se.by, true
	}
	return "", false
}

// runningWork is a run a Stop can cancel.
type runningWork struct {
	conv   string
	cancel context.CancelCauseFunc
}

// working gives the run of j a context a Stop cancels, and returns it
// with the function that ends the run's registration.
func (r *dispatcher) working(ctx context.Context, j *job) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	key := j.ev.Key
	r.b.mu.Lock()
	r.running[key] = &runningWork{conv: j.ev.Conversation, cancel: cancel}
	r.b.mu.Unlock()
	return ctx, func() {
		r.b.mu.Lock()
		delete(r.running, key)
		r.b.mu.Unlock()
		cancel(nil)
	}
}

// cancelRun cancels the run of the entry key if it runs here.
func (r *dispatcher) cancelRun(key, by string) {
	r.b.mu.Lock()
	w := r.running[key]
	r.b.mu.Unlock()
	if w != nil {
		w.cancel(stopError{by: by})
	}
}

// runsInLocked reports whether a run of conv is under way here.
func (r *dispatcher) runsInLocked(conv string) bool {
	for _, w := range r.running {
		if w.conv == conv {
			return true
		}
	}
	return false
}

// stopCheckEvery spaces the reads of a conversation's stops: a flood of
// messages into a conversation whose turn runs brings a notification each,
// and a read of its entries each would cost the flood's square.
const stopCheckEvery = 200 * time.Millisecond

// checkStopsLocked has the stops of conv read soon (checkStops), once for
// however many notifications come before the read.
func (r *dispatcher) checkStopsLocked(ctx context.Context, conv string) {
	if _, reading := r.stopChecks[conv]; reading {
		r.stopChecks[conv] = true
		return
	}
	r.stopChecks[conv] = false
	r.loops.Go(func() { r.checkStops(ctx, conv) })
}

// checkStops reads the unanswered entries of conv and cancels the runs
// here of those a Stop on another replica marked, after stopCheckEvery,
// and again while notifications came during a read.
func (r *dispatcher) checkStops(ctx context.Context, conv string) {
	b := r.b
	for {
		t := time.NewTimer(stopCheckEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			b.mu.Lock()
			delete(r.stopChecks, conv)
			b.mu.Unlock()
			return
		}
		b.mu.Lock()
		r.stopChecks[conv] = false
		b.mu.Unlock()
		octx, cancel := r.opCtx()
		entries, err := r.st.PendingOf(octx, conv)
		cancel()
		if err != nil {
			b.log.Warn("stops not read", zap.String("conversation", conv), zap.Error(err))
		}
		for _, e := range entries {
			if e.StoppedBy != "" {
				r.cancelRun(e.Key, e.StoppedBy)
			}
		}
		b.mu.Lock()
		again := r.stopChecks[conv] && r.runsInLocked(conv)
		if !again {
			delete(r.stopChecks, conv)
		}
		b.mu.Unlock()
		if !again {
			return
		}
	}
}

// What a Stop press found.
const (
	stopNothing = iota + 1 // nothing of the user's to stop
	stopDone               // stopped now
	stopAgain              // stopped already
	stopLate               // answered already
	stopRefused            // someone else's run, and the presser is no admin
)

// stopResult is what markStop did, kept on the press's job for its answer.
type stopResult struct {
	outcome int
	target  Event // the stopped event, for the notice's wording
}

// markStop finds the entry a Stop press is for and marks it stopped. It
// returns an error only when the store could not be read or written: the
// press is then not recorded, and the platform delivers it again.
func (b *Bridge) markStop(ctx context.Context, ev Event) (stopResult, error) {
	entries, err := b.store.PendingOf(ctx, ev.Conversation)
	if err != nil {
		return stopResult{}, fmt.Errorf("read the conversation's entries: %w", err)
	}
	target, found := stopTarget(entries, ev)
	if !found {
		if ev.Action.Value != "" {
			return stopResult{outcome: stopLate}, nil // answered, and forgotten by the inbox
		}
		return stopResult{outcome: stopNothing}, nil
	}
	tev, err := decodeEvent(target.Key, target.Event)
	if err != nil {
		return stopResult{outcome: stopNothing}, nil
	}
	res := stopResult{target: tev}
	if tev.User.ID != ev.User.ID && !b.set.cat.Load().isAdmin(ev.User) {
		res.outcome = stopRefused
		return res, nil
	}
	if target.StoppedBy != "" {
		res.outcome = stopAgain
		return res, nil
	}
	ok, err := b.store.Stop(ctx, target.Key, ev.User.ID, b.cfg.Now())
	switch {
	case errors.Is(err, store.ErrUnknownEntry):
		res.outcome = stopLate
		return res, nil
	case err != nil:
		return stopResult{}, fmt.Errorf("stop %s: %w", target.Key, err)
	case !ok:
		res.outcome = stopLate // answered (or stopped) meanwhile
		return res, nil
	}
	b.disp.cancelRun(target.Key, ev.User.ID)
	res.outcome = stopDone
	return res, nil
}

// stopTarget picks, among a conversation's unanswered entries, the one a
// press stops: the entry it names, or, for a press that names none, the
// run of the conversation under way (sent) or about to start, oldest
// first. Only chat messages and flow runs can be stopped.
func stopTarget(entries []store.InboxEntry, press Event) (store.InboxEntry, bool) {
	var next store.InboxEntry
	found := false
	for _, e := range entries {
		if e.Key == press.Key {
			continue
		}
		if press.Action.Value != "" {
			if e.Key == press.Action.Value {
				return e, true
			}
			continue
		}
		ev, err := decodeEvent(e.Key, e.Event)
		if err != nil || ev.alone {
			continue
		}
		if j := classify(ev); j.kind != KindMessage && j.command != CommandFlow && !(j.kind == KindAction && ev.Action.ID == ActionConfirm) {
			continue
		}
		if e.State == store.Sent {
			return e, true
		}
		if !found {
			next, found = e, true
		}
	}
	return next, found
}

// stopPressed answers a Stop press: what markStop did when the press was
// recorded, or, for a press read back from the inbox (a restart between
// its record and its answer), what marking it again finds.
func (b *Bridge) stopPressed(ctx context.Context, log *zap.Logger, j job) {
	res := j.stop
	if res == nil {
		again, err := b.markStop(ctx, j.ev)
		if err != nil {
			log.Warn("stop not read again; told as done", zap.Error(err))
			again = stopResult{outcome: stopAgain}
		}
		res = &again
	}
	b.stopNotice(ctx, log, j.ev, *res)
}

// stoppedEarlier closes an entry read back stopped: a flow's audit says
// who stopped it.
func (b *Bridge) stoppedEarlier(log *zap.Logger, ev Event, by string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), noticeTimeout)
	defer cancel()
	if name, isFlow := flowOf(ev); isFlow {
		entry := b.auditEntry(ev, name, ev.Params)
		entry.Outcome, entry.Detail = OutcomeStopped, "stopped by "+by
		b.audit(ctx, log, entry)
	}
	b.endStopped(ctx, log, ev, "", true, by)
}

// stopNotice answers a Stop press in one short line, to its presser.
func (b *Bridge) stopNotice(ctx context.Context, log *zap.Logger, ev Event, res stopResult) {
	text := msgStopNothing
	switch res.outcome {
	case stopDone:
		text = msgStopped
		if name, isFlow := flowOf(res.target); isFlow {
			text = fmt.Sprintf(msgStoppedFlow, cmp.Or(name, "your flow"))
		}
		log.Info("run stopped", zap.String("target", res.target.Key), zap.String("by", ev.User.ID))
	case stopAgain:
		text = msgStopAgain
	case stopLate:
		text = msgStopLate
	case stopRefused:
		text = msgStopRefused
	}
	b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Ephemeral: true, Text: text})
}

// flowOf reports whether ev runs a flow (a /flow command, the Run of a
// confirmation or approval, or a scheduled run), and the flow's name where
// the event says it ("" when only the flow's run knows it).
func flowOf(ev Event) (name string, isFlow bool) {
	j := classify(ev)
	switch {
	case j.command == CommandFlow:
		name = ev.Flow
		if name == "" {
			name, _, _ = ParseFlowArgs(j.args)
		}
		return name, true
	case j.kind == KindAction && ev.Action.ID == ActionConfirm, j.kind == KindScheduled:
		return ev.Flow, true
	}
	return "", false
}

// endStopped closes the entry of a stopped run without posting anything of
// its answer; a flow's progress message, when there is one (replace), says
// it was stopped in place of its Stop button, seen by whoever saw it
// (ephemeral as the answer would have been: a public message cannot be
// replaced by a private one).
func (b *Bridge) endStopped(ctx context.Context, log *zap.Logger, ev Event, replace MessageRef, ephemeral bool, by string) {
	ctx = context.WithoutCancel(ctx)
	log.Info("stopped; its answer is not posted", zap.String("event_key", ev.Key), zap.String("stopped_by", by))
	b.metrics.refused("stopped")
	if replace != "" {
		b.replace(ctx, ev, replace, Reply{Kind: ReplyInfo, Ephemeral: ephemeral, Text: msgStoppedHere})
	} else if p, ok := ev.reply.(Progresser); ok {
		// A chat answer's working indicator, where it is a message (Slack's
		// "Thinking…" placeholder, with its Stop button): the answer
		// would have replaced it; it says Stopped instead.
		if err := p.Progress(ctx, "", Reply{Kind: ReplyProgress, Text: msgStoppedHere}); err != nil {
			log.Debug("working indicator not rewritten", zap.Error(err))
		}
	}
	b.answered(ctx, log, ev, "", nil)
}

// withStop puts a Stop button for the entry key on a working message.
func withStop(key string, r Reply) Reply {
	if key == "" {
		return r
	}
	r.Buttons = append(r.Buttons, Button{Action: Action{ID: ActionStop, Value: key}, Label: "Stop", Style: "danger"})
	return r
}

// sessionStatus sets the conversation's agent session status where the
// platform shows one.
func (b *Bridge) sessionStatus(ctx context.Context, ev Event, s SessionStatus) {
	if st, ok := ev.reply.(SessionStatuser); ok {
		st.SetSessionStatus(context.WithoutCancel(ctx), s)
	}
}
