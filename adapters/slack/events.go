package slack

import (
	"context"
	"errors"
	"strings"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// incoming is a chat message that passed the cheap filters and waits, after
// the ack, for de-duplication, lookups and the core.
type incoming struct {
	eventID string
	team    string
	channel string
	ts      string // the message itself
	thread  string // where the reply goes ("" = the channel or DM itself)
	key     string
	user    string
	text    string
	// checkThread asks whether the bot is part of thread before answering.
	checkThread bool
	// joinThread records thread as the bot's (a mention there).
	joinThread bool
}

// onEventsAPI routes an acknowledged Events API event.
func (a *Adapter) onEventsAPI(ctx context.Context, ev slackevents.EventsAPIEvent, retry int) {
	cb, ok := ev.Data.(*slackevents.EventsAPICallbackEvent)
	if ev.Type != slackevents.CallbackEvent || !ok {
		return
	}
	log := a.log.WithLazy(zap.String("event_id", cb.EventID), zap.String("event", ev.InnerEvent.Type))
	if retry > 0 {
		log.Debug("event redelivered", zap.Int("retry", retry))
	}
	var in *incoming
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		in = a.fromMention(cb.TeamID, e)
	case *slackevents.MessageEvent:
		in = a.fromMessage(cb.TeamID, e)
	}
	if in == nil {
		log.Debug("event ignored")
		return
	}
	in.eventID = cb.EventID
	a.queue(in.key, func() { a.deliver(ctx, in) })
}

// isSelf reports whether a message was written by this app's bot.
func (a *Adapter) isSelf(user, botID string) bool {
	id := a.identity()
	return user != "" && user == id.userID || botID != "" && botID == id.botID
}

func (a *Adapter) fromMention(team string, e *slackevents.AppMentionEvent) *incoming {
	switch {
	case a.isSelf(e.User, e.BotID):
		return nil
	case e.BotID != "" && !a.cfg.AllowBots:
		return nil
	case e.Edited != nil:
		// Editing a message re-sends app_mention; answering again would duplicate.
		return nil
	case e.Channel == "" || e.TimeStamp == "":
		return nil
	}
	in := &incoming{
		team:    team,
		channel: e.Channel,
		ts:      e.TimeStamp,
		user:    e.User,
		text:    inboundText(e.Text, a.identity().userID),
	}
	root := e.ThreadTimeStamp
	if root == "" {
		root = e.TimeStamp
	}
	if a.cfg.SessionScope == ScopeChannel {
		// The channel is the conversation: answer where the mention was.
		in.thread = e.ThreadTimeStamp
		in.key = conversationKey(team, e.Channel, "")
	} else {
		in.thread = root
		in.key = conversationKey(team, e.Channel, root)
	}
	in.joinThread = in.thread != ""
	return in
}

// keptSubtypes are message subtypes that are still someone talking.
var keptSubtypes = map[string]bool{
	"":                                true,
	slackgo.MsgSubTypeFileShare:       true,
	slackgo.MsgSubTypeThreadBroadcast: true,
}

func (a *Adapter) fromMessage(team string, e *slackevents.MessageEvent) *incoming {
	botMessage := e.SubType == slackgo.MsgSubTypeBotMessage
	switch {
	case a.isSelf(e.User, e.BotID):
		return nil
	case (e.BotID != "" || botMessage) && !a.cfg.AllowBots:
		return nil
	case !keptSubtypes[e.SubType] && !botMessage:
		return nil
	case e.Channel == "" || e.TimeStamp == "":
		return nil
	}
	self := a.identity().userID
	in := &incoming{
		team:    team,
		channel: e.Channel,
		ts:      e.TimeStamp,
		user:    e.User,
		text:    inboundText(e.Text, self),
	}
	if e.ChannelType == "im" {
		in.thread = e.ThreadTimeStamp
		in.key = conversationKey(team, e.Channel, "")
		return in
	}
	switch {
	case self != "" && strings.Contains(e.Text, "<@"+self):
		// app_mention brings the same message; it is handled there.
		return nil
	case e.ThreadTimeStamp == "" || e.ThreadTimeStamp == e.TimeStamp:
		// A channel message without a mention is not for the bot.
		return nil
	case a.cfg.ThreadRepliesNeedMention:
		return nil
	}
	in.thread = e.ThreadTimeStamp
	in.checkThread = true
	if a.cfg.SessionScope == ScopeChannel {
		in.key = conversationKey(team, e.Channel, "")
	} else {
		in.key = conversationKey(team, e.Channel, e.ThreadTimeStamp)
	}
	return in
}

// deliver runs after the ack: de-duplication (persisted by the core), the
// thread check, identity lookups, then the core.
func (a *Adapter) deliver(ctx context.Context, in *incoming) {
	log := a.log.WithLazy(zap.String("conversation", in.key), zap.String("event_id", in.eventID))
	// A message is known by its channel and ts, checked below: that key
	// catches Slack's retries (same event, same ts) and the app_mention and
	// message pair of one mention (same ts), at one stored entry per message.
	// The event ID is only needed for events without a ts.
	if in.ts == "" && in.eventID != "" && !a.core.FirstDelivery("slack/ev/"+in.eventID) {
		log.Debug("duplicate event ignored")
		return
	}
	if in.checkThread && !a.threads.isBots(ctx, a.api, a.identity(), in.channel, in.thread, log) {
		log.Debug("message in a thread the bot is not part of")
		return
	}
	if !a.core.FirstDelivery("slack/msg/" + in.channel + "/" + in.ts) {
		log.Debug("duplicate message ignored")
		return
	}
	if in.joinThread {
		a.threads.add(in.channel, in.thread)
	}
	r := &responder{a: a, channel: in.channel, thread: in.thread, user: in.user, userTS: in.ts}
	a.handle(log, bridge.Event{
		Kind:         bridge.KindMessage,
		Platform:     "slack",
		Conversation: in.key,
		Team:         in.team,
		Channel:      in.channel,
		User:         a.users.lookup(ctx, in.user, ""),
		Text:         in.text,
		Reply:        r,
	})
}

func (a *Adapter) handle(log *zap.Logger, ev bridge.Event) {
	if err := a.core.Handle(ev); err != nil {
		// The core has told the user already (busy, shutting down).
		log.Debug("core refused event", zap.Error(err))
		return
	}
	if ce := log.Check(zap.DebugLevel, "event handed to core"); ce != nil {
		ce.Write(zap.Stringer("kind", ev.Kind), zap.String("user", ev.User.ID), zap.String("text", ev.Text))
	}
}

// onCommand handles a slash command. immediate is the acknowledgement's
// payload (nil for an empty ack); work hands the command to the core and must
// be called after the ack.
func (a *Adapter) onCommand(ctx context.Context, cmd slackgo.SlashCommand) (immediate any, work func()) {
	var word string
	switch cmd.Command {
	case a.cfg.FlowCommand:
		word = bridge.CommandFlow
	case a.cfg.AgentCommand:
		word = bridge.CommandAgent
	default:
		a.log.Info("unknown slash command", zap.String("command", cmd.Command))
		return &urlMessage{
			ResponseType: slackgo.ResponseTypeEphemeral,
			Text:         "Unknown command " + escapeText(cmd.Command) + ". Try " + a.cfg.FlowCommand + " help or " + a.cfg.AgentCommand + " help.",
		}, func() {}
	}
	key := conversationKey(cmd.TeamID, cmd.ChannelID, "")
	return nil, func() {
		a.queue(key, func() {
			log := a.log.WithLazy(zap.String("conversation", key), zap.String("command", cmd.Command))
			r := &responder{a: a, channel: cmd.ChannelID, user: cmd.UserID, responseURL: cmd.ResponseURL, kind: kindCommand}
			a.handle(log, bridge.Event{
				Kind:         bridge.KindCommand,
				Platform:     "slack",
				Conversation: key,
				Team:         cmd.TeamID,
				Channel:      cmd.ChannelID,
				User:         a.users.lookup(ctx, cmd.UserID, cmd.UserName),
				Text:         inboundText(cmd.Text, ""),
				Command:      word,
				Reply:        r,
			})
		})
	}
}

// onInteraction handles a button press (block_actions); other interaction
// types are acknowledged and ignored.
func (a *Adapter) onInteraction(ctx context.Context, cb slackgo.InteractionCallback) {
	if cb.Type != slackgo.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		return
	}
	act := cb.ActionCallback.BlockActions[0]
	channel := cb.Container.ChannelID
	if channel == "" {
		channel = cb.Channel.ID
	}
	thread := cb.Container.ThreadTs
	if thread == "" {
		thread = cb.Message.ThreadTimestamp
	}
	team := cb.Team.ID
	if team == "" {
		team = cb.User.TeamID
	}
	key := conversationKey(team, channel, "")
	if thread != "" && a.cfg.SessionScope == ScopeThread {
		key = conversationKey(team, channel, thread)
	}
	a.queue(key, func() {
		log := a.log.WithLazy(zap.String("conversation", key), zap.String("action", act.ActionID))
		r := &responder{
			a: a, channel: channel, thread: thread, user: cb.User.ID, responseURL: cb.ResponseURL, kind: kindAction,
			replaceOnSend: act.ActionID == bridge.ActionConfirm || act.ActionID == bridge.ActionCancel,
		}
		a.handle(log, bridge.Event{
			Kind:         bridge.KindAction,
			Platform:     "slack",
			Conversation: key,
			Team:         team,
			Channel:      channel,
			User:         a.users.lookup(ctx, cb.User.ID, cb.User.Name),
			Action:       bridge.Action{ID: act.ActionID, Value: act.Value},
			Reply:        r,
		})
	})
}

// errorCode is the "error" of a Slack API failure, such as "not_in_channel".
func errorCode(err error) string {
	if e, ok := errors.AsType[slackgo.SlackErrorResponse](err); ok {
		return e.Err
	}
	return ""
}

// queue runs fn after the ack, in order with the key's earlier work.
func (a *Adapter) queue(key string, fn func()) {
	if !a.work.do(key, fn) {
		a.log.Warn("too much queued for one conversation; event dropped", zap.String("conversation", key))
	}
}
