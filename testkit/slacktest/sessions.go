package slacktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Slack's agent sessions (docs.slack.dev/ai/agent-sessions, August 2026):
// an app declared as an agent keeps a session per thread, with a status and a
// title; users see a Stop button while the status is processing and can
// rename the session.
const (
	SessionActive     = "active"
	SessionProcessing = "processing"
	SessionSuspended  = "suspended"
	SessionClosed     = "closed"

	// MaxSessionTitle is the longest title agents.sessions.setStatus and
	// agents.sessions.rename take; rename also needs at least one character.
	MaxSessionTitle = 200

	// EventSessionStopped and EventSessionTitleChanged are the events a user's
	// Stop and rename send, and the bot events an app subscribes to for them.
	EventSessionStopped      = "agent_session_stopped"
	EventSessionTitleChanged = "agent_session_title_changed"

	// WarnNoStopSubscription is the warning agents.sessions.setStatus gives an
	// app not subscribed to agent_session_stopped: its users see a spinner
	// they cannot stop.
	WarnNoStopSubscription = "missing_agent_session_stopped_event_subscription"
)

// sessionStatuses is setStatus's enum, in the order its reference lists it.
var sessionStatuses = []string{SessionActive, SessionProcessing, SessionSuspended, SessionClosed}

// Errors of PressStop and RenameSession: what the user cannot do in Slack.
var (
	// ErrNoStopButton: Slack shows Stop only while the session is processing
	// and the app subscribes to agent_session_stopped.
	ErrNoStopButton = errors.New("slacktest: no Stop button")
	// ErrNoSession: the thread has no agent session (the app never set a status).
	ErrNoSession = errors.New("slacktest: no agent session")
)

// AgentSession is the state of an agent session, as agents.sessions.setStatus
// and agents.sessions.rename left it and users changed it.
type AgentSession struct {
	Channel  string
	ThreadTS string
	// Status is the current status; Statuses every status the app set, in
	// order (a call that repeats the status is recorded again).
	Status   string
	Statuses []string
	// Title is the current title; Titles every title it had, in order: the
	// one it was created with (when any), then each rename by the app or a user.
	Title           string
	Titles          []string
	InitiatorUserID string
	// IconEmoji, IconURL and Username are the overrides in effect.
	IconEmoji string
	IconURL   string
	Username  string
	// StoppedBy are the users who pressed Stop, in order.
	StoppedBy []string
}

func (a AgentSession) clone() AgentSession {
	a.Statuses = slices.Clone(a.Statuses)
	a.Titles = slices.Clone(a.Titles)
	a.StoppedBy = slices.Clone(a.StoppedBy)
	return a
}

// SetAgent declares the app an agent (true) or not, as Options.Agent does.
func (s *Server) SetAgent(agent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Agent = agent
	s.bumpLocked()
}

// SetBotEvents replaces the bot events the app subscribes to, as
// Options.BotEvents does; nil subscribes it to every event.
func (s *Server) SetBotEvents(events []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.BotEvents = slices.Clone(events)
	s.bumpLocked()
}

// subscribedLocked reports whether the app subscribes to the bot event.
func (s *Server) subscribedLocked(event string) bool {
	return s.opts.BotEvents == nil || slices.Contains(s.opts.BotEvents, event)
}

// Session returns the agent session of the thread.
func (s *Server) Session(channel, threadTS string) (AgentSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.sessions[msgKey{channel, threadTS}]
	if !ok {
		return AgentSession{}, false
	}
	return a.clone(), true
}

// SessionStatuses returns every status the app set on the thread's session,
// in order; nil when it has none.
func (s *Server) SessionStatuses(channel, threadTS string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.sessions[msgKey{channel, threadTS}]; ok {
		return slices.Clone(a.Statuses)
	}
	return nil
}

// Sessions returns every agent session, in the order they were created.
func (s *Server) Sessions() []AgentSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]AgentSession, 0, len(s.sessionOrder))
	for _, k := range s.sessionOrder {
		out = append(out, s.sessions[k].clone())
	}
	return out
}

// WaitSession waits until the thread's agent session exists and match
// accepts it.
func (s *Server) WaitSession(ctx context.Context, channel, threadTS string, match func(AgentSession) bool) (AgentSession, error) {
	var found AgentSession
	err := s.waitFor(ctx, "agent session "+channel+"/"+threadTS, func() bool {
		a, ok := s.sessions[msgKey{channel, threadTS}]
		if !ok {
			return false
		}
		found = a.clone()
		return match(found)
	})
	return found, err
}

// sessionAuthLocked answers what an app may not do with sessions: the
// chat:write scope is needed, and only an app declared as an agent may
// create or change sessions.
func (s *Server) sessionAuthLocked() (apiResult, bool) {
	if !s.hasScopeLocked("chat:write") {
		return s.missingScope("chat:write"), true
	}
	if !s.opts.Agent {
		return fail("not_authorized"), true
	}
	return apiResult{}, false
}

func (s *Server) agentsSessionsSetStatus(p url.Values, _ *http.Request) apiResult {
	if res, bad := s.sessionAuthLocked(); bad {
		return res
	}
	status := p.Get("status")
	switch {
	case status == "":
		return fail("invalid_arguments", "missing required field: status [json-pointer:/status]")
	case !slices.Contains(sessionStatuses, status):
		return fail("invalid_arguments", fmt.Sprintf("must be one of %s [json-pointer:/status]", strings.Join(sessionStatuses, ", ")))
	}
	// The fake models thread-based sessions only, not the session channels
	// of agents.conversations.create: channel_id and thread_ts are required.
	channel, ts, res, bad := s.threadArgs(p, true)
	if bad {
		return res
	}
	title := p.Get("title")
	if utf8.RuneCountInString(title) > MaxSessionTitle {
		return tooLong("/title", MaxSessionTitle)
	}
	icon := p.Get("icon_emoji") != "" || p.Get("icon_url") != "" || p.Get("username") != ""
	if icon && !s.hasScopeLocked("chat:write.customize") {
		return s.missingScope("chat:write.customize")
	}

	k := msgKey{channel, ts}
	a, exists := s.sessions[k]
	if !exists {
		// title and initiator_user_id apply only when the call creates the session.
		a = &AgentSession{Channel: channel, ThreadTS: ts, Title: title, InitiatorUserID: p.Get("initiator_user_id")}
		if title != "" {
			a.Titles = []string{title}
		}
		if s.sessions == nil {
			s.sessions = make(map[msgKey]*AgentSession)
		}
		s.sessions[k] = a
		s.sessionOrder = append(s.sessionOrder, k)
	}
	if icon {
		// The three overrides are one set: any of them replaces it whole.
		a.IconEmoji, a.IconURL, a.Username = p.Get("icon_emoji"), p.Get("icon_url"), p.Get("username")
	}
	a.Status = status
	a.Statuses = append(a.Statuses, status)

	body := map[string]any{"status": status, "agent_status": status}
	if a.Title != "" {
		body["title"] = a.Title
	}
	res = ok(body)
	if !s.subscribedLocked(EventSessionStopped) {
		warn(&res, WarnNoStopSubscription)
	}
	return res
}

func (s *Server) agentsSessionsRename(p url.Values, _ *http.Request) apiResult {
	if res, bad := s.sessionAuthLocked(); bad {
		return res
	}
	title := p.Get("title")
	switch {
	case strings.TrimSpace(title) == "":
		return fail("invalid_arguments", "missing required field: title [json-pointer:/title]")
	case utf8.RuneCountInString(title) > MaxSessionTitle:
		return tooLong("/title", MaxSessionTitle)
	}
	channel, ts, res, bad := s.threadArgs(p, true)
	if bad {
		return res
	}
	a, exists := s.sessions[msgKey{channel, ts}]
	if !exists {
		// Slack's reference names no error for it; rename does not create
		// a session, as setStatus does.
		return fail("session_not_found")
	}
	a.Title = title
	a.Titles = append(a.Titles, title)
	return ok(map[string]any{"title": title})
}

// warn adds a warning to a successful answer, where Slack puts it: in
// "warning" and in response_metadata.warnings.
func warn(res *apiResult, code string) {
	res.body["warning"] = code
	res.body["response_metadata"] = map[string]any{"warnings": []string{code}}
}

// StopPress is a user's press of an agent session's native Stop button.
type StopPress struct {
	Channel  string
	ThreadTS string
	User     string
	// StreamingMessageTS are the app's streams Slack stopped; the event
	// carries an empty list when there are none.
	StreamingMessageTS []string
	EventID            string // minted when empty
}

// stopEventLocked checks that Slack shows the Stop button, records the
// press and returns the agent_session_stopped payload
// (reference/events/agent_session_stopped). The status stays processing:
// moving it on is the app's job.
func (s *Server) stopEventLocked(e *StopPress) (map[string]any, error) {
	a, ok := s.sessions[msgKey{e.Channel, e.ThreadTS}]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %s/%s has no agent session", ErrNoStopButton, e.Channel, e.ThreadTS)
	case a.Status != SessionProcessing:
		return nil, fmt.Errorf("%w: session %s/%s is %s, not processing", ErrNoStopButton, e.Channel, e.ThreadTS, a.Status)
	case !s.subscribedLocked(EventSessionStopped):
		return nil, fmt.Errorf("%w: the app does not subscribe to %s, so users see a spinner they cannot stop", ErrNoStopButton, EventSessionStopped)
	case e.User == "":
		return nil, errors.New("slacktest: a Stop press needs the user")
	}
	if e.EventID == "" {
		e.EventID = s.nextIDLocked("Ev")
	}
	a.StoppedBy = append(a.StoppedBy, e.User)
	streams := e.StreamingMessageTS
	if streams == nil {
		streams = []string{}
	}
	ev := map[string]any{
		"type":                 EventSessionStopped,
		"channel":              e.Channel,
		"thread_ts":            e.ThreadTS,
		"user":                 e.User,
		"streaming_message_ts": streams,
		"event_ts":             s.nextTSLocked(),
	}
	return s.wrapEventLocked(ev, e.EventID), nil
}

// PressStop delivers agent_session_stopped over Socket Mode: the user
// pressed the session's Stop button. It fails with ErrNoStopButton when
// Slack shows none: no session, a status other than processing, or an app
// not subscribed to the event.
func (s *Server) PressStop(ctx context.Context, e StopPress) (Delivery, error) {
	s.mu.Lock()
	p, err := s.stopEventLocked(&e)
	s.bumpLocked()
	s.mu.Unlock()
	if err != nil {
		return Delivery{}, err
	}
	return s.sendEvent(ctx, p)
}

// PressStopBody is PressStop for HTTP mode: the event_callback JSON Slack
// POSTs to the request URL.
func (s *Server) PressStopBody(e StopPress) ([]byte, Delivery, error) {
	s.mu.Lock()
	p, err := s.stopEventLocked(&e)
	s.bumpLocked()
	s.mu.Unlock()
	if err != nil {
		return nil, Delivery{}, err
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, Delivery{}, fmt.Errorf("%s body: %w", EventSessionStopped, err)
	}
	return raw, Delivery{EventID: e.EventID}, nil
}

// SessionRename is a user's rename of an agent session.
type SessionRename struct {
	Channel  string
	ThreadTS string
	User     string
	Title    string // 1 to MaxSessionTitle characters
	EventID  string // minted when empty
}

// renameEventLocked renames the session and returns the
// agent_session_title_changed payload, nil when the app does not subscribe.
func (s *Server) renameEventLocked(e *SessionRename) (map[string]any, error) {
	a, ok := s.sessions[msgKey{e.Channel, e.ThreadTS}]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %s/%s", ErrNoSession, e.Channel, e.ThreadTS)
	case e.User == "":
		return nil, errors.New("slacktest: a rename needs the user")
	case strings.TrimSpace(e.Title) == "" || utf8.RuneCountInString(e.Title) > MaxSessionTitle:
		return nil, fmt.Errorf("slacktest: a session title has 1 to %d characters, not %d", MaxSessionTitle, utf8.RuneCountInString(e.Title))
	}
	previous := a.Title
	a.Title = e.Title
	a.Titles = append(a.Titles, e.Title)
	if !s.subscribedLocked(EventSessionTitleChanged) {
		return nil, nil
	}
	if e.EventID == "" {
		e.EventID = s.nextIDLocked("Ev")
	}
	ev := map[string]any{
		"type":      EventSessionTitleChanged,
		"channel":   e.Channel,
		"thread_ts": e.ThreadTS,
		"user":      e.User,
		"team_id":   s.opts.TeamID,
		"title":     e.Title,
		"event_ts":  s.nextTSLocked(),
	}
	if previous != "" {
		// Slack leaves previous_title out when the session had no title.
		ev["previous_title"] = previous
	}
	return s.wrapEventLocked(ev, e.EventID), nil
}

// RenameSession renames the thread's agent session as a user does in
// Slack's UI and delivers agent_session_title_changed over Socket Mode. An
// app not subscribed to the event gets nothing: the session is renamed and
// the Delivery is zero.
func (s *Server) RenameSession(ctx context.Context, e SessionRename) (Delivery, error) {
	s.mu.Lock()
	p, err := s.renameEventLocked(&e)
	s.bumpLocked()
	s.mu.Unlock()
	if err != nil || p == nil {
		return Delivery{}, err
	}
	return s.sendEvent(ctx, p)
}

// RenameSessionBody is RenameSession for HTTP mode: the event_callback JSON
// Slack POSTs, nil when the app does not subscribe to the event.
func (s *Server) RenameSessionBody(e SessionRename) ([]byte, Delivery, error) {
	s.mu.Lock()
	p, err := s.renameEventLocked(&e)
	s.bumpLocked()
	s.mu.Unlock()
	if err != nil || p == nil {
		return nil, Delivery{}, err
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, Delivery{}, fmt.Errorf("%s body: %w", EventSessionTitleChanged, err)
	}
	return raw, Delivery{EventID: e.EventID}, nil
}
