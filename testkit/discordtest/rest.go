package discordtest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
)

// Routes, as ServeMux patterns; Request.Route and RateLimit use them.
const (
	RouteGateway                = "GET /api/v9/gateway"
	RouteGatewayBot             = "GET /api/v9/gateway/bot"
	RouteCurrentUser            = "GET /api/v9/users/@me"
	RouteCreateDM               = "POST /api/v9/users/@me/channels"
	RouteGetChannel             = "GET /api/v9/channels/{channel}"
	RouteCreateMessage          = "POST /api/v9/channels/{channel}/messages"
	RouteGetMessage             = "GET /api/v9/channels/{channel}/messages/{message}"
	RouteEditMessage            = "PATCH /api/v9/channels/{channel}/messages/{message}"
	RouteDeleteMessage          = "DELETE /api/v9/channels/{channel}/messages/{message}"
	RouteTyping                 = "POST /api/v9/channels/{channel}/typing"
	RouteStartThreadFromMessage = "POST /api/v9/channels/{channel}/messages/{message}/threads"
	RouteStartThread            = "POST /api/v9/channels/{channel}/threads"
	RouteInteractionCallback    = "POST /api/v9/interactions/{interaction}/{token}/callback"
	RouteFollowup               = "POST /api/v9/webhooks/{app}/{token}"
	RouteGetWebhookMessage      = "GET /api/v9/webhooks/{app}/{token}/messages/{message}"
	RouteEditWebhookMessage     = "PATCH /api/v9/webhooks/{app}/{token}/messages/{message}"
	RouteDeleteWebhookMessage   = "DELETE /api/v9/webhooks/{app}/{token}/messages/{message}"
	RouteGlobalCommands         = "PUT /api/v9/applications/{app}/commands"
	RouteGuildCommands          = "PUT /api/v9/applications/{app}/guilds/{guild}/commands"
	RouteListGlobalCommands     = "GET /api/v9/applications/{app}/commands"
	RouteListGuildCommands      = "GET /api/v9/applications/{app}/guilds/{guild}/commands"
)

// authMode says whether a route needs the bot token. Interaction and webhook routes
// authenticate by the token in the path; a wrong Authorization header still fails.
type authMode int

const (
	authBot authMode = iota
	authPath
)

// call is one REST request being served.
type call struct {
	r    *http.Request
	body []byte
}

func (c *call) path(name string) string { return c.r.PathValue(name) }

// reply is a handler's answer: status and a value to encode as JSON (nil for no body).
type reply struct {
	status int
	body   any
}

type handlerFunc func(c *call) (reply, *apiError)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /gw", s.serveGateway)
	mux.HandleFunc("GET /gw/", s.serveGateway)
	mux.HandleFunc("GET /attachments/{channel}/{id}/{name}", s.serveCDN)
	api := func(route string, mode authMode, h handlerFunc) {
		mux.Handle(route, s.api(route, mode, h))
	}
	api(RouteGateway, authBot, s.handleGateway)
	api(RouteGatewayBot, authBot, s.handleGatewayBot)
	api(RouteCurrentUser, authBot, s.handleCurrentUser)
	api(RouteCreateDM, authBot, s.handleCreateDM)
	api(RouteGetChannel, authBot, s.handleGetChannel)
	api(RouteCreateMessage, authBot, s.handleCreateMessage)
	api(RouteGetMessage, authBot, s.handleGetMessage)
	api(RouteListMessages, authBot, s.handleListMessages)
	api(RouteEditMessage, authBot, s.handleEditMessage)
	api(RouteDeleteMessage, authBot, s.handleDeleteMessage)
	api(RouteTyping, authBot, s.handleTyping)
	api(RouteStartThreadFromMessage, authBot, s.handleStartThreadFromMessage)
	api(RouteStartThread, authBot, s.handleStartThread)
	api(RouteInteractionCallback, authPath, s.handleCallback)
	api(RouteFollowup, authPath, s.handleFollowup)
	api(RouteGetWebhookMessage, authPath, s.handleGetWebhookMessage)
	api(RouteEditWebhookMessage, authPath, s.handleEditWebhookMessage)
	api(RouteDeleteWebhookMessage, authPath, s.handleDeleteWebhookMessage)
	api(RouteGlobalCommands, authBot, s.handlePutCommands)
	api(RouteGuildCommands, authBot, s.handlePutCommands)
	api(RouteListGlobalCommands, authBot, s.handleListCommands)
	api(RouteListGuildCommands, authBot, s.handleListCommands)
	mux.Handle("/", s.api("", authBot, func(c *call) (reply, *apiError) {
		return reply{}, newAPIError(http.StatusNotFound, CodeGeneral, "404: Not Found")
	}))
	return mux
}

// api wraps a handler with what every REST route shares: recording, authorization,
// scripted rate limits, JSON encoding.
func (s *Server) api(route string, mode authMode, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Discord refuses a request over its size limit without reading it.
		if r.ContentLength > MaxUploadRequest {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			w.Write(newAPIError(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "Request entity too large").body())
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxUploadRequest))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		idx := len(s.requests)
		s.requests = append(s.requests, Request{
			Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Route: route,
			Authorization: r.Header.Get("Authorization"), Header: r.Header.Clone(), Body: body, At: s.now(),
		})
		limit, limited := s.takeLimitLocked(route)
		scripted := limited
		if !limited {
			limit, limited = s.editLimitLocked(route, r)
		}
		if !limited {
			limit, limited = s.historyLimitLocked(route, r)
		}
		s.mu.Unlock()

		var (
			rep  reply
			aerr *apiError
		)
		switch auth := r.Header.Get("Authorization"); {
		case (mode == authBot || auth != "") && auth != "Bot "+s.opts.Token:
			aerr = newAPIError(http.StatusUnauthorized, CodeGeneral, "401: Unauthorized")
			if auth != "" && !strings.HasPrefix(auth, "Bot ") {
				aerr.fields = []fieldError{{path: "authorization", code: "DISCORDTEST", message: "bot tokens need the \"Bot \" prefix"}}
			}
		case s.isForeign(r.PathValue("channel")):
			aerr = errMissingAccess()
		case limited:
			s.writeRateLimited(w, route, limit)
			why := "rate limited (edits per channel)"
			switch {
			case scripted:
				why = "rate limited (scripted)"
			case route == RouteListMessages:
				why = "rate limited (history reads per channel)"
			}
			s.finishRequest(idx, http.StatusTooManyRequests, 0, why)
			return
		default:
			rep, aerr = h(&call{r: r, body: body})
		}
		if aerr != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(aerr.status)
			w.Write(aerr.body())
			s.finishRequest(idx, aerr.status, aerr.code, aerr.Error())
			return
		}
		if rep.status == 0 {
			rep.status = http.StatusOK
		}
		if rep.status == http.StatusNoContent || rep.body == nil {
			w.WriteHeader(rep.status)
		} else {
			b, err := json.Marshal(rep.body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				s.finishRequest(idx, http.StatusInternalServerError, 0, err.Error())
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rep.status)
			w.Write(b)
		}
		s.finishRequest(idx, rep.status, 0, "")
	})
}

func (s *Server) finishRequest(idx, status, code int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[idx].Status = status
	s.requests[idx].Code = code
	s.requests[idx].Error = msg
	s.notifyLocked()
}

// RateLimit makes the next l.Count requests on route (a Route constant) answer 429.
// Scripts queue: a second call takes effect after the first is used up.
func (s *Server) RateLimit(route string, l RateLimit) {
	if l.Count <= 0 {
		l.Count = 1
	}
	if l.Bucket == "" {
		l.Bucket = fmt.Sprintf("%08x", fnv32(route))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[route] = append(s.limits[route], l)
}

func (s *Server) takeLimitLocked(route string) (RateLimit, bool) {
	q := s.limits[route]
	if len(q) == 0 {
		return RateLimit{}, false
	}
	l := q[0]
	q[0].Count--
	if q[0].Count <= 0 {
		s.limits[route] = q[1:]
	}
	return l, true
}

func (s *Server) writeRateLimited(w http.ResponseWriter, route string, l RateLimit) {
	secs := l.RetryAfter.Seconds()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(secs))))
	h.Set("X-RateLimit-Limit", "5")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(s.now().Add(l.RetryAfter).UnixMilli())/1000, 'f', 3, 64))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
	h.Set("X-RateLimit-Bucket", l.Bucket)
	scope := "user"
	if l.Global {
		scope = "global"
		h.Set("X-RateLimit-Global", "true")
	}
	h.Set("X-RateLimit-Scope", scope)
	w.WriteHeader(http.StatusTooManyRequests)
	b, _ := json.Marshal(map[string]any{"message": "You are being rate limited.", "retry_after": secs, "global": l.Global})
	w.Write(b)
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

func (s *Server) handleGateway(*call) (reply, *apiError) {
	return reply{body: map[string]string{"url": s.GatewayURL()}}, nil
}

func (s *Server) handleGatewayBot(*call) (reply, *apiError) {
	s.mu.Lock()
	l := s.startLimitLocked()
	s.mu.Unlock()
	return reply{body: map[string]any{
		"url": s.GatewayURL(), "shards": s.opts.Shards,
		"session_start_limit": map[string]int64{"total": int64(l.total), "remaining": int64(l.remaining),
			"reset_after": max(l.resetAt.Sub(s.now()), 0).Milliseconds(), "max_concurrency": 1},
	}}, nil
}

func (s *Server) handleCurrentUser(*call) (reply, *apiError) {
	return reply{body: s.wireSelf()}, nil
}

func errUnknownChannel() *apiError {
	return newAPIError(http.StatusNotFound, CodeUnknownChannel, "Unknown Channel")
}

func errUnknownMessage() *apiError {
	return newAPIError(http.StatusNotFound, CodeUnknownMessage, "Unknown Message")
}

func (s *Server) handleGetChannel(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.path("channel")]
	if !ok {
		return reply{}, errUnknownChannel()
	}
	return reply{body: s.wireChannelLocked(ch)}, nil
}

// handleCreateDM opens (or returns the open) DM channel with a user, as the
// real endpoint does: one DM channel per recipient.
func (s *Server) handleCreateDM(c *call) (reply, *apiError) {
	var body struct {
		RecipientID string `json:"recipient_id"`
	}
	if err := json.Unmarshal(c.body, &body); err != nil || body.RecipientID == "" {
		return reply{}, newAPIError(http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.channels {
		if ch.Type == discordgo.ChannelTypeDM && len(ch.Recipients) == 1 && ch.Recipients[0].ID == body.RecipientID {
			return reply{body: s.wireChannelLocked(ch)}, nil
		}
	}
	ch := &discordgo.Channel{ID: s.newIDLocked(), Type: discordgo.ChannelTypeDM, Recipients: []*discordgo.User{{ID: body.RecipientID}}}
	s.addChannelLocked(ch)
	s.notifyLocked()
	return reply{body: s.wireChannelLocked(ch)}, nil
}

func (s *Server) handleTyping(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := c.path("channel")
	if _, ok := s.channels[id]; !ok {
		return reply{}, errUnknownChannel()
	}
	s.typing[id]++
	s.notifyLocked()
	return reply{status: http.StatusNoContent}, nil
}

// channelMessageFlags are the flags a bot may set on a channel message.
const channelMessageFlags = discordgo.MessageFlagsSuppressEmbeds | discordgo.MessageFlagsSuppressNotifications | discordgo.MessageFlagsIsComponentsV2

func (s *Server) handleCreateMessage(c *call) (reply, *apiError) {
	b, aerr := s.parseMessageCall(c)
	if aerr != nil {
		return reply{}, aerr
	}
	channelID := c.path("channel")
	s.mu.Lock()
	ch, ok := s.channels[channelID]
	if !ok {
		s.mu.Unlock()
		return reply{}, errUnknownChannel()
	}
	var fe formErrors
	b.validate(&fe)
	if b.flags&^channelMessageFlags != 0 {
		fe.add("flags", "MESSAGE_FLAGS_INVALID", "only SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS and IS_COMPONENTS_V2 may be set on a channel message (got %d)", b.flags)
	}
	repliedTo := ""
	if ref := b.reference; ref != nil {
		target, ok := s.messages[ref.MessageID]
		switch {
		case ref.MessageID == "":
			fe.add("message_reference.message_id", "BASE_TYPE_REQUIRED", "This field is required")
		case (!ok || target.Deleted || target.Ephemeral()) && (ref.FailIfNotExists == nil || *ref.FailIfNotExists):
			fe.add("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
		case ok && ref.Type == discordgo.MessageReferenceTypeDefault && target.ChannelID != channelID:
			fe.add("message_reference", "MESSAGE_REFERENCE_INVALID_CHANNEL", "Cannot reply to a message in a different channel")
		case ok && target.Author.ID != s.bot.ID:
			repliedTo = target.Author.ID
		}
	}
	if err := fe.err(); err != nil {
		s.mu.Unlock()
		return reply{}, err
	}
	if !b.hasVisible() {
		s.mu.Unlock()
		return reply{}, newAPIError(http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message")
	}
	nonceKey := s.bot.ID + "/" + b.nonce
	if b.enforceNonce && b.nonce != "" {
		if u, ok := s.nonces[nonceKey]; ok && s.now().Sub(u.at) < NonceWindow {
			// Discord returns the message created with the nonce, and creates none.
			out := s.wireLocked(s.messages[u.message])
			s.mu.Unlock()
			return reply{body: out}, nil
		}
	}
	m := &Message{
		ID: s.newIDLocked(), ChannelID: channelID, GuildID: ch.GuildID, Author: s.bot,
		Content: b.content, Embeds: b.embeds, Components: b.components, rawComponents: b.rawComponents,
		AllowedMentions: b.allowedMentions, Reference: b.reference, Flags: b.flags,
		Source: SourceChannel, Timestamp: s.now(), Attachments: s.storeAttachmentsLocked(channelID, b.files),
	}
	m.Pings = pings(m.Content, m.AllowedMentions, SourceChannel, repliedTo)
	m.Nonce = b.nonce
	s.addBotMessageLocked(m)
	if b.enforceNonce && b.nonce != "" {
		s.nonces[nonceKey] = nonceUse{message: m.ID, at: m.Timestamp}
	}
	out := s.wireLocked(m)
	s.mu.Unlock()
	s.echo(c.r.Context(), "MESSAGE_CREATE", m)
	return reply{body: out}, nil
}

// addBotMessageLocked stores a new message the bot sent.
func (s *Server) addBotMessageLocked(m *Message) {
	s.messages[m.ID] = m
	s.botMessages = append(s.botMessages, m.ID)
	s.countMessageLocked(m.ChannelID, m.ID)
	s.notifyLocked()
}

// countMessageLocked records a new message as its channel's last and counts it in a
// thread's message_count.
func (s *Server) countMessageLocked(channelID, messageID string) {
	ch, ok := s.channels[channelID]
	if !ok {
		return
	}
	ch.LastMessageID = messageID
	if ch.IsThread() {
		ch.MessageCount++
	}
}

func (s *Server) handleGetMessage(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[c.path("message")]
	if !ok || m.Deleted || m.ChannelID != c.path("channel") || m.Ephemeral() {
		return reply{}, errUnknownMessage()
	}
	return reply{body: s.restContentLocked(s.wireLocked(m), m)}, nil
}

func (s *Server) handleEditMessage(c *call) (reply, *apiError) {
	b, aerr := s.parseMessageCall(c)
	if aerr != nil {
		return reply{}, aerr
	}
	s.mu.Lock()
	if _, ok := s.channels[c.path("channel")]; !ok {
		s.mu.Unlock()
		return reply{}, errUnknownChannel()
	}
	m, ok := s.messages[c.path("message")]
	if !ok || m.Deleted || m.ChannelID != c.path("channel") || m.Ephemeral() {
		s.mu.Unlock()
		return reply{}, errUnknownMessage()
	}
	if m.Author.ID != s.bot.ID || m.Source != SourceChannel && m.Source != SourceUser {
		s.mu.Unlock()
		return reply{}, newAPIError(http.StatusForbidden, CodeCannotEditOthers, "Cannot edit a message authored by another user")
	}
	next, aerr := s.applyEditLocked(m, b, true)
	if aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	out := s.wireLocked(next)
	s.mu.Unlock()
	s.echo(c.r.Context(), "MESSAGE_UPDATE", next)
	return reply{body: out}, nil
}

// applyEditLocked validates an edit of m and stores the edited copy. Fields absent from
// the body stay; the result must still show something.
func (s *Server) applyEditLocked(m *Message, b msgBody, allowFlags bool) (*Message, *apiError) {
	next := *m
	if b.has["content"] {
		next.Content = b.content
	}
	if b.has["embeds"] {
		next.Embeds = b.embeds
	}
	if b.has["components"] {
		next.Components, next.rawComponents = b.components, b.rawComponents
	}
	if b.has["allowed_mentions"] {
		next.AllowedMentions = b.allowedMentions
	}
	if len(b.files) > 0 {
		// New files join those the message has.
		next.Attachments = append(append([]Attachment(nil), m.Attachments...), s.storeAttachmentsLocked(m.ChannelID, b.files)...)
	}
	var fe formErrors
	check := b
	// The rules apply to what the message becomes, but allowed_mentions only to what the
	// edit itself sends: Discord parses mentions of the edited content with the edit's.
	check.content = next.Content
	check.embeds = next.Embeds
	if !b.has["content"] && !b.has["embeds"] {
		check.content, check.embeds = "", nil
		validateEmbeds(next.Embeds, &fe)
	}
	check.validate(&fe)
	if b.has["flags"] {
		switch {
		case !allowFlags:
		case b.flags&^channelMessageFlags != 0 || b.flags&discordgo.MessageFlagsIsComponentsV2 != next.Flags&discordgo.MessageFlagsIsComponentsV2:
			fe.add("flags", "MESSAGE_FLAGS_INVALID", "only SUPPRESS_EMBEDS may change in an edit")
		default:
			next.Flags = next.Flags&^discordgo.MessageFlagsSuppressEmbeds | b.flags&discordgo.MessageFlagsSuppressEmbeds
		}
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	if next.Content == "" && len(next.Embeds) == 0 && len(next.Components) == 0 && len(next.Attachments) == 0 {
		return nil, newAPIError(http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message")
	}
	next.Flags &^= discordgo.MessageFlagsLoading
	if b.has["content"] || b.has["allowed_mentions"] {
		next.Pings = pings(next.Content, next.AllowedMentions, next.Source, "")
	}
	next.Edits++
	next.Edited = s.now()
	s.messages[m.ID] = &next
	s.notifyLocked()
	return &next, nil
}

func (s *Server) handleDeleteMessage(c *call) (reply, *apiError) {
	s.mu.Lock()
	m, ok := s.messages[c.path("message")]
	if !ok || m.Deleted || m.ChannelID != c.path("channel") || m.Ephemeral() {
		s.mu.Unlock()
		return reply{}, errUnknownMessage()
	}
	next := s.deleteLocked(m)
	s.mu.Unlock()
	s.echoDelete(c.r.Context(), next)
	return reply{status: http.StatusNoContent}, nil
}

func (s *Server) deleteLocked(m *Message) *Message {
	next := *m
	next.Deleted = true
	s.messages[m.ID] = &next
	s.notifyLocked()
	return &next
}

// threadStart is the body of both thread routes.
type threadStart struct {
	Name                string                `json:"name"`
	AutoArchiveDuration int                   `json:"auto_archive_duration"`
	Type                discordgo.ChannelType `json:"type"`
	Invitable           *bool                 `json:"invitable"`
}

func (t threadStart) validate() *apiError {
	var fe formErrors
	if n := len([]rune(t.Name)); n < 1 || n > 100 {
		fe.add("name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
	switch t.AutoArchiveDuration {
	case 0, 60, 1440, 4320, 10080:
	default:
		fe.add("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}.")
	}
	return fe.err()
}

func (s *Server) handleStartThreadFromMessage(c *call) (reply, *apiError) {
	var body threadStart
	if err := json.Unmarshal(c.body, &body); err != nil {
		return reply{}, errBadJSON(err)
	}
	if aerr := body.validate(); aerr != nil {
		return reply{}, aerr
	}
	s.mu.Lock()
	parent, ok := s.channels[c.path("channel")]
	if !ok {
		s.mu.Unlock()
		return reply{}, errUnknownChannel()
	}
	m, ok := s.messages[c.path("message")]
	if !ok || m.Deleted || m.ChannelID != parent.ID || m.Ephemeral() {
		s.mu.Unlock()
		return reply{}, errUnknownMessage()
	}
	var typ discordgo.ChannelType
	switch parent.Type {
	case discordgo.ChannelTypeGuildText:
		typ = discordgo.ChannelTypeGuildPublicThread
	case discordgo.ChannelTypeGuildNews:
		typ = discordgo.ChannelTypeGuildNewsThread
	default:
		s.mu.Unlock()
		return reply{}, newAPIError(http.StatusBadRequest, CodeWrongChannelType, "Cannot execute action on this channel type")
	}
	if _, exists := s.channels[m.ID]; exists || m.ThreadID != "" {
		s.mu.Unlock()
		return reply{}, newAPIError(http.StatusBadRequest, CodeThreadAlreadyCreated, "A thread has already been created for this message")
	}
	// Discord gives a thread started from a message the message's id.
	th := s.newThreadLocked(m.ID, parent, body, typ)
	next := *m
	next.ThreadID = th.ID
	next.Flags |= discordgo.MessageFlagsHasThread
	s.messages[m.ID] = &next
	out := s.wireChannelLocked(th)
	s.mu.Unlock()
	s.dispatchThreadCreate(c.r.Context(), th.GuildID, out)
	return reply{status: http.StatusCreated, body: out}, nil
}

func (s *Server) handleStartThread(c *call) (reply, *apiError) {
	var body threadStart
	if err := json.Unmarshal(c.body, &body); err != nil {
		return reply{}, errBadJSON(err)
	}
	if aerr := body.validate(); aerr != nil {
		return reply{}, aerr
	}
	if body.Type == 0 {
		body.Type = discordgo.ChannelTypeGuildPrivateThread // Discord's default, for now
	}
	s.mu.Lock()
	parent, ok := s.channels[c.path("channel")]
	if !ok {
		s.mu.Unlock()
		return reply{}, errUnknownChannel()
	}
	if parent.Type != discordgo.ChannelTypeGuildText && parent.Type != discordgo.ChannelTypeGuildNews ||
		body.Type != discordgo.ChannelTypeGuildPublicThread && body.Type != discordgo.ChannelTypeGuildPrivateThread && body.Type != discordgo.ChannelTypeGuildNewsThread {
		s.mu.Unlock()
		return reply{}, newAPIError(http.StatusBadRequest, CodeWrongChannelType, "Cannot execute action on this channel type")
	}
	th := s.newThreadLocked(s.newIDLocked(), parent, body, body.Type)
	out := s.wireChannelLocked(th)
	s.mu.Unlock()
	s.dispatchThreadCreate(c.r.Context(), th.GuildID, out)
	return reply{status: http.StatusCreated, body: out}, nil
}

func (s *Server) newThreadLocked(id string, parent *discordgo.Channel, body threadStart, typ discordgo.ChannelType) *discordgo.Channel {
	archive := body.AutoArchiveDuration
	if archive == 0 {
		archive = 4320
	}
	th := &discordgo.Channel{
		ID: id, GuildID: parent.GuildID, ParentID: parent.ID, Name: body.Name, Type: typ, OwnerID: s.bot.ID, MemberCount: 1,
		ThreadMetadata: &discordgo.ThreadMetadata{AutoArchiveDuration: archive, ArchiveTimestamp: s.now().UTC(), Invitable: body.Invitable == nil || *body.Invitable},
	}
	s.addChannelLocked(th)
	return th
}

func (s *Server) addChannelLocked(ch *discordgo.Channel) {
	if _, ok := s.channels[ch.ID]; !ok {
		s.channelOrder = append(s.channelOrder, ch.ID)
	}
	s.channels[ch.ID] = ch
	s.notifyLocked()
}

// wireMessage is a message as Discord serialises it (resources/message#message-object);
// discordgo.Message cannot be marshalled with its components (they are tagged "-"), and
// its users, members and channels marshal absent arrays as null.
type wireMessage struct {
	ID                  string                    `json:"id"`
	ChannelID           string                    `json:"channel_id"`
	GuildID             string                    `json:"guild_id,omitempty"`
	Type                discordgo.MessageType     `json:"type"`
	Content             string                    `json:"content"`
	Nonce               string                    `json:"nonce,omitempty"`
	Timestamp           string                    `json:"timestamp"`
	EditedTimestamp     *string                   `json:"edited_timestamp"`
	TTS                 bool                      `json:"tts"`
	MentionEveryone     bool                      `json:"mention_everyone"`
	Mentions            []any                     `json:"mentions"`
	MentionRoles        []string                  `json:"mention_roles"`
	Author              map[string]any            `json:"author"`
	Embeds              []*discordgo.MessageEmbed `json:"embeds"`
	Components          json.RawMessage           `json:"components"`
	Attachments         []map[string]any          `json:"attachments"`
	Pinned              bool                      `json:"pinned"`
	MessageReference    map[string]any            `json:"message_reference,omitempty"`
	ReferencedMessage   *wireMessage              `json:"referenced_message,omitempty"`
	Flags               discordgo.MessageFlags    `json:"flags"`
	WebhookID           string                    `json:"webhook_id,omitempty"`
	ApplicationID       string                    `json:"application_id,omitempty"`
	InteractionMetadata map[string]any            `json:"interaction_metadata,omitempty"`
	Thread              map[string]any            `json:"thread,omitempty"`

	// MESSAGE_CREATE and MESSAGE_UPDATE only (events/gateway-events#message-create).
	ChannelType *discordgo.ChannelType `json:"channel_type,omitempty"`
	Member      map[string]any         `json:"member,omitempty"`
}

// wireLocked renders m as the REST API answers it.
// NonceWindow is how long a nonce sent with enforce_nonce keeps a second
// message of the same author from being created: Discord says "the past
// few minutes".
const NonceWindow = 5 * time.Minute

// nonceUse is the message a nonce sent with enforce_nonce created.
type nonceUse struct {
	message string
	at      time.Time
}

func (s *Server) wireLocked(m *Message) *wireMessage {
	w := &wireMessage{
		Nonce: m.Nonce,
		ID:    m.ID, ChannelID: m.ChannelID, GuildID: m.GuildID, Content: m.Content,
		Timestamp: timestamp(m.Timestamp), Author: wireUser(m.Author),
		Embeds: m.Embeds, Components: m.rawComponents, Attachments: wireAttachments(m.Attachments), Flags: m.Flags,
		Mentions: []any{}, MentionRoles: []string{}, WebhookID: m.WebhookID,
	}
	if w.Embeds == nil {
		w.Embeds = []*discordgo.MessageEmbed{}
	}
	if len(w.Components) == 0 {
		w.Components = json.RawMessage("[]")
	}
	if !m.Edited.IsZero() {
		t := timestamp(m.Edited)
		w.EditedTimestamp = &t
	}
	if m.Source == SourceUser {
		w.Mentions = append(w.Mentions, wireUsers(m.Mentions)...)
		for _, r := range roleMention.FindAllStringSubmatch(m.Content, -1) {
			w.MentionRoles = append(w.MentionRoles, r[1])
		}
		w.MentionEveryone = strings.Contains(m.Content, "@everyone") || strings.Contains(m.Content, "@here")
	} else {
		for _, p := range m.Pings {
			switch {
			case p == "everyone" || p == "here":
				w.MentionEveryone = true
			case strings.HasPrefix(p, "role:"):
				w.MentionRoles = append(w.MentionRoles, p[len("role:"):])
			case strings.HasPrefix(p, "user:"):
				w.Mentions = append(w.Mentions, wireUser(s.userLocked(p[len("user:"):])))
			}
		}
	}
	if ref := m.Reference; ref != nil {
		// Discord completes the reference it was given with the message's channel and guild.
		wr := map[string]any{"type": ref.Type, "message_id": ref.MessageID, "channel_id": ref.ChannelID}
		if ref.ChannelID == "" {
			wr["channel_id"] = m.ChannelID
		}
		if g := cmp.Or(ref.GuildID, m.GuildID); g != "" {
			wr["guild_id"] = g
		}
		w.MessageReference = wr
		if ref.Type == discordgo.MessageReferenceTypeDefault {
			w.Type = discordgo.MessageTypeReply
		}
		if target, ok := s.messages[ref.MessageID]; ok && target.ID != m.ID {
			rw := *target
			rw.Reference = nil // one level, as Discord does
			w.ReferencedMessage = s.wireLocked(&rw)
		}
	}
	if m.InteractionID != "" {
		w.WebhookID = s.opts.ApplicationID
		w.ApplicationID = s.opts.ApplicationID
		if in, ok := s.interactions[m.InteractionID]; ok {
			w.InteractionMetadata = map[string]any{
				"id": in.id, "type": in.typ, "user": wireUser(in.user), "authorizing_integration_owners": in.owners(),
			}
			if m.Source == SourceFollowup && in.originalID != "" {
				w.InteractionMetadata["original_response_message_id"] = in.originalID
			}
			if m.Source == SourceInteraction && in.typ == discordgo.InteractionApplicationCommand {
				w.Type = discordgo.MessageTypeChatInputCommand
			}
		}
	}
	if m.ThreadID != "" {
		if th, ok := s.channels[m.ThreadID]; ok {
			w.Thread = s.wireChannelLocked(th)
		}
	}
	return w
}

// eventLocked renders m as MESSAGE_CREATE and MESSAGE_UPDATE carry it: the message with
// channel_type and, in a guild, the author's member (none for webhooks and interaction
// responses, which are webhook messages).
func (s *Server) eventLocked(m *Message) *wireMessage {
	w := s.wireLocked(m)
	typ := discordgo.ChannelTypeGuildText
	if ch, ok := s.channels[m.ChannelID]; ok {
		typ = ch.Type
	} else if m.GuildID == "" {
		typ = discordgo.ChannelTypeDM
	}
	w.ChannelType = &typ
	if m.GuildID != "" && w.WebhookID == "" {
		if m.Member != nil {
			w.Member = wireMember(m.Member, nil)
		} else {
			w.Member = s.botMemberLocked(false)
		}
	}
	return w
}

// userLocked returns the user with id as far as the fake knows it.
func (s *Server) userLocked(id string) discordgo.User {
	if id == s.bot.ID {
		return s.bot
	}
	for _, m := range s.messages {
		if m.Author.ID == id {
			return m.Author
		}
	}
	return discordgo.User{ID: id, Username: "user" + id, Discriminator: "0"}
}

// echoDelete dispatches MESSAGE_DELETE of a non-ephemeral message.
func (s *Server) echoDelete(ctx context.Context, m *Message) {
	if m.Ephemeral() {
		return
	}
	d := map[string]string{"id": m.ID, "channel_id": m.ChannelID}
	if m.GuildID != "" {
		d["guild_id"] = m.GuildID
	}
	s.dispatchEcho(ctx, "MESSAGE_DELETE", m.GuildID, messageIntent(m.GuildID), d)
}
