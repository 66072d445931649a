package slack

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// Slack's agent sessions (agents.sessions.setStatus, agent_session_stopped,
// agent_session_title_changed): an agent_view app keeps a session per
// thread of its Messages tab, whose status follows the conversation's inbox.
const (
	// MaxSessionTitle is the longest title Slack takes for a session, and
	// the most of a user's rename the core is told.
	MaxSessionTitle = 200
	// maxFirstTitle is how much of a thread's first message names its
	// session: a title reads at a glance in the sessions list.
	maxFirstTitle = 60
	// warnNoStopSubscription is setStatus's warning to an app that does
	// not subscribe to agent_session_stopped.
	warnNoStopSubscription = "missing_agent_session_stopped_event_subscription"
	// statusTimeout bounds one status, its waits for rate limits included:
	// the turn it reports on does not wait long for it.
	statusTimeout = 10 * time.Second
)

// receiveSessionStopped hands the core a press of an agent session's
// native Stop button: a bridge.ActionStop with no value, which stops
// whatever of the presser's runs in the session's thread. The thread is the
// conversation of the messages written in it (fromMessage), and the answer
// goes there, to the presser where it is private. Without slack.agent_view
// it is ignored (nil): the app sets no session statuses then.
func (a *Adapter) receiveSessionStopped(log *zap.Logger, team string, e *slackevents.AgentSessionStoppedEvent) *bridge.Receipt {
	if !a.cfg.AgentView {
		log.Debug("agent_session_stopped while slack.agent_view is off")
		return nil
	}
	if err := checkSession(team, e.Channel, e.ThreadTimestamp, e.User, e.EventTimestamp); err != nil {
		a.refuse(log, err)
		return nil
	}
	return a.receive(log, bridge.Event{
		Kind:         bridge.KindAction,
		Conversation: conversationKey(team, e.Channel, e.ThreadTimestamp),
		Parent:       conversationKey(team, e.Channel, ""),
		Team:         team,
		Channel:      e.Channel,
		User:         bridge.User{ID: e.User},
		Action:       bridge.Action{ID: bridge.ActionStop},
		// Slack's retries of one press carry its event_ts: one Stop.
		Key:   "slack/stop/" + e.Channel + "/" + e.ThreadTimestamp + "/" + e.EventTimestamp,
		Order: tsOrder(e.EventTimestamp),
	}, route{Kind: kindChat, Channel: e.Channel, Thread: e.ThreadTimestamp, User: e.User, Agent: true})
}

// receiveSessionTitle hands the core a user's rename of an agent session
// (bridge.KindTitle), its title cleaned as message text is. Without
// slack.agent_view, or for a title that cleans to nothing, it is ignored.
func (a *Adapter) receiveSessionTitle(log *zap.Logger, team string, e *slackevents.AgentSessionTitleChangedEvent) *bridge.Receipt {
	if !a.cfg.AgentView {
		log.Debug("agent_session_title_changed while slack.agent_view is off")
		return nil
	}
	if team == "" {
		team = e.TeamID
	}
	if err := checkSession(team, e.Channel, e.ThreadTimestamp, e.User, e.EventTimestamp); err != nil {
		a.refuse(log, err)
		return nil
	}
	title := cleanTitle(e.Title, MaxSessionTitle)
	if title == "" {
		log.Debug("session renamed to nothing readable")
		return nil
	}
	return a.receive(log, bridge.Event{
		Kind:         bridge.KindTitle,
		Conversation: conversationKey(team, e.Channel, e.ThreadTimestamp),
		Parent:       conversationKey(team, e.Channel, ""),
		Team:         team,
		Channel:      e.Channel,
		User:         bridge.User{ID: e.User},
		Text:         title,
		Key:          "slack/title/" + e.Channel + "/" + e.ThreadTimestamp + "/" + e.EventTimestamp,
		Order:        tsOrder(e.EventTimestamp),
	}, route{Kind: kindChat, Channel: e.Channel, Thread: e.ThreadTimestamp, User: e.User, Agent: true})
}

// checkSession checks the IDs an agent session event carries; a session
// lives in a thread, so thread_ts is required.
func checkSession(team, channel, thread, user, eventTS string) error {
	return checkFields(
		field{"team_id", team, optional(isID)},
		field{"channel", channel, isID},
		field{"thread_ts", thread, isTS},
		field{"user", user, isID},
		field{"event_ts", eventTS, isTS},
	)
}

// cleanTitle reads a title as message text is read (inboundText), with
// every mention left out (a title is plain text: "<@U1>" would show as
// typed), on one line, cut at a word within max runes.
func cleanTitle(s string, max int) string {
	return titleOf(inboundText(dropMentions(s), ""), max)
}

// dropMentions removes the user, group and broadcast mentions (<@U1>,
// <!subteam^S1>, <!here>) from Slack-formatted text; a labelled user
// mention keeps its label.
func dropMentions(s string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '<')
		if open < 0 {
			break
		}
		end := strings.IndexByte(s[open:], '>')
		if end < 0 {
			break
		}
		entity := s[open+1 : open+end]
		b.WriteString(s[:open])
		switch {
		case strings.HasPrefix(entity, "@"):
			if _, label, ok := strings.Cut(entity, "|"); ok && label != "" {
				b.WriteString(label)
			}
		case strings.HasPrefix(entity, "!"):
		default:
			b.WriteString(s[open : open+end+1])
		}
		s = s[open+end+1:]
	}
	b.WriteString(s)
	return b.String()
}

var _ bridge.SessionStatuser = (*statusResponder)(nil)

// SetSessionStatus sets the status of the agent session of the responder's
// thread (agents.sessions.setStatus), in the Messages tab of an agent_view
// app; elsewhere there is no session and it does nothing. The call that
// creates the session (for the thread's first message) names it after that
// message and the user who wrote it. A failure is logged: the answer does
// not depend on it.
//
// The call outlives ctx's cancellation, within statusTimeout: a status
// that moves the session away from processing must reach Slack even when
// the run it follows was cancelled (a Stop cancels it), or users keep a
// spinner until Slack's one-hour timeout.
func (r *statusResponder) SetSessionStatus(ctx context.Context, status bridge.SessionStatus) {
	if !r.agent || r.Thread == "" || !r.a.cfg.AgentView {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusTimeout)
	defer cancel()
	params := slackgo.AgentSessionSetStatusParameters{Status: string(status), ChannelID: r.Channel, ThreadTS: r.Thread}
	if r.Title != "" {
		// Slack applies both only when the call creates the session.
		params.Title, params.InitiatorUserID = r.Title, r.User
	}
	var res *slackgo.AgentSessionSetStatusResponse
	err := r.a.withRetry(ctx, "agents.sessions.setStatus", func() error {
		var err error
		res, err = r.a.api.SetAgentSessionStatusContext(ctx, params)
		return err
	})
	log := r.a.log.WithLazy(zap.String("channel", r.Channel), zap.String("thread", r.Thread), zap.String("status", params.Status))
	switch {
	case errorCode(err) == "not_authorized" && r.a.sessionRefused.CompareAndSwap(false, true):
		log.Warn("Slack refused the agent session status: the app is not declared an agent; "+
			"add features.agent_view to its manifest (flowbridge slack-manifest) and reinstall it", zap.Error(err))
	case errorCode(err) == "not_authorized":
		log.Debug("agent session status not set", zap.Error(err))
	case err != nil:
		log.Warn("agent session status not set", zap.Error(err))
	}
	if res != nil && hasWarning(res.SlackResponse, warnNoStopSubscription) && r.a.stopUnsubscribed.CompareAndSwap(false, true) {
		log.Warn("the Slack app does not subscribe to agent_session_stopped: users see a Stop button that does nothing until Slack's one-hour timeout; "+
			"add the bot events "+strings.Join(AgentSessionEvents, " and ")+" (flowbridge slack-manifest) and reinstall the app",
			zap.String("warning", warnNoStopSubscription))
	}
}

// hasWarning reports whether a Web API answer carries the warning code.
func hasWarning(res slackgo.SlackResponse, code string) bool {
	w := res.Warn()
	return w != nil && (slices.Contains(w.Codes, code) || slices.Contains(w.Warnings, code))
}

// checkTitle accepts a title a route carries: valid text within Slack's limit.
func checkTitle(s string) bool {
	return utf8.ValidString(s) && runes(s) <= MaxSessionTitle && !strings.ContainsAny(s, "\n\r")
}
