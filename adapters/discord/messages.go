package discord

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
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

// place says where a message or interaction happened, for keys and replies.
type place struct {
	key     string // conversation key
	channel string // channel ID for access rules: a thread's parent
	thread  bool
	ownedBy string // a thread's owner
}

func (a *Adapter) onMessage(ctx context.Context, m *discordgo.MessageCreate) {
	if m.Message == nil || m.Author == nil {
		return // a partly decoded event
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
	mentioned := mentions(m.Message, bot)
	text := stripMention(m.Content, bot)
	command := isTextCommand(text)
	log := a.log.WithLazy(zap.String("message", m.ID), zap.String("channel", m.ChannelID))

	var (
		p         place
		replyIn   = m.ChannelID
		reference = true
	)
	if m.GuildID == "" {
		p = place{key: Platform + "/@me/" + m.ChannelID, channel: m.ChannelID}
	} else {
		p = a.place(ctx, m.GuildID, m.ChannelID)
		switch {
		case p.thread && (mentioned || command || p.ownedBy == bot || a.isFollowed(m.ChannelID)):
		case !p.thread && (mentioned || command):
		default:
			return
		}
	}
	if strings.TrimSpace(text) == "" {
		log.Debug("empty message skipped (no message content intent?)")
		return
	}
	if !a.core.FirstDelivery("discord/msg/" + m.ID) {
		log.Debug("repeated message skipped")
		return
	}
	if m.GuildID != "" && !p.thread && mentioned && !command && a.cfg.SessionScope == ScopeThread && a.cfg.StartThreads {
		if thread, err := a.startThread(ctx, m.Message, text); err != nil {
			log.Warn("thread not started; answering in the channel", zap.Error(err))
		} else {
			p = place{key: Platform + "/" + m.GuildID + "/" + thread, channel: m.ChannelID, thread: true, ownedBy: bot}
			replyIn, reference = thread, false // the thread opens on the user's message already
		}
	}
	if p.thread {
		a.follow(replyIn)
	}
	r := &messageResponder{a: a, channel: replyIn}
	if reference {
		r.ref = &discordgo.MessageReference{MessageID: m.ID, ChannelID: m.ChannelID, GuildID: m.GuildID, FailIfNotExists: new(false)}
	}
	ev := bridge.Event{
		Kind:         bridge.KindMessage,
		Platform:     Platform,
		Conversation: p.key,
		Team:         m.GuildID,
		Channel:      p.channel,
		User:         userOf(m.Author, m.Member),
		Text:         text,
		Reply:        r,
	}
	if err := a.core.Handle(ev); err != nil {
		log.Debug("event not taken", zap.Error(err))
	}
}

// place resolves a guild channel: threads get their own key under scope
// "thread" and their parent's under scope "channel".
func (a *Adapter) place(ctx context.Context, guildID, channelID string) place {
	info := a.channelInfo(ctx, channelID)
	p := place{key: Platform + "/" + guildID + "/" + channelID, channel: channelID, thread: info.thread, ownedBy: info.owner}
	if info.thread && info.parent != "" {
		p.channel = info.parent
		if a.cfg.SessionScope == ScopeChannel {
			p.key = Platform + "/" + guildID + "/" + info.parent
		}
	}
	return p
}

// channelInfo reads the gateway state (filled by GUILD_CREATE and
// THREAD_CREATE), then the cache, then asks the API. It copies what it needs
// under the state's lock: state objects are mutated in place.
func (a *Adapter) channelInfo(ctx context.Context, channelID string) channelInfo {
	if ch, err := a.session.State.Channel(channelID); err == nil {
		a.session.State.RLock()
		info := channelInfo{thread: ch.IsThread(), parent: ch.ParentID, owner: ch.OwnerID}
		a.session.State.RUnlock()
		return info
	}
	a.cacheMu.Lock()
	info, ok := a.channels[channelID]
	a.cacheMu.Unlock()
	if ok {
		return info
	}
	ch, err := a.session.Channel(channelID, discordgo.WithContext(ctx))
	if err != nil {
		a.log.Debug("channel lookup failed; treating it as a plain channel", zap.String("channel", channelID), zap.Error(err))
		return channelInfo{}
	}
	info = channelInfo{thread: ch.IsThread(), parent: ch.ParentID, owner: ch.OwnerID}
	a.cacheMu.Lock()
	if len(a.channels) >= maxRemembered {
		clear(a.channels)
	}
	a.channels[channelID] = info
	a.cacheMu.Unlock()
	return info
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
// message's. A thread that already exists (a redelivered message) is reused.
func (a *Adapter) startThread(ctx context.Context, m *discordgo.Message, text string) (string, error) {
	name := threadName(text)
	ch, err := a.session.MessageThreadStartComplex(m.ChannelID, m.ID, &discordgo.ThreadStart{Name: name, AutoArchiveDuration: 1440}, discordgo.WithContext(ctx))
	if err != nil {
		if restErr, ok := errors.AsType[*discordgo.RESTError](err); ok && restErr.Message != nil && restErr.Message.Code == 160004 {
			return m.ID, nil
		}
		return "", fmt.Errorf("start thread: %w", err)
	}
	a.cacheMu.Lock()
	a.channels[ch.ID] = channelInfo{thread: true, parent: m.ChannelID, owner: a.bot()}
	a.cacheMu.Unlock()
	return ch.ID, nil
}

// threadName is the message's first line, shortened to fit a thread name.
func threadName(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.Join(strings.Fields(line), " ")
	if line == "" {
		return "Conversation"
	}
	return truncate(line, 90)
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

func isTextCommand(text string) bool {
	word, _, _ := strings.Cut(strings.TrimSpace(text), " ")
	word = strings.ToLower(word)
	return word == "!"+bridge.CommandFlow || word == "!"+bridge.CommandAgent
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
	a       *Adapter
	channel string
	ref     *discordgo.MessageReference // the user's message, for the first reply

	mu   sync.Mutex
	sent bool
}

var (
	_ bridge.Responder = (*messageResponder)(nil)
	_ bridge.Updater   = (*messageResponder)(nil)
	_ bridge.Typist    = (*messageResponder)(nil)
)

// Send posts the reply, its first part referencing the user's message.
func (r *messageResponder) Send(ctx context.Context, reply bridge.Reply) (bridge.MessageRef, error) {
	r.mu.Lock()
	ref := r.ref
	if r.sent {
		ref = nil // one reply quotes the question; the rest stand alone
	}
	r.sent = true
	r.mu.Unlock()
	ids, err := r.a.sendChannel(ctx, r.channel, render(reply), ref, nil)
	if len(ids) == 0 {
		return "", err
	}
	return channelRef(r.channel, ids), err
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
	return r.a.typing(ctx, r.channel)
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
	var ids []string
	for i, m := range msgs {
		send := &discordgo.MessageSend{Content: m.Content, Components: m.Components, AllowedMentions: noMentions()}
		if i == 0 {
			send.Reference = ref
			if allow != nil {
				send.AllowedMentions = allow
			}
		}
		sent, err := a.session.ChannelMessageSendComplex(channel, send, discordgo.WithContext(ctx))
		if err != nil {
			return ids, fmt.Errorf("send to channel %s: %w", channel, err)
		}
		ids = append(ids, sent.ID)
	}
	return ids, nil
}

func (a *Adapter) editChannel(ctx context.Context, channel, id string, m message) error {
	comps := m.Components
	if comps == nil {
		comps = []discordgo.MessageComponent{}
	}
	edit := &discordgo.MessageEdit{ID: id, Channel: channel, Content: &m.Content, Components: &comps, AllowedMentions: noMentions()}
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
