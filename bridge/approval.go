package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// A flow whose confirmation names approvers (Flow.Approvers) does not ask
// its caller: the request is posted in the conversation, for everyone to
// see, with Approve and Refuse buttons only an approver's press answers. It
// is kept as a due token (store.DueTokenPrefix) that lives as long as the
// request stays open, so that a press after a restart, or on another
// replica, finds it, and one nobody answers is found when it expires
// (ExpireApprovals). Whoever takes the token (TakeToken: one taker among
// replicas) answers the request, and tells its requester how it ended.
//
// The buttons are Run and Cancel's own actions (ActionConfirm,
// ActionCancel), their value marked approvalValue: adapters already put
// the answer to those presses in place of the question where the platform
// can, the console already binds its keys to them, and a restart that cuts
// an approved run short already tells of a flow, not of a chat message.

// approvalTokens starts the store ID of every request for approval; the
// platform's name and the request's ID follow, so that a replica finds
// the expired requests of the platforms it can tell.
const approvalTokens = store.DueTokenPrefix + "approve:"

func approvalToken(platform, id string) string { return approvalTokens + platform + ":" + id }

// approvalValue starts the value of an Approve or Refuse button; the
// request's ID follows. A caller's own Run and Cancel carry the ID alone.
const approvalValue = "approval:"

// approvalSweep bounds the expired requests one ExpireApprovals takes per
// platform; the next sweep takes more.
const approvalSweep = 100

// storedApproval is a request for approval as Tokens keep it.
type storedApproval struct {
	Flow   string            `json:"flow"`
	Params map[string]string `json:"params,omitempty"`
	// Event is the request's event as the inbox keeps it: its requester is
	// told through it, from any replica, after any restart.
	Event json.RawMessage `json:"event"`
	// Timeout is how long the request was open for.
	Timeout time.Duration `json:"timeout"`
}

// approval is a request taken from the store. req is the request's event,
// bound to its platform when that could be done (req.reply != nil).
type approval struct {
	storedApproval
	expires time.Time
	req     Event
}

// askApproval posts the request to run f in the conversation, for f's
// approvers to answer.
func (b *Bridge) askApproval(ctx context.Context, log *zap.Logger, ev Event, f *Flow, params map[string]string) {
	data, err := encodeEvent(ev)
	id := randomID()
	timeout := f.approvalTimeout()
	if err != nil {
		log.Error("request for approval not encoded", zap.Error(err))
	}
	if err != nil || !b.putToken(ctx, log, "", approvalToken(ev.Platform, id), storedApproval{Flow: f.Name, Params: params, Event: data, Timeout: timeout}, b.cfg.Now().Add(timeout)) {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgNotSaved})
		return
	}
	// The request is work under way, until it waits on its approvers.
	b.sessionStatus(ctx, ev, SessionProcessing)
	entry := b.auditEntry(ev, f.Name, params)
	entry.Outcome, entry.Detail = OutcomeConfirm, "approval asked of "+strings.Join(f.Approvers, ", ")
	b.audit(ctx, log, entry)
	var s strings.Builder
	fmt.Fprintf(&s, msgApprovalAsk, displayName(ev.User), f.Name)
	if len(params) == 0 {
		s.WriteString(".")
	} else {
		s.WriteString(" with these parameters:")
		for _, k := range slices.Sorted(maps.Keys(params)) {
			fmt.Fprintf(&s, "\n• `%s` = `%s`", k, params[k])
		}
	}
	s.WriteString("\n\n")
	fmt.Fprintf(&s, msgApprovalWho, approversText(f), humanDuration(timeout))
	b.tell(ctx, log, ev, Reply{Kind: ReplyConfirm, Text: s.String(), Buttons: []Button{
		{Action: Action{ID: ActionConfirm, Value: approvalValue + id}, Label: "Approve", Style: "primary"},
		{Action: Action{ID: ActionCancel, Value: approvalValue + id}, Label: "Refuse", Style: "danger"},
	}})
	b.sessionStatus(ctx, ev, SessionSuspended)
}

// answerApproval answers a press of Approve or Refuse.
func (b *Bridge) answerApproval(ctx context.Context, log *zap.Logger, ev Event) {
	tokenID := approvalToken(ev.Platform, strings.TrimPrefix(ev.Action.Value, approvalValue))
	var s storedApproval
	expires, ok := b.takeToken(ctx, log, "", tokenID, &s)
	if !ok {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgApprovalGone})
		return
	}
	a := b.restoreApproval(log, s, expires)
	log = log.WithLazy(zap.String("flow", a.Flow), zap.String("requester", a.req.User.ID))
	if b.cfg.Now().After(expires) {
		// Expired, and not yet swept: taken here, it is told here.
		b.expireApproval(ctx, log, a)
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: fmt.Sprintf(msgApprovalLate, a.Flow)})
		return
	}
	// Who may answer is decided by the configuration in force: a flow
	// removed since the request closes it, whoever presses.
	f, known := b.set.cat.Load().flows[a.Flow]
	if !known {
		b.closeApproval(ctx, log, ev, a, "flow removed before approval", fmt.Sprintf(msgApprovalNoFlow, a.Flow))
		return
	}
	if !approves(f, ev) {
		// Put back: it stays the approvers' to answer.
		b.putToken(ctx, log, "", tokenID, s, expires)
		text := fmt.Sprintf(msgApprovalOthers, f.Name, approversText(f))
		if ev.User.ID == a.req.User.ID {
			text = fmt.Sprintf(msgApprovalOwn, f.Name, approversText(f))
		}
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: text})
		return
	}
	at := b.cfg.Now().UTC().Format("15:04 MST")
	if ev.Action.ID == ActionCancel {
		entry := b.auditEntry(a.req, a.Flow, a.Params)
		entry.Outcome, entry.Detail, entry.Approver = OutcomeRefused, "refused by "+displayName(ev.User), ev.User.ID
		b.audit(ctx, log, entry)
		b.tellRequester(ctx, log, a, ev, fmt.Sprintf(msgRefusedTold, a.Flow, displayName(ev.User)))
		b.sessionStatus(ctx, a.req, SessionActive)
		b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Replace: true, Text: fmt.Sprintf(msgRefusedNote, displayName(ev.User), at, a.Flow)})
		return
	}
	// The requester's right to run it is decided now too, by what they
	// were when they asked.
	if rule, allowed := admits(f, a.req); !allowed {
		b.metrics.refused("flow_access")
		b.closeApproval(ctx, log, ev, a, rule, fmt.Sprintf(msgApprovalNoRight, displayName(a.req.User), f.Name))
		return
	}
	b.tellRequester(ctx, log, a, ev, fmt.Sprintf(msgApprovedTold, a.Flow, displayName(ev.User)))
	// The request's conversation shows the run, and its end (runFlowHeld
	// sets the statuses of the press's own conversation).
	b.sessionStatus(ctx, a.req, SessionProcessing)
	defer b.sessionStatus(ctx, a.req, SessionActive)
	// The run is the requester's, answered where the request was posted
	// (the press's responder, which replaces the request where the
	// platform can), and posted there whatever the flow's public setting:
	// the request, its approval and its result are the conversation's.
	run := ev
	run.User, run.approver = a.req.User, ev.User.ID
	pub := *f
	pub.Public = true
	b.runFlow(ctx, log, run, &pub, a.Params, fmt.Sprintf(msgApprovedNote, displayName(ev.User), at))
}

// closeApproval ends a request that can no longer run (why, for the
// audit): the presser is told text, and so is the requester.
func (b *Bridge) closeApproval(ctx context.Context, log *zap.Logger, ev Event, a approval, why, text string) {
	entry := b.auditEntry(a.req, a.Flow, a.Params)
	entry.Outcome, entry.Detail = OutcomeRefused, why
	b.audit(ctx, log, entry)
	b.tellRequester(ctx, log, a, ev, text)
	b.sessionStatus(ctx, a.req, SessionActive)
	b.tell(ctx, log, ev, Reply{Kind: ReplyError, Replace: true, Text: text})
}

// expireApproval records that nobody answered a, and tells its requester.
func (b *Bridge) expireApproval(ctx context.Context, log *zap.Logger, a approval) {
	entry := b.auditEntry(a.req, a.Flow, a.Params)
	entry.Outcome, entry.Detail = OutcomeExpired, "nobody approved within "+humanDuration(a.Timeout)
	b.audit(ctx, log, entry)
	b.tellRequester(ctx, log, a, Event{}, fmt.Sprintf(msgExpiredTold, a.Flow, humanDuration(a.Timeout)))
	b.sessionStatus(ctx, a.req, SessionActive)
}

// tellRequester tells a's requester privately how their request ended,
// unless they are the one who ended it (by): they have the answer already.
func (b *Bridge) tellRequester(ctx context.Context, log *zap.Logger, a approval, by Event, text string) {
	if by.User.ID != "" && by.User.ID == a.req.User.ID {
		return
	}
	if a.req.reply == nil {
		log.Warn("requester not told how their request for approval ended: its route cannot be answered")
		return
	}
	b.send(ctx, a.req, Reply{Kind: ReplyInfo, Ephemeral: true, Text: text})
}

// restoreApproval rebuilds a request taken from the store, its event
// bound to its platform where that is attached and can answer it.
func (b *Bridge) restoreApproval(log *zap.Logger, s storedApproval, expires time.Time) approval {
	a := approval{storedApproval: s, expires: expires}
	ev, err := decodeEvent("", s.Event)
	if err == nil {
		p := b.disp.platform(ev.Platform)
		if p == nil {
			err = ErrNotAttached
		} else {
			err = bind(p, &ev)
		}
	}
	if err != nil {
		log.Warn("requester of a request for approval cannot be told", zap.String("flow", s.Flow), zap.Error(err))
	}
	a.req = ev
	return a
}

// ExpireApprovals ends the requests for approval nobody answered in time,
// of the platforms attached here: each is recorded expired and its
// requester told. It returns how many it ended. A request is taken from
// the store before its requester is told, so that of several replicas
// sweeping at once one tells each; one taken and not told (a crash between
// the two) is told nobody.
func (b *Bridge) ExpireApprovals(ctx context.Context) (int, error) {
	b.mu.Lock()
	platforms := slices.Sorted(maps.Keys(b.disp.platforms))
	b.mu.Unlock()
	log := b.log.Named("approvals")
	n := 0
	for _, name := range platforms {
		ids, err := b.store.DueTokens(ctx, approvalTokens+name+":", b.cfg.Now(), approvalSweep)
		if err != nil {
			return n, fmt.Errorf("expire approvals: %w", err)
		}
		for _, id := range ids {
			if ctx.Err() != nil || b.closing() {
				return n, ctx.Err()
			}
			var s storedApproval
			expires, ok := b.takeToken(ctx, log, "", id, &s)
			if !ok {
				continue // answered, or taken by another replica
			}
			if b.cfg.Now().Before(expires) {
				// Put back while listed (a refused press): not due.
				b.putToken(ctx, log, "", id, s, expires)
				continue
			}
			a := b.restoreApproval(log, s, expires)
			b.expireApproval(ctx, log.With(zap.String("platform", name), zap.String("flow", s.Flow), zap.String("requester", a.req.User.ID)), a)
			n++
		}
	}
	return n, nil
}

// ExpireApprovalsEvery runs ExpireApprovals every interval until ctx ends
// or the bridge shuts down.
func (b *Bridge) ExpireApprovalsEvery(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := b.ExpireApprovals(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("expiring requests for approval", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-b.work.quit:
			return
		case <-t.C:
		}
	}
}

// closing reports whether Shutdown has begun.
func (b *Bridge) closing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closingLocked()
}
