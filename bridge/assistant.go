package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Prompt is a suggestion offered to the user of a new conversation (Slack's
// assistant suggested prompts): a short title, and the message sent for
// them when they pick it.
type Prompt struct {
	Title   string
	Message string
}

// Titler is implemented by responders whose conversation can carry a title
// (Slack's assistant threads): the core names the conversation from the
// first message of its session.
type Titler interface {
	Title(ctx context.Context, text string) error
}

// maxContextBytes bounds a conversation's context, which the platform sends
// and the agent receives with a message.
const maxContextBytes = 2000

// open greets a conversation the platform opened for the bot with its
// agent's greeting and suggested prompts, and keeps its context. A
// conversation greeted before is not greeted again (Slack's Messages tab
// opens the same DM each time the user looks at it). The greeting is
// remembered apart from the context, which an opening with nothing in
// view, or a context change to nothing, forgets: remembered with it, every
// such opening greeted again.
func (b *Bridge) open(ctx context.Context, log *zap.Logger, ev Event) {
	known := b.keepContext(ctx, log, ev)
	_, greeted, err := b.store.ConversationContext(ctx, greetedKey(ev.Conversation))
	if err != nil {
		log.Warn("greeting record not read", zap.Error(err))
	}
	if known || greeted {
		log.Debug("conversation opened again; not greeted")
		b.answered(ctx, log, ev, "", nil)
		return
	}
	err = b.noteWrite(func() error {
		return b.store.PutConversationContext(ctx, store.Context{Key: greetedKey(ev.Conversation), Text: "greeted", Updated: b.cfg.Now()})
	})
	if err != nil {
		// Greeted all the same; the next opening may greet again.
		b.metrics.storeFailed("save_greeted")
		log.Warn("greeting not remembered", zap.Error(err))
	}
	agent, err := b.conversationAgent(ctx, b.set.cat.Load(), ev)
	var r Reply
	switch {
	case err != nil:
		log.Error("agent lookup", zap.Error(err))
		r = Reply{Kind: ReplyError, Text: msgStoreFailed}
	case agent == nil:
		r = Reply{Kind: ReplyError, Text: msgNoAgent}
	case len(agent.Channels) > 0 && !slices.Contains(agent.Channels, ev.Channel):
		r = Reply{Kind: ReplyError, Text: fmt.Sprintf(msgAgentChannel, agent.Name)}
	default:
		r = Reply{Kind: ReplyInfo, Text: agent.Greeting, Prompts: agent.SuggestedPrompts}
		if r.Text == "" {
			r.Text = fmt.Sprintf(msgGreeting, agent.Name)
		}
	}
	b.deliver(ctx, log, ev, "", r, nil)
}

// greetedKey is where the greeting of conversation is remembered: a key
// no conversation has (conversation keys never contain "#").
func greetedKey(conversation string) string { return conversation + "#greeted" }

// keepContext records what the user of the event's conversation has open
// beside it (ev.Text), for the agent to hear with the next message, and
// reports whether the conversation had a record already. An open event
// records the conversation, leaving a context it knows alone when it brings
// none; a context event without one forgets it. A context the conversation
// already has, told or not, is not written again.
func (b *Bridge) keepContext(ctx context.Context, log *zap.Logger, ev Event) (known bool) {
	cs := b.store
	b.contextMu.Lock()
	defer b.contextMu.Unlock()
	text := truncate.Bytes(sanitize(ev.Text), maxContextBytes)
	cur, found, err := cs.ConversationContext(ctx, ev.Conversation)
	switch {
	case err != nil:
		log.Warn("context not read", zap.Error(err))
	case found && (cur.Text == text || text == "" && ev.Kind == KindOpen):
		return true
	case !found && text == "" && ev.Kind == KindContext:
		return false
	}
	err = b.noteWrite(func() error {
		return cs.PutConversationContext(ctx, store.Context{Key: ev.Conversation, Text: text, Updated: b.cfg.Now()})
	})
	if err != nil {
		b.metrics.storeFailed("save_context")
		log.Warn("context not kept", zap.Error(err))
	}
	return found
}

// maxTitleBytes bounds a conversation's title as the core keeps it; Slack
// allows 200 characters.
const maxTitleBytes = 800

// titleKey is the context record under which a conversation's title (a
// user's rename, KindTitle) is kept.
func titleKey(conversation string) string { return conversation + "#title" }

// keepTitle keeps the title a user gave the conversation, for /agent status.
func (b *Bridge) keepTitle(ctx context.Context, log *zap.Logger, ev Event) {
	text := truncate.Bytes(sanitize(strings.Join(strings.Fields(ev.Text), " ")), maxTitleBytes)
	err := b.noteWrite(func() error {
		return b.store.PutConversationContext(ctx, store.Context{Key: titleKey(ev.Conversation), Text: text, Updated: b.cfg.Now()})
	})
	if err != nil {
		b.metrics.storeFailed("save_context")
		log.Warn("title not kept", zap.Error(err))
	}
}

// withContext returns text led by the conversation's context when the agent
// has not been told it yet, and the function that records that it has,
// to call once the agent answered. A thread without a context of its own
// takes its parent's (Slack's agent view tells what the user views once
// for the whole DM, whose threads are the conversations).
//
// The parent's context may change while the agent answers (its events are
// ordered apart from the thread's), so the record is marked told only
// while it still holds the text told: a change kept meanwhile is the next
// message's to tell. contextMu makes the read and the write one step
// against keepContext in this process; among replicas, a change kept by
// another replica between the two (one store round trip) is marked told
// unheard, which a later change undoes.
func (b *Bridge) withContext(ctx context.Context, log *zap.Logger, ev Event, text string) (string, func()) {
	cs := b.store
	c, found, err := cs.ConversationContext(ctx, ev.Conversation)
	if err == nil && !found && ev.Parent != "" {
		c, found, err = cs.ConversationContext(ctx, ev.Parent)
	}
	if err != nil {
		log.Warn("context not read", zap.Error(err))
		return text, func() {}
	}
	if !found || c.Told || c.Text == "" {
		return text, func() {}
	}
	return fmt.Sprintf(msgContextLead, c.Text) + text, func() {
		ctx := recordCtx(ctx)
		b.contextMu.Lock()
		defer b.contextMu.Unlock()
		cur, found, err := cs.ConversationContext(ctx, c.Key)
		if err == nil && (!found || cur.Told || cur.Text != c.Text) {
			return // forgotten, or changed since: nothing told to record
		}
		if err == nil {
			c.Told, c.Updated = true, b.cfg.Now()
			err = cs.PutConversationContext(ctx, c)
		}
		if err != nil {
			// The agent hears the context once more with the next message.
			log.Debug("context not marked told", zap.Error(err))
		}
	}
}

// titler returns the responder's Titler when the event's message is the
// first of its conversation's session, so the conversation takes its name
// from it; otherwise nil.
func (b *Bridge) titler(ctx context.Context, log *zap.Logger, ev Event) Titler {
	t, ok := ev.reply.(Titler)
	if !ok {
		return nil
	}
	_, has, err := b.store.Session(ctx, ev.Conversation)
	if err != nil {
		log.Debug("session not read for the title", zap.Error(err))
		return nil
	}
	if has {
		return nil
	}
	return t
}

// title names the conversation after its first message.
func (b *Bridge) title(ctx context.Context, log *zap.Logger, t Titler, text string) {
	if err := t.Title(ctx, text); err != nil {
		log.Debug("conversation not named", zap.Error(err))
	}
}

// titleSource is what names a conversation: the user's own words, else
// what the agent was sent (a message of attached files only).
func titleSource(ev Event, sent string) string {
	if own := strings.TrimSpace(sanitize(ev.Text)); own != "" {
		return own
	}
	return sent
}
