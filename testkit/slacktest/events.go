package slacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/google/uuid"
)

// VerificationToken is the deprecated verification token the fake puts in payloads.
const VerificationToken = "fake-verification-token"

// MessageEvent describes a user's (or another bot's) message, delivered as a
// "message" or "app_mention" event inside an event_callback.
type MessageEvent struct {
	Channel      string
	ChannelType  string // "channel", "group", "im" or "mpim"; guessed from the channel ID when empty
	User         string
	Text         string // app_mention: "<@BOT> " is prefixed when the text does not mention the bot
	TS           string // minted when empty
	ThreadTS     string
	BotID        string
	Subtype      string         // e.g. "message_changed", "message_deleted", "channel_join", "bot_message"
	PreviousText string         // message_changed and message_deleted: the text before
	EventID      string         // minted when empty
	Extra        map[string]any // merged into the inner event last, to add or override fields
	// Files are shared with the message: the event carries their file objects (a message
	// event gets subtype "file_share") and the fake serves their content.
	Files []File
}

// eventCallbackLocked completes e, learns its channel and message, and
// returns the event_callback payload for an inner event of type typ.
func (s *Server) eventCallbackLocked(typ string, e *MessageEvent) map[string]any {
	if e.TS == "" {
		e.TS = s.nextTSLocked()
	}
	if e.EventID == "" {
		e.EventID = s.nextIDLocked("Ev")
	}
	if e.ChannelType == "" {
		switch {
		case strings.HasPrefix(e.Channel, "D"):
			e.ChannelType = "im"
		case strings.HasPrefix(e.Channel, "G"):
			e.ChannelType = "group"
		default:
			e.ChannelType = "channel"
		}
	}
	if typ == "app_mention" && !strings.Contains(e.Text, "<@"+s.opts.BotUserID+">") {
		e.Text = "<@" + s.opts.BotUserID + "> " + e.Text
	}
	s.learnChannelLocked(e.Channel, e.ChannelType == "im", e.User)

	eventTS := e.TS
	ev := map[string]any{"type": typ, "channel": e.Channel, "team": s.opts.TeamID}
	if typ == "message" {
		ev["channel_type"] = e.ChannelType
	}
	author := map[string]any{"type": "message", "user": e.User, "text": e.Text, "ts": e.TS, "team": s.opts.TeamID}
	if e.ThreadTS != "" {
		author["thread_ts"] = e.ThreadTS
	}
	switch e.Subtype {
	case "message_changed":
		eventTS = s.nextTSLocked()
		author["edited"] = map[string]any{"user": e.User, "ts": eventTS}
		prev := maps.Clone(author)
		prev["text"] = e.PreviousText
		delete(prev, "edited")
		ev["subtype"], ev["hidden"], ev["message"], ev["previous_message"] = e.Subtype, true, author, prev
		if m, ok := s.msgs[msgKey{e.Channel, e.TS}]; ok && !m.fromApp {
			m.Text = e.Text
		}
	case "message_deleted":
		eventTS = s.nextTSLocked()
		prev := maps.Clone(author)
		prev["text"] = e.PreviousText
		ev["subtype"], ev["hidden"], ev["deleted_ts"], ev["previous_message"] = e.Subtype, true, e.TS, prev
		if m, ok := s.msgs[msgKey{e.Channel, e.TS}]; ok && !m.fromApp {
			m.Deleted = true
		}
	default:
		maps.Copy(ev, author)
		ev["type"] = typ
		if len(e.Files) > 0 {
			ev["files"], ev["upload"] = s.eventFilesLocked(e), false
			if typ == "message" && e.Subtype == "" {
				ev["subtype"] = "file_share"
			}
		}
		if e.Subtype != "" {
			ev["subtype"] = e.Subtype
		}
		if e.BotID != "" {
			ev["bot_id"] = e.BotID
		}
		if e.Subtype == "" && e.BotID == "" {
			ev["client_msg_id"] = uuid.NewString()
		}
		if e.ThreadTS != "" && e.ThreadTS != e.TS {
			if root, ok := s.msgs[msgKey{e.Channel, e.ThreadTS}]; ok {
				ev["parent_user_id"] = root.author
			}
		}
		s.rememberUserMessageLocked(e.Channel, e.TS, e.ThreadTS, e.User, e.BotID, e.Text)
	}
	ev["ts"] = eventTS
	ev["event_ts"] = eventTS
	maps.Copy(ev, e.Extra)
	return s.wrapEventLocked(ev, e.EventID)
}

// wrapEventLocked puts an inner event in Slack's event_callback envelope.
func (s *Server) wrapEventLocked(ev map[string]any, eventID string) map[string]any {
	typ, _ := ev["type"].(string)
	ch, _ := ev["channel"].(string)
	return map[string]any{
		"token":      VerificationToken,
		"team_id":    s.opts.TeamID,
		"api_app_id": s.opts.AppID,
		"event":      ev,
		"type":       "event_callback",
		"event_id":   eventID,
		"event_time": s.now().Unix(),
		"authorizations": []map[string]any{{
			"enterprise_id": nil, "team_id": s.opts.TeamID, "user_id": s.opts.BotUserID,
			"is_bot": true, "is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false,
		"event_context":         fmt.Sprintf("4-%s-%s-%s", typ, s.opts.TeamID, ch),
		"context_team_id":       s.opts.TeamID,
		"context_enterprise_id": nil,
	}
}

// send delivers e, whose payload is payload, calling onAck (when not nil)
// with the app's acknowledgement, under s.mu.
func (s *Server) send(ctx context.Context, e Envelope, payload map[string]any, onAck func(*Server, Ack)) (Delivery, error) {
	env, err := s.newEnvelope(e)
	if err != nil {
		return Delivery{}, err
	}
	env.payload = payload
	env.onAck = onAck
	if err := s.deliver(ctx, env); err != nil {
		return Delivery{}, err
	}
	return deliveryOf(env), nil
}

func (s *Server) sendEvent(ctx context.Context, payload map[string]any) (Delivery, error) {
	return s.send(ctx, Envelope{Type: TypeEventsAPI, Payload: payload}, payload, nil)
}

// SendMessage delivers a "message" event (events_api) and returns what it
// delivered; wait for the app's ack with WaitAck(ctx, d.EnvelopeID).
func (s *Server) SendMessage(ctx context.Context, e MessageEvent) (Delivery, error) {
	s.mu.Lock()
	p := s.eventCallbackLocked("message", &e)
	s.mu.Unlock()
	return s.sendEvent(ctx, p)
}

// SendAppMention delivers an "app_mention" event.
func (s *Server) SendAppMention(ctx context.Context, e MessageEvent) (Delivery, error) {
	s.mu.Lock()
	p := s.eventCallbackLocked("app_mention", &e)
	s.mu.Unlock()
	return s.sendEvent(ctx, p)
}

// SendBoth delivers what Slack sends for one channel message that mentions
// the bot when the app subscribes to both app_mention and message.channels:
// an app_mention and a message event with the same ts and different event IDs.
func (s *Server) SendBoth(ctx context.Context, e MessageEvent) (mention, message Delivery, err error) {
	s.mu.Lock()
	me := e
	me.EventID = ""
	pm := s.eventCallbackLocked("app_mention", &me)
	msg := e
	msg.TS, msg.Text, msg.EventID, msg.Files = me.TS, me.Text, "", me.Files // one message, one set of files
	pg := s.eventCallbackLocked("message", &msg)
	s.mu.Unlock()
	if mention, err = s.sendEvent(ctx, pm); err != nil {
		return mention, message, err
	}
	message, err = s.sendEvent(ctx, pg)
	return mention, message, err
}

// SendEcho delivers the "message" event Slack sends to an app subscribed to
// the channel for the app's own message m (bot_id and app_id set, user the
// bot user), so a test can check that the app ignores itself.
func (s *Server) SendEcho(ctx context.Context, m Message) (Delivery, error) {
	s.mu.Lock()
	e := MessageEvent{Channel: m.Channel, User: s.opts.BotUserID, Text: m.Text, TS: m.TS, ThreadTS: m.ThreadTS, BotID: s.opts.BotID,
		Extra: map[string]any{"app_id": s.opts.AppID}}
	if len(m.Blocks) > 0 {
		e.Extra["blocks"] = m.Blocks
	}
	p := s.eventCallbackLocked("message", &e)
	s.mu.Unlock()
	return s.sendEvent(ctx, p)
}

// SendEvent delivers an arbitrary inner event (its "type" included) wrapped
// in event_callback, e.g. an event type slack-go does not know.
func (s *Server) SendEvent(ctx context.Context, inner map[string]any) (Delivery, error) {
	s.mu.Lock()
	ev := maps.Clone(inner)
	if _, ok := ev["event_ts"]; !ok {
		ev["event_ts"] = s.nextTSLocked()
	}
	p := s.wrapEventLocked(ev, s.nextIDLocked("Ev"))
	s.mu.Unlock()
	return s.sendEvent(ctx, p)
}

// SlashCommand describes a slash-command invocation.
type SlashCommand struct {
	Command             string // "/flow"
	Text                string
	UserID              string
	UserName            string // defaults to the lower-cased user ID
	ChannelID           string
	ChannelName         string // defaults to the lower-cased channel ID
	TeamID              string // defaults to the server's team
	TeamDomain          string
	ResponseURL         string // minted on the fake when empty
	TriggerID           string // minted when empty
	EnterpriseID        string
	IsEnterpriseInstall bool
}

// fillCommandLocked completes c; its response_url, when minted, is tied to
// the channel and user.
func (s *Server) fillCommandLocked(c *SlashCommand) {
	if c.UserName == "" {
		c.UserName = strings.ToLower(c.UserID)
	}
	if c.ChannelName == "" {
		c.ChannelName = strings.ToLower(c.ChannelID)
	}
	if c.TeamID == "" {
		c.TeamID = s.opts.TeamID
	}
	if c.TeamDomain == "" {
		c.TeamDomain = s.opts.TeamName
	}
	if c.TriggerID == "" {
		c.TriggerID = s.triggerIDLocked()
	}
	s.registerTriggerLocked(c.TriggerID, c.UserID)
	s.learnChannelLocked(c.ChannelID, false, c.UserID)
	if c.ResponseURL == "" {
		c.ResponseURL = s.newResponseURLLocked("commands", c.ChannelID, c.UserID, "")
	}
}

func (s *Server) triggerIDLocked() string {
	s.counter++
	return fmt.Sprintf("%d.%d.%s", 1000000000+s.counter, 4700000000+s.counter, strings.ReplaceAll(uuid.NewString(), "-", ""))
}

// fields are the slash-command fields exactly as Slack names them.
func (c SlashCommand) fields(appID string) map[string]string {
	f := map[string]string{
		"token":                 VerificationToken,
		"team_id":               c.TeamID,
		"team_domain":           c.TeamDomain,
		"channel_id":            c.ChannelID,
		"channel_name":          c.ChannelName,
		"user_id":               c.UserID,
		"user_name":             c.UserName,
		"command":               c.Command,
		"text":                  c.Text,
		"api_app_id":            appID,
		"is_enterprise_install": fmt.Sprint(c.IsEnterpriseInstall),
		"response_url":          c.ResponseURL,
		"trigger_id":            c.TriggerID,
	}
	if c.EnterpriseID != "" {
		f["enterprise_id"] = c.EnterpriseID
	}
	return f
}

// SendSlashCommand delivers a slash_commands envelope (accepts_response_payload
// true). An ack payload with text or blocks is recorded as the message the
// user sees (Op "ack"), and replace_original on the command's response_url
// then replaces it.
func (s *Server) SendSlashCommand(ctx context.Context, c SlashCommand) (Delivery, error) {
	s.mu.Lock()
	s.fillCommandLocked(&c)
	fields := c.fields(s.opts.AppID)
	s.mu.Unlock()
	payload := make(map[string]any, len(fields))
	for k, v := range fields {
		payload[k] = v
	}
	return s.send(ctx, Envelope{Type: TypeSlashCommands, Payload: payload, AcceptsResponsePayload: true}, payload, func(s *Server, a Ack) { s.ackMessageLocked(a, c) })
}

// ackMessageLocked records the immediate response a slash-command ack carried.
func (s *Server) ackMessageLocked(a Ack, c SlashCommand) {
	if a.Payload == nil {
		return
	}
	var body responseBody
	if json.Unmarshal(a.Payload, &body) != nil || (body.Text == "" && len(body.Blocks) == 0) {
		return
	}
	m := &stored{fromApp: true, author: s.opts.BotUserID}
	m.Via, m.Channel, m.BotID = "ack", c.ChannelID, s.opts.BotID
	m.ResponseType = body.ResponseType
	m.Ephemeral = body.ResponseType != "in_channel"
	if m.Ephemeral {
		m.User = c.UserID
	}
	m.Text, m.Blocks = body.Text, body.Blocks
	m.TS = s.nextTSLocked()
	s.recordLocked(m, "ack")
	// A response_url post that raced ahead of the ack stays the original.
	if u := s.responseURLs[responseURLID(c.ResponseURL)]; u != nil && u.original == (msgKey{}) {
		u.original = msgKey{m.Channel, m.TS}
	}
}

// BlockAction describes a button press (block_actions).
type BlockAction struct {
	UserID      string
	UserName    string
	ChannelID   string
	ChannelName string
	MessageTS   string // the message holding the button
	ThreadTS    string
	IsEphemeral bool
	ActionID    string
	BlockID     string
	Value       string
	Label       string // the button's text
	ResponseURL string // minted when empty, tied to the message
	TriggerID   string
}

// blockActionPayloadLocked completes a and returns the block_actions payload.
func (s *Server) blockActionPayloadLocked(a *BlockAction) map[string]any {
	if a.UserName == "" {
		a.UserName = strings.ToLower(a.UserID)
	}
	if a.ChannelName == "" {
		a.ChannelName = strings.ToLower(a.ChannelID)
	}
	if a.TriggerID == "" {
		a.TriggerID = s.triggerIDLocked()
	}
	s.registerTriggerLocked(a.TriggerID, a.UserID)
	if a.Label == "" {
		a.Label = a.ActionID
	}
	s.learnChannelLocked(a.ChannelID, false, a.UserID)
	if a.ResponseURL == "" {
		a.ResponseURL = s.newResponseURLLocked("actions", a.ChannelID, a.UserID, a.ThreadTS)
		if u := s.responseURLs[responseURLID(a.ResponseURL)]; u != nil {
			u.original = msgKey{a.ChannelID, a.MessageTS}
		}
	}
	container := map[string]any{"type": "message", "message_ts": a.MessageTS, "channel_id": a.ChannelID, "is_ephemeral": a.IsEphemeral}
	if a.ThreadTS != "" {
		container["thread_ts"] = a.ThreadTS
	}
	p := map[string]any{
		"type":                  "block_actions",
		"user":                  map[string]any{"id": a.UserID, "username": a.UserName, "name": a.UserName, "team_id": s.opts.TeamID},
		"api_app_id":            s.opts.AppID,
		"token":                 VerificationToken,
		"container":             container,
		"trigger_id":            a.TriggerID,
		"team":                  map[string]any{"id": s.opts.TeamID, "domain": s.opts.TeamName},
		"enterprise":            nil,
		"is_enterprise_install": false,
		"channel":               map[string]any{"id": a.ChannelID, "name": a.ChannelName},
		"state":                 map[string]any{"values": map[string]any{}},
		"response_url":          a.ResponseURL,
		"actions": []map[string]any{{
			"action_id": a.ActionID,
			"block_id":  a.BlockID,
			"text":      map[string]any{"type": "plain_text", "text": a.Label, "emoji": true},
			"value":     a.Value,
			"type":      "button",
			"action_ts": s.nextTSLocked(),
		}},
	}
	// Slack includes the message only when it is a real (non-ephemeral) one.
	if m, ok := s.msgs[msgKey{a.ChannelID, a.MessageTS}]; ok && !a.IsEphemeral {
		p["message"] = s.botMessageJSON(m)
	}
	return p
}

// SendBlockAction delivers an interactive block_actions envelope.
func (s *Server) SendBlockAction(ctx context.Context, a BlockAction) (Delivery, error) {
	s.mu.Lock()
	payload := s.blockActionPayloadLocked(&a)
	s.mu.Unlock()
	return s.send(ctx, Envelope{Type: TypeInteractive, Payload: payload}, payload, nil)
}

// Button is a button element found in a message's blocks.
type Button struct {
	BlockID  string
	ActionID string
	Value    string
	Label    string
	URL      string
}

// Buttons returns every button in the message's blocks, in order.
func (m Message) Buttons() []Button {
	// Elements are decoded one by one: a context block's elements carry text
	// as a string where a button's is an object, so one shape cannot hold both.
	var blocks []struct {
		BlockID   string            `json:"block_id"`
		Elements  []json.RawMessage `json:"elements"`
		Accessory json.RawMessage   `json:"accessory"`
	}
	if json.Unmarshal(m.Blocks, &blocks) != nil {
		return nil
	}
	var out []Button
	for _, b := range blocks {
		els := b.Elements
		if len(b.Accessory) > 0 {
			els = append(els, b.Accessory)
		}
		for _, raw := range els {
			var e buttonJSON
			if json.Unmarshal(raw, &e) == nil && e.Type == "button" {
				out = append(out, Button{BlockID: b.BlockID, ActionID: e.ActionID, Value: e.Value, Label: e.Text.Text, URL: e.URL})
			}
		}
	}
	return out
}

type buttonJSON struct {
	Type     string `json:"type"`
	ActionID string `json:"action_id"`
	Value    string `json:"value"`
	URL      string `json:"url"`
	Text     struct {
		Text string `json:"text"`
	} `json:"text"`
}

// PressButton delivers the block_actions a user's click on the button
// actionID of msg produces; for an ephemeral msg the new response_url can
// delete or replace it.
func (s *Server) PressButton(ctx context.Context, msg Message, actionID, userID string) (Delivery, error) {
	a, err := buttonAction(msg, actionID, userID)
	if err != nil {
		return Delivery{}, err
	}
	return s.SendBlockAction(ctx, a)
}

// PressButtonBody is PressButton for HTTP mode: the form body Slack POSTs
// to the interactivity URL.
func (s *Server) PressButtonBody(msg Message, actionID, userID string) ([]byte, Delivery, error) {
	a, err := buttonAction(msg, actionID, userID)
	if err != nil {
		return nil, Delivery{}, err
	}
	return s.BlockActionBody(a)
}

func buttonAction(msg Message, actionID, userID string) (BlockAction, error) {
	for _, b := range msg.Buttons() {
		if b.ActionID == actionID {
			return BlockAction{
				UserID: userID, ChannelID: msg.Channel, MessageTS: msg.TS, ThreadTS: msg.ThreadTS,
				IsEphemeral: msg.Ephemeral, ActionID: b.ActionID, BlockID: b.BlockID, Value: b.Value, Label: b.Label,
			}, nil
		}
	}
	return BlockAction{}, fmt.Errorf("press %q: no such button in message %s/%s", actionID, msg.Channel, msg.TS)
}
