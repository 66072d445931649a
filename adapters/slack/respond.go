package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// responderKind says where an event came from, which decides how replies go
// out. Its values are stored in the inbox with the event's route.
type responderKind string

const (
	kindChat    responderKind = "chat"    // a mention, DM or thread message: Web API
	kindCommand responderKind = "command" // a slash command: its response_url
	kindAction  responderKind = "action"  // a button press: Web API and its response_url
)

// maxURLUses is how often Slack accepts posts to one response_url.
const maxURLUses = 5

// MessageRef prefixes: refMessage+"channel:ts" is a message the Web API can
// update; refURL+response type is a message sent through the response_url;
// refEphemeral is a chat.postEphemeral message, which nothing can update.
const (
	refMessage   = "msg:"
	refURL       = "url:"
	refEphemeral = "eph:"
)

// route is where and how an event is answered, and what Prepare checks
// first. It is the event's bridge.Event.Route, kept with it in the inbox,
// so that the responder is rebuilt from it after a restart.
type route struct {
	Kind    responderKind `json:"kind"`
	Channel string        `json:"channel"`
	// Thread is where replies go; "" for the channel or DM itself.
	Thread string `json:"thread,omitempty"`
	// User sees the ephemeral replies.
	User string `json:"user,omitempty"`
	// UserTS is the user's message, for the reaction indicator.
	UserTS      string `json:"user_ts,omitempty"`
	ResponseURL string `json:"response_url,omitempty"`
	// ReplaceOnSend lets the reply the core marks Replace replace the message whose button
	// was pressed (Run or Cancel on a confirmation) instead of adding one.
	ReplaceOnSend bool `json:"replace_on_send,omitempty"`
	// CheckThread makes Prepare ask whether the bot takes part in Thread,
	// and drop the event when it does not.
	CheckThread bool `json:"check_thread,omitempty"`
	// JoinThread makes Prepare remember Thread as the bot's (a mention there).
	JoinThread bool `json:"join_thread,omitempty"`
	// Assistant marks a thread of the app's assistant container: replies
	// there use its status, title and suggested prompts.
	Assistant bool `json:"assistant,omitempty"`
	// Agent marks the Messages tab of an agent_view app: replies there use
	// its status and the DM's suggested prompts.
	Agent bool `json:"agent,omitempty"`
	// ContextOf is the root of the thread a message was written in, whose
	// earlier messages the agent hears when the message starts its
	// conversation's session.
	ContextOf string `json:"context_of,omitempty"`
	// Title names the agent session a thread's first message starts (an
	// Agent route's): Slack takes it with the session's first status.
	Title string `json:"title,omitempty"`
}

// check applies the same rules to a route read back from the inbox as to
// the payload it was made from.
func (rt route) check() error {
	switch rt.Kind {
	case kindChat, kindCommand, kindAction:
	default:
		return fmt.Errorf("unknown responder kind %q", rt.Kind)
	}
	return checkFields(
		field{"channel", rt.Channel, isID},
		field{"thread", rt.Thread, optional(isTS)},
		field{"user", rt.User, optional(isID)},
		field{"user_ts", rt.UserTS, optional(isTS)},
		field{"context_of", rt.ContextOf, optional(isTS)},
		field{"response_url", rt.ResponseURL, optional(isResponseURL)},
		field{"title", rt.Title, checkTitle},
	)
}

// responder answers one event. It implements bridge.Responder, Updater,
// Typist and Dismisser.
type responder struct {
	a *Adapter
	route

	mu            sync.Mutex
	replaceOnSend bool   // ReplaceOnSend, until the first reply has used it
	placeholder   string // ts of the "Thinking…" message the reply replaces
	urlUses       int
	urlProgress   time.Time // when progress last used the response_url
	lastProgress  time.Time // when progress last rewrote a message by chat.update
}

func (a *Adapter) newResponder(rt route) *responder {
	return &responder{a: a, route: rt, replaceOnSend: rt.ReplaceOnSend}
}

var (
	_ bridge.Responder = (*responder)(nil)
	_ bridge.Updater   = (*responder)(nil)
	_ bridge.Typist    = (*responder)(nil)
	_ bridge.Dismisser = (*responder)(nil)
)

// Send posts a reply: for chat in the event's thread (replacing the
// placeholder), for a slash command through its response_url, and for a
// button press publicly in the channel or privately through the response_url.
//
// A reply the core names once (bridge.Reply.Once: an answer or a notice
// kept in the outbox) is posted where a second send can tell it is there:
//   - in a chat thread or DM, a regular message is marked with the name
//     and looked for first when sent again. An ephemeral one cannot be
//     (chat.postEphemeral leaves nothing a later send could find), so the
//     core sends the notices that stand in for a chat answer (a
//     "restarted while answering", a "too long") as regular messages; an
//     ephemeral reply it keeps private (a private flow result run by a
//     text command) can be shown twice after a crash;
//   - through a slash command's response_url, sent again (Again) with
//     replace_original: Slack then replaces the URL's latest message (the
//     earlier send, or the flow's "Running…" message) instead of adding
//     one. A reply of several parts replaces only one of them, so only
//     single-part replies (notices, short results) are once-only there. A
//     button press's response_url is not sent again so: its original is
//     the message the button is on (an agent's answer, say), which must
//     stay; such a reply can be shown twice after a crash.
func (r *responder) Send(ctx context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	if rep.File != nil {
		return r.sendWithFile(ctx, rep)
	}
	msgs := render(rep, !r.a.cfg.DisableMarkdownBlock)
	again := rep.Once != "" && rep.Again && r.Kind == kindCommand
	if rep.Ephemeral {
		if r.ResponseURL != "" {
			r.mu.Lock()
			replace := r.replaceOnSend && rep.Replace
			if replace {
				r.replaceOnSend = false
			}
			r.mu.Unlock()
			if err := r.postURL(ctx, slackgo.ResponseTypeEphemeral, msgs, replace || again); !errors.Is(err, errURLUsedUp) {
				return refURL + slackgo.ResponseTypeEphemeral, err
			}
		}
		r.dropPlaceholder(ctx)
		return refEphemeral, r.postEphemeral(ctx, msgs)
	}
	if r.Kind == kindAction && r.ResponseURL != "" {
		r.mu.Lock()
		replace := r.replaceOnSend && rep.Replace
		if replace {
			r.replaceOnSend = false
		}
		r.mu.Unlock()
		if replace {
			// A public question answered (an approval's request): its
			// answer takes its place, so no live buttons are left behind.
			// Sent again after a crash, it replaces the same message again.
			err := r.postURL(ctx, slackgo.ResponseTypeInChannel, msgs, true)
			if !errors.Is(err, errURLUsedUp) {
				return refURL + slackgo.ResponseTypeInChannel, err
			}
		}
	}
	if r.Kind == kindCommand {
		err := r.postURL(ctx, slackgo.ResponseTypeInChannel, msgs, again)
		if !errors.Is(err, errURLUsedUp) {
			return refURL + slackgo.ResponseTypeInChannel, err
		}
	}
	ts, err := r.postMarked(ctx, msgs, r.takePlaceholder(), rep.Once, rep.Again)
	if err != nil && r.Kind == kindAction && r.ResponseURL != "" && notMember(err) {
		// The bot is not in the channel; the button's response_url can still post there.
		r.a.log.Debug("chat.postMessage refused; posting through response_url", zap.Error(err))
		err = r.postURL(ctx, slackgo.ResponseTypeInChannel, msgs, false)
		return refURL + slackgo.ResponseTypeInChannel, err
	}
	if err != nil {
		return "", err
	}
	return bridge.MessageRef(refMessage + r.Channel + ":" + ts), nil
}

// Update replaces a message sent earlier with a new reply; where Slack cannot
// (ephemeral chat messages, a change of visibility) it sends the reply anew.
func (r *responder) Update(ctx context.Context, ref bridge.MessageRef, rep bridge.Reply) error {
	if rep.File != nil {
		return r.updateWithFile(ctx, ref, rep)
	}
	s := string(ref)
	switch {
	case strings.HasPrefix(s, refMessage):
		channel, ts, ok := strings.Cut(strings.TrimPrefix(s, refMessage), ":")
		if !ok || rep.Ephemeral {
			break
		}
		msgs := render(rep, !r.a.cfg.DisableMarkdownBlock)
		return r.updateChat(ctx, channel, ts, msgs)
	case strings.HasPrefix(s, refURL):
		want := slackgo.ResponseTypeInChannel
		if rep.Ephemeral {
			want = slackgo.ResponseTypeEphemeral
		}
		if strings.TrimPrefix(s, refURL) == want {
			msgs := render(rep, !r.a.cfg.DisableMarkdownBlock)
			err := r.postURL(ctx, want, msgs, true)
			if !errors.Is(err, errURLUsedUp) {
				return err
			}
		} else if err := r.deleteOriginal(ctx); err != nil {
			// An ephemeral cannot turn public in place: remove it, then post.
			r.a.log.Debug("deleting the original failed", zap.Error(err))
		}
	}
	_, err := r.Send(ctx, rep)
	return err
}

// Typing shows that the agent works: a placeholder message the reply will
// replace, or a reaction on the user's message that stop removes.
func (r *responder) Typing(ctx context.Context) (stop func()) {
	if r.Kind != kindChat {
		return func() {}
	}
	// The indicator is posted while the agent already works, so its round trip
	// does not delay the answer. stop waits for it: the answer must come after
	// the placeholder (it replaces it) and the reaction must exist to be removed.
	switch r.a.cfg.WorkingIndicator {
	case IndicatorPlaceholder:
		if r.a.updatesLimited() {
			// Its answer could not replace it for a while: a placeholder
			// would only delay the answer, or outlive it.
			return func() {}
		}
		posted := make(chan struct{})
		go func() { // owned by stop, which waits for it
			defer close(posted)
			ts, err := r.postChat(ctx, []outMessage{{Text: placeholder}}, "")
			if err != nil {
				r.a.log.Debug("placeholder not posted", zap.Error(err))
				return
			}
			r.mu.Lock()
			r.placeholder = ts
			r.mu.Unlock()
		}()
		return sync.OnceFunc(func() { <-posted })
	case IndicatorReaction:
		if r.UserTS == "" {
			return func() {}
		}
		item := slackgo.NewRefToMessage(r.Channel, r.UserTS)
		name := r.a.cfg.WorkingReaction
		added := make(chan bool, 1)
		go func() { // owned by stop, which waits for it
			err := r.a.withRetry(ctx, "reactions.add", func() error {
				return r.a.api.AddReactionContext(ctx, name, item)
			})
			if err != nil {
				r.a.log.Debug("reaction not added", zap.Error(err))
			}
			added <- err == nil
		}()
		return sync.OnceFunc(func() {
			if !<-added {
				return
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
			defer cancel()
			if err := r.a.withRetry(ctx, "reactions.remove", func() error {
				return r.a.api.RemoveReactionContext(ctx, name, item)
			}); err != nil {
				r.a.log.Debug("reaction not removed", zap.Error(err))
			}
		})
	}
	return func() {}
}

// Dismiss deletes the ephemeral message whose button was pressed.
func (r *responder) Dismiss(ctx context.Context) error {
	if r.ResponseURL == "" {
		return nil
	}
	return r.deleteOriginal(ctx)
}

func (r *responder) takePlaceholder() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.placeholder
	r.placeholder = ""
	return ts
}

// dropPlaceholder deletes an unused placeholder when the reply goes elsewhere.
func (r *responder) dropPlaceholder(ctx context.Context) {
	ts := r.takePlaceholder()
	if ts == "" {
		return
	}
	unlock, err := r.a.locks.lock(ctx, r.Channel)
	if err != nil {
		return
	}
	defer unlock()
	if err := r.a.withRetry(ctx, "chat.delete", func() error {
		_, _, err := r.a.api.DeleteMessageContext(ctx, r.Channel, ts)
		return err
	}); err != nil {
		r.a.log.Debug("placeholder not deleted", zap.Error(err))
	}
}

// postChat posts messages in order into the responder's thread, the first
// one replacing the placeholder at replaceTS when set. It returns the first
// message's ts.
func (r *responder) postChat(ctx context.Context, msgs []outMessage, replaceTS string) (string, error) {
	return r.postMarked(ctx, msgs, replaceTS, "", false)
}

// replyEventType is the metadata event type of the messages of a reply
// the core named (bridge.Reply.Once); the payload holds the name ("key")
// and the part's index ("part").
const replyEventType = "flowbridge_reply"

// postMarked is postChat for a reply named once: each part carries the
// name in its metadata, and when again is set (an earlier send may have
// been posted) the parts already in the conversation are looked for first
// and not posted twice.
func (r *responder) postMarked(ctx context.Context, msgs []outMessage, replaceTS, once string, again bool) (string, error) {
	unlock, err := r.a.locks.lock(ctx, r.Channel)
	if err != nil {
		return "", err
	}
	defer unlock()
	var posted map[int]string
	if once != "" && again {
		if posted, err = r.findPosted(ctx, once); err != nil {
			return "", fmt.Errorf("look for the reply in %s: %w", r.Channel, err)
		}
	}
	first := ""
	for i, m := range msgs {
		var ts string
		opts := content(m)
		if once != "" {
			opts = append(opts, slackgo.MsgOptionMetadata(slackgo.SlackMetadata{
				EventType: replyEventType, EventPayload: map[string]any{"key": once, "part": i}}))
		}
		done, found := posted[i]
		replace := i == 0 && replaceTS != "" && !found
		if replace && !r.a.updatesLimited() {
			// One attempt: an answer does not wait out chat.update's rate
			// tier (50 a minute, a Retry-After of up to a minute) to take
			// the placeholder's place; it is posted anew instead.
			_, _, _, err = r.a.api.UpdateMessageContext(ctx, r.Channel, replaceTS, opts...)
			if rl, ok := errors.AsType[*slackgo.RateLimitedError](err); ok {
				r.a.noteUpdatesLimited(rl.RetryAfter)
			} else {
				replace = false
				ts = replaceTS
			}
		}
		if found {
			ts, err = done, nil
		} else if ts == "" {
			if replace {
				r.a.dropMessage(ctx, r.Channel, replaceTS)
			}
			if r.Thread != "" {
				opts = append(opts, slackgo.MsgOptionTS(r.Thread))
			}
			err = r.a.withRetry(ctx, "chat.postMessage", func() error {
				var err error
				_, ts, err = r.a.api.PostMessageContext(ctx, r.Channel, opts...)
				return err
			})
		}
		if err != nil {
			if i == 0 && len(posted) == 0 && refused(err) {
				err = fmt.Errorf("%w: %w", bridge.ErrNotPosted, err)
			}
			return first, fmt.Errorf("post to %s: %w", r.Channel, err)
		}
		if i == 0 {
			first = ts
		}
	}
	r.a.threads.add(r.Channel, r.Thread)
	return first, nil
}

// updatesLimited reports whether chat.update answered 429 and its
// Retry-After has not passed.
func (a *Adapter) updatesLimited() bool { return a.now().UnixNano() < a.updatesUntil.Load() }

// noteUpdatesLimited records chat.update's 429 for retryAfter.
func (a *Adapter) noteUpdatesLimited(retryAfter time.Duration) {
	a.updatesUntil.Store(a.now().Add(max(retryAfter, time.Second)).UnixNano())
	a.log.Info("chat.update rate limited; answers are posted anew meanwhile", zap.Duration("retry_after", retryAfter))
}

// dropMessage deletes a placeholder an answer could not replace, with one
// attempt: a placeholder left behind is untidy, a delayed answer worse.
func (a *Adapter) dropMessage(ctx context.Context, channel, ts string) {
	if _, _, err := a.api.DeleteMessageContext(ctx, channel, ts); err != nil {
		a.log.Debug("placeholder not deleted", zap.String("channel", channel), zap.Error(err))
	}
}

// findPosted returns the parts of the reply named once that are in the
// responder's thread (or, outside a thread, among the channel's latest
// messages), by index.
func (r *responder) findPosted(ctx context.Context, once string) (map[int]string, error) {
	var msgs []slackgo.Message
	err := r.a.withRetry(ctx, "conversations.history", func() error {
		if r.Thread != "" {
			m, _, _, err := r.a.api.GetConversationRepliesContext(ctx, &slackgo.GetConversationRepliesParameters{
				ChannelID: r.Channel, Timestamp: r.Thread, Limit: findPostedLimit, IncludeAllMetadata: true})
			msgs = m
			return err
		}
		res, err := r.a.api.GetConversationHistoryContext(ctx, &slackgo.GetConversationHistoryParameters{
			ChannelID: r.Channel, Limit: findPostedLimit, IncludeAllMetadata: true})
		if err == nil {
			msgs = res.Messages
		}
		return err
	})
	if err != nil && r.Thread != "" && err.Error() == "thread_not_found" {
		// The thread's first message is gone (deleted with no replies
		// under it: a root with replies stays as a tombstone), so no part
		// of the reply can be in it. Looking again would only fail again.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	posted := make(map[int]string)
	for _, m := range msgs {
		md := m.Metadata
		if md.EventType != replyEventType || md.EventPayload["key"] != once {
			continue
		}
		if part, ok := md.EventPayload["part"].(float64); ok {
			posted[int(part)] = m.Timestamp
		}
	}
	return posted, nil
}

// findPostedLimit is how many of a conversation's latest messages are
// searched for a reply posted before a restart: a reply is posted soon
// after its question, and Slack's own limit on one page is 1,000.
const findPostedLimit = 200

// updateChat replaces the message at ts with the first message and posts the
// rest after it.
func (r *responder) updateChat(ctx context.Context, channel, ts string, msgs []outMessage) error {
	if channel != r.Channel {
		return fmt.Errorf("message of channel %s updated through a responder of %s", channel, r.Channel)
	}
	if _, err := r.postChat(ctx, msgs, ts); err != nil {
		return err
	}
	return nil
}

func (r *responder) postEphemeral(ctx context.Context, msgs []outMessage) error {
	unlock, err := r.a.locks.lock(ctx, r.Channel)
	if err != nil {
		return err
	}
	defer unlock()
	for _, m := range msgs {
		opts := content(m)
		if r.Thread != "" {
			opts = append(opts, slackgo.MsgOptionTS(r.Thread))
		}
		if err := r.a.withRetry(ctx, "chat.postEphemeral", func() error {
			_, err := r.a.api.PostEphemeralContext(ctx, r.Channel, r.User, opts...)
			return err
		}); err != nil {
			return fmt.Errorf("ephemeral to %s in %s: %w", r.User, r.Channel, err)
		}
	}
	return nil
}

// content is a message's text and blocks as slack-go options. The text is
// escaped already, so slack-go must not escape it again, and neither parse
// nor link_names is set: Slack must not turn names into mentions.
func content(m outMessage) []slackgo.MsgOption {
	opts := []slackgo.MsgOption{slackgo.MsgOptionText(m.Text, false)}
	if len(m.Blocks) > 0 {
		opts = append(opts, slackgo.MsgOptionBlocks(m.Blocks...))
	}
	return opts
}

// refused reports an error Slack answered, which posted nothing: a 429 or
// an error code.
func refused(err error) bool {
	if _, ok := errors.AsType[*slackgo.RateLimitedError](err); ok {
		return true
	}
	return errorCode(err) != ""
}

// notMember reports a post refused because the bot cannot write to the channel.
func notMember(err error) bool {
	switch errorCode(err) {
	case "not_in_channel", "channel_not_found":
		return true
	}
	return false
}

// urlMessage is the JSON a response_url takes.
type urlMessage struct {
	ResponseType    string          `json:"response_type,omitempty"`
	Text            string          `json:"text,omitempty"`
	Blocks          []slackgo.Block `json:"blocks,omitempty"`
	ReplaceOriginal bool            `json:"replace_original,omitempty"`
	DeleteOriginal  bool            `json:"delete_original,omitempty"`
}

// errURLUsedUp means the response_url's five uses are spent; callers fall
// back to the Web API.
var errURLUsedUp = errors.New("response_url used up")

// postURL sends messages through the response_url, the first replacing the
// original message when replace is set.
func (r *responder) postURL(ctx context.Context, responseType string, msgs []outMessage, replace bool) error {
	if r.ResponseURL == "" {
		return errURLUsedUp
	}
	unlock, err := r.a.locks.lock(ctx, r.Channel)
	if err != nil {
		return err
	}
	defer unlock()
	for i, m := range msgs {
		if !r.useURL() {
			if i == 0 {
				return errURLUsedUp
			}
			return fmt.Errorf("%w after %d of %d parts", errURLUsedUp, i, len(msgs))
		}
		err := r.sendURL(ctx, urlMessage{
			ResponseType:    responseType,
			Text:            m.Text,
			Blocks:          m.Blocks,
			ReplaceOriginal: replace && i == 0,
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *responder) deleteOriginal(ctx context.Context) error {
	if !r.useURL() {
		return errURLUsedUp
	}
	return r.sendURL(ctx, urlMessage{DeleteOriginal: true})
}

func (r *responder) useURL() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.urlUses >= maxURLUses {
		return false
	}
	r.urlUses++
	return true
}

// sendURL posts one message to the response_url, waiting out a 429.
func (r *responder) sendURL(ctx context.Context, m urlMessage) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	return r.a.withRetry(ctx, "response_url", func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.ResponseURL, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("response_url: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := r.a.http.Do(req)
		if err != nil {
			return fmt.Errorf("response_url: %w", err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		if res.StatusCode == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil {
				return &slackgo.RateLimitedError{RetryAfter: time.Duration(s) * time.Second}
			}
		}
		var reply struct {
			OK    *bool  `json:"ok"`
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &reply)
		if res.StatusCode/100 != 2 || reply.OK != nil && !*reply.OK {
			code := reply.Error
			if code == "" {
				code = strings.TrimSpace(string(b))
			}
			if code == "expired_url" || code == "used_url" {
				// Slack takes a response_url for 30 minutes and five
				// posts: past either (an answer that came late, such as
				// a request for approval's), the Web API answers instead.
				r.mu.Lock()
				r.urlUses = maxURLUses
				r.mu.Unlock()
				return fmt.Errorf("response_url: %s: %w", code, errURLUsedUp)
			}
			return fmt.Errorf("response_url: %s: %s", res.Status, truncate.Bytes(code, 200))
		}
		return nil
	})
}
