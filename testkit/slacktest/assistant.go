package slacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Slack's limits on the assistant thread methods. Slack's reference
// documents the prompt count and the loading messages; it states no length
// for a status, and the 50 characters are what Slack refuses past in
// practice. It states none for a prompt's title or message either: the fake
// holds them to a button's text (75) and to an input label's (2000), as the
// prompts render as buttons that send the message.
const (
	MaxSuggestedPrompts = 4
	MaxStatusLength     = 50
	MaxLoadingMessages  = 10
	MaxPromptTitle      = 75
	MaxPromptMessage    = 2000
	MaxThreadTitle      = 255
	// StatusLifetime is how long a status shows when the app posts nothing.
	StatusLifetime = 2 * time.Minute
)

// Prompt is a suggested prompt of an assistant thread.
type Prompt struct {
	Title   string `json:"title"`
	Message string `json:"message"`
}

// AssistantThread is the state of a thread in the app's assistant container
// (or of any thread the app set a status in).
type AssistantThread struct {
	Channel  string // the DM between the user and the app
	ThreadTS string
	User     string
	// ContextChannel is the channel the user was viewing, from the latest
	// assistant_thread_started or _context_changed event.
	ContextChannel string
	// Status is the status shown now: set by setStatus, cleared by the
	// app's next message in the thread or after StatusLifetime.
	Status string
	// Statuses are the statuses set, in order, "" for a clear.
	Statuses     []string
	Title        string
	Titles       []string
	PromptsTitle string
	Prompts      []Prompt

	statusAt time.Time
}

func (t AssistantThread) clone() AssistantThread {
	t.Statuses = slices.Clone(t.Statuses)
	t.Titles = slices.Clone(t.Titles)
	t.Prompts = slices.Clone(t.Prompts)
	return t
}

// AssistantThreadEvent describes an assistant_thread_started or
// assistant_thread_context_changed event.
type AssistantThreadEvent struct {
	User     string
	Channel  string // the DM with the app; D…
	ThreadTS string // minted for a new thread when empty
	// ContextChannel is the channel the user is viewing; "" for none.
	ContextChannel string
	EventID        string // minted when empty
}

// assistantThreadLocked returns the thread's record, creating it.
func (s *Server) assistantThreadLocked(channel, ts string) *AssistantThread {
	if s.assistant == nil {
		s.assistant = make(map[msgKey]*AssistantThread)
	}
	k := msgKey{channel, ts}
	t := s.assistant[k]
	if t == nil {
		t = &AssistantThread{Channel: channel, ThreadTS: ts}
		s.assistant[k] = t
	}
	return t
}

// assistantEventLocked completes e and returns the event_callback payload
// of an assistant thread event of type typ, as Slack documents it
// (reference/events/assistant_thread_started).
func (s *Server) assistantEventLocked(typ string, e *AssistantThreadEvent) map[string]any {
	if e.ThreadTS == "" {
		e.ThreadTS = s.nextTSLocked()
	}
	if e.EventID == "" {
		e.EventID = s.nextIDLocked("Ev")
	}
	s.learnChannelLocked(e.Channel, true, e.User)
	t := s.assistantThreadLocked(e.Channel, e.ThreadTS)
	t.User, t.ContextChannel = e.User, e.ContextChannel
	if typ == "assistant_thread_started" {
		// The thread's root is the app's: Slack opens it for the app.
		if _, ok := s.msgs[msgKey{e.Channel, e.ThreadTS}]; !ok && !s.opts.NoRecord {
			m := &stored{fromApp: true, author: s.opts.BotUserID}
			m.Via, m.Channel, m.TS, m.BotID, m.ThreadTS = "assistant", e.Channel, e.ThreadTS, s.opts.BotID, e.ThreadTS
			m.Params = url.Values{"subtype": {"assistant_app_thread"}}
			s.recordLocked(m, "assistant")
		}
	}
	context := map[string]any{}
	if e.ContextChannel != "" {
		context = map[string]any{"channel_id": e.ContextChannel, "team_id": s.opts.TeamID, "enterprise_id": nil}
	}
	ev := map[string]any{
		"type": typ,
		"assistant_thread": map[string]any{
			"user_id":    e.User,
			"context":    context,
			"channel_id": e.Channel,
			"thread_ts":  e.ThreadTS,
		},
		"event_ts": s.nextTSLocked(),
	}
	return s.wrapEventLocked(ev, e.EventID)
}

func (s *Server) sendAssistantEvent(ctx context.Context, typ string, e AssistantThreadEvent) (Delivery, error) {
	s.mu.Lock()
	p := s.assistantEventLocked(typ, &e)
	s.mu.Unlock()
	d, err := s.sendEvent(ctx, p)
	d.TS = e.ThreadTS
	return d, err
}

// SendAssistantThreadStarted delivers assistant_thread_started: the user
// opened a new thread in the app's assistant container. The Delivery's TS
// is the thread's.
func (s *Server) SendAssistantThreadStarted(ctx context.Context, e AssistantThreadEvent) (Delivery, error) {
	return s.sendAssistantEvent(ctx, "assistant_thread_started", e)
}

// SendAssistantThreadContextChanged delivers
// assistant_thread_context_changed: the user of the thread now views
// another channel (ContextChannel, or none).
func (s *Server) SendAssistantThreadContextChanged(ctx context.Context, e AssistantThreadEvent) (Delivery, error) {
	return s.sendAssistantEvent(ctx, "assistant_thread_context_changed", e)
}

// AssistantThreadBody is SendAssistantThreadStarted for HTTP mode: the
// event_callback JSON Slack POSTs.
func (s *Server) AssistantThreadBody(e AssistantThreadEvent) ([]byte, Delivery, error) {
	s.mu.Lock()
	p := s.assistantEventLocked("assistant_thread_started", &e)
	s.mu.Unlock()
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, Delivery{}, fmt.Errorf("assistant_thread_started body: %w", err)
	}
	return raw, Delivery{EventID: e.EventID, TS: e.ThreadTS}, nil
}

// Assistant returns the state of the assistant thread.
func (s *Server) Assistant(channel, threadTS string) (AssistantThread, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.assistant[msgKey{channel, threadTS}]
	if !ok {
		return AssistantThread{}, false
	}
	s.expireStatusLocked(t)
	return t.clone(), true
}

// WaitAssistant waits until the assistant thread's state satisfies match.
func (s *Server) WaitAssistant(ctx context.Context, channel, threadTS string, match func(AssistantThread) bool) (AssistantThread, error) {
	var found AssistantThread
	err := s.waitFor(ctx, "assistant thread "+channel+"/"+threadTS, func() bool {
		t, ok := s.assistant[msgKey{channel, threadTS}]
		if !ok {
			return false
		}
		s.expireStatusLocked(t)
		found = t.clone()
		return match(found)
	})
	return found, err
}

func (s *Server) expireStatusLocked(t *AssistantThread) {
	if t.Status != "" && s.now().Sub(t.statusAt) >= StatusLifetime {
		t.Status = ""
	}
}

// replyPostedLocked clears the status of the thread the app just posted in,
// as Slack does.
func (s *Server) replyPostedLocked(channel, threadTS string) {
	if t, ok := s.assistant[msgKey{channel, threadTS}]; ok && threadTS != "" {
		t.Status = ""
	}
}

// threadArgs checks the channel_id and thread_ts every assistant method takes.
func (s *Server) threadArgs(p url.Values, threadRequired bool) (channel, ts string, res apiResult, bad bool) {
	channel, ts = p.Get("channel_id"), p.Get("thread_ts")
	switch {
	case channel == "":
		return "", "", fail("invalid_arguments", "missing required field: channel_id [json-pointer:/channel_id]"), true
	case !s.knownChannelLocked(channel):
		return "", "", fail("channel_not_found"), true
	case ts == "" && threadRequired:
		return "", "", fail("invalid_arguments", "missing required field: thread_ts [json-pointer:/thread_ts]"), true
	case ts != "" && !validTS(ts):
		return "", "", fail("invalid_thread_ts"), true
	}
	return channel, ts, apiResult{}, false
}

func validTS(ts string) bool {
	sec, frac, ok := strings.Cut(ts, ".")
	return ok && sec != "" && frac != "" && strings.Trim(sec+frac, "0123456789") == ""
}

// tooLong is Slack's schema error for a string past its limit.
func tooLong(pointer string, limit int) apiResult {
	return fail("invalid_arguments", fmt.Sprintf("must be less than %d characters [json-pointer:%s]", limit+1, pointer))
}

func (s *Server) assistantSetStatus(p url.Values, _ *http.Request) apiResult {
	channel, ts, res, bad := s.threadArgs(p, true)
	if bad {
		return res
	}
	if _, ok := p["status"]; !ok {
		return fail("invalid_arguments", "missing required field: status [json-pointer:/status]")
	}
	status := p.Get("status")
	if utf8.RuneCountInString(status) > MaxStatusLength {
		return tooLong("/status", MaxStatusLength)
	}
	if lm := p.Get("loading_messages"); lm != "" {
		var msgs []string
		if json.Unmarshal([]byte(lm), &msgs) != nil {
			msgs = strings.Split(lm, ",") // slack-go joins them with commas
		}
		if len(msgs) > MaxLoadingMessages {
			return fail("invalid_arguments", fmt.Sprintf("must have at most %d items [json-pointer:/loading_messages]", MaxLoadingMessages))
		}
	}
	t := s.assistantThreadLocked(channel, ts)
	t.Status, t.statusAt = status, s.now()
	t.Statuses = append(t.Statuses, status)
	return ok(nil)
}

func (s *Server) assistantSetTitle(p url.Values, _ *http.Request) apiResult {
	channel, ts, res, bad := s.threadArgs(p, true)
	if bad {
		return res
	}
	title := p.Get("title")
	switch {
	case strings.TrimSpace(title) == "":
		return fail("invalid_arguments", "missing required field: title [json-pointer:/title]")
	case utf8.RuneCountInString(title) > MaxThreadTitle:
		return tooLong("/title", MaxThreadTitle)
	}
	t := s.assistantThreadLocked(channel, ts)
	t.Title = title
	t.Titles = append(t.Titles, title)
	return ok(nil)
}

func (s *Server) assistantSetSuggestedPrompts(p url.Values, _ *http.Request) apiResult {
	channel, ts, res, bad := s.threadArgs(p, false)
	if bad {
		return res
	}
	var prompts []Prompt
	if err := json.Unmarshal([]byte(p.Get("prompts")), &prompts); err != nil {
		return fail("invalid_arguments", "prompts must be a JSON array of {title, message} [json-pointer:/prompts]")
	}
	switch {
	case len(prompts) == 0:
		return fail("invalid_arguments", "must have at least 1 items [json-pointer:/prompts]")
	case len(prompts) > MaxSuggestedPrompts:
		return fail("invalid_arguments", fmt.Sprintf("must have at most %d items [json-pointer:/prompts]", MaxSuggestedPrompts))
	}
	for i, pr := range prompts {
		switch {
		case strings.TrimSpace(pr.Title) == "":
			return fail("invalid_arguments", fmt.Sprintf("missing required field: title [json-pointer:/prompts/%d/title]", i))
		case strings.TrimSpace(pr.Message) == "":
			return fail("invalid_arguments", fmt.Sprintf("missing required field: message [json-pointer:/prompts/%d/message]", i))
		case utf8.RuneCountInString(pr.Title) > MaxPromptTitle:
			return tooLong(fmt.Sprintf("/prompts/%d/title", i), MaxPromptTitle)
		case utf8.RuneCountInString(pr.Message) > MaxPromptMessage:
			return tooLong(fmt.Sprintf("/prompts/%d/message", i), MaxPromptMessage)
		}
	}
	if s.opts.AgentView {
		// An agent's prompts sit at the top of its DM; Slack ignores a
		// thread_ts without an error (ai/migrating-to-agent-messaging).
		if ts == "" {
			t := s.assistantThreadLocked(channel, "")
			t.PromptsTitle, t.Prompts = p.Get("title"), prompts
		}
		return ok(nil)
	}
	if ts == "" {
		// Without thread_ts Slack takes the channel's latest thread.
		for i := len(s.order) - 1; i >= 0; i-- {
			if k := s.order[i]; k.channel == channel {
				ts = s.msgs[k].ThreadTS
				if ts == "" {
					ts = k.ts
				}
				break
			}
		}
	}
	t := s.assistantThreadLocked(channel, ts)
	t.PromptsTitle, t.Prompts = p.Get("title"), prompts
	return ok(nil)
}
