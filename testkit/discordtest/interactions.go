package discordtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/bwmarrin/discordgo"
)

// Interaction is a user's interaction for SendInteraction.
type Interaction struct {
	// Type defaults from Data: a command or a component. Set it for autocomplete.
	Type discordgo.InteractionType
	// Data is a discordgo.ApplicationCommandInteractionData (commands, autocomplete) or a
	// discordgo.MessageComponentInteractionData (buttons). The fake fills the command id and
	// option types from the registered command, and the component type from the message.
	Data discordgo.InteractionData
	// GuildID is empty in a DM; then the user comes as "user", else as "member".
	GuildID   string
	ChannelID string
	User      discordgo.User
	// Roles are the member's roles in the guild.
	Roles []string
	// MessageID is the bot message carrying the pressed component.
	MessageID string
	// Locale defaults to "en-US".
	Locale string
	// UserInstall sends the interaction through the user's install of the app
	// (authorizing_integration_owners "1"): the command must be registered globally for
	// user installs and the interaction's context. In a guild the bot was not added to
	// (AddGuild), the bot is no member: the channel's REST routes answer 403 50001.
	UserInstall bool
	// PrivateChannel sends it from a group DM (context 2), which only a user install
	// reaches and the bot never joins; GuildID must be empty.
	PrivateChannel bool
	// RawData, when set, is sent as the interaction's data as it is, unchecked: what a
	// client holding a stale command list, or a forged or changed payload, may carry
	// (an unregistered name, an option of another type, an empty object). "null" sends
	// no data at all. Type is then required.
	RawData json.RawMessage
}

// SentInteraction identifies a dispatched interaction.
type SentInteraction struct {
	ID           string
	Token        string
	DispatchedAt time.Time
}

// interaction is the fake's state of one interaction.
type interaction struct {
	id, token          string
	typ                discordgo.InteractionType
	guildID, channelID string
	user               discordgo.User
	dispatchedAt       time.Time
	acked              bool
	ackType            discordgo.InteractionResponseType
	originalID         string // the @original message, once there is one
	context            discordgo.InteractionContextType
	userInstall        bool // authorized by the user's install
	guildInstall       bool // authorized by the app's install in the guild (or a DM with the bot)
	followups          int
	sourceMessageID    string // the message a component was on
	responses          []InteractionResponse
}

// owners is the interaction's authorizing_integration_owners: the app is installed to
// guilds (key "0"), which maps to the guild, or to "0" in a DM with the bot.
func (in *interaction) owners() map[string]string {
	out := map[string]string{}
	if in.guildInstall {
		out["0"] = "0"
		if in.guildID != "" {
			out["0"] = in.guildID
		}
	}
	if in.userInstall {
		out["1"] = in.user.ID
	}
	return out
}

// SendInteraction dispatches INTERACTION_CREATE. A command must be registered (guild or
// global) and its options valid as Discord's client would send them; a component must be on
// a bot message. The 3-second deadline and 15-minute token life run from now by Options.Now.
func (s *Server) SendInteraction(ctx context.Context, in Interaction) (SentInteraction, error) {
	if in.ChannelID == "" || in.User.ID == "" || in.Data == nil && (in.RawData == nil || in.Type == 0) {
		return SentInteraction{}, errors.New("discordtest: send interaction: ChannelID, User.ID and Data (or RawData and Type) are required")
	}
	if in.Type == 0 {
		in.Type = in.Data.Type()
	}
	if in.Locale == "" {
		in.Locale = "en-US"
	}
	if in.User.Discriminator == "" {
		in.User.Discriminator = "0"
	}
	where, err := s.interactionPlace(ctx, in)
	if err != nil {
		return SentInteraction{}, err
	}
	s.mu.Lock()
	var data any
	var source string
	if in.RawData != nil {
		data = in.RawData
	} else {
		data, source, err = s.interactionDataLocked(in)
	}
	if err == nil && in.UserInstall {
		err = s.checkUserInstallLocked(in, where.context)
	}
	if err != nil {
		s.mu.Unlock()
		return SentInteraction{}, fmt.Errorf("discordtest: send interaction: %w", err)
	}
	st := &interaction{
		typ: in.Type, guildID: in.GuildID, channelID: in.ChannelID, user: in.User,
		dispatchedAt: s.now(), sourceMessageID: source,
		context: where.context, userInstall: in.UserInstall, guildInstall: where.botPresent,
	}
	st.id = s.newIDLocked()
	st.token = "fake-interaction-token-" + st.id
	s.interactions[st.id] = st
	s.byToken[st.token] = st
	// interactions/receiving-and-responding#interaction-object
	payload := map[string]any{
		"id": st.id, "application_id": s.opts.ApplicationID, "type": in.Type, "token": st.token, "version": 1,
		"channel_id": in.ChannelID, "channel": s.wireChannelLocked(s.channels[in.ChannelID]),
		"locale": in.Locale, "app_permissions": where.appPermissions, "data": data,
		"entitlements": []any{}, "authorizing_integration_owners": st.owners(),
		"attachment_size_limit": s.opts.AttachmentSizeLimit,
	}
	if string(in.RawData) == "null" {
		delete(payload, "data")
	}
	if in.GuildID != "" {
		u := in.User
		payload["guild_id"] = in.GuildID
		payload["guild"] = map[string]any{"id": in.GuildID, "locale": "en-US", "features": []string{}}
		payload["guild_locale"] = "en-US"
		payload["context"] = where.context
		member := wireMember(&discordgo.Member{Roles: in.Roles, JoinedAt: s.now()}, &u)
		member["permissions"] = everyonePermissions
		payload["member"] = member
	} else {
		payload["context"] = where.context
		payload["user"] = wireUser(in.User)
	}
	if source != "" {
		payload["message"] = s.wireLocked(s.messages[source])
	}
	sent := SentInteraction{ID: st.id, Token: st.token, DispatchedAt: st.dispatchedAt}
	s.notifyLocked()
	s.mu.Unlock()
	return sent, s.dispatch(ctx, "INTERACTION_CREATE", in.GuildID, 0, func(discordgo.Intent) any { return payload })
}

// interactionDataLocked checks in.Data as Discord's client would and completes it.
func (s *Server) interactionDataLocked(in Interaction) (data any, sourceMessageID string, err error) {
	switch d := in.Data.(type) {
	case discordgo.ApplicationCommandInteractionData:
		if in.Type != discordgo.InteractionApplicationCommand && in.Type != discordgo.InteractionApplicationCommandAutocomplete {
			return nil, "", fmt.Errorf("command data with interaction type %v", in.Type)
		}
		cmd := s.findCommandLocked(in.GuildID, d.Name)
		if cmd == nil {
			return nil, "", fmt.Errorf("command %q is not registered for guild %q or globally", d.Name, in.GuildID)
		}
		d.ID = cmd.ID
		d.CommandType = cmd.Type
		if d.CommandType == 0 {
			d.CommandType = discordgo.ChatApplicationCommand
		}
		opts, err := completeOptions(d.Options, cmd.Options, in.Type == discordgo.InteractionApplicationCommandAutocomplete, "")
		if err != nil {
			return nil, "", fmt.Errorf("/%s: %w", d.Name, err)
		}
		if in.Type == discordgo.InteractionApplicationCommandAutocomplete && countFocused(opts) != 1 {
			return nil, "", fmt.Errorf("/%s: autocomplete needs exactly one focused option", d.Name)
		}
		// interactions/receiving-and-responding#interaction-object-application-command-data-structure:
		// options only when there are some, resolved only for users, roles, channels and
		// attachments (the fake resolves none), guild_id for a guild command.
		out := map[string]any{"id": d.ID, "name": d.Name, "type": d.CommandType}
		if len(opts) > 0 {
			out["options"] = opts
		}
		if cmd.GuildID != "" {
			out["guild_id"] = cmd.GuildID
		}
		return out, "", nil
	case discordgo.MessageComponentInteractionData:
		if in.Type != discordgo.InteractionMessageComponent {
			return nil, "", fmt.Errorf("component data with interaction type %v", in.Type)
		}
		m, ok := s.messages[in.MessageID]
		if !ok || m.Deleted {
			return nil, "", fmt.Errorf("component on unknown message %q", in.MessageID)
		}
		if m.ChannelID != in.ChannelID {
			return nil, "", fmt.Errorf("message %s is in channel %s, not %s", m.ID, m.ChannelID, in.ChannelID)
		}
		found := false
		for _, b := range m.Buttons() {
			if b.CustomID == d.CustomID && d.CustomID != "" && !b.Disabled {
				found = true
			}
		}
		if !found {
			return nil, "", fmt.Errorf("message %s has no enabled button with custom_id %q", m.ID, d.CustomID)
		}
		// A button's data is its custom_id and type; values and resolved are for select menus.
		return map[string]any{"custom_id": d.CustomID, "component_type": discordgo.ButtonComponent}, m.ID, nil
	default:
		return nil, "", fmt.Errorf("unsupported interaction data %T", in.Data)
	}
}

func countFocused(opts []*discordgo.ApplicationCommandInteractionDataOption) int {
	n := 0
	for _, o := range opts {
		if o.Focused {
			n++
		}
		n += countFocused(o.Options)
	}
	return n
}

// completeOptions checks given options against their definitions and returns copies with
// types filled in. Autocomplete sends partial input: no required or choice checks, values
// as typed strings.
func completeOptions(given []*discordgo.ApplicationCommandInteractionDataOption, defs []*discordgo.ApplicationCommandOption, autocomplete bool, path string) ([]*discordgo.ApplicationCommandInteractionDataOption, error) {
	out := make([]*discordgo.ApplicationCommandInteractionDataOption, 0, len(given))
	seen := map[string]bool{}
	for _, g := range given {
		i := slices.IndexFunc(defs, func(d *discordgo.ApplicationCommandOption) bool { return d.Name == g.Name })
		if i < 0 {
			return nil, fmt.Errorf("unknown option %s%s", path, g.Name)
		}
		if seen[g.Name] {
			return nil, fmt.Errorf("option %s%s given twice", path, g.Name)
		}
		seen[g.Name] = true
		def := defs[i]
		o := *g
		if o.Type == 0 {
			o.Type = def.Type
		}
		if o.Type != def.Type {
			return nil, fmt.Errorf("option %s%s has type %v, registered as %v", path, g.Name, o.Type, def.Type)
		}
		switch def.Type {
		case discordgo.ApplicationCommandOptionSubCommand, discordgo.ApplicationCommandOptionSubCommandGroup:
			if len(given) != 1 {
				return nil, fmt.Errorf("a subcommand must be the only option at %s", path)
			}
			sub, err := completeOptions(g.Options, def.Options, autocomplete, path+g.Name+" ")
			if err != nil {
				return nil, err
			}
			o.Options = sub
		default:
			if o.Focused && !autocomplete {
				return nil, fmt.Errorf("option %s%s is focused outside autocomplete", path, g.Name)
			}
			if o.Focused && !def.Autocomplete {
				return nil, fmt.Errorf("option %s%s is focused but not registered with autocomplete", path, g.Name)
			}
			if !autocomplete {
				if err := checkValue(def, o.Value); err != nil {
					return nil, fmt.Errorf("option %s%s: %w", path, g.Name, err)
				}
			}
		}
		out = append(out, &o)
	}
	if len(given) == 0 && len(defs) > 0 && isSubcommand(defs[0]) {
		return nil, fmt.Errorf("a subcommand is required at %q", path)
	}
	if !autocomplete {
		for _, d := range defs {
			if d.Required && !seen[d.Name] {
				return nil, fmt.Errorf("required option %s%s missing", path, d.Name)
			}
		}
	}
	return out, nil
}

func isSubcommand(d *discordgo.ApplicationCommandOption) bool {
	return d.Type == discordgo.ApplicationCommandOptionSubCommand || d.Type == discordgo.ApplicationCommandOptionSubCommandGroup
}

// checkValue applies what Discord's client enforces on a submitted option value.
func checkValue(def *discordgo.ApplicationCommandOption, v any) error {
	switch def.Type {
	case discordgo.ApplicationCommandOptionString:
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("value %v is not a string", v)
		}
		if def.MinLength != nil && len([]rune(s)) < *def.MinLength || def.MaxLength > 0 && len([]rune(s)) > def.MaxLength {
			return fmt.Errorf("value %q outside the registered length", s)
		}
	case discordgo.ApplicationCommandOptionInteger, discordgo.ApplicationCommandOptionNumber:
		f, ok := v.(float64)
		if !ok {
			return fmt.Errorf("value %v is not a number (use float64, as JSON decodes)", v)
		}
		if def.MinValue != nil && f < *def.MinValue || def.MaxValue != 0 && f > def.MaxValue {
			return fmt.Errorf("value %v outside the registered range", f)
		}
	case discordgo.ApplicationCommandOptionBoolean:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("value %v is not a boolean", v)
		}
	}
	if len(def.Choices) > 0 && !slices.ContainsFunc(def.Choices, func(c *discordgo.ApplicationCommandOptionChoice) bool { return c.Value == v }) {
		return fmt.Errorf("value %v is not one of the registered choices", v)
	}
	return nil
}

// InteractionResponses returns every callback received for an interaction, refused ones
// included (with their Code).
func (s *Server) InteractionResponses(id string) []InteractionResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.interactions[id]; ok {
		return append([]InteractionResponse(nil), st.responses...)
	}
	return nil
}

// WaitInteractionResponse waits for the accepted callback of an interaction.
func (s *Server) WaitInteractionResponse(ctx context.Context, id string) (InteractionResponse, error) {
	return waitFor(ctx, s, "interaction response", func() (InteractionResponse, bool) {
		if st, ok := s.interactions[id]; ok {
			for _, r := range st.responses {
				if r.Code == 0 {
					return r, true
				}
			}
		}
		return InteractionResponse{}, false
	})
}

// OriginalResponse returns the @original message of an interaction, if it has one.
func (s *Server) OriginalResponse(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.interactions[id]
	if !ok || st.originalID == "" {
		return Message{}, false
	}
	return *s.messages[st.originalID], true
}

// callbackFlags are the flags each callback type may carry.
var callbackFlags = map[discordgo.InteractionResponseType]discordgo.MessageFlags{
	discordgo.InteractionResponseChannelMessageWithSource:         discordgo.MessageFlagsEphemeral | channelMessageFlags,
	discordgo.InteractionResponseDeferredChannelMessageWithSource: discordgo.MessageFlagsEphemeral,
	discordgo.InteractionResponseUpdateMessage:                    discordgo.MessageFlagsSuppressEmbeds | discordgo.MessageFlagsIsComponentsV2,
}

// callbackAllowed says which callback types fit which interaction types.
func callbackAllowed(it discordgo.InteractionType, rt discordgo.InteractionResponseType) bool {
	switch rt {
	case discordgo.InteractionResponseChannelMessageWithSource, discordgo.InteractionResponseDeferredChannelMessageWithSource:
		return it == discordgo.InteractionApplicationCommand || it == discordgo.InteractionMessageComponent || it == discordgo.InteractionModalSubmit
	case discordgo.InteractionResponseDeferredMessageUpdate, discordgo.InteractionResponseUpdateMessage:
		return it == discordgo.InteractionMessageComponent || it == discordgo.InteractionModalSubmit
	case discordgo.InteractionApplicationCommandAutocompleteResult:
		return it == discordgo.InteractionApplicationCommandAutocomplete
	case discordgo.InteractionResponseModal:
		return it == discordgo.InteractionApplicationCommand || it == discordgo.InteractionMessageComponent
	}
	return false
}

func (s *Server) handleCallback(c *call) (reply, *apiError) {
	var body struct {
		Type discordgo.InteractionResponseType `json:"type"`
		Data json.RawMessage                   `json:"data"`
	}
	if err := json.Unmarshal(c.body, &body); err != nil {
		return reply{}, errBadJSON(err)
	}
	b, aerr := parseMessageBody(body.Data)
	if aerr != nil {
		return reply{}, aerr
	}
	s.mu.Lock()
	st, ok := s.interactions[c.path("interaction")]
	if !ok || st.token != c.path("token") {
		s.mu.Unlock()
		return reply{}, newAPIError(http.StatusNotFound, CodeUnknownInteraction, "Unknown interaction")
	}
	resp := InteractionResponse{InteractionID: st.id, Type: body.Type, Body: c.body, At: s.now(), Late: s.now().Sub(st.dispatchedAt)}
	if len(body.Data) > 0 && string(body.Data) != "null" {
		var d discordgo.InteractionResponseData
		if json.Unmarshal(stripComponents(body.Data), &d) == nil {
			d.Components = b.components
			resp.Data = &d
		}
	}
	created, edited, aerr := s.acceptCallbackLocked(st, body.Type, b, resp.Late)
	if aerr != nil {
		resp.Code = aerr.code
	}
	st.responses = append(st.responses, resp)
	s.notifyLocked()
	s.mu.Unlock()
	if aerr != nil {
		return reply{}, aerr
	}
	if created != nil {
		s.echo(c.r.Context(), "MESSAGE_CREATE", created)
	}
	if edited != nil {
		s.echo(c.r.Context(), "MESSAGE_UPDATE", edited)
	}
	return reply{status: http.StatusNoContent}, nil
}

// stripComponents removes "components" so the rest decodes into discordgo types, whose
// component interfaces encoding/json cannot fill.
func stripComponents(raw json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	delete(m, "components")
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// acceptCallbackLocked applies Discord's rules to a first response and creates or edits
// the message it implies.
func (s *Server) acceptCallbackLocked(st *interaction, rt discordgo.InteractionResponseType, b msgBody, late time.Duration) (created, edited *Message, aerr *apiError) {
	if st.acked {
		return nil, nil, newAPIError(http.StatusBadRequest, CodeAlreadyAcknowledged, "Interaction has already been acknowledged.")
	}
	if late > InteractionDeadline {
		return nil, nil, newAPIError(http.StatusNotFound, CodeUnknownInteraction, "Unknown interaction")
	}
	var fe formErrors
	if !callbackAllowed(st.typ, rt) {
		fe.add("type", "INTERACTION_RESPONSE_TYPE_INVALID", "response type %d is not valid for interaction type %d", rt, st.typ)
		return nil, nil, fe.err()
	}
	if allowed, ok := callbackFlags[rt]; ok && b.flags&^allowed != 0 {
		fe.add("data.flags", "MESSAGE_FLAGS_INVALID", "flags %d not allowed for response type %d", b.flags, rt)
	}
	switch rt {
	case discordgo.InteractionResponseChannelMessageWithSource, discordgo.InteractionResponseUpdateMessage:
		b.validate(&fe)
		if err := fe.err(); err != nil {
			return nil, nil, prefixData(err)
		}
		if rt == discordgo.InteractionResponseChannelMessageWithSource && !b.hasVisible() {
			return nil, nil, newAPIError(http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message")
		}
	case discordgo.InteractionApplicationCommandAutocompleteResult:
		if len(b.choices) > MaxAutocompleteOpt {
			fe.add("data.choices", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxAutocompleteOpt)
		}
		for i, ch := range b.choices {
			validateChoice(&fe, fmt.Sprintf("data.choices.%d", i), ch, discordgo.ApplicationCommandOptionString)
		}
	}
	if err := fe.err(); err != nil {
		return nil, nil, err
	}
	st.acked, st.ackType = true, rt
	switch rt {
	case discordgo.InteractionResponseChannelMessageWithSource, discordgo.InteractionResponseDeferredChannelMessageWithSource:
		m := &Message{
			ID: s.newIDLocked(), ChannelID: st.channelID, GuildID: st.guildID, Author: s.bot,
			Source: SourceInteraction, InteractionID: st.id, Timestamp: s.now(),
		}
		if rt == discordgo.InteractionResponseChannelMessageWithSource {
			m.Content, m.Embeds, m.Components, m.rawComponents = b.content, b.embeds, b.components, b.rawComponents
			m.AllowedMentions, m.Flags = b.allowedMentions, b.flags
			m.Pings = pings(m.Content, m.AllowedMentions, SourceInteraction, "")
		} else {
			m.Flags = b.flags&discordgo.MessageFlagsEphemeral | discordgo.MessageFlagsLoading
		}
		st.originalID = m.ID
		s.addBotMessageLocked(m)
		return m, nil, nil
	case discordgo.InteractionResponseDeferredMessageUpdate:
		st.originalID = st.sourceMessageID
	case discordgo.InteractionResponseUpdateMessage:
		st.originalID = st.sourceMessageID
		src := s.messages[st.sourceMessageID]
		b.flags = 0
		delete(b.has, "flags")
		next, aerr := s.applyEditLocked(src, b, false)
		if aerr != nil {
			st.acked = false
			return nil, nil, prefixData(aerr)
		}
		return nil, next, nil
	}
	return nil, nil, nil
}

// prefixData moves field errors under "data", where the callback body has them.
func prefixData(e *apiError) *apiError {
	for i := range e.fields {
		e.fields[i].path = "data." + e.fields[i].path
	}
	return e
}

// webhookInteractionLocked finds the interaction of a webhook route and checks its token.
func (s *Server) webhookInteractionLocked(c *call) (*interaction, *apiError) {
	if c.path("app") != s.opts.ApplicationID {
		return nil, newAPIError(http.StatusNotFound, CodeUnknownWebhook, "Unknown Webhook")
	}
	st, ok := s.byToken[c.path("token")]
	if !ok || s.now().Sub(st.dispatchedAt) > InteractionTokenTTL {
		return nil, newAPIError(http.StatusUnauthorized, CodeInvalidWebhookToken, "Invalid Webhook Token")
	}
	return st, nil
}

// webhookMessageLocked resolves "@original" or a follow-up id of an interaction.
func (s *Server) webhookMessageLocked(st *interaction, id string) (*Message, *apiError) {
	if id == "@original" {
		id = st.originalID
	}
	m, ok := s.messages[id]
	if !ok || m.Deleted {
		return nil, errUnknownMessage()
	}
	if m.ID != st.originalID && (m.InteractionID != st.id || m.Source != SourceFollowup) {
		return nil, errUnknownMessage()
	}
	return m, nil
}

// followupFlags are the flags a follow-up may set.
const followupFlags = discordgo.MessageFlagsEphemeral | discordgo.MessageFlagsSuppressEmbeds | discordgo.MessageFlagsSuppressNotifications | discordgo.MessageFlagsIsComponentsV2

func (s *Server) handleFollowup(c *call) (reply, *apiError) {
	b, aerr := s.parseMessageCall(c)
	if aerr != nil {
		return reply{}, aerr
	}
	s.mu.Lock()
	st, aerr := s.webhookInteractionLocked(c)
	if aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	if !st.acked || st.ackType == discordgo.InteractionApplicationCommandAutocompleteResult {
		s.mu.Unlock()
		return reply{}, newAPIError(http.StatusNotFound, CodeUnknownWebhook, "Unknown Webhook")
	}
	var fe formErrors
	b.validate(&fe)
	if b.flags&^followupFlags != 0 {
		fe.add("flags", "MESSAGE_FLAGS_INVALID", "flags %d not allowed on a follow-up", b.flags)
	}
	if err := fe.err(); err != nil {
		s.mu.Unlock()
		return reply{}, err
	}
	if !b.hasVisible() {
		s.mu.Unlock()
		return reply{}, newAPIError(http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message")
	}
	// The first follow-up after a deferred response fills the "thinking" message instead of
	// posting a new one, keeping the ephemeral flag chosen when deferring.
	if orig, ok := s.messages[st.originalID]; ok && st.ackType == discordgo.InteractionResponseDeferredChannelMessageWithSource && orig.Loading() && !orig.Deleted {
		delete(b.has, "flags")
		next, aerr := s.applyEditLocked(orig, b, false)
		if aerr != nil {
			s.mu.Unlock()
			return reply{}, aerr
		}
		out := s.wireLocked(next)
		s.mu.Unlock()
		s.echo(c.r.Context(), "MESSAGE_UPDATE", next)
		return reply{body: out}, nil
	}
	if !st.guildInstall && st.followups >= MaxUserInstallFollowups {
		s.mu.Unlock()
		return reply{}, errTooManyFollowups()
	}
	st.followups++
	m := &Message{
		ID: s.newIDLocked(), ChannelID: st.channelID, GuildID: st.guildID, Author: s.bot,
		Content: b.content, Embeds: b.embeds, Components: b.components, rawComponents: b.rawComponents,
		AllowedMentions: b.allowedMentions, Flags: b.flags, Source: SourceFollowup, InteractionID: st.id, Timestamp: s.now(),
		Attachments: s.storeAttachmentsLocked(st.channelID, b.files),
	}
	m.Pings = pings(m.Content, m.AllowedMentions, SourceFollowup, "")
	s.addBotMessageLocked(m)
	out := s.wireLocked(m)
	s.mu.Unlock()
	s.echo(c.r.Context(), "MESSAGE_CREATE", m)
	return reply{body: out}, nil
}

func (s *Server) handleGetWebhookMessage(c *call) (reply, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, aerr := s.webhookInteractionLocked(c)
	if aerr != nil {
		return reply{}, aerr
	}
	m, aerr := s.webhookMessageLocked(st, c.path("message"))
	if aerr != nil {
		return reply{}, aerr
	}
	return reply{body: s.wireLocked(m)}, nil
}

func (s *Server) handleEditWebhookMessage(c *call) (reply, *apiError) {
	b, aerr := s.parseMessageCall(c)
	if aerr != nil {
		return reply{}, aerr
	}
	s.mu.Lock()
	st, aerr := s.webhookInteractionLocked(c)
	if aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	m, aerr := s.webhookMessageLocked(st, c.path("message"))
	if aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	delete(b.has, "flags")
	next, aerr := s.applyEditLocked(m, b, false)
	if aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	out := s.wireLocked(next)
	s.mu.Unlock()
	s.echo(c.r.Context(), "MESSAGE_UPDATE", next)
	return reply{body: out}, nil
}

func (s *Server) handleDeleteWebhookMessage(c *call) (reply, *apiError) {
	s.mu.Lock()
	st, aerr := s.webhookInteractionLocked(c)
	if aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	m, aerr := s.webhookMessageLocked(st, c.path("message"))
	if aerr != nil {
		s.mu.Unlock()
		return reply{}, aerr
	}
	next := s.deleteLocked(m)
	s.mu.Unlock()
	s.echoDelete(c.r.Context(), next)
	return reply{status: http.StatusNoContent}, nil
}
