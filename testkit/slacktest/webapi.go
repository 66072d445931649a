package slacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Call is one Web API request the server answered.
type Call struct {
	Seq    uint64     // order among everything the server recorded
	Method string     // e.g. "chat.postMessage"
	Params url.Values // form, query or JSON body fields (JSON values other than strings are kept as JSON)
	Token  string     // the token the request carried
	Status int        // HTTP status the fake answered
	Error  string     // Slack error code of the answer; "" when ok
	// Warning is the warning code of a successful answer, e.g.
	// missing_agent_session_stopped_event_subscription; "" for none.
	Warning string
	At      time.Time
}

// Fault is a scripted answer that replaces a method's normal one.
type Fault struct {
	Status     int    // HTTP status; 0 means 200, or 429 when RetryAfter is set
	Error      string // Slack error code for the {"ok":false,"error":…} body
	RetryAfter int    // seconds, sent as the Retry-After header when > 0
}

type fault struct {
	Fault
	times int // < 0: until ClearFaults
}

// InjectFault makes the next times calls of method (every call when times
// < 0) answer f instead of running the method.
func (s *Server) InjectFault(method string, times int, f Fault) {
	if f.Status == 0 && f.RetryAfter > 0 {
		f.Status = http.StatusTooManyRequests
	}
	if f.Status == 0 {
		f.Status = http.StatusOK
	}
	if f.Error == "" {
		f.Error = "fatal_error"
		if f.Status == http.StatusTooManyRequests {
			f.Error = "ratelimited"
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], fault{Fault: f, times: times})
}

// RateLimit makes the next times calls of method answer 429 with
// Retry-After: retryAfter seconds, which slack-go turns into
// *slack.RateLimitedError.
func (s *Server) RateLimit(method string, times, retryAfter int) {
	s.InjectFault(method, times, Fault{Status: http.StatusTooManyRequests, Error: "ratelimited", RetryAfter: retryAfter})
}

// FailNext makes the next times calls of method answer {"ok":false,"error":slackErr}.
func (s *Server) FailNext(method string, times int, slackErr string) {
	s.InjectFault(method, times, Fault{Error: slackErr})
}

// ClearFaults removes every scripted fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
}

// Calls returns every Web API call so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// CallCount returns how many calls of method (every method when "") were made.
func (s *Server) CallCount(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			n++
		}
	}
	return n
}

// WaitCall waits for the first call, past or future, that match accepts.
func (s *Server) WaitCall(ctx context.Context, match func(Call) bool) (Call, error) {
	var found Call
	err := s.waitFor(ctx, "call", func() bool {
		for _, c := range s.calls {
			if match(c) {
				found = c
				return true
			}
		}
		return false
	})
	return found, err
}

// apiResult is a method's answer; body gets "ok" added.
type apiResult struct {
	status int
	header map[string]string
	body   map[string]any
}

func ok(body map[string]any) apiResult {
	if body == nil {
		body = map[string]any{}
	}
	body["ok"] = true
	return apiResult{status: http.StatusOK, body: body}
}

// fail is Slack's error answer: HTTP 200 with ok=false, plus the detailed
// messages Slack puts in "errors" and response_metadata for invalid_blocks.
func fail(code string, details ...string) apiResult {
	body := map[string]any{"ok": false, "error": code}
	if len(details) > 0 {
		body["errors"] = details
		body["response_metadata"] = map[string]any{"messages": prefixAll("[ERROR] ", details)}
	}
	return apiResult{status: http.StatusOK, body: body}
}

func prefixAll(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

type apiMethod func(s *Server, p url.Values, r *http.Request) apiResult

// methods needing the bot token; apps.connections.open is handled apart.
var botMethods = map[string]apiMethod{
	"auth.test":             (*Server).authTest,
	"chat.postMessage":      (*Server).chatPostMessage,
	"chat.postEphemeral":    (*Server).chatPostEphemeral,
	"chat.update":           (*Server).chatUpdate,
	"chat.delete":           (*Server).chatDelete,
	"reactions.add":         (*Server).reactionsAdd,
	"reactions.remove":      (*Server).reactionsRemove,
	"conversations.info":    (*Server).conversationsInfo,
	"conversations.replies": (*Server).conversationsReplies,
	"conversations.history": (*Server).conversationsHistory,
	"users.info":            (*Server).usersInfo,
	"usergroups.list":       (*Server).usergroupsList,
	"usergroups.users.list": (*Server).usergroupsUsersList,

	"files.getUploadURLExternal":   (*Server).filesGetUploadURLExternal,
	"files.completeUploadExternal": (*Server).filesCompleteUploadExternal,

	"assistant.threads.setStatus":           (*Server).assistantSetStatus,
	"assistant.threads.setTitle":            (*Server).assistantSetTitle,
	"assistant.threads.setSuggestedPrompts": (*Server).assistantSetSuggestedPrompts,

	"agents.sessions.setStatus": (*Server).agentsSessionsSetStatus,
	"agents.sessions.rename":    (*Server).agentsSessionsRename,

	"views.open":   (*Server).viewsOpen,
	"views.update": (*Server).viewsUpdate,
}

const maxAPIBody = 8 << 20

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	params, err := readParams(r)
	token := params.Get("token")
	if h := r.Header.Get("Authorization"); token == "" && strings.HasPrefix(h, "Bearer ") {
		token = strings.TrimPrefix(h, "Bearer ")
	}
	s.mu.Lock()
	var res apiResult
	switch {
	case err != nil:
		res = fail("invalid_form_data", err.Error())
	case s.popFaultLocked(method, &res):
	default:
		res = s.dispatchLocked(method, token, params, r)
	}
	call := Call{Method: method, Params: params, Token: token, Status: res.status, At: s.now()}
	if e, _ := res.body["error"].(string); res.body["ok"] != true {
		call.Error = e
	}
	call.Warning, _ = res.body["warning"].(string)
	call.Seq = s.bumpLocked()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	writeJSON(w, res)
}

func (s *Server) popFaultLocked(method string, res *apiResult) bool {
	fs := s.faults[method]
	if len(fs) == 0 {
		return false
	}
	f := fs[0]
	if f.times > 0 {
		fs[0].times--
		if fs[0].times == 0 {
			s.faults[method] = fs[1:]
		}
	}
	*res = apiResult{status: f.Status, body: map[string]any{"ok": false, "error": f.Error}}
	if f.RetryAfter > 0 {
		res.header = map[string]string{"Retry-After": strconv.Itoa(f.RetryAfter)}
	}
	return true
}

func (s *Server) dispatchLocked(method, token string, p url.Values, r *http.Request) apiResult {
	if method == "apps.connections.open" {
		switch token {
		case "":
			return fail("not_authed")
		case s.opts.AppToken:
			return s.appsConnectionsOpen(r)
		case s.opts.BotToken:
			return fail("not_allowed_token_type")
		}
		return fail("invalid_auth")
	}
	h, known := botMethods[method]
	switch {
	case !known:
		return fail("unknown_method")
	case token == "":
		return fail("not_authed")
	case token == s.opts.AppToken:
		return fail("not_allowed_token_type")
	case token != s.opts.BotToken:
		return fail("invalid_auth")
	}
	return h(s, p, r)
}

// readParams reads a Web API request the way Slack does: query string,
// url-encoded form, or a JSON object whose non-string values are kept as JSON.
func readParams(r *http.Request) (url.Values, error) {
	p := r.URL.Query()
	if r.Body == nil {
		return p, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAPIBody))
	if err != nil {
		return p, fmt.Errorf("read body: %w", err)
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case len(body) == 0:
	case ct == "application/json":
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			if string(body) == "null\n" || string(body) == "null" {
				return p, nil
			}
			return p, fmt.Errorf("json body: %w", err)
		}
		for k, v := range m {
			var str string
			if json.Unmarshal(v, &str) == nil {
				p.Set(k, str)
			} else if string(v) != "null" {
				p.Set(k, string(v))
			}
		}
	default:
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return p, fmt.Errorf("form body: %w", err)
		}
		for k, vs := range form {
			p[k] = vs
		}
	}
	return p, nil
}

func writeJSON(w http.ResponseWriter, res apiResult) {
	for k, v := range res.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(res.status)
	_ = json.NewEncoder(w).Encode(res.body)
}

func (s *Server) authTest(url.Values, *http.Request) apiResult {
	return ok(map[string]any{
		"url":                   "https://" + s.opts.TeamName + ".slack.com/",
		"team":                  s.opts.TeamName,
		"user":                  "flowbridge",
		"team_id":               s.opts.TeamID,
		"user_id":               s.opts.BotUserID,
		"bot_id":                s.opts.BotID,
		"is_enterprise_install": false,
	})
}

// msgKey identifies a message: Slack's (channel, ts).
type msgKey struct{ channel, ts string }

// stored is a message in a channel: the app's own (exported through Messages)
// or a user's, learnt from a delivered event.
type stored struct {
	Message
	author    string
	fromApp   bool
	fileNames []string // a user's message: the files shared with it
}

// Message is the state of a message the app produced, through the Web API,
// a response_url or a slash-command ack payload.
type Message struct {
	Seq            uint64 // order among everything the server recorded
	Op             string // what produced this version: chat.postMessage, chat.update, chat.delete, chat.postEphemeral, reactions.add, reactions.remove, response_url, ack, assistant (the root of an assistant thread)
	Via            string // what created the message (one of the Op values that create)
	Channel        string
	TS             string // assigned by the fake; message_ts for ephemeral messages
	ThreadTS       string
	User           string // who sees an ephemeral message
	BotID          string
	Ephemeral      bool
	Text           string
	Blocks         json.RawMessage // as sent; nil when none
	Attachments    json.RawMessage
	Metadata       json.RawMessage
	ResponseType   string // response_url and ack: "in_channel" or "ephemeral"
	ResponseURL    string // the response_url that created or last changed it
	ReplyBroadcast bool
	UnfurlLinks    *bool // nil when not sent
	UnfurlMedia    *bool
	Mrkdwn         *bool
	LinkNames      string
	Parse          string
	Username       string
	IconEmoji      string
	IconURL        string
	Reactions      []string // names, in the order added
	Edits          int      // updates applied so far
	Deleted        bool
	Files          []string   // IDs of the files a files.completeUploadExternal share carries
	Params         url.Values // everything the creating or updating request carried
	At             time.Time
}

func (m Message) clone() Message {
	m.Reactions = slices.Clone(m.Reactions)
	m.Files = slices.Clone(m.Files)
	return m
}

// Messages returns the current state of every message the app produced,
// in the order they were created; deleted ones have Deleted set.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, k := range s.order {
		if m := s.msgs[k]; m.fromApp {
			out = append(out, m.clone())
		}
	}
	return out
}

// MessageLog returns every version of every app message: one entry per
// post, update, delete and reaction change, in order.
func (s *Server) MessageLog() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.history))
	for i, m := range s.history {
		out[i] = m.clone()
	}
	return out
}

// WaitMessage waits for the first message version, past or future, that
// match accepts. Versions include transient ones (a placeholder later
// updated) and deletions (Deleted set).
func (s *Server) WaitMessage(ctx context.Context, match func(Message) bool) (Message, error) {
	var found Message
	err := s.waitFor(ctx, "message", func() bool {
		for _, m := range s.history {
			if match(m) {
				found = m.clone()
				return true
			}
		}
		return false
	})
	return found, err
}

// Message returns the current state of the app message (channel, ts).
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[msgKey{channel, ts}]
	if !ok || !m.fromApp {
		return Message{}, false
	}
	return m.clone(), true
}

// recordLocked stores m (a new or changed app message) and logs the version.
func (s *Server) recordLocked(m *stored, op string) {
	m.Op = op
	m.At = s.now()
	m.Seq = s.bumpLocked()
	k := msgKey{m.Channel, m.TS}
	if _, ok := s.msgs[k]; !ok {
		s.order = append(s.order, k)
		s.msgs[k] = m
	}
	if m.fromApp {
		s.history = append(s.history, m.clone())
	}
}

// rememberUserMessageLocked stores a message a user posted (from an event),
// so reactions, threads and conversations.replies can refer to it.
func (s *Server) rememberUserMessageLocked(channel, ts, threadTS, user, botID, text string) {
	k := msgKey{channel, ts}
	if _, ok := s.msgs[k]; ok || channel == "" || ts == "" || s.opts.NoRecord {
		return
	}
	m := &stored{Message: Message{Channel: channel, TS: ts, ThreadTS: threadTS, BotID: botID, Text: text, At: s.now()}, author: user}
	s.msgs[k] = m
	s.order = append(s.order, k)
}

func (s *Server) knownChannelLocked(id string) bool {
	if id == "" {
		return false
	}
	if _, ok := s.channels[id]; ok {
		return true
	}
	// Posting to a user ID opens the DM with that user.
	return strings.HasPrefix(id, "U") || strings.HasPrefix(id, "W")
}

func parseBool(v string) *bool {
	if v == "" {
		return nil
	}
	b := v == "true" || v == "1"
	return &b
}

// content is what a message shows: checked against Slack's limits.
type content struct {
	text, blocks, attachments string
}

func contentFrom(p url.Values) content {
	return content{text: p.Get("text"), blocks: p.Get("blocks"), attachments: p.Get("attachments")}
}

func (c content) check() (string, []string) {
	if n := len([]rune(c.text)); n > MaxTextLength {
		return "msg_too_long", []string{fmt.Sprintf("text must be at most %d characters, got %d", MaxTextLength, n)}
	}
	nblocks := 0
	if c.blocks != "" {
		n, code, details := validateBlocks([]byte(c.blocks))
		if code != "" {
			return code, details
		}
		nblocks = n
	}
	hasAttachments := c.attachments != "" && c.attachments != "[]" && c.attachments != "null"
	if c.text == "" && nblocks == 0 && !hasAttachments {
		return "no_text", nil
	}
	return "", nil
}

func (s *Server) botMessageJSON(m *stored) map[string]any {
	out := map[string]any{
		"type":    "message",
		"text":    m.Text,
		"ts":      m.TS,
		"team":    s.opts.TeamID,
		"bot_id":  s.opts.BotID,
		"app_id":  s.opts.AppID,
		"user":    s.opts.BotUserID,
		"channel": m.Channel,
	}
	if !m.fromApp {
		out["user"] = m.author
		delete(out, "app_id")
		delete(out, "bot_id")
		if m.BotID != "" {
			out["bot_id"] = m.BotID
		}
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
		if root, ok := s.msgs[msgKey{m.Channel, m.ThreadTS}]; ok && m.ThreadTS != m.TS {
			out["parent_user_id"] = root.author
		}
	}
	if len(m.Blocks) > 0 {
		out["blocks"] = m.Blocks
	}
	if len(m.fileNames) > 0 {
		files := make([]map[string]any, len(m.fileNames))
		for i, n := range m.fileNames {
			files[i] = map[string]any{"id": "F" + strconv.Itoa(i+1) + strings.ReplaceAll(m.TS, ".", ""), "name": n, "title": n, "mode": "hosted"}
		}
		out["files"] = files
	}
	if m.Edits > 0 {
		out["edited"] = map[string]any{"user": s.opts.BotUserID, "ts": m.TS}
	}
	return out
}

func (s *Server) fillFromParams(m *stored, p url.Values) {
	m.Text = p.Get("text")
	m.Blocks = rawOrNil(p.Get("blocks"))
	m.Attachments = rawOrNil(p.Get("attachments"))
	m.Metadata = rawOrNil(p.Get("metadata"))
	m.ReplyBroadcast = p.Get("reply_broadcast") == "true"
	m.UnfurlLinks = parseBool(p.Get("unfurl_links"))
	m.UnfurlMedia = parseBool(p.Get("unfurl_media"))
	m.Mrkdwn = parseBool(p.Get("mrkdwn"))
	m.LinkNames = p.Get("link_names")
	m.Parse = p.Get("parse")
	m.Username = p.Get("username")
	m.IconEmoji = p.Get("icon_emoji")
	m.IconURL = p.Get("icon_url")
	m.Params = cloneValues(p)
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		if k == "token" {
			continue
		}
		out[k] = slices.Clone(vs)
	}
	return out
}

func (s *Server) chatPostMessage(p url.Values, _ *http.Request) apiResult {
	ch := p.Get("channel")
	if !s.knownChannelLocked(ch) {
		return fail("channel_not_found")
	}
	if res, limited := s.postLimitedLocked(ch); limited {
		return res
	}
	if code, details := contentFrom(p).check(); code != "" {
		return fail(code, details...)
	}
	m := &stored{fromApp: true, author: s.opts.BotUserID}
	m.Via, m.Channel, m.ThreadTS, m.BotID = "chat.postMessage", ch, p.Get("thread_ts"), s.opts.BotID
	m.TS = s.nextTSLocked()
	s.fillFromParams(m, p)
	s.recordLocked(m, "chat.postMessage")
	s.replyPostedLocked(ch, m.ThreadTS)
	return ok(map[string]any{"channel": ch, "ts": m.TS, "message": s.botMessageJSON(m)})
}

func (s *Server) chatPostEphemeral(p url.Values, _ *http.Request) apiResult {
	ch, user := p.Get("channel"), p.Get("user")
	switch {
	case !s.knownChannelLocked(ch):
		return fail("channel_not_found")
	case user == "":
		return fail("user_not_found")
	}
	if code, details := contentFrom(p).check(); code != "" {
		return fail(code, details...)
	}
	m := &stored{fromApp: true, author: s.opts.BotUserID}
	m.Via, m.Channel, m.ThreadTS, m.BotID, m.User, m.Ephemeral = "chat.postEphemeral", ch, p.Get("thread_ts"), s.opts.BotID, user, true
	m.TS = s.nextTSLocked()
	s.fillFromParams(m, p)
	s.recordLocked(m, "chat.postEphemeral")
	return ok(map[string]any{"message_ts": m.TS})
}

// editableLocked finds the message chat.update or chat.delete targets.
func (s *Server) editableLocked(p url.Values, verb string) (*stored, apiResult, bool) {
	ch, ts := p.Get("channel"), p.Get("ts")
	if !s.knownChannelLocked(ch) {
		return nil, fail("channel_not_found"), false
	}
	m, found := s.msgs[msgKey{ch, ts}]
	switch {
	case !found || m.Deleted || m.Ephemeral:
		// Ephemeral messages are not stored by Slack: only their response_url can change them.
		return nil, fail("message_not_found"), false
	case !m.fromApp:
		return nil, fail("cant_" + verb + "_message"), false
	}
	return m, apiResult{}, true
}

func (s *Server) chatUpdate(p url.Values, _ *http.Request) apiResult {
	m, res, found := s.editableLocked(p, "update")
	if !found {
		return res
	}
	if res, limited := s.updateLimitedLocked(msgKey{m.Channel, m.TS}); limited {
		return res
	}
	c := contentFrom(p)
	if c.blocks == "" && p.Get("text") == "" {
		// An update replaces the content with what it carries; it must carry some.
		return fail("no_text")
	}
	if code, details := c.check(); code != "" {
		return fail(code, details...)
	}
	thread := m.ThreadTS
	s.fillFromParams(m, p)
	m.ThreadTS = thread
	m.Edits++
	s.recordLocked(m, "chat.update")
	return ok(map[string]any{"channel": m.Channel, "ts": m.TS, "text": m.Text, "message": s.botMessageJSON(m)})
}

func (s *Server) chatDelete(p url.Values, _ *http.Request) apiResult {
	m, res, found := s.editableLocked(p, "delete")
	if !found {
		return res
	}
	m.Deleted = true
	s.recordLocked(m, "chat.delete")
	return ok(map[string]any{"channel": m.Channel, "ts": m.TS})
}

// Reaction is one reactions.add or reactions.remove that succeeded.
type Reaction struct {
	Seq     uint64
	Op      string // "reactions.add" or "reactions.remove"
	Channel string
	TS      string // the message reacted to
	Name    string
	At      time.Time
}

// Reactions returns every reaction change so far, in order.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Reaction
	for _, c := range s.calls {
		if (c.Method == "reactions.add" || c.Method == "reactions.remove") && c.Error == "" && c.Status == http.StatusOK {
			out = append(out, Reaction{Seq: c.Seq, Op: c.Method, Channel: c.Params.Get("channel"), TS: c.Params.Get("timestamp"), Name: c.Params.Get("name"), At: c.At})
		}
	}
	return out
}

// MessageReactions returns the reactions currently on any message (channel, ts),
// the app's or a user's.
func (s *Server) MessageReactions(channel, ts string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.msgs[msgKey{channel, ts}]; ok {
		return slices.Clone(m.Reactions)
	}
	return nil
}

func (s *Server) reactionTargetLocked(p url.Values) (*stored, apiResult, bool) {
	name, ch, ts := p.Get("name"), p.Get("channel"), p.Get("timestamp")
	switch {
	case ch == "" || ts == "":
		return nil, fail("no_item_specified"), false
	case name == "" || strings.ContainsAny(name, ": "):
		return nil, fail("invalid_name"), false
	case !s.knownChannelLocked(ch):
		return nil, fail("channel_not_found"), false
	}
	m, found := s.msgs[msgKey{ch, ts}]
	if !found || m.Deleted || m.Ephemeral {
		return nil, fail("message_not_found"), false
	}
	return m, apiResult{}, true
}

func (s *Server) reactionsAdd(p url.Values, _ *http.Request) apiResult {
	m, res, found := s.reactionTargetLocked(p)
	if !found {
		return res
	}
	if slices.Contains(m.Reactions, p.Get("name")) {
		return fail("already_reacted")
	}
	m.Reactions = append(m.Reactions, p.Get("name"))
	if m.fromApp {
		s.recordLocked(m, "reactions.add")
	}
	return ok(nil)
}

func (s *Server) reactionsRemove(p url.Values, _ *http.Request) apiResult {
	m, res, found := s.reactionTargetLocked(p)
	if !found {
		return res
	}
	i := slices.Index(m.Reactions, p.Get("name"))
	if i < 0 {
		return fail("no_reaction")
	}
	m.Reactions = slices.Delete(m.Reactions, i, i+1)
	if m.fromApp {
		s.recordLocked(m, "reactions.remove")
	}
	return ok(nil)
}

// conversationsInfo answers with a conversation object as Slack's examples show it
// (reference/objects/conversation-object): an IM's fields, or a channel's.
func (s *Server) conversationsInfo(p url.Values, _ *http.Request) apiResult {
	c, found := s.channels[p.Get("channel")]
	if !found {
		return fail("channel_not_found")
	}
	created := s.started.Unix()
	ch := map[string]any{
		"id":              c.ID,
		"created":         created,
		"is_archived":     false,
		"is_im":           c.IsIM,
		"is_org_shared":   false,
		"context_team_id": s.opts.TeamID,
		"updated":         s.started.UnixMilli(),
	}
	if c.IsIM {
		ch["user"], ch["is_user_deleted"], ch["priority"] = c.User, false, 0
		return ok(map[string]any{"channel": ch})
	}
	private := strings.HasPrefix(c.ID, "G")
	topic := func() map[string]any { return map[string]any{"value": "", "creator": "", "last_set": 0} }
	for k, v := range map[string]any{
		"name":                       c.Name,
		"name_normalized":            c.Name,
		"is_channel":                 !private,
		"is_group":                   private,
		"is_mpim":                    false,
		"is_private":                 private,
		"is_general":                 false,
		"is_shared":                  false,
		"is_ext_shared":              false,
		"is_pending_ext_shared":      false,
		"is_frozen":                  false,
		"unlinked":                   0,
		"pending_shared":             []string{},
		"pending_connected_team_ids": []string{},
		"shared_team_ids":            []string{s.opts.TeamID},
		"parent_conversation":        nil,
		"creator":                    s.opts.BotUserID,
		"is_member":                  true,
		"topic":                      topic(),
		"purpose":                    topic(),
		"previous_names":             []string{},
		"num_members":                2,
	} {
		ch[k] = v
	}
	return ok(map[string]any{"channel": ch})
}

// listedMessageJSON is a message as conversations.history and .replies
// list it: with its metadata only when include_all_metadata asks for it.
func (s *Server) listedMessageJSON(m *stored, p url.Values) map[string]any {
	j := s.botMessageJSON(m)
	if m.Metadata != nil && (p.Get("include_all_metadata") == "1" || p.Get("include_all_metadata") == "true") {
		j["metadata"] = m.Metadata
	}
	return j
}

// Page sizes of conversations.history: Slack's default and its maximum.
const (
	DefaultHistoryLimit = 100
	MaxHistoryLimit     = 999
)

// conversationsHistory lists a channel's messages (thread replies left
// out, as Slack does), newest first, between oldest and latest (both
// exclusive unless inclusive), at most limit of them. It is Tier 3, as
// conversations.replies, with the same restriction for a commercially
// distributed app outside the Marketplace.
func (s *Server) conversationsHistory(p url.Values, _ *http.Request) apiResult {
	if res, limited := s.tier3LimitedLocked(&s.historyAt); limited {
		return res
	}
	ch := p.Get("channel")
	if !s.knownChannelLocked(ch) {
		return fail("channel_not_found")
	}
	w, bad := s.historyWindow(p, DefaultHistoryLimit, MaxHistoryLimit)
	if bad {
		return fail("invalid_limit")
	}
	limit := w.limit
	var list []*stored
	for _, k := range s.order {
		m := s.msgs[k]
		if m.Channel != ch || m.Deleted || m.Ephemeral || (m.ThreadTS != "" && m.ThreadTS != m.TS) {
			continue
		}
		if !w.holds(m.TS) {
			continue
		}
		list = append(list, m)
	}
	slices.SortFunc(list, func(a, b *stored) int { return compareTS(b.TS, a.TS) })
	more := len(list) > limit
	if more {
		list = list[:limit]
	}
	msgs := make([]map[string]any, 0, len(list))
	for _, m := range list {
		msgs = append(msgs, s.listedMessageJSON(m, p))
	}
	return ok(map[string]any{"messages": msgs, "has_more": more, "pin_count": 0,
		"response_metadata": map[string]any{"next_cursor": ""}})
}

// compareTS orders Slack timestamps numerically ("9.000001" < "10.000000").
func compareTS(a, b string) int {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) - len(bs)
	}
	if c := strings.Compare(as, bs); c != 0 {
		return c
	}
	return strings.Compare(af, bf)
}

func (s *Server) usersInfo(p url.Values, _ *http.Request) apiResult {
	id := p.Get("user")
	if !strings.HasPrefix(id, "U") && !strings.HasPrefix(id, "W") {
		return fail("user_not_found")
	}
	name, real := strings.ToLower(id), "User "+id
	if n, ok := s.opts.UserNames[id]; ok {
		name, real = n, n
	}
	isBot := id == s.opts.BotUserID
	// reference/objects/user-object, as users.info's example shows it.
	return ok(map[string]any{"user": map[string]any{
		"id":                  id,
		"team_id":             s.opts.TeamID,
		"name":                name,
		"deleted":             false,
		"color":               "9f69e7",
		"real_name":           real,
		"tz":                  "UTC",
		"tz_label":            "Coordinated Universal Time",
		"tz_offset":           0,
		"is_admin":            false,
		"is_owner":            false,
		"is_primary_owner":    false,
		"is_restricted":       false,
		"is_ultra_restricted": false,
		"is_bot":              isBot,
		"is_app_user":         false,
		"updated":             s.started.Unix(),
		"has_2fa":             false,
		"profile": map[string]any{
			"real_name": real, "real_name_normalized": real, "display_name": name, "display_name_normalized": name,
			"avatar_hash": "", "status_text": "", "status_emoji": "", "team": s.opts.TeamID,
		},
	}})
}

// groupJSON renders a user group as usergroups.list's example shows it.
func (s *Server) groupJSON(g UserGroup, withUsers bool) map[string]any {
	out := map[string]any{
		"id":           g.ID,
		"team_id":      s.opts.TeamID,
		"is_usergroup": true,
		"is_subteam":   true,
		"name":         g.Name,
		"description":  "",
		"handle":       g.Handle,
		"is_external":  false,
		"date_create":  s.started.Unix(),
		"date_update":  s.started.Unix(),
		"date_delete":  0,
		"auto_type":    nil,
		"created_by":   s.opts.BotUserID,
		"updated_by":   s.opts.BotUserID,
		"deleted_by":   nil,
		"prefs":        map[string]any{"channels": []string{}, "groups": []string{}},
		"user_count":   len(g.Users),
	}
	if withUsers {
		out["users"] = append([]string{}, g.Users...)
	}
	return out
}

func (s *Server) usergroupsList(p url.Values, _ *http.Request) apiResult {
	groups := make([]map[string]any, 0, len(s.groups))
	for _, g := range s.groups {
		groups = append(groups, s.groupJSON(g, p.Get("include_users") == "true"))
	}
	return ok(map[string]any{"usergroups": groups})
}

func (s *Server) usergroupsUsersList(p url.Values, _ *http.Request) apiResult {
	for _, g := range s.groups {
		if g.ID == p.Get("usergroup") {
			return ok(map[string]any{"users": append([]string{}, g.Users...)})
		}
	}
	return fail("no_such_subteam")
}
