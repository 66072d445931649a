package slack

import (
	"context"
	"strings"

	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// maxContextEntities bounds how many of the things a user views (most
// relevant first) the agent is told about.
const maxContextEntities = 5

// receiveHome hands the core the opening of an agent_view app's Messages
// tab: the DM is greeted with the agent's suggested prompts the first time,
// and what the user views is kept for the agent. Without slack.agent_view,
// or for the Home tab, it is ignored (nil).
func (a *Adapter) receiveHome(log *zap.Logger, team, eventID string, e *slackevents.AppHomeOpenedEvent) *bridge.Receipt {
	if !a.cfg.AgentView || e.Tab != "messages" {
		log.Debug("app_home_opened ignored", zap.String("tab", truncate.Bytes(e.Tab, 16)))
		return nil
	}
	return a.receiveAgent(log, team, eventID, e.EventTimeStamp, bridge.KindOpen, e.Channel, e.User, e.Context)
}

// receiveAppContext hands the core what the user of an agent_view app's DM
// now views. Without slack.agent_view it is ignored (nil).
func (a *Adapter) receiveAppContext(log *zap.Logger, team, eventID string, e *slackevents.AppContextChangedEvent) *bridge.Receipt {
	if !a.cfg.AgentView {
		log.Debug("app_context_changed while slack.agent_view is off")
		return nil
	}
	return a.receiveAgent(log, team, eventID, e.EventTimestamp, bridge.KindContext, e.Channel, e.User, &e.Context)
}

// receiveAgent hands the core an agent_view DM's opening or context change,
// in the DM's order by its event_ts (see receiveAssistant).
func (a *Adapter) receiveAgent(log *zap.Logger, team, eventID, eventTS string, kind bridge.Kind, channel, user string, ac *slackevents.AppContext) *bridge.Receipt {
	err := checkFields(
		field{"team_id", team, optional(isID)},
		field{"event_id", eventID, isTrigger},
		field{"channel", channel, isID},
		field{"user", user, isID},
	)
	if err != nil {
		a.refuse(log, err)
		return nil
	}
	return a.receive(log, bridge.Event{
		Kind:         kind,
		Conversation: conversationKey(team, channel, ""),
		Team:         team,
		Channel:      channel,
		User:         bridge.User{ID: user},
		Text:         appContextText(ac),
		// Each delivery is its own event; the core greets a DM once.
		Key:   "slack/ctx/" + eventID,
		Order: tsOrder(eventTS),
	}, route{Kind: kindChat, Channel: channel, User: user, Agent: true})
}

// appContextText is the sentence that tells the agent what the user views
// in Slack, most relevant first; "" for nothing. Entities whose IDs are not
// Slack's shape are left out.
func appContextText(ac *slackevents.AppContext) string {
	if ac == nil {
		return ""
	}
	var parts []string
	for _, e := range ac.Entities {
		if len(parts) == maxContextEntities {
			break
		}
		switch {
		case e.Type == slackevents.AppContextEntityChannel && isID(e.Value):
			parts = append(parts, "the Slack channel <#"+e.Value+">")
		case e.Type == slackevents.AppContextEntityCanvas && isID(e.Value):
			parts = append(parts, "the canvas "+e.Value)
		case e.Type == slackevents.AppContextEntityList && isID(e.Value):
			parts = append(parts, "the list "+e.Value)
		case e.Type == slackevents.AppContextEntityMessageContext && e.Message != nil &&
			isID(e.Message.ChannelID) && isTS(e.Message.MessageTimestamp):
			parts = append(parts, "the message "+e.Message.MessageTimestamp+" in <#"+e.Message.ChannelID+">")
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "The user is viewing " + strings.Join(parts, ", and ") + "."
}

// earlierPage is the most messages one conversations.replies page asks for.
const earlierPage = 200

// earlier reads, for a message in the thread rooted at rt.ContextOf, the thread's messages just before it (readThreadEnd), with
// the names of their authors and of the people they mention from the
// adapter's cache, at most maxNameLookups users.info calls for those it
// does not know. conversations.replies is
// Tier 3, but once a minute and 15 messages a page for a commercially
// distributed app outside the Slack Marketplace: a failed first call is the
// core's "no context", a later one ends the reading with what was read.
func (a *Adapter) earlier(ctx context.Context, rt route, max int) ([]bridge.Earlier, error) {
	end, err := a.readThreadEnd(ctx, rt, max)
	if err != nil {
		return nil, err
	}
	// Authors first, the newest first, then the people they mention.
	ids := make([]string, 0, len(end.msgs))
	for i := len(end.msgs) - 1; i >= 0; i-- {
		ids = append(ids, end.msgs[i].User)
	}
	for i := len(end.msgs) - 1; i >= 0; i-- {
		ids = append(ids, mentionedUsers(end.msgs[i].Text)...)
	}
	names := a.users.nameAll(ctx, ids, maxNameLookups)
	self := a.identity()
	out := make([]bridge.Earlier, 0, len(end.msgs))
	for _, m := range end.msgs {
		e := bridge.Earlier{Self: a.isSelf(m.User, m.BotID), Text: inboundText(labelMentions(m.Text, names), self.userID)}
		switch {
		case m.User != "":
			e.Author = names[m.User]
			if e.Author == "" {
				e.Author = m.User
			}
		case m.Username != "":
			e.Author = m.Username
		}
		for _, f := range m.Files {
			name := f.Name
			if name == "" {
				name = f.Title
			}
			e.Files = append(e.Files, name)
		}
		out = append(out, e)
	}
	if len(out) > 0 {
		out[0].LeftOut = end.leftOut
	}
	return out, nil
}

// mentionedUsers lists the users text mentions without a label (<@U…>).
func mentionedUsers(text string) []string {
	var ids []string
	for {
		i := strings.Index(text, "<@")
		if i < 0 {
			return ids
		}
		text = text[i+2:]
		end := strings.IndexByte(text, '>')
		if end < 0 {
			return ids
		}
		if id := text[:end]; isID(id) {
			ids = append(ids, id)
		}
		text = text[end+1:]
	}
}

// labelEscaper escapes a name as Slack's message format does a label.
var labelEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// labelMentions gives each unlabelled user mention of text whose name is
// known that name as its label (<@U1> becomes <@U1|Alice>), so that it
// reads as the name.
func labelMentions(text string, names map[string]string) string {
	var b strings.Builder
	for {
		i := strings.Index(text, "<@")
		if i < 0 {
			break
		}
		end := strings.IndexByte(text[i:], '>')
		if end < 0 {
			break
		}
		id := text[i+2 : i+end]
		b.WriteString(text[:i+2+len(id)])
		if name := names[id]; name != "" && isID(id) {
			b.WriteString("|" + labelEscaper.Replace(name))
		}
		text = text[i+end:]
	}
	b.WriteString(text)
	return b.String()
}
