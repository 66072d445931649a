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

// maxHistory is Discord's most messages one Get Channel Messages returns.
const maxHistory = 100

// earlierOf returns the reading of what a message on its route follows: the reply
// chain it answers, else, in a thread, the thread's messages before it; nil
// for neither.
func (a *Adapter) earlierOf(rt route) func(ctx context.Context, max int) ([]bridge.Earlier, error) {
	switch {
	case rt.ReplyTo != "":
		return a.earlier(rt)
	case rt.InThread && rt.Message != "":
		return a.threadHistory(rt)
	}
	return nil
}

// threadHistory returns the reading of what came before a message in a thread people
// were already talking in: the thread's messages before it, oldest first,
// from one Get Channel Messages (at most 100, newest first as Discord
// returns them).
func (a *Adapter) threadHistory(rt route) func(ctx context.Context, max int) ([]bridge.Earlier, error) {
	return func(ctx context.Context, max int) ([]bridge.Earlier, error) {
		msgs, err := a.session.ChannelMessages(rt.Channel, min(max, maxHistory), rt.Message, "", "", discordgo.WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("thread %s before %s: %w", rt.Channel, rt.Message, err)
		}
		slices.Reverse(msgs)
		talk := msgs[:0]
		for _, m := range msgs {
			if m != nil && (m.Type == discordgo.MessageTypeDefault || m.Type == discordgo.MessageTypeReply) {
				talk = append(talk, m)
			}
		}
		return a.earlierMessages(talk), nil
	}
}

// earlier returns the reading of what came before a message that replies to another
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
		return a.earlierMessages(chain), nil
	}
}

// earlierMessages writes messages for the agent: authors by name, the
// bot's own marked, mentions by name, files by name. Without the message
// content intent Discord shows others' guild messages blank: they are left
// out.
func (a *Adapter) earlierMessages(msgs []*discordgo.Message) []bridge.Earlier {
	bot := a.bot()
	out := make([]bridge.Earlier, 0, len(msgs))
	for _, m := range msgs {
		if m.Content == "" && len(m.Attachments) == 0 {
			continue // blank without the message content intent, or nothing said
		}
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
	return out
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
