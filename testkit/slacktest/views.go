package slacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"
)

// Slack's limits on modals (reference/views/modal-views, reference/block-kit).
const (
	// TriggerLifetime is how long a trigger_id can open a view.
	TriggerLifetime    = 3 * time.Second
	MaxViewBlocks      = 100
	MaxViewTitle       = 24 // title, submit and close texts
	MaxPrivateMetadata = 3000
	MaxCallbackID      = 255
	MaxInputLabel      = 2000
	MaxInputHint       = 2000
	MaxSelectOptions   = 100
	MaxOptionText      = 75
	MaxOptionValue     = 150
	MaxPlaceholder     = 150
	MaxActionID        = 255
)

// View is a modal the app opened, as the fake holds it.
type View struct {
	ID              string
	Hash            string // changes with every update
	User            string // whose trigger opened it
	CallbackID      string
	PrivateMetadata string
	Title           string
	Blocks          json.RawMessage
	TriggerID       string
	Updates         int
	// Closed is set once a submission was acknowledged without errors.
	Closed bool
	// Errors are the response_action "errors" of the last submission's ack.
	Errors map[string]string
}

func (v View) clone() View {
	v.Blocks = append(json.RawMessage(nil), v.Blocks...)
	v.Errors = maps.Clone(v.Errors)
	return v
}

type trigger struct {
	at   time.Time
	user string
	used bool
}

// registerTriggerLocked makes id a trigger of user's, issued now.
func (s *Server) registerTriggerLocked(id, user string) {
	if s.triggers == nil {
		s.triggers = make(map[string]*trigger)
	}
	if _, ok := s.triggers[id]; !ok {
		s.triggers[id] = &trigger{at: s.now(), user: user}
	}
}

// Views returns the views opened so far, by ID.
func (s *Server) Views() map[string]View {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]View, len(s.views))
	for id, v := range s.views {
		out[id] = v.clone()
	}
	return out
}

// WaitView waits for a view that match accepts, and returns it.
func (s *Server) WaitView(ctx context.Context, match func(View) bool) (View, error) {
	var found View
	err := s.waitFor(ctx, "view", func() bool {
		for _, id := range s.viewOrder {
			if v := s.views[id]; match(v.clone()) {
				found = v.clone()
				return true
			}
		}
		return false
	})
	return found, err
}

func (s *Server) viewsOpen(p url.Values, _ *http.Request) apiResult {
	id := p.Get("trigger_id")
	t, known := s.triggers[id]
	switch {
	case id == "":
		return fail("invalid_arguments", "missing required field: trigger_id [json-pointer:/trigger_id]")
	case !known:
		return fail("invalid_trigger_id")
	case t.used:
		return fail("exchanged_trigger_id")
	case s.now().Sub(t.at) > TriggerLifetime:
		return fail("expired_trigger_id")
	}
	raw := []byte(p.Get("view"))
	v, details := checkView(raw)
	if len(details) > 0 {
		return fail("invalid_arguments", details...)
	}
	t.used = true
	v.ID, v.User, v.TriggerID = s.nextIDLocked("V"), t.user, id
	v.Hash = s.viewHashLocked()
	if s.views == nil {
		s.views = make(map[string]*View)
	}
	s.views[v.ID] = &v
	s.viewOrder = append(s.viewOrder, v.ID)
	s.bumpLocked()
	return ok(map[string]any{"view": s.viewJSONLocked(&v, nil)})
}

func (s *Server) viewsUpdate(p url.Values, _ *http.Request) apiResult {
	id := p.Get("view_id")
	if id == "" && p.Get("external_id") == "" {
		return fail("invalid_arguments", "view_id or external_id is required")
	}
	cur, found := s.views[id]
	if !found {
		return fail("not_found")
	}
	if h := p.Get("hash"); h != "" && h != cur.Hash {
		return fail("hash_conflict")
	}
	v, details := checkView([]byte(p.Get("view")))
	if len(details) > 0 {
		return fail("invalid_arguments", details...)
	}
	cur.CallbackID, cur.PrivateMetadata, cur.Title, cur.Blocks = v.CallbackID, v.PrivateMetadata, v.Title, v.Blocks
	cur.Hash = s.viewHashLocked()
	cur.Updates++
	s.bumpLocked()
	return ok(map[string]any{"view": s.viewJSONLocked(cur, nil)})
}

func (s *Server) viewHashLocked() string {
	s.counter++
	return fmt.Sprintf("%d.%08x", s.now().Unix(), s.counter)
}

// viewJSONLocked is a view object as Slack returns and sends it, with the
// input state values.
func (s *Server) viewJSONLocked(v *View, values map[string]map[string]any) map[string]any {
	if values == nil {
		values = map[string]map[string]any{}
	}
	var blocks any = []any{}
	_ = json.Unmarshal(v.Blocks, &blocks)
	return map[string]any{
		"id": v.ID, "team_id": s.opts.TeamID, "type": "modal",
		"title":  map[string]any{"type": "plain_text", "text": v.Title, "emoji": true},
		"blocks": blocks, "private_metadata": v.PrivateMetadata, "callback_id": v.CallbackID,
		"state": map[string]any{"values": values}, "hash": v.Hash,
		"clear_on_close": false, "notify_on_close": false, "root_view_id": v.ID, "previous_view_id": nil,
		"app_id": s.opts.AppID, "external_id": "", "bot_id": s.opts.BotID, "app_installed_team_id": s.opts.TeamID,
	}
}

// checkView applies Slack's modal rules to a view payload and returns the
// view and the problems, each with its json-pointer as Slack reports them.
func checkView(raw []byte) (View, []string) {
	var in struct {
		Type            string            `json:"type"`
		Title           *viewText         `json:"title"`
		Submit          *viewText         `json:"submit"`
		Close           *viewText         `json:"close"`
		Blocks          []json.RawMessage `json:"blocks"`
		PrivateMetadata string            `json:"private_metadata"`
		CallbackID      string            `json:"callback_id"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return View{}, []string{"view is not a JSON object [json-pointer:/view]"}
	}
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if in.Type != "modal" {
		add("must be modal [json-pointer:/view/type]")
	}
	if in.Title == nil || in.Title.Text == "" {
		add("missing required field: title [json-pointer:/view/title]")
	}
	for name, t := range map[string]*viewText{"title": in.Title, "submit": in.Submit, "close": in.Close} {
		if t != nil {
			t.check(&bad, "/view/"+name, MaxViewTitle)
		}
	}
	if len(in.Blocks) > MaxViewBlocks {
		add("must have at most %d items [json-pointer:/view/blocks]", MaxViewBlocks)
	}
	if n := utf8.RuneCountInString(in.PrivateMetadata); n > MaxPrivateMetadata {
		add("must be less than %d characters [json-pointer:/view/private_metadata]", MaxPrivateMetadata+1)
	}
	if len(in.CallbackID) > MaxCallbackID {
		add("must be less than %d characters [json-pointer:/view/callback_id]", MaxCallbackID+1)
	}
	ids := map[string]bool{}
	inputs := 0
	for i, b := range in.Blocks {
		ptr := fmt.Sprintf("/view/blocks/%d", i)
		var blk struct {
			Type    string          `json:"type"`
			BlockID string          `json:"block_id"`
			Label   *viewText       `json:"label"`
			Hint    *viewText       `json:"hint"`
			Element json.RawMessage `json:"element"`
			Text    *viewText       `json:"text"`
		}
		if json.Unmarshal(b, &blk) != nil {
			add("invalid block [json-pointer:%s]", ptr)
			continue
		}
		if blk.BlockID != "" {
			if ids[blk.BlockID] {
				add("duplicate block_id %q [json-pointer:%s/block_id]", blk.BlockID, ptr)
			}
			ids[blk.BlockID] = true
			if len(blk.BlockID) > MaxBlockID {
				add("must be less than %d characters [json-pointer:%s/block_id]", MaxBlockID+1, ptr)
			}
		}
		switch blk.Type {
		case "input":
			inputs++
			if blk.Label == nil {
				add("missing required field: label [json-pointer:%s/label]", ptr)
			} else {
				blk.Label.check(&bad, ptr+"/label", MaxInputLabel)
			}
			if blk.Hint != nil {
				blk.Hint.check(&bad, ptr+"/hint", MaxInputHint)
			}
			checkInputElement(&bad, blk.Element, ptr+"/element")
		case "section":
			if blk.Text != nil && utf8.RuneCountInString(blk.Text.Text) > MaxSectionText {
				add("must be less than %d characters [json-pointer:%s/text/text]", MaxSectionText+1, ptr)
			}
		case "context", "divider", "header", "actions", "markdown":
		default:
			add("unsupported block type %q in a modal [json-pointer:%s/type]", blk.Type, ptr)
		}
	}
	if inputs > 0 && in.Submit == nil {
		add("submit is required when a view has input blocks [json-pointer:/view/submit]")
	}
	v := View{CallbackID: in.CallbackID, PrivateMetadata: in.PrivateMetadata, Blocks: nil}
	if in.Title != nil {
		v.Title = in.Title.Text
	}
	v.Blocks, _ = json.Marshal(in.Blocks)
	return v, bad
}

type viewText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (t *viewText) check(bad *[]string, ptr string, limit int) {
	if t.Type != "plain_text" {
		*bad = append(*bad, fmt.Sprintf("must be plain_text [json-pointer:%s/type]", ptr))
	}
	if utf8.RuneCountInString(t.Text) > limit {
		*bad = append(*bad, fmt.Sprintf("must be less than %d characters [json-pointer:%s/text]", limit+1, ptr))
	}
}

type viewOption struct {
	Text        *viewText `json:"text"`
	Value       string    `json:"value"`
	Description *viewText `json:"description"`
}

func checkInputElement(bad *[]string, raw json.RawMessage, ptr string) {
	var el struct {
		Type          string       `json:"type"`
		ActionID      string       `json:"action_id"`
		Placeholder   *viewText    `json:"placeholder"`
		Options       []viewOption `json:"options"`
		InitialOption *viewOption  `json:"initial_option"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &el) != nil {
		*bad = append(*bad, fmt.Sprintf("missing required field: element [json-pointer:%s]", ptr))
		return
	}
	if len(el.ActionID) > MaxActionID {
		*bad = append(*bad, fmt.Sprintf("must be less than %d characters [json-pointer:%s/action_id]", MaxActionID+1, ptr))
	}
	if el.Placeholder != nil {
		el.Placeholder.check(bad, ptr+"/placeholder", MaxPlaceholder)
	}
	switch el.Type {
	case "plain_text_input":
	case "static_select":
		switch n := len(el.Options); {
		case n == 0:
			*bad = append(*bad, fmt.Sprintf("must have at least 1 items [json-pointer:%s/options]", ptr))
		case n > MaxSelectOptions:
			*bad = append(*bad, fmt.Sprintf("must have at most %d items [json-pointer:%s/options]", MaxSelectOptions, ptr))
		}
		values := map[string]bool{}
		for i, o := range el.Options {
			optPtr := fmt.Sprintf("%s/options/%d", ptr, i)
			if o.Text == nil {
				*bad = append(*bad, fmt.Sprintf("missing required field: text [json-pointer:%s/text]", optPtr))
			} else {
				o.Text.check(bad, optPtr+"/text", MaxOptionText)
			}
			if o.Description != nil {
				o.Description.check(bad, optPtr+"/description", MaxOptionText)
			}
			if o.Value == "" || len(o.Value) > MaxOptionValue {
				*bad = append(*bad, fmt.Sprintf("must be 1 to %d characters [json-pointer:%s/value]", MaxOptionValue, optPtr))
			}
			values[o.Value] = true
		}
		if el.InitialOption != nil && !values[el.InitialOption.Value] {
			*bad = append(*bad, fmt.Sprintf("initial_option must be one of the options [json-pointer:%s/initial_option]", ptr))
		}
	default:
		*bad = append(*bad, fmt.Sprintf("unsupported element type %q [json-pointer:%s/type]", el.Type, ptr))
	}
}

// elementType returns the type of the element of the input block blockID
// in v, and the option texts by value for a select.
func (v *View) elementType(blockID string) (string, map[string]string) {
	var blocks []struct {
		BlockID string `json:"block_id"`
		Element struct {
			Type    string       `json:"type"`
			Options []viewOption `json:"options"`
		} `json:"element"`
	}
	_ = json.Unmarshal(v.Blocks, &blocks)
	for _, b := range blocks {
		if b.BlockID == blockID {
			texts := map[string]string{}
			for _, o := range b.Element.Options {
				if o.Text != nil {
					texts[o.Value] = o.Text.Text
				}
			}
			return b.Element.Type, texts
		}
	}
	return "", nil
}

// stateValue is an input's value in a view's state, as Slack sends it.
func (v *View) stateValue(blockID, value string) map[string]any {
	typ, texts := v.elementType(blockID)
	if typ == "static_select" {
		var opt any
		if value != "" {
			opt = map[string]any{"text": map[string]any{"type": "plain_text", "text": texts[value], "emoji": true}, "value": value}
		}
		return map[string]any{"type": "static_select", "selected_option": opt}
	}
	var val any
	if value != "" {
		val = value
	}
	return map[string]any{"type": "plain_text_input", "value": val}
}

// ViewSubmission is a user's press of a modal's submit button.
type ViewSubmission struct {
	ViewID string
	UserID string
	// Values are what the inputs hold, by block_id and action_id.
	Values map[string]map[string]string
}

func (s *Server) viewSubmissionLocked(sub ViewSubmission) (map[string]any, *View, error) {
	v, ok := s.views[sub.ViewID]
	if !ok {
		return nil, nil, fmt.Errorf("submit view %s: no such view", sub.ViewID)
	}
	if v.Closed {
		return nil, nil, fmt.Errorf("submit view %s: it was closed", sub.ViewID)
	}
	values := map[string]map[string]any{}
	for block, actions := range sub.Values {
		values[block] = map[string]any{}
		for action, value := range actions {
			values[block][action] = v.stateValue(block, value)
		}
	}
	trig := s.triggerIDLocked()
	s.registerTriggerLocked(trig, sub.UserID)
	return map[string]any{
		"type":                  "view_submission",
		"team":                  map[string]any{"id": s.opts.TeamID, "domain": s.opts.TeamName},
		"user":                  map[string]any{"id": sub.UserID, "username": sub.UserID, "name": sub.UserID, "team_id": s.opts.TeamID},
		"api_app_id":            s.opts.AppID,
		"token":                 VerificationToken,
		"trigger_id":            trig,
		"view":                  s.viewJSONLocked(v, values),
		"response_urls":         []any{},
		"is_enterprise_install": false,
		"enterprise":            nil,
	}, v, nil
}

// SubmitView delivers a view_submission envelope (accepts_response_payload
// true). The ack's response_action "errors" is kept in the view's Errors;
// an ack without errors closes it.
func (s *Server) SubmitView(ctx context.Context, sub ViewSubmission) (Delivery, error) {
	s.mu.Lock()
	payload, _, err := s.viewSubmissionLocked(sub)
	s.mu.Unlock()
	if err != nil {
		return Delivery{}, err
	}
	return s.send(ctx, Envelope{Type: TypeInteractive, Payload: payload, AcceptsResponsePayload: true}, payload, func(s *Server, a Ack) { s.submissionAnsweredLocked(sub.ViewID, a.Payload) })
}

// ViewSubmissionBody is SubmitView for HTTP mode: the form body Slack POSTs.
// Pass the app's answer to ViewSubmissionAnswered.
func (s *Server) ViewSubmissionBody(sub ViewSubmission) ([]byte, error) {
	s.mu.Lock()
	payload, _, err := s.viewSubmissionLocked(sub)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("view submission body: %w", err)
	}
	return []byte(url.Values{"payload": {string(raw)}}.Encode()), nil
}

// ViewSubmissionAnswered records the app's HTTP answer to a submission, as
// an ack's payload is recorded in Socket Mode.
func (s *Server) ViewSubmissionAnswered(viewID string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.submissionAnsweredLocked(viewID, body)
}

func (s *Server) submissionAnsweredLocked(viewID string, payload []byte) {
	v, ok := s.views[viewID]
	if !ok {
		return
	}
	var answer struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if len(payload) > 0 {
		_ = json.Unmarshal(payload, &answer)
	}
	if answer.ResponseAction == "errors" {
		v.Errors = answer.Errors
	} else {
		v.Errors, v.Closed = nil, true
	}
	s.bumpLocked()
}

// SelectInView delivers the block_actions a user's choice of value in the
// select blockID/actionID of an open view produces.
func (s *Server) SelectInView(ctx context.Context, viewID, userID, blockID, actionID, value string) (Delivery, error) {
	s.mu.Lock()
	v, ok := s.views[viewID]
	if !ok {
		s.mu.Unlock()
		return Delivery{}, fmt.Errorf("select in view %s: no such view", viewID)
	}
	trig := s.triggerIDLocked()
	s.registerTriggerLocked(trig, userID)
	state := v.stateValue(blockID, value)
	action := map[string]any{"type": state["type"], "action_id": actionID, "block_id": blockID,
		"selected_option": state["selected_option"], "action_ts": s.nextTSLocked()}
	payload := map[string]any{
		"type":                  "block_actions",
		"user":                  map[string]any{"id": userID, "username": userID, "name": userID, "team_id": s.opts.TeamID},
		"api_app_id":            s.opts.AppID,
		"token":                 VerificationToken,
		"container":             map[string]any{"type": "view", "view_id": viewID},
		"trigger_id":            trig,
		"team":                  map[string]any{"id": s.opts.TeamID, "domain": s.opts.TeamName},
		"enterprise":            nil,
		"is_enterprise_install": false,
		"view":                  s.viewJSONLocked(v, map[string]map[string]any{blockID: {actionID: state}}),
		"actions":               []any{action},
	}
	s.mu.Unlock()
	return s.send(ctx, Envelope{Type: TypeInteractive, Payload: payload}, payload, nil)
}

// MessageShortcut is a user's choice of one of the app's message shortcuts
// on a message.
type MessageShortcut struct {
	CallbackID string
	UserID     string
	ChannelID  string
	MessageTS  string // the message the shortcut was used on
	ThreadTS   string // its thread, when it is a reply
	Text       string
}

func (s *Server) messageShortcutLocked(m MessageShortcut) map[string]any {
	trig := s.triggerIDLocked()
	s.registerTriggerLocked(trig, m.UserID)
	s.learnChannelLocked(m.ChannelID, false, m.UserID)
	msg := map[string]any{"type": "message", "user": m.UserID, "ts": m.MessageTS, "text": m.Text}
	if m.ThreadTS != "" {
		msg["thread_ts"] = m.ThreadTS
	}
	return map[string]any{
		"type":                  "message_action",
		"token":                 VerificationToken,
		"action_ts":             s.nextTSLocked(),
		"team":                  map[string]any{"id": s.opts.TeamID, "domain": s.opts.TeamName},
		"user":                  map[string]any{"id": m.UserID, "username": m.UserID, "name": m.UserID, "team_id": s.opts.TeamID},
		"channel":               map[string]any{"id": m.ChannelID, "name": s.channels[m.ChannelID].Name},
		"is_enterprise_install": false,
		"enterprise":            nil,
		"callback_id":           m.CallbackID,
		"trigger_id":            trig,
		"response_url":          s.newResponseURLLocked("actions", m.ChannelID, m.UserID, m.ThreadTS),
		"message_ts":            m.MessageTS,
		"message":               msg,
	}
}

// SendMessageShortcut delivers the message_action a message shortcut produces.
func (s *Server) SendMessageShortcut(ctx context.Context, m MessageShortcut) (Delivery, error) {
	s.mu.Lock()
	payload := s.messageShortcutLocked(m)
	s.mu.Unlock()
	return s.send(ctx, Envelope{Type: TypeInteractive, Payload: payload}, payload, nil)
}
