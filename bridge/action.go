package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// action handles a button press.
func (b *Bridge) action(ctx context.Context, log *zap.Logger, ev Event) {
	switch ev.Action.ID {
	case ActionShare:
		b.shareResult(ctx, log, ev)
	case ActionConfirm, ActionCancel:
		if strings.HasPrefix(ev.Action.Value, approvalValue) {
			b.answerApproval(ctx, log, ev)
			return
		}
		b.answerConfirmation(ctx, log, ev)
	case ActionVoteUp, ActionVoteDown:
		b.vote(ctx, log, ev)
	default:
		log.Debug("unknown action", zap.String("action", ev.Action.ID))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "That button is no longer supported."})
	}
}

// shareResult posts a private flow result to the channel, attributed to the
// person who shared it, and removes the private copy.
func (b *Bridge) shareResult(ctx context.Context, log *zap.Logger, ev Event) {
	s, ok := b.takeShare(ctx, log, ev.Action.Value)
	if !ok {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "This result can no longer be shared (it was shared already, or it expired)."})
		return
	}
	footer := s.footer + " · shared by " + displayName(ev.User)
	if _, err := ev.reply.Send(ctx, b.asFile(ev, Reply{Kind: ReplyFlow, Text: s.text, Footer: footer}, "result", nil)); err != nil {
		log.Warn("share not posted", zap.Error(err))
		b.putShare(ctx, log, s) // let the user try again
		b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "The result could not be posted to the channel. Please try again."})
		return
	}
	if d, ok := ev.reply.(Dismisser); ok {
		if err := d.Dismiss(ctx); err != nil {
			log.Debug("private copy not removed", zap.Error(err))
		}
	}
}

type share struct {
	id      string
	text    string
	footer  string
	owner   string
	expires time.Time
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// pending is a flow run waiting for its caller's confirmation.
type pending struct {
	flow    *Flow
	params  map[string]string
	owner   string
	expires time.Time
}

// confirmTTL is how long a flow run waits for its Run or Cancel.
const confirmTTL = 5 * time.Minute

func (b *Bridge) askConfirmation(ctx context.Context, log *zap.Logger, ev Event, f *Flow, params map[string]string) {
	id, ok := b.putPending(ctx, log, pending{flow: f, params: params, owner: ev.User.ID, expires: b.cfg.Now().Add(confirmTTL)})
	if !ok {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgNotSaved})
		return
	}
	entry := b.auditEntry(ev, f.Name, params)
	entry.Outcome = OutcomeConfirm
	b.audit(ctx, log, entry)
	var s strings.Builder
	if len(params) == 0 {
		fmt.Fprintf(&s, "Run *%s*?", f.Name)
	} else {
		fmt.Fprintf(&s, "Run *%s* with these parameters?", f.Name)
		for _, k := range slices.Sorted(maps.Keys(params)) {
			fmt.Fprintf(&s, "\n• `%s` = `%s`", k, params[k])
		}
	}
	fmt.Fprintf(&s, "\n\nThis request expires in %s.", humanDuration(confirmTTL))
	b.tell(ctx, log, ev, Reply{Kind: ReplyConfirm, Ephemeral: true, Text: s.String(), Buttons: []Button{
		{Action: Action{ID: ActionConfirm, Value: id}, Label: "Run", Style: "primary"},
		{Action: Action{ID: ActionCancel, Value: id}, Label: "Cancel"},
	}})
}

func (b *Bridge) answerConfirmation(ctx context.Context, log *zap.Logger, ev Event) {
	p, ok, mine := b.takePending(ctx, log, ev.Action.Value, ev.User.ID)
	if ok && !mine {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "Only the person who asked for this flow can confirm or cancel it."})
		return
	}
	if !ok || b.cfg.Now().After(p.expires) {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Replace: true, Text: "This confirmation has expired or was already answered. Run the flow again if you still need it."})
		return
	}
	entry := b.auditEntry(ev, p.flow.Name, p.params)
	if ev.Action.ID == ActionConfirm {
		// Access is decided now, by the configuration in force: a flow
		// removed, or a rule narrowed, since the question was asked, wins.
		f, ok := b.set.cat.Load().flows[p.flow.Name]
		if !ok {
			entry.Outcome, entry.Detail = OutcomeRefused, "flow removed before confirmation"
			b.audit(ctx, log, entry)
			b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: fmt.Sprintf("The flow *%s* is no longer offered, so it was not run.", p.flow.Name)})
			return
		}
		if rule, allowed := admits(f, ev); !allowed {
			b.metrics.refused("flow_access")
			entry.Outcome, entry.Detail = OutcomeRefused, rule
			b.audit(ctx, log, entry)
			b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: refusalText(f, rule)})
			return
		}
		p.flow = f
	}
	// The answer replaces the question where the platform can (the first
	// reply to a press does), so no live Run / Cancel buttons are left.
	at := b.cfg.Now().UTC().Format("15:04 MST")
	if ev.Action.ID == ActionCancel {
		entry.Outcome = OutcomeCancelled
		b.audit(ctx, log, entry)
		b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Ephemeral: true, Replace: true, Text: fmt.Sprintf("Cancelled by %s at %s: *%s* was not run.", displayName(ev.User), at, p.flow.Name)})
		return
	}
	b.runFlow(ctx, log.WithLazy(zap.String("flow", p.flow.Name)), ev, p.flow, p.params, fmt.Sprintf("Run by %s at %s. ", displayName(ev.User), at))
}

// storedShare and storedPending are a share and a pending confirmation as
// Tokens keep them.
type storedShare struct {
	Text   string `json:"text"`
	Footer string `json:"footer,omitempty"`
	Owner  string `json:"owner"`
}

type storedPending struct {
	Flow   string            `json:"flow"`
	Params map[string]string `json:"params,omitempty"`
	Owner  string            `json:"owner"`
}

// tokenOpTimeout bounds a token's store call: a button press waits on it.
const tokenOpTimeout = 5 * time.Second

func (b *Bridge) putToken(ctx context.Context, log *zap.Logger, prefix, id string, v any, expires time.Time) bool {
	data, err := json.Marshal(v)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenOpTimeout)
		defer cancel()
		err = b.store.PutToken(ctx, prefix+id, data, expires, b.cfg.Now())
	}
	if err != nil {
		log.Warn("button state not saved", zap.String("token", prefix), zap.Error(err))
		b.metrics.storeFailed("put_token")
		return false
	}
	return true
}

func (b *Bridge) takeToken(ctx context.Context, log *zap.Logger, prefix, id string, v any) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenOpTimeout)
	defer cancel()
	data, expires, ok, err := b.store.TakeToken(ctx, prefix+id)
	if err == nil && ok {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		log.Warn("button state not read", zap.String("token", prefix), zap.Error(err))
		b.metrics.storeFailed("take_token")
		return time.Time{}, false
	}
	return expires, ok
}

// putShare keeps a result that may be shared and returns its ID; ok is
// false when it could not be kept (the result is then shown without a
// Share button).
func (b *Bridge) putShare(ctx context.Context, log *zap.Logger, s share) (string, bool) {
	if s.id == "" {
		s.id = randomID()
	}
	return s.id, b.putToken(ctx, log, "share:", s.id, storedShare{Text: s.text, Footer: s.footer, Owner: s.owner}, b.cfg.Now().Add(b.cfg.ShareTTL))
}

// takeShare removes and returns an unexpired share: one press, one post.
func (b *Bridge) takeShare(ctx context.Context, log *zap.Logger, id string) (share, bool) {
	var s storedShare
	expires, ok := b.takeToken(ctx, log, "share:", id, &s)
	if !ok || b.cfg.Now().After(expires) {
		return share{}, false
	}
	return share{id: id, text: s.Text, footer: s.Footer, owner: s.Owner, expires: expires}, true
}

// putPending keeps a flow run waiting for its caller's Run and returns its
// ID; ok is false when it could not be kept.
func (b *Bridge) putPending(ctx context.Context, log *zap.Logger, p pending) (string, bool) {
	id := randomID()
	return id, b.putToken(ctx, log, "confirm:", id, storedPending{Flow: p.flow.Name, Params: p.params, Owner: p.owner}, p.expires)
}

// takePending removes and returns the pending run id when user asked for
// it (mine); another user's is left in place. ok is false when there is
// none. A run whose flow left the catalog since keeps its name only: the
// press is refused by the catalog in force.
func (b *Bridge) takePending(ctx context.Context, log *zap.Logger, id, user string) (p pending, ok, mine bool) {
	var s storedPending
	expires, ok := b.takeToken(ctx, log, "confirm:", id, &s)
	if !ok {
		return pending{}, false, true
	}
	f, known := b.set.cat.Load().flows[s.Flow]
	if !known {
		f = &Flow{Name: s.Flow}
	}
	p = pending{flow: f, params: s.Params, owner: s.Owner, expires: expires}
	if s.Owner != user {
		// Put back: it stays its owner's to answer.
		b.putToken(ctx, log, "confirm:", id, s, expires)
		return p, true, false
	}
	return p, true, true
}
