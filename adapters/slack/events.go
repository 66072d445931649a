package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// platform is the adapter's name in events and inbox keys.
const platform = "slack"

// incoming is a chat message that passed the cheap filters: who wrote it,
// where, and where the answer goes.
type incoming struct {
	team   string
	key    string // the conversation
	parent string // the channel's conversation, when key is one of its threads
	user   string
	ts     string // the message itself
	text   string
	files  []bridge.Attachment
	rt     route
}

// receiveEventsAPI hands an Events API event to the core. It returns the
// core's receipt, or nil when the event is not for the bot or is refused.
func (a *Adapter) receiveEventsAPI(ev slackevents.EventsAPIEvent, retry int) *bridge.Receipt {
	cb, ok := ev.Data.(*slackevents.EventsAPICallbackEvent)
	if ev.Type != slackevents.CallbackEvent || !ok {
		return nil
	}
	log := a.log.WithLazy(zap.String("event_id", truncate.Bytes(cb.EventID, 64)), zap.String("event", truncate.Bytes(ev.InnerEvent.Type, 64)))
	if retry > 0 {
		log.Debug("event redelivered", zap.Int("retry", retry))
	}
	var (
		in  *incoming
		err error
	)
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		in, err = a.fromMention(cb.TeamID, e)
	case *slackevents.MessageEvent:
		in, err = a.fromMessage(cb.TeamID, e)
	case *slackevents.AssistantThreadStartedEvent:
		return a.receiveAssistant(log, cb.TeamID, cb.EventID, e.EventTimestamp, bridge.KindOpen, e.AssistantThread)
	case *slackevents.AssistantThreadContextChangedEvent:
		return a.receiveAssistant(log, cb.TeamID, cb.EventID, e.EventTimestamp, bridge.KindContext, e.AssistantThread)
	case *slackevents.AppHomeOpenedEvent:
		return a.receiveHome(log, cb.TeamID, cb.EventID, e)
	case *slackevents.AppContextChangedEvent:
		return a.receiveAppContext(log, cb.TeamID, cb.EventID, e)
	case *slackevents.AgentSessionStoppedEvent:
		return a.receiveSessionStopped(log, cb.TeamID, e)
	case *slackevents.AgentSessionTitleChangedEvent:
		return a.receiveSessionTitle(log, cb.TeamID, e)
	}
	if err != nil {
		a.refuse(log, err)
		return nil
	}
	if in == nil {
		log.Debug("event ignored")
		return nil
	}
	if in.rt.CheckThread && a.threads.knownNotBots(in.rt.Channel, in.rt.Thread) {
		log.Debug("message in a thread the bot is not part of")
		return nil
	}
	if in.rt.JoinThread {
		// At once, so that replies received after the mention find the
		// thread the bot's; Prepare does it again for a restored mention.
		a.threads.add(in.rt.Channel, in.rt.Thread)
	}
	return a.receive(log, bridge.Event{
		Kind:         bridge.KindMessage,
		Conversation: in.key,
		Parent:       in.parent,
		Team:         in.team,
		Channel:      in.rt.Channel,
		User:         bridge.User{ID: in.user},
		Text:         in.text,
		Files:        in.files,
		// The channel and ts name a message, whichever event brought it: the
		// key catches Slack's retries and the app_mention and message pair
		// of one mention alike.
		Key:   "slack/msg/" + in.rt.Channel + "/" + in.ts,
		Order: tsOrder(in.ts),
	}, in.rt)
}

// tsOrder returns a message ts ("1716212345.000100") in microseconds, the
// platform's order of a conversation's messages (bridge.Event.Order); 0
// for a malformed one.
func tsOrder(ts string) int64 {
	sec, frac, ok := strings.Cut(ts, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt(frac, 10, 64)
	if !ok || err1 != nil || err2 != nil || len(frac) != 6 || s < 0 || us < 0 || s > math.MaxInt64/1_000_000-1 {
		return 0
	}
	return s*1_000_000 + us
}

// isSelf reports whether a message was written by this app's bot.
func (a *Adapter) isSelf(user, botID string) bool {
	id := a.identity()
	return user != "" && user == id.userID || botID != "" && botID == id.botID
}

// fromMention reads an app_mention. It returns nil for a mention the bot
// does not answer, and an error for one whose IDs are malformed.
func (a *Adapter) fromMention(team string, e *slackevents.AppMentionEvent) (*incoming, error) {
	switch {
	case a.isSelf(e.User, e.BotID):
		return nil, nil
	case e.BotID != "" && !a.cfg.AllowBots:
		return nil, nil
	case e.Edited != nil:
		// Editing a message re-sends app_mention; answering again would duplicate.
		return nil, nil
	case e.Channel == "" || e.TimeStamp == "":
		return nil, nil
	}
	in, err := a.chatMessage(team, e.Channel, e.User, e.TimeStamp, e.ThreadTimeStamp, e.Text)
	if err != nil {
		return nil, err
	}
	in.files = attachmentsOf(e.Files)
	root := e.ThreadTimeStamp
	if root == "" {
		root = e.TimeStamp
	}
	if a.cfg.SessionScope == ScopeChannel {
		// The channel is the conversation: answer where the mention was.
		in.rt.Thread = e.ThreadTimeStamp
		in.key = conversationKey(team, e.Channel, "")
	} else {
		in.rt.Thread = root
		in.key, in.parent = conversationKey(team, e.Channel, root), conversationKey(team, e.Channel, "")
		if root != e.TimeStamp {
			in.rt.ContextOf = root // a mention inside a thread people had started
		}
	}
	in.rt.JoinThread = in.rt.Thread != ""
	return in, nil
}

// keptSubtypes are message subtypes that are still someone talking.
var keptSubtypes = map[string]bool{
	"":                                true,
	slackgo.MsgSubTypeFileShare:       true,
	slackgo.MsgSubTypeThreadBroadcast: true,
}

// fromMessage reads a message event: a DM, or a reply in a thread that may
// be the bot's. It returns nil for a message the bot does not answer, and an
// error for one whose IDs are malformed.
func (a *Adapter) fromMessage(team string, e *slackevents.MessageEvent) (*incoming, error) {
	botMessage := e.SubType == slackgo.MsgSubTypeBotMessage
	switch {
	case a.isSelf(e.User, e.BotID):
		return nil, nil
	case (e.BotID != "" || botMessage) && !a.cfg.AllowBots:
		return nil, nil
	case !keptSubtypes[e.SubType] && !botMessage:
		return nil, nil
	case e.Channel == "" || e.TimeStamp == "":
		return nil, nil
	}
	self := a.identity().userID
	if e.ChannelType != "im" {
		switch {
		case self != "" && strings.Contains(e.Text, "<@"+self):
			// app_mention brings the same message; it is handled there.
			return nil, nil
		case e.ThreadTimeStamp == "" || e.ThreadTimeStamp == e.TimeStamp:
			// A channel message without a mention is not for the bot.
			return nil, nil
		case a.cfg.ThreadRepliesNeedMention:
			return nil, nil
		}
	}
	in, err := a.chatMessage(team, e.Channel, e.User, e.TimeStamp, e.ThreadTimeStamp, e.Text)
	if err != nil {
		return nil, err
	}
	if e.Message != nil {
		// slack-go keeps a message event's fields, files among them, in Message.
		in.files = attachmentsOf(e.Message.Files)
	}
	in.rt.Thread = e.ThreadTimeStamp
	switch {
	case e.ChannelType == "im" && a.cfg.Assistant && e.ThreadTimeStamp != "":
		// Each thread of the assistant container is a conversation of its own.
		in.key, in.parent = conversationKey(team, e.Channel, e.ThreadTimeStamp), conversationKey(team, e.Channel, "")
		in.rt.Assistant = true
	case e.ChannelType == "im" && a.cfg.AgentView:
		// The Messages tab of an agent: a message there starts a thread, and
		// each thread is a conversation of its own.
		root := e.ThreadTimeStamp
		if root == "" {
			root = e.TimeStamp
		}
		in.key, in.parent = conversationKey(team, e.Channel, root), conversationKey(team, e.Channel, "")
		in.rt.Thread, in.rt.Agent = root, true
		if root == e.TimeStamp {
			// It starts the thread's agent session, which is named after it.
			in.rt.Title = cleanTitle(e.Text, maxFirstTitle)
		}
	case e.ChannelType == "im":
		in.key = conversationKey(team, e.Channel, "")
	case a.cfg.SessionScope == ScopeChannel:
		in.key = conversationKey(team, e.Channel, "")
		in.rt.CheckThread = true
	default:
		in.key, in.parent = conversationKey(team, e.Channel, e.ThreadTimeStamp), conversationKey(team, e.Channel, "")
		in.rt.CheckThread = true
		in.rt.ContextOf = e.ThreadTimeStamp
	}
	return in, nil
}

// chatMessage checks the IDs of a chat message and reads it; the caller
// decides its conversation and where the answer goes.
func (a *Adapter) chatMessage(team, channel, user, ts, thread, text string) (*incoming, error) {
	err := checkFields(
		field{"team_id", team, optional(isID)},
		field{"channel", channel, isID},
		field{"user", user, optional(isID)}, // bot messages may have none
		field{"ts", ts, isTS},
		field{"thread_ts", thread, optional(isTS)},
	)
	if err != nil {
		return nil, err
	}
	return &incoming{
		team: team,
		user: user,
		ts:   ts,
		text: inboundText(text, a.identity().userID),
		rt:   route{Kind: kindChat, Channel: channel, User: user, UserTS: ts},
	}, nil
}

// receiveCommand hands a slash command to the core. immediate, when not nil,
// is the acknowledgement's payload and the command was not handed on; rec is
// nil when the command was refused.
func (a *Adapter) receiveCommand(ctx context.Context, cmd slackgo.SlashCommand) (rec *bridge.Receipt, immediate any) {
	var word string
	switch cmd.Command {
	case a.cfg.FlowCommand:
		word = bridge.CommandFlow
	case a.cfg.AgentCommand:
		word = bridge.CommandAgent
	default:
		name := truncate.Bytes(cmd.Command, 32)
		a.log.Info("unknown slash command", zap.String("command", name))
		return nil, &urlMessage{
			ResponseType: slackgo.ResponseTypeEphemeral,
			Text:         "Unknown command " + escapeText(name) + ". Try " + a.cfg.FlowCommand + " help or " + a.cfg.AgentCommand + " help.",
		}
	}
	log := a.log.WithLazy(zap.String("command", cmd.Command))
	err := checkFields(
		field{"team_id", cmd.TeamID, optional(isID)},
		field{"channel_id", cmd.ChannelID, isID},
		field{"user_id", cmd.UserID, isID},
		field{"trigger_id", cmd.TriggerID, isTrigger},
		field{"response_url", cmd.ResponseURL, optional(isResponseURL)},
		field{"user_name", cmd.UserName, shorterThan(256)},
	)
	if err != nil {
		a.refuse(log, err)
		return nil, nil
	}
	if word == bridge.CommandFlow && a.commandForm(ctx, log, cmd) {
		return nil, nil // the form is open; its submission is the event
	}
	return a.receive(log, bridge.Event{
		Kind:         bridge.KindCommand,
		Conversation: conversationKey(cmd.TeamID, cmd.ChannelID, ""),
		Team:         cmd.TeamID,
		Channel:      cmd.ChannelID,
		User:         bridge.User{ID: cmd.UserID, Name: cmd.UserName},
		Text:         inboundText(cmd.Text, ""),
		Command:      word,
		// A trigger_id is unique per invocation: it makes Slack's retries,
		// and a signed request replayed within its 5-minute window, one
		// event answered once.
		Key: "slack/cmd/" + cmd.TriggerID,
	}, route{Kind: kindCommand, Channel: cmd.ChannelID, User: cmd.UserID, ResponseURL: cmd.ResponseURL}), nil
}

// receiveInteraction hands a button press (block_actions) to the core; other
// interaction types are acknowledged and ignored (nil).
func (a *Adapter) receiveInteraction(cb slackgo.InteractionCallback) *bridge.Receipt {
	if cb.Type != slackgo.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		return nil
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
	log := a.log.WithLazy(zap.String("action", truncate.Bytes(act.ActionID, 64)))
	// A press is known by its trigger_id, or its action_ts where Slack sends none.
	id, valid := cb.TriggerID, isTrigger
	if id == "" {
		id, valid = act.ActionTs, isTS
	}
	err := checkFields(
		field{"team_id", team, optional(isID)},
		field{"channel_id", channel, isID},
		field{"user_id", cb.User.ID, isID},
		field{"trigger_id", id, valid},
		field{"thread_ts", thread, optional(isTS)},
		field{"response_url", cb.ResponseURL, optional(isResponseURL)},
		field{"action_id", act.ActionID, shorterThan(maxActionID)},
		field{"value", act.Value, shorterThan(maxValueLen)},
		field{"user_name", cb.User.Name, shorterThan(256)},
	)
	if err != nil {
		a.refuse(log, err)
		return nil
	}
	key, parent := a.pressConversation(team, channel, thread)
	return a.receive(log, bridge.Event{
		Kind:         bridge.KindAction,
		Conversation: key,
		Parent:       parent,
		Team:         team,
		Channel:      channel,
		User:         bridge.User{ID: cb.User.ID, Name: cb.User.Name},
		Action:       pressed(act.ActionID, act.Value, &cb, channel, thread),
		Key:          "slack/act/" + id,
	}, route{
		Kind: kindAction, Channel: channel, Thread: thread, User: cb.User.ID, ResponseURL: cb.ResponseURL,
		// The answer to Run or Cancel takes the question's place. Stop's
		// does not: its button is on the run's working message, which the
		// run itself rewrites (its outcome, or its answer in the
		// placeholder's place), and which others in the channel see; the
		// presser is answered beside it.
		ReplaceOnSend: act.ActionID == bridge.ActionConfirm || act.ActionID == bridge.ActionCancel,
	})
}

// pressConversation is the conversation of a button press on a message in
// channel (and thread): the conversation of the messages written there, as
// fromMessage and fromMention name it, so that a press (a Stop above all)
// reaches the conversation whose run it is about.
func (a *Adapter) pressConversation(team, channel, thread string) (key, parent string) {
	key = conversationKey(team, channel, "")
	if thread == "" {
		return key, ""
	}
	if strings.HasPrefix(channel, "D") {
		// A DM: its threads are conversations of their own only in the
		// assistant container and an agent_view app's Messages tab.
		if a.cfg.Assistant || a.cfg.AgentView {
			return conversationKey(team, channel, thread), key
		}
		return key, ""
	}
	if a.cfg.SessionScope == ScopeThread {
		return conversationKey(team, channel, thread), key
	}
	return key, ""
}

// receive completes ev with its route and hands it to the core, which
// returns at once. Called in the order events arrive, so that the core runs
// a conversation's events in that order.
func (a *Adapter) receive(log *zap.Logger, ev bridge.Event, rt route) *bridge.Receipt {
	ev.Platform = platform
	ev.Route, _ = json.Marshal(rt) // strings and booleans: it cannot fail
	if ce := log.Check(zap.DebugLevel, "event handed to core"); ce != nil {
		ce.Write(zap.String("conversation", ev.Conversation), zap.Stringer("kind", ev.Kind), zap.String("user", ev.User.ID), zap.String("text", ev.Text))
	}
	return a.core.Receive(ev)
}

// The adapter is the core's platform for Slack's events: what the core asks
// of an event is derived from its route, for a live event and one read back
// from the inbox alike.
var _ bridge.Platform = (*Adapter)(nil)

// routeOf reads the route an event was received with.
func routeOf(ev bridge.Event) (route, error) {
	var rt route
	if err := json.Unmarshal(ev.Route, &rt); err != nil {
		return rt, fmt.Errorf("route of %s: %w", ev.Key, err)
	}
	if err := rt.check(); err != nil {
		return rt, fmt.Errorf("route of %s: %w", ev.Key, err)
	}
	return rt, nil
}

// Responder returns what answers the event: a message responder, wrapped
// for the assistant thread's or the agent view's status where the route
// says so.
func (a *Adapter) Responder(ev bridge.Event) (bridge.Responder, error) {
	rt, err := routeOf(ev)
	if err != nil {
		return nil, err
	}
	switch {
	case rt.Assistant:
		return &assistantResponder{&statusResponder{responder: a.newResponder(rt)}}, nil
	case rt.Agent:
		return &statusResponder{responder: a.newResponder(rt), agent: true}, nil
	}
	return a.newResponder(rt), nil
}

// Acknowledge has nothing to tell Slack: the adapter acknowledges each
// delivery itself once its receipt settles.
func (a *Adapter) Acknowledge(context.Context, bridge.Event) error { return nil }

// Prepare runs on the core's dispatcher, in the conversation's order, after
// Slack has been acknowledged and just before the event runs. It holds the
// lookups an acknowledgement must not wait for: whether the bot takes part
// in the thread, and the user's name and groups.
func (a *Adapter) Prepare(ctx context.Context, ev *bridge.Event) bool {
	rt, err := routeOf(*ev)
	if err != nil {
		a.log.Error("event prepared without a route", zap.Error(err))
		return false
	}
	if rt.CheckThread && !a.threads.isBots(ctx, a.api, a.identity(), rt.Channel, rt.Thread, a.log) {
		a.log.Debug("message in a thread the bot is not part of", zap.String("conversation", ev.Conversation))
		return false
	}
	if rt.JoinThread {
		a.threads.add(rt.Channel, rt.Thread)
	}
	ev.User = a.users.lookup(ctx, ev.User.ID, ev.User.Name)
	return true
}

// Earlier reads the thread a message mentions the bot in, before it (see
// earlier); a message in no thread has nothing before it.
func (a *Adapter) Earlier(ctx context.Context, ev bridge.Event, max int) ([]bridge.Earlier, error) {
	rt, err := routeOf(ev)
	if err != nil {
		return nil, err
	}
	if !rt.readsThread() {
		return nil, nil
	}
	return a.earlier(ctx, rt, max)
}

// readsThread says whether a message on the route has a thread to read
// before it: it mentions the bot in a thread it did not start.
func (rt route) readsThread() bool { return rt.ContextOf != "" && rt.UserTS != "" }

// refuse drops an event whose payload is malformed. It is still
// acknowledged, so Slack does not send it again; only the count of
// refusals reaches the core.
func (a *Adapter) refuse(log *zap.Logger, err error) {
	a.core.Refused("invalid_id")
	log.Warn("event refused", zap.Error(err))
}

// errorCode is the "error" of a Slack API failure, such as "not_in_channel".
func errorCode(err error) string {
	if e, ok := errors.AsType[slackgo.SlackErrorResponse](err); ok {
		return e.Err
	}
	return ""
}

// pressed is the press as the core reads it: the button's action and value,
// and the message it is on with its permalink (an ephemeral message has
// none). The link is built as Slack's own permalinks are, from the team's
// domain, saving a chat.getPermalink call per press.
func pressed(id, value string, cb *slackgo.InteractionCallback, channel, thread string) bridge.Action {
	a := bridge.Action{ID: id, Value: value}
	ts := cb.Container.MessageTs
	if ts == "" {
		ts = cb.Message.Timestamp
	}
	if ts == "" || !isTS(ts) {
		return a
	}
	a.Message = channel + "/" + ts
	if domain := cb.Team.Domain; isDomain(domain) && !cb.Container.IsEphemeral {
		a.Link = "https://" + domain + ".slack.com/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")
		if thread != "" && thread != ts {
			a.Link += "?thread_ts=" + thread + "&cid=" + channel
		}
	}
	return a
}

// isDomain accepts a Slack workspace's subdomain: lower-case letters,
// digits and hyphens, at most 63 of them.
func isDomain(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
