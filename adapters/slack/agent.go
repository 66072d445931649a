package slack

import (
	"context"
	"fmt"
	"strings"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
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
		log.Debug("app_home_opened ignored", zap.String("tab", truncate(e.Tab, 16)))
		return nil
	}
	return a.receiveAgent(log, team, eventID, bridge.KindOpen, e.Channel, e.User, e.Context)
}

// receiveAppContext hands the core what the user of an agent_view app's DM
// now views. Without slack.agent_view it is ignored (nil).
func (a *Adapter) receiveAppContext(log *zap.Logger, team, eventID string, e *slackevents.AppContextChangedEvent) *bridge.Receipt {
	if !a.cfg.AgentView {
		log.Debug("app_context_changed while slack.agent_view is off")
		return nil
	}
	return a.receiveAgent(log, team, eventID, bridge.KindContext, e.Channel, e.User, &e.Context)
}

func (a *Adapter) receiveAgent(log *zap.Logger, team, eventID string, kind bridge.Kind, channel, user string, ac *slackevents.AppContext) *bridge.Receipt {
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
		Key: "slack/ctx/" + eventID,
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

// Slack's conversations.replies pages: how many messages a request asks
// for, and how many pages a thread is read in at most.
const (
	earlierPage     = 200
	maxEarlierPages = 5
)

// earlier returns the Event.Earlier of a message in the thread rooted at
// rt.ContextOf: the thread's messages before it (conversations.replies),
// with display names. conversations.replies is Tier 3, but once a minute
// and 15 messages a page for a commercially distributed app outside the
// Slack Marketplace: a page that fails after the first ends the reading
// with what was read, and a failed first page is the core's "no context".
func (a *Adapter) earlier(rt route) func(ctx context.Context, max int) ([]bridge.Earlier, error) {
	return func(ctx context.Context, max int) ([]bridge.Earlier, error) {
		var (
			msgs   []slackgo.Message
			cursor string
		)
		for page := 0; page < maxEarlierPages; page++ {
			got, more, next, err := a.api.GetConversationRepliesContext(ctx, &slackgo.GetConversationRepliesParameters{
				ChannelID: rt.Channel, Timestamp: rt.ContextOf, Latest: rt.UserTS, Inclusive: false,
				Limit: earlierPage, Cursor: cursor,
			})
			if err != nil {
				if page == 0 {
					return nil, fmt.Errorf("conversations.replies %s/%s: %w", rt.Channel, rt.ContextOf, err)
				}
				a.log.Info("thread read in part; the agent gets its oldest messages", zap.String("channel", rt.Channel), zap.Int("messages", len(msgs)), zap.Error(err))
				break
			}
			msgs = append(msgs, got...)
			if !more || next == "" {
				break
			}
			cursor = next
		}
		self := a.identity()
		out := make([]bridge.Earlier, 0, len(msgs))
		seen := make(map[string]bool, len(msgs))
		for _, m := range msgs {
			if seen[m.Timestamp] || m.Timestamp == rt.UserTS || !keptSubtypes[m.SubType] && m.SubType != slackgo.MsgSubTypeBotMessage {
				continue // Slack repeats the root on later pages; joins and the like are no talk
			}
			seen[m.Timestamp] = true
			e := bridge.Earlier{Self: a.isSelf(m.User, m.BotID), Text: inboundText(m.Text, self.userID)}
			switch {
			case m.User != "":
				e.Author = a.users.name(ctx, m.User)
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
		if len(out) > max {
			out = out[len(out)-max:]
		}
		return out, nil
	}
}
