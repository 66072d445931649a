package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// action handles a button press.
func (b *Bridge) action(ctx context.Context, log *zap.Logger, ev Event) {
	switch ev.Action.ID {
	case ActionShare:
		b.shareResult(ctx, log, ev)
	case ActionConfirm, ActionCancel:
		b.answerConfirmation(ctx, log, ev)
	default:
		log.Debug("unknown action", zap.String("action", ev.Action.ID))
		b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "That button is no longer supported."})
	}
}

// shareResult posts a private flow result to the channel, attributed to the
// person who shared it, and removes the private copy.
func (b *Bridge) shareResult(ctx context.Context, log *zap.Logger, ev Event) {
	s, ok := b.shares.take(ev.Action.Value, b.cfg.Now())
	if !ok {
		b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "This result can no longer be shared (it was shared already, or it expired)."})
		return
	}
	footer := s.footer + " · shared by " + displayName(ev.User)
	if _, err := ev.Reply.Send(ctx, b.asFile(ev, Reply{Kind: ReplyFlow, Text: s.text, Footer: footer}, "result", nil)); err != nil {
		log.Warn("share not posted", zap.Error(err))
		b.shares.put(s, b.cfg.Now()) // let the user try again
		b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "The result could not be posted to the channel. Please try again."})
		return
	}
	if d, ok := ev.Reply.(Dismisser); ok {
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

// shareCache holds private flow results that may still be shared. Bounded, so
// a busy bridge forgets the oldest first.
type shareCache struct {
	ttl time.Duration
	max int
	mu  sync.Mutex
	m   map[string]share
}

func newShareCache(ttl time.Duration, max int) *shareCache {
	return &shareCache{ttl: ttl, max: max, m: make(map[string]share)}
}

func (c *shareCache) put(s share, now time.Time) string {
	if s.id == "" {
		s.id = randomID()
	}
	s.expires = now.Add(c.ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		c.evict(now)
	}
	c.m[s.id] = s
	return s.id
}

// take removes and returns an unexpired share: one press, one post.
func (c *shareCache) take(id string, now time.Time) (share, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[id]
	delete(c.m, id)
	if !ok || now.After(s.expires) {
		return share{}, false
	}
	return s, true
}

// evict drops expired entries, then the oldest quarter if still full.
func (c *shareCache) evict(now time.Time) {
	for id, s := range c.m {
		if now.After(s.expires) {
			delete(c.m, id)
		}
	}
	if len(c.m) < c.max {
		return
	}
	ids := slices.SortedFunc(maps.Keys(c.m), func(a, b string) int { return c.m[a].expires.Compare(c.m[b].expires) })
	for _, id := range ids[:len(ids)/4+1] {
		delete(c.m, id)
	}
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

type confirmCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]pending
}

func newConfirmCache(ttl time.Duration) *confirmCache {
	return &confirmCache{ttl: ttl, m: make(map[string]pending)}
}

func (b *Bridge) askConfirmation(ctx context.Context, log *zap.Logger, ev Event, f *Flow, params map[string]string) {
	id := randomID()
	now := b.cfg.Now()
	c := b.confirm
	c.mu.Lock()
	for k, p := range c.m {
		if now.After(p.expires) {
			delete(c.m, k)
		}
	}
	c.m[id] = pending{flow: f, params: params, owner: ev.User.ID, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	entry := b.auditEntry(ev, f.Name, params)
	entry.Outcome = OutcomeConfirm
	b.audit(log, entry)
	var s strings.Builder
	if len(params) == 0 {
		fmt.Fprintf(&s, "Run *%s*?", f.Name)
	} else {
		fmt.Fprintf(&s, "Run *%s* with these parameters?", f.Name)
		for _, k := range slices.Sorted(maps.Keys(params)) {
			fmt.Fprintf(&s, "\n• `%s` = `%s`", k, params[k])
		}
	}
	fmt.Fprintf(&s, "\n\nThis request expires in %s.", humanDuration(c.ttl))
	b.send(ctx, ev, Reply{Kind: ReplyConfirm, Ephemeral: true, Text: s.String(), Buttons: []Button{
		{Action: Action{ID: ActionConfirm, Value: id}, Label: "Run", Style: "primary"},
		{Action: Action{ID: ActionCancel, Value: id}, Label: "Cancel"},
	}})
}

func (b *Bridge) answerConfirmation(ctx context.Context, log *zap.Logger, ev Event) {
	c := b.confirm
	c.mu.Lock()
	p, ok := c.m[ev.Action.Value]
	if ok && p.owner != ev.User.ID {
		c.mu.Unlock()
		b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "Only the person who asked for this flow can confirm or cancel it."})
		return
	}
	delete(c.m, ev.Action.Value)
	c.mu.Unlock()
	if !ok || b.cfg.Now().After(p.expires) {
		b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Replace: true, Text: "This confirmation has expired or was already answered. Run the flow again if you still need it."})
		return
	}
	entry := b.auditEntry(ev, p.flow.Name, p.params)
	if ev.Action.ID == ActionConfirm {
		// Access is decided now, by the configuration in force: a flow
		// removed, or a rule narrowed, since the question was asked, wins.
		f, ok := b.cat.Load().flows[p.flow.Name]
		if !ok {
			entry.Outcome, entry.Detail = OutcomeRefused, "flow removed before confirmation"
			b.audit(log, entry)
			b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: fmt.Sprintf("The flow *%s* is no longer offered, so it was not run.", p.flow.Name)})
			return
		}
		if rule, allowed := admits(f, ev); !allowed {
			b.metrics.refused("flow_access")
			entry.Outcome, entry.Detail = OutcomeRefused, rule
			b.audit(log, entry)
			b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: refusalText(f, rule)})
			return
		}
		p.flow = f
	}
	// The answer replaces the question where the platform can (the first
	// reply to a press does), so no live Run / Cancel buttons are left.
	at := b.cfg.Now().UTC().Format("15:04 MST")
	if ev.Action.ID == ActionCancel {
		entry.Outcome = OutcomeCancelled
		b.audit(log, entry)
		b.send(ctx, ev, Reply{Kind: ReplyInfo, Ephemeral: true, Replace: true, Text: fmt.Sprintf("Cancelled by %s at %s: *%s* was not run.", displayName(ev.User), at, p.flow.Name)})
		return
	}
	b.runFlow(ctx, log.WithLazy(zap.String("flow", p.flow.Name)), ev, p.flow, p.params, fmt.Sprintf("Run by %s at %s. ", displayName(ev.User), at))
}
