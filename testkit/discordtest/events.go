package discordtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/bwmarrin/discordgo"
)

// MessageCreate is a user's message for SendMessage.
type MessageCreate struct {
	// ID is assigned by the fake when empty.
	ID        string
	ChannelID string
	// GuildID is empty for a DM. A channel keeps the guild it was first seen with.
	GuildID string
	Author  discordgo.User
	// Roles are the author's guild roles (member.roles), for a guild message.
	Roles   []string
	Content string
	// Mentions adds users to those mentioned as <@id> in Content.
	Mentions []discordgo.User
	// Reference makes the message a reply.
	Reference *discordgo.MessageReference
	// ReplyPing keeps the reply's "@ mention" on: the replied-to author is mentioned, which
	// counts as mentioning the bot when replying to it.
	ReplyPing bool
	// WebhookID marks a message sent by a webhook.
	WebhookID string
	// Files are attached to the message and served by the fake's CDN.
	Files []File
}

// AddGuild makes the bot a member of a guild: READY lists it and GUILD_CREATE describes it.
// A new guild while a session is live is announced with GUILD_CREATE.
func (s *Server) AddGuild(ctx context.Context, id string) error {
	s.mu.Lock()
	if slices.Contains(s.guilds, id) {
		s.mu.Unlock()
		return nil
	}
	s.guilds = append(s.guilds, id)
	s.joined[id] = s.now()
	g := s.guildCreateLocked(id)
	s.notifyLocked()
	s.mu.Unlock()
	return ignoreNoSession(s.dispatch(ctx, "GUILD_CREATE", id, discordgo.IntentsGuilds, func(discordgo.Intent) any { return g }))
}

// AddChannel adds a guild channel, thread or DM channel the bot can see. A channel of an
// unknown guild adds the guild. While a session is live, CHANNEL_CREATE (THREAD_CREATE for a
// thread) announces it.
func (s *Server) AddChannel(ctx context.Context, ch discordgo.Channel) error {
	if ch.ID == "" {
		return errors.New("discordtest: add channel: ID is required")
	}
	if ch.GuildID != "" {
		if err := s.AddGuild(ctx, ch.GuildID); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if ch.IsThread() {
		parent, ok := s.channels[ch.ParentID]
		if !ok || parent.GuildID != ch.GuildID {
			s.mu.Unlock()
			return fmt.Errorf("discordtest: add thread %s: parent %q is not a known channel of guild %s", ch.ID, ch.ParentID, ch.GuildID)
		}
		if ch.ThreadMetadata == nil {
			ch.ThreadMetadata = &discordgo.ThreadMetadata{AutoArchiveDuration: 1440, ArchiveTimestamp: s.now().UTC()}
		}
	}
	s.addChannelLocked(&ch)
	w := s.wireChannelLocked(&ch)
	s.mu.Unlock()
	switch {
	case ch.GuildID == "":
		return nil // Discord sends no CHANNEL_CREATE for DMs
	case ch.IsThread():
		return ignoreNoSession(s.dispatchThreadCreate(ctx, ch.GuildID, w))
	default:
		return ignoreNoSession(s.dispatch(ctx, "CHANNEL_CREATE", ch.GuildID, discordgo.IntentsGuilds, func(discordgo.Intent) any { return w }))
	}
}

// ignoreNoSession lets state be set up before any client connects.
func ignoreNoSession(err error) error {
	if errors.Is(err, ErrNoSession) {
		return nil
	}
	if _, ok := errors.AsType[*IntentError](err); ok {
		return nil
	}
	return err
}

// dispatchThreadCreate sends THREAD_CREATE of a new thread, rendered by wireChannelLocked.
func (s *Server) dispatchThreadCreate(ctx context.Context, guildID string, th map[string]any) error {
	d := maps.Clone(th)
	d["newly_created"] = true
	return s.dispatch(ctx, "THREAD_CREATE", guildID, discordgo.IntentsGuilds, func(discordgo.Intent) any { return d })
}

// Thread is a thread for SendThreadCreate.
type Thread struct {
	// ID is assigned by the fake when empty.
	ID       string
	GuildID  string
	ParentID string
	Name     string
	// Type defaults to a public thread.
	Type    discordgo.ChannelType
	OwnerID string
}

// SendThreadCreate creates a thread, as a user would, and dispatches THREAD_CREATE. An
// unknown parent is added as a text channel of the guild.
func (s *Server) SendThreadCreate(ctx context.Context, t Thread) (discordgo.Channel, error) {
	if t.GuildID == "" || t.ParentID == "" {
		return discordgo.Channel{}, errors.New("discordtest: send thread create: GuildID and ParentID are required")
	}
	if t.Type == 0 {
		t.Type = discordgo.ChannelTypeGuildPublicThread
	}
	s.mu.Lock()
	_, parentKnown := s.channels[t.ParentID]
	if t.ID == "" {
		t.ID = s.newIDLocked()
	}
	s.mu.Unlock()
	if !parentKnown {
		if err := s.AddChannel(ctx, discordgo.Channel{ID: t.ParentID, GuildID: t.GuildID, Type: discordgo.ChannelTypeGuildText, Name: "channel-" + t.ParentID}); err != nil {
			return discordgo.Channel{}, err
		}
	}
	ch := discordgo.Channel{ID: t.ID, GuildID: t.GuildID, ParentID: t.ParentID, Name: t.Name, Type: t.Type, OwnerID: t.OwnerID, MemberCount: 1}
	return ch, s.AddChannel(ctx, ch)
}

// ensureChannel adds the channel a dispatched message or interaction happens in.
func (s *Server) ensureChannel(ctx context.Context, channelID, guildID string, user discordgo.User) error {
	s.mu.Lock()
	ch, ok := s.channels[channelID]
	s.mu.Unlock()
	if ok {
		if ch.GuildID != guildID {
			return fmt.Errorf("discordtest: channel %s belongs to guild %q, not %q", channelID, ch.GuildID, guildID)
		}
		return nil
	}
	if guildID == "" {
		u := user
		return s.AddChannel(ctx, discordgo.Channel{ID: channelID, Type: discordgo.ChannelTypeDM, Recipients: []*discordgo.User{&u}})
	}
	return s.AddChannel(ctx, discordgo.Channel{ID: channelID, GuildID: guildID, Type: discordgo.ChannelTypeGuildText, Name: "channel-" + channelID})
}

// SendMessage dispatches MESSAGE_CREATE of a user's message and stores it (so the bot can
// reply to it or start a thread on it). Without the message content intent a guild message
// that does not mention the bot arrives with blank content. It fails when the session did
// not ask for the intent the message needs (GUILD_MESSAGES, DIRECT_MESSAGES).
func (s *Server) SendMessage(ctx context.Context, mc MessageCreate) (Message, error) {
	if mc.ChannelID == "" || mc.Author.ID == "" {
		return Message{}, errors.New("discordtest: send message: ChannelID and Author.ID are required")
	}
	if mc.Author.Discriminator == "" {
		mc.Author.Discriminator = "0"
	}
	if err := s.ensureChannel(ctx, mc.ChannelID, mc.GuildID, mc.Author); err != nil {
		return Message{}, err
	}
	s.mu.Lock()
	if mc.ID == "" {
		mc.ID = s.newIDLocked()
	}
	if _, dup := s.messages[mc.ID]; dup {
		s.mu.Unlock()
		return Message{}, fmt.Errorf("discordtest: send message: id %s exists", mc.ID)
	}
	m := &Message{
		ID: mc.ID, ChannelID: mc.ChannelID, GuildID: mc.GuildID, Author: mc.Author, Content: mc.Content,
		Reference: mc.Reference, Source: SourceUser, Timestamp: s.now(), WebhookID: mc.WebhookID,
	}
	for _, f := range mc.Files {
		m.Attachments = append(m.Attachments, Attachment{Filename: f.Name, ContentType: f.ContentType, Content: f.Content, Body: f.Body})
	}
	m.Attachments = s.storeAttachmentsLocked(mc.ChannelID, m.Attachments)
	if mc.GuildID != "" {
		roles := append([]string{}, mc.Roles...)
		m.Member = &discordgo.Member{Roles: roles, JoinedAt: s.now().UTC()}
	}
	addMention := func(u discordgo.User) {
		if !slices.ContainsFunc(m.Mentions, func(x discordgo.User) bool { return x.ID == u.ID }) {
			m.Mentions = append(m.Mentions, u)
		}
	}
	for _, sub := range userMention.FindAllStringSubmatch(mc.Content, -1) {
		addMention(s.userLocked(sub[1]))
	}
	for _, u := range mc.Mentions {
		addMention(u)
	}
	if ref := mc.Reference; ref != nil && mc.ReplyPing {
		if target, ok := s.messages[ref.MessageID]; ok {
			addMention(target.Author)
		}
	}
	if !s.opts.NoRecord {
		s.messages[m.ID] = m
	}
	s.countMessageLocked(m.ChannelID, m.ID)
	s.notifyLocked()
	full := s.eventLocked(m)
	s.mu.Unlock()

	mentionsBot := slices.ContainsFunc(m.Mentions, func(u discordgo.User) bool { return u.ID == s.bot.ID })
	err := s.dispatch(ctx, "MESSAGE_CREATE", mc.GuildID, messageIntent(mc.GuildID), func(intents discordgo.Intent) any {
		if mc.GuildID == "" || intents&discordgo.IntentMessageContent != 0 || mentionsBot {
			return full
		}
		blank := *full
		blank.Content = ""
		blank.Embeds = []*discordgo.MessageEmbed{}
		blank.Components = json.RawMessage("[]")
		blank.Attachments = []map[string]any{}
		return &blank
	})
	return *m, err
}

// Messages returns the messages the bot sent (channel messages, interaction responses and
// follow-ups) in the order they were created, in their current state.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, 0, len(s.botMessages))
	for _, id := range s.botMessages {
		out = append(out, *s.messages[id])
	}
	return out
}

// Message returns any stored message, the bot's or a user's.
func (s *Server) Message(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// WaitMessage waits until a bot message, in its current state, satisfies match; e.g. an
// interaction's original response once edited with the result.
func (s *Server) WaitMessage(ctx context.Context, match func(Message) bool) (Message, error) {
	return waitFor(ctx, s, "message", func() (Message, bool) {
		for _, id := range s.botMessages {
			if m := s.messages[id]; match(*m) {
				return *m, true
			}
		}
		return Message{}, false
	})
}

// Channel returns a channel the fake knows.
func (s *Server) Channel(id string) (discordgo.Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[id]
	if !ok {
		return discordgo.Channel{}, false
	}
	return *ch, true
}
