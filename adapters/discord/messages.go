package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Conversation keys:
//
//	discord/@me/<channel>        a DM channel
//	discord/<guild>/<channel>    a channel (and, with session_scope "channel", its threads)
//	discord/<guild>/<thread>     a thread, with session_scope "thread"

// Which messages reach the Agent (own messages never; other bots' only with
// allow_bots):
//   - in a DM, every message;
//   - in a plain channel, a message that mentions the bot or starts with
//     "!flow" or "!agent";
//   - in a thread, the same, and also every message when the thread is the
//     bot's: the bot started it (it is the thread's owner, which survives a
//     restart) or answered in it since this process started. Without the
//     message content intent such messages arrive empty and are skipped.

// channelInfo is what the adapter needs to know of a channel.
type channelInfo struct {
	thread bool
	parent string
	owner  string
}

// Keys of conversations and of platform events.
func dmKey(channelID string) string                   { return Platform + "/@me/" + channelID }
func channelKey(guildID, channelID string) string     { return Platform + "/" + guildID + "/" + channelID }
func messageEventKey(messageID string) string         { return Platform + "/msg/" + messageID }
func interactionEventKey(interactionID string) string { return Platform + "/int/" + interactionID }

// snowflakeOrder returns a snowflake ID as the platform's order of a
// conversation's events (bridge.Event.Order), 0 for a malformed one.
func snowflakeOrder(id string) int64 {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// onMessage translates a MESSAGE_CREATE on the gateway's read loop and hands
// it to the core, in the order the gateway sent it. It makes no network call:
// what needs one (a channel the gateway state does not know, a thread to
// start) is left to Prepare, which the core runs in the conversation's order.
func (a *Adapter) onMessage(m *discordgo.MessageCreate) {
	defer a.recoverEvent("MESSAGE_CREATE")
	if m == nil || m.Message == nil || m.Author == nil {
		return // a partly decoded event
	}
	var ids idCheck
	ids.need("message id", m.ID)
	ids.need("channel id", m.ChannelID)
	ids.may("guild id", m.GuildID)
	ids.need("author id", m.Author.ID)
	if ids.err != nil {
		a.refuse("MESSAGE_CREATE", ids.err)
		return
	}
	bot := a.bot()
	if m.Author.ID == bot || (bot == "" && m.Author.Bot) {
		return
	}
	if (m.Author.Bot || m.WebhookID != "") && !a.cfg.AllowBots {
		return
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return // joins, pins, thread notices
	}
	text := stripMention(m.Content, bot)
	cmd, _ := bridge.TextCommand(text)
	rt := route{Channel: m.ChannelID, Guild: m.GuildID, Message: m.ID, Mention: mentions(m.Message, bot)}
	if ref := m.MessageReference; ref != nil && m.Type == discordgo.MessageTypeReply {
		rt.ReplyTo = ref.MessageID
		if ref.ChannelID != m.ChannelID {
			rt.ReplyChannel = ref.ChannelID
		}
	}
	addressed := rt.Mention || cmd != ""
	ev := bridge.Event{
		Kind:     bridge.KindMessage,
		Platform: Platform,
		Team:     m.GuildID,
		Channel:  m.ChannelID,
		User:     userOf(m.Author, m.Member),
		Text:     text,
		Files:    attachmentsOf(m.Message),
		Key:      messageEventKey(m.ID),
		Order:    snowflakeOrder(m.ID),
	}
	if m.GuildID == "" {
		ev.Conversation = dmKey(m.ChannelID)
	} else {
		info, known := a.knownChannel(m.ChannelID)
		switch {
		case !known:
			// Perhaps a thread of the bot's; Prepare asks the API, and
			// drops the message when it is not for the bot.
			rt.Lookup = true
			ev.Conversation = channelKey(m.GuildID, m.ChannelID)
		case info.thread:
			if !addressed && info.owner != bot && !a.isFollowed(m.ChannelID) {
				return
			}
			a.threadPlace(&ev, m.GuildID, m.ChannelID, info)
			a.follow(m.ChannelID)
			rt.InThread = true
		default:
			if !addressed {
				return
			}
			ev.Conversation = channelKey(m.GuildID, m.ChannelID)
			if a.startsThread(rt.Mention, cmd) {
				// The thread Prepare starts on the message takes the
				// message's ID, so its conversation is known now, and the
				// thread's next messages queue behind this one.
				rt.Thread = true
				ev.Conversation, ev.Parent = channelKey(m.GuildID, m.ID), channelKey(m.GuildID, m.ChannelID)
			}
		}
	}
	if strings.TrimSpace(text) == "" && len(ev.Files) == 0 {
		a.log.Debug("empty message skipped (no message content intent?)", zap.String("message", m.ID))
		return
	}
	if err := a.complete(&ev, rt); err != nil {
		a.refuse("MESSAGE_CREATE", err)
		return
	}
	a.received(ev, m.GuildID, m.ChannelID, m.ID) // Discord needs no acknowledgement of a message
}

// startsThread reports whether a message in a plain channel starts a thread
// for its conversation.
func (a *Adapter) startsThread(mentioned bool, command string) bool {
	return mentioned && command == "" && a.cfg.SessionScope == ScopeThread && a.cfg.StartThreads
}

// threadPlace places an event in a thread: its conversation key, the
// channel its access rules see (the parent) and its parent conversation.
// Scope "thread" keeps each thread apart, under its channel's conversation;
// scope "channel" joins it to its parent's conversation.
func (a *Adapter) threadPlace(ev *bridge.Event, guildID, threadID string, info channelInfo) {
	ev.Conversation, ev.Channel, ev.Parent = channelKey(guildID, threadID), threadID, ""
	switch {
	case info.parent == "":
	case a.cfg.SessionScope == ScopeChannel:
		ev.Conversation, ev.Channel = channelKey(guildID, info.parent), info.parent
	default:
		ev.Channel, ev.Parent = info.parent, channelKey(guildID, info.parent)
	}
}

// prepareMessage completes a message on the core's dispatcher: it asks the
// API about a channel the gateway state did not know, and starts the thread
// a mention opens. It reports false when the message is not for the bot.
//
// A message in an unknown channel was queued under the channel's own key: in
// scope "channel" a thread found here answers in its parent's session, but
// was ordered apart from the parent's messages. Only the first messages of
// a channel are unknown; the lookup is cached.
func (a *Adapter) prepareMessage(ctx context.Context, ev *bridge.Event, rt *route) bool {
	if rt.Lookup {
		info := a.lookupChannel(ctx, rt.Channel)
		cmd, _ := bridge.TextCommand(ev.Text)
		addressed := rt.Mention || cmd != ""
		switch {
		case info.thread:
			if !addressed && info.owner != a.bot() && !a.isFollowed(rt.Channel) {
				return false
			}
			a.threadPlace(ev, rt.Guild, rt.Channel, info)
			a.follow(rt.Channel)
			rt.InThread = true
		case !addressed:
			return false
		case a.startsThread(rt.Mention, cmd):
			rt.Thread = true
			ev.Conversation, ev.Parent = channelKey(rt.Guild, rt.Message), channelKey(rt.Guild, rt.Channel)
		}
	}
	if rt.Thread && rt.AnswerIn == "" {
		thread, err := a.startThread(ctx, rt.Channel, rt.Message, ev.Text)
		if err != nil {
			a.log.Warn("thread not started; answering in the channel", zap.String("message", rt.Message), zap.Error(err))
			ev.Conversation, ev.Parent = channelKey(rt.Guild, rt.Channel), ""
			return true
		}
		rt.AnswerIn = thread // the thread opens on the user's message already
		a.follow(thread)
	}
	return true
}

// knownChannel reads the gateway state of each shard (filled by
// GUILD_CREATE and THREAD_CREATE), then the cache of earlier lookups; it
// makes no network call. It copies what it needs under the state's lock:
// state objects are mutated in place.
func (a *Adapter) knownChannel(channelID string) (channelInfo, bool) {
	for _, sh := range a.shards {
		state := sh.session.State
		if ch, err := state.Channel(channelID); err == nil {
			state.RLock()
			info := channelInfo{thread: ch.IsThread(), parent: ch.ParentID, owner: ch.OwnerID}
			state.RUnlock()
			return info, true
		}
	}
	a.cacheMu.Lock()
	defer a.cacheMu.Unlock()
	info, ok := a.channels[channelID]
	return info, ok
}

// lookupChannel is knownChannel, asking the API when neither knows the
// channel. A failed lookup treats it as a plain channel.
func (a *Adapter) lookupChannel(ctx context.Context, channelID string) channelInfo {
	if info, ok := a.knownChannel(channelID); ok {
		return info
	}
	ch, err := a.session.Channel(channelID, discordgo.WithContext(ctx))
	if err != nil {
		a.log.Debug("channel lookup failed; treating it as a plain channel", zap.String("channel", channelID), zap.Error(err))
		return channelInfo{}
	}
	info := channelInfo{thread: ch.IsThread(), parent: ch.ParentID, owner: ch.OwnerID}
	a.remember(channelID, info)
	return info
}

func (a *Adapter) remember(channelID string, info channelInfo) {
	a.cacheMu.Lock()
	defer a.cacheMu.Unlock()
	if len(a.channels) >= maxRemembered {
		clear(a.channels)
	}
	a.channels[channelID] = info
}

func (a *Adapter) follow(threadID string) {
	a.cacheMu.Lock()
	defer a.cacheMu.Unlock()
	if len(a.followed) >= maxRemembered {
		clear(a.followed)
	}
	a.followed[threadID] = true
}

func (a *Adapter) isFollowed(threadID string) bool {
	a.cacheMu.Lock()
	defer a.cacheMu.Unlock()
	return a.followed[threadID]
}

// startThread opens a public thread on the user's message; its ID is the
// message's. A thread that already exists (the message was taken up again
// after a restart) is reused.
func (a *Adapter) startThread(ctx context.Context, channelID, messageID, text string) (string, error) {
	ch, err := a.session.MessageThreadStartComplex(channelID, messageID, &discordgo.ThreadStart{Name: threadName(text), AutoArchiveDuration: 1440}, discordgo.WithContext(ctx))
	if err != nil {
		if restErr, ok := errors.AsType[*discordgo.RESTError](err); ok && restErr.Message != nil && restErr.Message.Code == 160004 {
			return messageID, nil
		}
		return "", fmt.Errorf("start thread: %w", err)
	}
	a.remember(ch.ID, channelInfo{thread: true, parent: channelID, owner: a.bot()})
	return ch.ID, nil
}

// threadName is the message's first line, shortened to fit a thread name.
func threadName(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.Join(strings.Fields(line), " ")
	if line == "" {
		return "Conversation"
	}
	return truncate.Bytes(line, 90)
}

// mentionPattern matches user mentions, <@ID> and the older <@!ID>.
var mentionPattern = regexp.MustCompile(`<@!?(\d+)>`)

// stripMention removes the bot's mentions and tidies the space they leave.
func stripMention(text, botID string) string {
	if botID == "" {
		return strings.TrimSpace(text)
	}
	out := mentionPattern.ReplaceAllStringFunc(text, func(s string) string {
		if mentionPattern.FindStringSubmatch(s)[1] == botID {
			return ""
		}
		return s
	})
	return strings.TrimSpace(out)
}

func mentions(m *discordgo.Message, botID string) bool {
	if botID == "" {
		return false
	}
	for _, u := range m.Mentions {
		if u != nil && u.ID == botID {
			return true
		}
	}
	for _, sub := range mentionPattern.FindAllStringSubmatch(m.Content, -1) {
		if sub[1] == botID {
			return true
		}
	}
	return false
}

// userOf describes the author for access rules: the member's roles are its groups.
func userOf(u *discordgo.User, m *discordgo.Member) bridge.User {
	if u == nil && m != nil {
		u = m.User
	}
	if u == nil {
		return bridge.User{}
	}
	user := bridge.User{ID: u.ID, Name: u.Username}
	if u.GlobalName != "" {
		user.Name = u.GlobalName
	}
	if m != nil {
		user.Groups = append([]string(nil), m.Roles...)
	}
	return user
}

// messageResponder answers a chat message in its channel or thread.
type messageResponder struct {
	a *Adapter

	mu      sync.Mutex
	channel string
	ref     *discordgo.MessageReference // the user's message, for the first reply
	sent    bool
}

func (a *Adapter) messageResponder(rt route) *messageResponder {
	if rt.AnswerIn != "" {
		return &messageResponder{a: a, channel: rt.AnswerIn}
	}
	if rt.Message == "" {
		// A channel's route (a scheduled run's): no message to reference.
		return &messageResponder{a: a, channel: rt.Channel}
	}
	return &messageResponder{a: a, channel: rt.Channel, ref: &discordgo.MessageReference{
		MessageID: rt.Message, ChannelID: rt.Channel, GuildID: rt.Guild, FailIfNotExists: new(false),
	}}
}

var (
	_ bridge.Responder = (*messageResponder)(nil)
	_ bridge.Updater   = (*messageResponder)(nil)
	_ bridge.Typist    = (*messageResponder)(nil)
)

// Send posts the reply, its first part referencing the user's message.
func (r *messageResponder) Send(ctx context.Context, reply bridge.Reply) (bridge.MessageRef, error) {
	r.mu.Lock()
	channel, ref := r.channel, r.ref
	if r.sent {
		ref = nil // one reply quotes the question; the rest stand alone
	}
	r.sent = true
	r.mu.Unlock()
	ids, err := r.a.sendChannelOnce(ctx, channel, render(reply), ref, nil, reply.Once)
	if len(ids) == 0 {
		return "", err
	}
	return channelRef(channel, ids), err
}

// Update edits the first message of ref and posts any further parts.
func (r *messageResponder) Update(ctx context.Context, ref bridge.MessageRef, reply bridge.Reply) error {
	channel, ids, ok := parseChannelRef(ref)
	if !ok {
		return fmt.Errorf("update: %q is not a message of this adapter", ref)
	}
	msgs := render(reply)
	if err := r.a.editChannel(ctx, channel, ids[0], msgs[0]); err != nil {
		return err
	}
	for _, id := range ids[1:] {
		// The text shrank: drop the parts it no longer needs.
		if err := r.a.session.ChannelMessageDelete(channel, id, discordgo.WithContext(ctx)); err != nil {
			r.a.log.Debug("stale part not deleted", zap.Error(err))
		}
	}
	_, err := r.a.sendChannel(ctx, channel, msgs[1:], nil, nil)
	return err
}

// Typing shows the typing indicator until stop, renewing it as Discord lets
// it lapse after about 10 seconds.
func (r *messageResponder) Typing(ctx context.Context) func() {
	r.mu.Lock()
	channel := r.channel
	r.mu.Unlock()
	return r.a.typing(ctx, channel)
}

// typingRequestTimeout bounds one typing request, which stop waits for.
const typingRequestTimeout = 5 * time.Second

func (a *Adapter) typing(ctx context.Context, channel string) func() {
	ctx, cancel := context.WithCancel(ctx)
	var done sync.WaitGroup
	done.Add(1)
	if !a.spawn(func() {
		defer done.Done()
		t := time.NewTicker(a.typingEvery)
		defer t.Stop()
		for {
			// The request is not cancelled with the loop: cancelling a request
			// while the transport dials for it can fail other requests waiting
			// for that connection — the reply among them (golang/go#24194,
			// #66442). It has its own short deadline instead, and stop waits
			// for it, so no indicator follows the reply.
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), typingRequestTimeout)
			if err := a.session.ChannelTyping(channel, discordgo.WithContext(rctx)); err != nil && ctx.Err() == nil {
				a.log.Debug("typing indicator", zap.Error(err))
			}
			rcancel()
			select {
			case <-ctx.Done():
				return
			case <-a.done:
				return
			case <-t.C:
			}
		}
	}) {
		done.Done()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			done.Wait() // no indicator may follow the reply
		})
	}
}

// sendChannel posts messages in order; ref and allowUser apply to the first.
func (a *Adapter) sendChannel(ctx context.Context, channel string, msgs []message, ref *discordgo.MessageReference, allow *discordgo.MessageAllowedMentions) ([]string, error) {
	return a.sendChannelOnce(ctx, channel, msgs, ref, allow, "")
}

// sendChannelOnce is sendChannel for a reply the core named once
// (bridge.Reply.Once): each part carries a nonce made from the name and its
// index, with enforce_nonce, so that Discord creates it once however often
// it is sent within its nonce window, and returns the first instead.
func (a *Adapter) sendChannelOnce(ctx context.Context, channel string, msgs []message, ref *discordgo.MessageReference, allow *discordgo.MessageAllowedMentions, once string) ([]string, error) {
	var ids []string
	for i, m := range msgs {
		send := &discordgo.MessageSend{Content: m.Content, Components: m.Components, AllowedMentions: noMentions(), Files: discordFiles(m.File)}
		if i == 0 {
			send.Reference = ref
			if allow != nil {
				send.AllowedMentions = allow
			}
		}
		var (
			sent *discordgo.Message
			err  error
		)
		if once == "" {
			sent, err = a.session.ChannelMessageSendComplex(channel, send, discordgo.WithContext(ctx))
		} else {
			sent, err = a.sendWithNonce(ctx, channel, send, nonce(once, i))
		}
		if err != nil {
			return ids, fmt.Errorf("send to channel %s: %w", channel, err)
		}
		ids = append(ids, sent.ID)
	}
	return ids, nil
}

// nonce is the nonce of part i of the reply named once: at most 25
// characters, as Discord takes.
func nonce(once string, i int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s#%d", once, i))
	return hex.EncodeToString(sum[:])[:25]
}

// nonceSend is a Create Message body with the nonce fields discordgo's
// MessageSend lacks.
type nonceSend struct {
	*discordgo.MessageSend
	Nonce        string `json:"nonce"`
	EnforceNonce bool   `json:"enforce_nonce"`
}

// sendWithNonce is ChannelMessageSendComplex with a nonce Discord enforces.
func (a *Adapter) sendWithNonce(ctx context.Context, channel string, send *discordgo.MessageSend, nonce string) (*discordgo.Message, error) {
	body := nonceSend{MessageSend: send, Nonce: nonce, EnforceNonce: true}
	endpoint := discordgo.EndpointChannelMessages(channel)
	var (
		res []byte
		err error
	)
	if len(send.Files) > 0 {
		contentType, data, encErr := discordgo.MultipartBodyWithJSON(body, send.Files)
		if encErr != nil {
			return nil, encErr
		}
		res, err = a.session.RequestRaw(http.MethodPost, endpoint, contentType, data, endpoint, 0, discordgo.WithContext(ctx))
	} else {
		res, err = a.session.RequestWithBucketID(http.MethodPost, endpoint, body, endpoint, discordgo.WithContext(ctx))
	}
	if err != nil {
		return nil, err
	}
	var m discordgo.Message
	if err := json.Unmarshal(res, &m); err != nil {
		return nil, fmt.Errorf("decode the created message: %w", err)
	}
	return &m, nil
}

func (a *Adapter) editChannel(ctx context.Context, channel, id string, m message) error {
	comps := m.Components
	if comps == nil {
		comps = []discordgo.MessageComponent{}
	}
	edit := &discordgo.MessageEdit{ID: id, Channel: channel, Content: &m.Content, Components: &comps, AllowedMentions: noMentions(), Files: discordFiles(m.File)}
	if _, err := a.session.ChannelMessageEditComplex(edit, discordgo.WithContext(ctx)); err != nil {
		return fmt.Errorf("edit message %s: %w", id, err)
	}
	return nil
}

// Message references: "ch/<channel>/<id>,<id>…" for channel messages,
// "wh/<message>" for an interaction's own messages ("@original" or a follow-up).
func channelRef(channel string, ids []string) bridge.MessageRef {
	return bridge.MessageRef("ch/" + channel + "/" + strings.Join(ids, ","))
}

func parseChannelRef(ref bridge.MessageRef) (channel string, ids []string, ok bool) {
	rest, ok := strings.CutPrefix(string(ref), "ch/")
	if !ok {
		return "", nil, false
	}
	channel, list, ok := strings.Cut(rest, "/")
	if !ok || channel == "" || list == "" {
		return "", nil, false
	}
	return channel, strings.Split(list, ","), true
}
