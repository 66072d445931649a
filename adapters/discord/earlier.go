package discord

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// earlier returns the Event.Earlier of a message that replies to another
// (rt.ReplyTo): the chain of replies it answers, read message by message
// (GET /channels/{channel}/messages/{message}, which names the message each
// one replies to), oldest first. A hop that fails after the first ends the
// chain with what was read; a failed first one is the core's "no context".
func (a *Adapter) earlier(rt route) func(ctx context.Context, max int) ([]bridge.Earlier, error) {
	return func(ctx context.Context, max int) ([]bridge.Earlier, error) {
		var chain []*discordgo.Message
		channel, next := cmp.Or(rt.ReplyChannel, rt.Channel), rt.ReplyTo
		seen := map[string]bool{rt.Message: true}
		for len(chain) < max && next != "" && !seen[next] {
			seen[next] = true
			m, err := a.session.ChannelMessage(channel, next, discordgo.WithContext(ctx))
			if err != nil {
				if len(chain) == 0 {
					return nil, fmt.Errorf("replied-to message %s/%s: %w", channel, next, err)
				}
				a.log.Info("reply chain read in part", zap.String("channel", channel), zap.Int("messages", len(chain)), zap.Error(err))
				break
			}
			chain = append(chain, m)
			next = ""
			if ref := m.MessageReference; ref != nil && m.Type == discordgo.MessageTypeReply {
				channel, next = cmp.Or(ref.ChannelID, channel), ref.MessageID
			}
		}
		slices.Reverse(chain)
		bot := a.bot()
		out := make([]bridge.Earlier, 0, len(chain))
		for _, m := range chain {
			e := bridge.Earlier{Text: plainMentions(stripMention(m.Content, bot), m.Mentions)}
			if m.Author != nil {
				e.Author, e.Self = userOf(m.Author, nil).Name, m.Author.ID == bot
			}
			for _, f := range m.Attachments {
				if f != nil {
					e.Files = append(e.Files, f.Filename)
				}
			}
			out = append(out, e)
		}
		return out, nil
	}
}

// plainMentions writes the users a message mentions by name ("@alice")
// rather than as <@ID>.
func plainMentions(text string, users []*discordgo.User) string {
	return mentionPattern.ReplaceAllStringFunc(text, func(s string) string {
		id := mentionPattern.FindStringSubmatch(s)[1]
		for _, u := range users {
			if u != nil && u.ID == id {
				return "@" + userOf(u, nil).Name
			}
		}
		return "@" + id
	})
}
