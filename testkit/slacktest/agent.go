package slacktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Entity types of what a user views, in the context of app_home_opened and
// app_context_changed (reference/events/app_context_changed).
const (
	EntityChannel = "slack#/types/channel_id"
	EntityCanvas  = "slack#/types/canvas_id"
	EntityList    = "slack#/types/list_id"
	EntityMessage = "slack#/types/message_context"
)

// ContextEntity is one thing the user views: a channel, canvas or list by
// ID (Value), or a message (Channel and MessageTS).
type ContextEntity struct {
	Type      string
	Value     string
	Channel   string // EntityMessage
	MessageTS string // EntityMessage
}

// AgentEvent describes an app_home_opened or app_context_changed event of
// an app with the Agent messaging experience.
type AgentEvent struct {
	User    string
	Channel string // the DM with the app; D…
	// Tab is app_home_opened's tab: "messages" (the default here) or "home".
	Tab string
	// Entities are what the user views, most relevant first; none sends
	// the empty context {}.
	Entities []ContextEntity
	EventID  string // minted when empty
}

// ErrNotAgentView is returned for an event Slack sends only to apps with
// features.agent_view (Options.AgentView).
var ErrNotAgentView = errors.New("slacktest: app_context_changed needs Options.AgentView, as Slack sends it only to apps with agent_view")

func (s *Server) contextLocked(entities []ContextEntity) map[string]any {
	if len(entities) == 0 {
		return map[string]any{}
	}
	list := make([]map[string]any, len(entities))
	for i, e := range entities {
		item := map[string]any{"type": e.Type, "team_id": s.opts.TeamID}
		if e.Type == EntityMessage {
			item["value"] = map[string]any{"channel_id": e.Channel, "message_ts": e.MessageTS}
		} else {
			item["value"] = e.Value
		}
		list[i] = item
	}
	return map[string]any{"entities": list}
}

// homeEventLocked completes e and returns the event_callback payload of
// its app_home_opened.
func (s *Server) homeEventLocked(e *AgentEvent) map[string]any {
	if e.Tab == "" {
		e.Tab = "messages"
	}
	if e.EventID == "" {
		e.EventID = s.nextIDLocked("Ev")
	}
	s.learnChannelLocked(e.Channel, true, e.User)
	ev := map[string]any{"type": "app_home_opened", "user": e.User, "channel": e.Channel, "tab": e.Tab, "event_ts": s.nextTSLocked()}
	if s.opts.AgentView {
		ev["context"] = s.contextLocked(e.Entities)
	}
	return s.wrapEventLocked(ev, e.EventID)
}

// SendAppHomeOpened delivers app_home_opened: the user opened the app's
// Messages tab (Tab "messages") or Home tab. An agent_view app's event
// carries what the user views.
func (s *Server) SendAppHomeOpened(ctx context.Context, e AgentEvent) (Delivery, error) {
	s.mu.Lock()
	p := s.homeEventLocked(&e)
	s.mu.Unlock()
	return s.sendEvent(ctx, p)
}

// AppHomeOpenedBody is SendAppHomeOpened for HTTP mode: the event_callback
// JSON Slack POSTs.
func (s *Server) AppHomeOpenedBody(e AgentEvent) ([]byte, error) {
	s.mu.Lock()
	p := s.homeEventLocked(&e)
	s.mu.Unlock()
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("app_home_opened body: %w", err)
	}
	return raw, nil
}

// SendAppContextChanged delivers app_context_changed: the user of the
// app's DM now views Entities (nothing when empty). Slack sends it only to
// agent_view apps; without Options.AgentView it returns ErrNotAgentView.
func (s *Server) SendAppContextChanged(ctx context.Context, e AgentEvent) (Delivery, error) {
	s.mu.Lock()
	if !s.opts.AgentView {
		s.mu.Unlock()
		return Delivery{}, ErrNotAgentView
	}
	if e.EventID == "" {
		e.EventID = s.nextIDLocked("Ev")
	}
	if e.Channel == "" || e.User == "" {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("slacktest: app_context_changed needs the DM channel and its user")
	}
	s.learnChannelLocked(e.Channel, true, e.User)
	ev := map[string]any{"type": "app_context_changed", "context": s.contextLocked(e.Entities), "channel": e.Channel, "user": e.User, "event_ts": s.nextTSLocked()}
	p := s.wrapEventLocked(ev, e.EventID)
	s.mu.Unlock()
	return s.sendEvent(ctx, p)
}
