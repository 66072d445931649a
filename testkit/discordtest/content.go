package discordtest

import (
	"encoding/json"
	"slices"

	"github.com/bwmarrin/discordgo"
)

// restContentLocked blanks what a REST read of m shows an app without the
// message content intent, as Discord does across its APIs
// (events/gateway#message-content-intent): the content, embeds, attachments
// and components of a guild message, unless the app wrote it or it mentions
// the app. The app's intent is that of its identified gateway sessions.
func (s *Server) restContentLocked(w *wireMessage, m *Message) *wireMessage {
	if m.GuildID == "" || m.Author.ID == s.bot.ID || slices.ContainsFunc(m.Mentions, func(u discordgo.User) bool { return u.ID == s.bot.ID }) {
		return w
	}
	for _, sess := range s.sessions {
		if sess.intents&discordgo.IntentMessageContent != 0 {
			return w
		}
	}
	blank := *w
	blank.Content = ""
	blank.Embeds = []*discordgo.MessageEmbed{}
	blank.Components = json.RawMessage("[]")
	blank.Attachments = []map[string]any{}
	return &blank
}
