package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// route is the adapter's record of where and how an event is answered. It is
// kept with the event in the core's inbox (Event.Route): everything the core
// asks of an event (bridge.Platform) is derived from it, so a live event and
// one read back after a restart are answered alike.
type route struct {
	// Channel is where the event happened and replies go; Guild is empty in
	// a DM.
	Channel string `json:"channel"`
	Guild   string `json:"guild,omitempty"`
	// Message is the user's message, which the first reply references and a
	// started thread opens on; for a button, the message the button is on.
	Message string `json:"message,omitempty"`
	// Mention is set when the message mentions the bot.
	Mention bool `json:"mention,omitempty"`
	// Thread asks Prepare to start a thread on Message and answer there.
	Thread bool `json:"thread,omitempty"`
	// Lookup is set when the gateway state did not know Channel: Prepare
	// asks the API whether it is a thread.
	Lookup bool `json:"lookup,omitempty"`
	// Interaction is set for a slash command or a button press.
	Interaction *interactionRoute `json:"interaction,omitempty"`
	// ReplyTo is the message Message replies to, in ReplyChannel (Channel
	// when empty): the start of the reply chain the agent hears when the
	// message starts its conversation's session.
	ReplyTo      string `json:"reply_to,omitempty"`
	ReplyChannel string `json:"reply_channel,omitempty"`
	// InThread marks a message in a thread (Channel): when it starts its
	// conversation's session, and replies to nothing, the agent hears the
	// thread's messages before it.
	InThread bool `json:"in_thread,omitempty"`
	// AnswerIn is the thread Prepare started on Message (Thread): the
	// replies go there, with no reference to the user's message, which
	// the thread opens on already.
	AnswerIn string `json:"answer_in,omitempty"`
}

// interactionRoute is what answering an interaction takes.
type interactionRoute struct {
	ID    string `json:"id"`
	AppID string `json:"app_id"`
	// Token is the interaction's token, valid 15 minutes; after that the
	// responder answers in the channel or by DM.
	Token string `json:"token"`
	User  string `json:"user,omitempty"`
	// Component is set for a button press (deferred update, type 6).
	Component bool `json:"component,omitempty"`
	// ReplaceOnSend makes the first reply to a press replace the message
	// the button is on (a confirmation's Run / Cancel), so no live buttons
	// are left behind.
	ReplaceOnSend bool `json:"replace_on_send,omitempty"`
	// Ephemeral is the visibility of a command's deferred response (the
	// core's decision), or of the message a pressed button is on.
	Ephemeral bool `json:"ephemeral,omitempty"`
	// Source is the content of the message a pressed button is on, which
	// Dismiss keeps when that message is public.
	Source string `json:"source,omitempty"`
	// WebhookOnly marks an interaction from where the bot is not a member
	// (a user install): every reply goes through the interaction's webhook.
	WebhookOnly bool `json:"webhook_only,omitempty"`
}

// check refuses a route whose IDs are not Discord IDs: they become URL paths
// of calls made with the bot's token.
func (rt route) check() error {
	var ids idCheck
	ids.need("channel id", rt.Channel)
	ids.may("guild id", rt.Guild)
	ids.may("message id", rt.Message)
	ids.may("replied-to message id", rt.ReplyTo)
	ids.may("replied-to channel id", rt.ReplyChannel)
	ids.may("thread id", rt.AnswerIn)
	if in := rt.Interaction; in != nil {
		ids.need("interaction id", in.ID)
		ids.need("application id", in.AppID)
		ids.may("user id", in.User)
		if ids.err == nil && !validToken(in.Token) {
			ids.err = errors.New("interaction token is not a Discord token")
		}
	}
	return ids.err
}

// complete gives a new event its route.
func (a *Adapter) complete(ev *bridge.Event, rt route) error {
	if err := rt.check(); err != nil {
		return err
	}
	raw, err := json.Marshal(rt)
	if err != nil {
		return fmt.Errorf("route: %w", err)
	}
	ev.Route = raw
	return nil
}

// The adapter is the core's platform for Discord's events: what the core
// asks of an event is derived from its route, for a live event and one read
// back from the inbox alike.
var _ bridge.Platform = (*Adapter)(nil)

// routeOf reads the route an event was received with.
func routeOf(ev bridge.Event) (route, error) {
	var rt route
	if err := json.Unmarshal(ev.Route, &rt); err != nil {
		return rt, fmt.Errorf("discord route: %w", err)
	}
	if err := rt.check(); err != nil {
		return rt, fmt.Errorf("discord route: %w", err)
	}
	return rt, nil
}

// Responder returns what answers the event: the interaction's webhook for
// a slash command or a button, else messages in the channel (or the thread
// Prepare started).
func (a *Adapter) Responder(ev bridge.Event) (bridge.Responder, error) {
	rt, err := routeOf(ev)
	if err != nil {
		return nil, err
	}
	if rt.Interaction != nil {
		return a.interactionResponder(rt), nil
	}
	return a.messageResponder(rt), nil
}

// Acknowledge defers an interaction's response (see deferral); a message
// needs none.
func (a *Adapter) Acknowledge(ctx context.Context, ev bridge.Event) error {
	rt, err := routeOf(ev)
	if err != nil {
		return err
	}
	if rt.Interaction == nil {
		return nil
	}
	return a.deferral(ctx, rt)
}

// Prepare places an event from a channel the gateway state did not know,
// and starts the thread a message is to be answered in (see
// prepareMessage). What it learns goes into the event's route.
func (a *Adapter) Prepare(ctx context.Context, ev *bridge.Event) bool {
	rt, err := routeOf(*ev)
	if err != nil {
		a.log.Error("event prepared without a route", zap.Error(err))
		return false
	}
	var ok bool
	if rt.Interaction != nil {
		ok = !rt.Lookup || a.prepareInteraction(ctx, ev, rt)
	} else {
		ok = !(rt.Lookup || rt.Thread) || a.prepareMessage(ctx, ev, &rt)
	}
	if ok {
		ev.Route, _ = json.Marshal(rt) // strings and booleans: it cannot fail
	}
	return ok
}

// Earlier reads what the message answers: the reply chain, or the thread
// before it (see earlierOf).
func (a *Adapter) Earlier(ctx context.Context, ev bridge.Event, max int) ([]bridge.Earlier, error) {
	rt, err := routeOf(ev)
	if err != nil {
		return nil, err
	}
	read := a.earlierOf(rt)
	if read == nil {
		return nil, nil
	}
	return read(ctx, max)
}

// idCheck keeps the first platform ID found not to be a Discord ID.
type idCheck struct{ err error }

// need checks a required ID.
func (c *idCheck) need(field, id string) {
	if c.err == nil && !isSnowflake(id) {
		c.err = fmt.Errorf("%s %q is not a Discord ID", field, truncate.Bytes(id, 40))
	}
}

// may checks an ID that may be absent.
func (c *idCheck) may(field, id string) {
	if id != "" {
		c.need(field, id)
	}
}

// maxToken bounds an interaction token; Discord's are a few hundred characters.
const maxToken = 1000

// validToken reports whether an interaction token can stand in a URL path:
// printable ASCII with nothing that would change the path it stands in.
func validToken(tok string) bool {
	if tok == "" || len(tok) > maxToken {
		return false
	}
	for i := range len(tok) {
		switch c := tok[i]; {
		case c <= ' ' || c >= 0x7f:
			return false
		case c == '/' || c == '\\' || c == '?' || c == '#' || c == '%':
			return false
		}
	}
	return true
}
