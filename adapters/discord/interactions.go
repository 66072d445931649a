package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// Discord error codes that mean an interaction token can no longer be used.
const (
	codeUnknownWebhook     = 10015
	codeUnknownInteraction = 10062
	codeInvalidWebhookTok  = 50027
)

const maxAutocomplete = 25

// onInteraction translates an INTERACTION_CREATE on the gateway's read
// loop. Commands and button presses go to the core, which records them and
// then acknowledges them (Ack, the deferred response); autocomplete, which
// is no event of the core's and cannot be deferred, is answered on a
// goroutine of the adapter's.
func (a *Adapter) onInteraction(ctx context.Context, ic *discordgo.InteractionCreate) {
	defer a.recoverEvent("INTERACTION_CREATE")
	if ic == nil || ic.Interaction == nil || ic.ID == "" || ic.Token == "" {
		return
	}
	inter := *ic.Interaction // the event's copy; the adapter only reads it
	if inter.AppID == "" {
		inter.AppID = a.cfg.ApplicationID
	}
	i := &inter
	var ids idCheck
	ids.need("interaction id", i.ID)
	ids.need("application id", i.AppID)
	ids.need("channel id", i.ChannelID)
	ids.may("guild id", i.GuildID)
	u := interactionUser(i)
	if u == nil {
		ids.need("user id", "")
	} else {
		ids.need("user id", u.ID)
	}
	if i.Message != nil {
		ids.need("message id", i.Message.ID)
	}
	if ids.err == nil && !validToken(i.Token) {
		ids.err = errors.New("interaction token is not a Discord token")
	}
	if ids.err != nil {
		a.refuse("INTERACTION_CREATE", ids.err)
		return
	}
	switch i.Type {
	case discordgo.InteractionApplicationCommand:
		a.onCommand(ctx, i)
	case discordgo.InteractionApplicationCommandAutocomplete:
		if !a.spawnLimited(func() { a.onAutocomplete(ctx, i) }) {
			a.log.Debug("autocomplete skipped: too many at once", zap.String("interaction", i.ID))
		}
	case discordgo.InteractionMessageComponent:
		a.onComponent(i)
	}
}

// interactionUser is the member's user in a guild, the user in a DM.
func interactionUser(i *discordgo.Interaction) *discordgo.User {
	if i.Member != nil && i.Member.User != nil {
		return i.Member.User
	}
	return i.User
}

func (a *Adapter) onCommand(ctx context.Context, i *discordgo.Interaction) {
	data, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	if !ok {
		a.refuseInteraction(ctx, i, errNoData)
		return
	}
	ev, err := commandEvent(data)
	if err != nil {
		a.refuseInteraction(ctx, i, err)
		return
	}
	a.receiveInteraction(i, ev, false)
}

// Sentences a refused command is answered with.
const (
	msgNotOffered = "This command is not offered any more; the bridge's commands are `/flow` and `/agent`."
	msgOptionType = "The option `%s` must be %s, but Discord sent %s. Nothing was run; try the command again from Discord's list."
)

// errNoData is a command interaction without its data: Discord says which
// command through it, so there is nothing to run.
var errNoData = errors.New("command interaction without data")

// unknownCommandError is a command the bridge does not register (Discord's
// clients can hold on to an old list for a while).
type unknownCommandError struct{ name string }

func (e *unknownCommandError) Error() string {
	return fmt.Sprintf("command %q is not registered", e.name)
}

// optionTypeError is an option whose value is not of the type the bridge
// registered it with.
type optionTypeError struct {
	name string
	got  any
	typ  discordgo.ApplicationCommandOptionType
}

func (e *optionTypeError) Error() string {
	return fmt.Sprintf("option %q: got %s (type %d), want text", e.name, kindOf(e.got), e.typ)
}

// kindOf names the JSON kind of a decoded value, for the user.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "text"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// refuseInteraction answers a command the bridge cannot run with an
// ephemeral error, so that it does not hang on "thinking…", and logs why.
func (a *Adapter) refuseInteraction(ctx context.Context, i *discordgo.Interaction, err error) {
	a.log.Info("interaction refused", zap.String("interaction", i.ID), zap.Error(err))
	text := msgNotOffered
	if oe, ok := errors.AsType[*optionTypeError](err); ok {
		text = fmt.Sprintf(msgOptionType, oe.name, "text", kindOf(oe.got))
	}
	answer := func() {
		err := a.session.InteractionRespond(i, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()},
		}, discordgo.WithContext(ctx))
		if err != nil {
			a.log.Warn("refused interaction not answered", zap.String("interaction", i.ID), zap.Error(err))
		}
	}
	if !a.spawnLimited(answer) {
		a.log.Warn("refused interaction not answered: too many answers at once", zap.String("interaction", i.ID))
	}
}

// commandEvent turns a slash command into the core's structured command:
// /flow NAME with its options becomes Flow and Params, with nothing to parse
// again; /agent SUB becomes Command "agent" with Text "SUB ARGS". Every
// option the bridge registers is text: one of another type is refused
// rather than run with its value printed as text.
func commandEvent(data discordgo.ApplicationCommandInteractionData) (bridge.Event, error) {
	var ev bridge.Event
	var sub *discordgo.ApplicationCommandInteractionDataOption
	if len(data.Options) > 0 && data.Options[0] != nil && data.Options[0].Type == discordgo.ApplicationCommandOptionSubCommand {
		sub = data.Options[0]
	}
	var values []string
	if sub != nil {
		for _, o := range sub.Options {
			if o == nil {
				continue
			}
			v, ok := o.Value.(string)
			if !ok || o.Type != discordgo.ApplicationCommandOptionString {
				return ev, &optionTypeError{name: o.Name, got: o.Value, typ: o.Type}
			}
			values = append(values, o.Name, v)
		}
	}
	ev.Kind = bridge.KindCommand
	switch data.Name {
	case bridge.CommandFlow:
		ev.Command = bridge.CommandFlow
		if sub == nil {
			ev.Text = "help"
			return ev, nil
		}
		ev.Flow = sub.Name
		ev.Params = make(map[string]string, len(values)/2)
		for i := 0; i < len(values); i += 2 {
			ev.Params[values[i]] = values[i+1]
		}
		return ev, nil
	case bridge.CommandAgent:
		ev.Command = bridge.CommandAgent
		if sub == nil {
			ev.Text = agentHelp
			return ev, nil
		}
		words := []string{sub.Name}
		for i := 1; i < len(values); i += 2 {
			words = append(words, bridge.QuoteArg(values[i]))
		}
		ev.Text = strings.Join(words, " ")
		return ev, nil
	}
	return ev, &unknownCommandError{data.Name}
}

// optionValue reads an option as text; Discord sends numbers for numeric
// options, and raw typed text during autocomplete.
func optionValue(o *discordgo.ApplicationCommandInteractionDataOption) string {
	switch v := o.Value.(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func (a *Adapter) onComponent(i *discordgo.Interaction) {
	data, ok := i.Data.(discordgo.MessageComponentInteractionData)
	if !ok {
		return
	}
	ephemeral := i.Message != nil && i.Message.Flags&discordgo.MessageFlagsEphemeral != 0
	a.receiveInteraction(i, bridge.Event{Kind: bridge.KindAction, Action: parseCustomID(data.CustomID)}, ephemeral)
}

// receiveInteraction completes an interaction's event (where it happened,
// who asked, how to answer) and hands it to the core. Ephemeral is the
// visibility of the message a button is on; a command's comes from the core.
func (a *Adapter) receiveInteraction(i *discordgo.Interaction, ev bridge.Event, ephemeral bool) {
	ev.Platform = Platform
	ev.Key = interactionEventKey(i.ID)
	ev.Order = snowflakeOrder(i.ID)
	ev.Team = i.GuildID
	ev.User = userOf(i.User, i.Member)
	ev.MaxFlowTimeout = maxFlowTimeout
	ev.Channel = i.ChannelID
	rt := route{Channel: i.ChannelID, Guild: i.GuildID, Interaction: &interactionRoute{
		ID: i.ID, AppID: i.AppID, Token: i.Token, User: ev.User.ID,
		Component: i.Type == discordgo.InteractionMessageComponent, Ephemeral: ephemeral,
		// The answer to Run or Cancel takes the question's place; Stop's
		// does not: its button is on the run's working message, which the
		// run rewrites itself, and the presser is answered beside it.
		ReplaceOnSend: ev.Kind == bridge.KindAction && (ev.Action.ID == bridge.ActionConfirm || ev.Action.ID == bridge.ActionCancel),
		WebhookOnly:   botAbsent(i),
	}}
	if i.Message != nil {
		rt.Message = i.Message.ID
		rt.Interaction.Source = i.Message.Content
		if ev.Kind == bridge.KindAction {
			ev.Action.Message = i.ChannelID + "/" + i.Message.ID
			if !ephemeral {
				ev.Action.Link = messageLink(i.GuildID, i.ChannelID, i.Message.ID)
			}
		}
	}
	if i.GuildID == "" {
		ev.Conversation = dmKey(i.ChannelID)
	} else if rt.Interaction.WebhookOnly {
		// The bot cannot look the channel up: a thread here is its own conversation.
		ev.Conversation = channelKey(i.GuildID, i.ChannelID)
	} else if info, known := a.knownChannel(i.ChannelID); !known {
		rt.Lookup = true
		ev.Conversation = channelKey(i.GuildID, i.ChannelID)
	} else if info.thread {
		a.threadPlace(&ev, i.GuildID, i.ChannelID, info)
	} else {
		ev.Conversation = channelKey(i.GuildID, i.ChannelID)
	}
	if !rt.Interaction.Component {
		rt.Interaction.Ephemeral = a.core.Ephemeral(ev)
	}
	if err := a.complete(&ev, rt); err != nil {
		a.refuse("INTERACTION_CREATE", err)
		return
	}
	a.core.Receive(ev) // the core acknowledges it (Acknowledge) once it is recorded
}

// prepareInteraction places an interaction from a channel the gateway state
// did not know: a thread's conversation and its parent for access rules.
func (a *Adapter) prepareInteraction(ctx context.Context, ev *bridge.Event, rt route) bool {
	if info := a.lookupChannel(ctx, rt.Channel); info.thread {
		a.threadPlace(ev, rt.Guild, rt.Channel, info)
	}
	return true
}

// deferral is an interaction's acknowledgement: a deferred response (type 5)
// for a command, ephemeral as the core decided, so that the answer replaces
// it; a deferred update (type 6) for a button press. Discord drops an
// interaction not acknowledged within 3 seconds.
func (a *Adapter) deferral(ctx context.Context, rt route) error {
	i := rt.interaction()
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}
	if !rt.Interaction.Component {
		resp = &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{AllowedMentions: noMentions()},
		}
		if rt.Interaction.Ephemeral {
			resp.Data.Flags = discordgo.MessageFlagsEphemeral
		}
	}
	if err := a.session.InteractionRespond(i, resp, discordgo.WithContext(ctx)); err != nil {
		return fmt.Errorf("acknowledge interaction %s: %w", i.ID, err)
	}
	return nil
}

// interaction is what discordgo's interaction calls read of one: its ID,
// application and token, and where it happened.
func (rt route) interaction() *discordgo.Interaction {
	in := rt.Interaction
	i := &discordgo.Interaction{ID: in.ID, AppID: in.AppID, Token: in.Token, ChannelID: rt.Channel, GuildID: rt.Guild, Type: discordgo.InteractionApplicationCommand}
	if in.Component {
		i.Type = discordgo.InteractionMessageComponent
		flags := discordgo.MessageFlags(0)
		if in.Ephemeral {
			flags = discordgo.MessageFlagsEphemeral
		}
		i.Message = &discordgo.Message{ID: rt.Message, ChannelID: rt.Channel, Content: in.Source, Flags: flags}
	}
	return i
}

func (a *Adapter) onAutocomplete(ctx context.Context, i *discordgo.Interaction) {
	data, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	if !ok {
		return
	}
	typed, values := a.autocompleteValues(data)
	choices := []*discordgo.ApplicationCommandOptionChoice{}
	for _, v := range filterPrefix(values, typed, maxAutocomplete) {
		choices = append(choices, choice(v))
	}
	// discordgo's InteractionResponseData leaves out an empty choices list;
	// Discord expects the list, empty when nothing matches.
	body := struct {
		Type discordgo.InteractionResponseType `json:"type"`
		Data struct {
			Choices []*discordgo.ApplicationCommandOptionChoice `json:"choices"`
		} `json:"data"`
	}{Type: discordgo.InteractionApplicationCommandAutocompleteResult}
	body.Data.Choices = choices
	endpoint := discordgo.EndpointInteractionResponse(i.ID, i.Token)
	if _, err := a.session.RequestWithBucketID(http.MethodPost, endpoint, body, endpoint, discordgo.WithContext(ctx)); err != nil {
		// Nothing to retry: Discord has moved on by the time an answer fails.
		a.log.Debug("autocomplete not answered", zap.String("interaction", i.ID), zap.Error(err))
	}
}

// autocompleteValues finds the option being typed and what it may hold.
func (a *Adapter) autocompleteValues(data discordgo.ApplicationCommandInteractionData) (typed string, values []string) {
	if len(data.Options) == 0 || data.Options[0] == nil {
		return "", nil
	}
	sub := data.Options[0]
	var focused *discordgo.ApplicationCommandInteractionDataOption
	for _, o := range sub.Options {
		if o != nil && o.Focused {
			focused = o
		}
	}
	if focused == nil {
		return "", nil
	}
	typed = optionValue(focused)
	switch data.Name {
	case bridge.CommandFlow:
		f, ok := a.core.Flow(sub.Name)
		if !ok {
			return typed, nil
		}
		for _, p := range f.Params {
			if p.Name == focused.Name {
				return typed, append(append([]string(nil), p.Choices...), p.Suggestions...)
			}
		}
	case bridge.CommandAgent:
		if sub.Name == agentUse {
			for _, ag := range a.core.Agents() {
				values = append(values, ag.Name)
			}
		}
	}
	return typed, values
}

// filterPrefix returns up to n values: those starting with typed (ignoring
// case) first, then those containing it, each once, none over Discord's
// 100-character limit.
func filterPrefix(values []string, typed string, n int) []string {
	typed = strings.ToLower(strings.TrimSpace(typed))
	var first, then []string
	seen := make(map[string]bool)
	for _, v := range values {
		if seen[v] || v == "" || len([]rune(v)) > maxChoiceLength {
			continue
		}
		seen[v] = true
		lv := strings.ToLower(v)
		switch {
		case strings.HasPrefix(lv, typed):
			first = append(first, v)
		case strings.Contains(lv, typed):
			then = append(then, v)
		}
	}
	out := append(first, then...)
	return out[:min(len(out), n)]
}

func (a *Adapter) interactionResponder(rt route) *interactionResponder {
	return &interactionResponder{a: a, i: rt.interaction(), component: rt.Interaction.Component, ephemeral: rt.Interaction.Ephemeral, userID: rt.Interaction.User,
		replaceOnSend: rt.Interaction.ReplaceOnSend, webhookOnly: rt.Interaction.WebhookOnly}
}

// interactionResponder answers an acknowledged interaction: a command's
// replies edit its deferred response and then follow it; a button's replies
// follow the message it is on, and public ones go to the channel. Once the
// token has expired (15 minutes), replies go to the channel, mentioning the user.
type interactionResponder struct {
	a         *Adapter
	i         *discordgo.Interaction
	component bool
	ephemeral bool // the deferred response, or the message the button is on
	userID    string
	// webhookOnly: the bot is not a member where the interaction happened,
	// so nothing goes to the channel's REST routes.
	webhookOnly bool

	mu            sync.Mutex
	originalUsed  bool
	replaceOnSend bool // the first reply edits the pressed message (@original)
	expired       bool
	noticed       bool // the channel was told a private result went by DM
}

var (
	_ bridge.Responder = (*interactionResponder)(nil)
	_ bridge.Updater   = (*interactionResponder)(nil)
	_ bridge.Dismisser = (*interactionResponder)(nil)
)

const originalMessage = "@original"

// Send delivers a reply. The first reply to a command fills its deferred
// response, whose visibility was fixed when it was deferred.
func (r *interactionResponder) Send(ctx context.Context, reply bridge.Reply) (bridge.MessageRef, error) {
	r.mu.Lock()
	expired := r.expired
	useOriginal := !r.component && !r.originalUsed
	replace := r.component && r.replaceOnSend && reply.Replace
	if replace {
		r.replaceOnSend = false
	}
	r.originalUsed = true
	r.mu.Unlock()
	if expired {
		return r.toChannel(ctx, reply)
	}
	if r.webhookOnly {
		reply = r.withinFollowups(reply)
	}
	if replace {
		// A deferred update's @original is the message the button is on.
		msgs := render(reply)
		if err := r.a.editWebhook(ctx, r.i, originalMessage, msgs[0]); err == nil {
			if _, err := r.followUps(ctx, msgs[1:], r.ephemeral); err != nil {
				return webhookRef(originalMessage), err
			}
			return webhookRef(originalMessage), nil
		} else {
			r.a.log.Debug("pressed message not replaced; answering apart", zap.Error(err))
		}
	}
	if r.component && !reply.Ephemeral && !r.webhookOnly {
		ids, err := r.a.sendChannel(ctx, r.i.ChannelID, render(reply), nil, nil)
		if len(ids) == 0 {
			return "", err
		}
		return channelRef(r.i.ChannelID, ids), err
	}
	msgs := render(reply)
	if useOriginal {
		if err := r.a.editWebhook(ctx, r.i, originalMessage, msgs[0]); err != nil {
			return r.fallback(ctx, reply, err)
		}
		if _, err := r.followUps(ctx, msgs[1:], r.ephemeral); err != nil {
			return webhookRef(originalMessage), err
		}
		return webhookRef(originalMessage), nil
	}
	ids, err := r.followUps(ctx, msgs, reply.Ephemeral)
	if err != nil && len(ids) == 0 {
		return r.fallback(ctx, reply, err)
	}
	return webhookRef(ids[0]), err
}

// Update replaces a message sent earlier for this interaction.
func (r *interactionResponder) Update(ctx context.Context, ref bridge.MessageRef, reply bridge.Reply) error {
	if channel, ids, ok := parseChannelRef(ref); ok {
		msgs := render(reply)
		if err := r.a.editChannel(ctx, channel, ids[0], msgs[0]); err != nil {
			return err
		}
		_, err := r.a.sendChannel(ctx, channel, msgs[1:], nil, nil)
		return err
	}
	id, ok := strings.CutPrefix(string(ref), "wh/")
	if !ok || id == "" {
		return fmt.Errorf("update: %q is not a message of this adapter", ref)
	}
	r.mu.Lock()
	expired := r.expired
	r.mu.Unlock()
	if expired {
		_, err := r.toChannel(ctx, reply)
		return err
	}
	if r.webhookOnly {
		reply = r.withinFollowups(reply)
	}
	msgs := render(reply)
	if err := r.a.editWebhook(ctx, r.i, id, msgs[0]); err != nil {
		_, err = r.fallback(ctx, reply, err)
		return err
	}
	ephemeral := r.ephemeral
	if id != originalMessage {
		ephemeral = reply.Ephemeral
	}
	_, err := r.followUps(ctx, msgs[1:], ephemeral)
	return err
}

// Dismiss retires the private message a "Share with channel" button was on.
func (r *interactionResponder) Dismiss(ctx context.Context) error {
	if !r.component || r.i.Message == nil {
		return nil
	}
	m := message{Content: r.i.Message.Content}
	if r.ephemeral {
		m.Content = "Shared with the channel."
	}
	return r.a.editWebhook(ctx, r.i, originalMessage, m)
}

// followUps posts messages after the response; they return their IDs.
func (r *interactionResponder) followUps(ctx context.Context, msgs []message, ephemeral bool) ([]string, error) {
	var ids []string
	for _, m := range msgs {
		params := &discordgo.WebhookParams{Content: m.Content, Components: m.Components, AllowedMentions: noMentions(), Files: discordFiles(m.File)}
		if ephemeral {
			params.Flags = discordgo.MessageFlagsEphemeral
		}
		sent, err := r.a.session.FollowupMessageCreate(r.i, true, params, discordgo.WithContext(ctx))
		if err != nil {
			return ids, fmt.Errorf("follow-up: %w", err)
		}
		ids = append(ids, sent.ID)
	}
	return ids, nil
}

// fallback posts to the channel when the interaction token has expired, and
// returns err otherwise.
func (r *interactionResponder) fallback(ctx context.Context, reply bridge.Reply, err error) (bridge.MessageRef, error) {
	if !tokenExpired(err) {
		return "", err
	}
	r.mu.Lock()
	r.expired = true
	r.mu.Unlock()
	r.a.log.Info("interaction token expired; replying in the channel", zap.String("interaction", r.i.ID))
	return r.toChannel(ctx, reply)
}

// toChannel delivers a reply after the token expired. A public reply goes to
// the channel, mentioning (and pinging only) the user. A private one must not
// become public: it goes to the user by DM, and the channel only hears that it
// did.
func (r *interactionResponder) toChannel(ctx context.Context, reply bridge.Reply) (bridge.MessageRef, error) {
	if r.webhookOnly {
		return "", errNoChannel
	}
	reply.Buttons = nil // the share button needs the private message it would retire
	allow := noMentions()
	if r.userID != "" {
		allow.Users = []string{r.userID}
	}
	if (reply.Ephemeral || r.ephemeral) && r.userID != "" {
		ref, err := r.toDM(ctx, reply)
		notice := "your request outlived the time Discord gives a command to answer, so its result was sent to you in a direct message."
		if err != nil {
			r.a.log.Warn("private result not delivered by DM", zap.String("interaction", r.i.ID), zap.Error(err))
			notice = "your request outlived the time Discord gives a command to answer, and its private result could not be sent to you in a direct message (are your DMs closed?). Please run it again."
		}
		r.mu.Lock()
		first := !r.noticed
		r.noticed = true
		r.mu.Unlock()
		if first || err != nil {
			msg := message{Content: "<@" + r.userID + "> " + notice}
			if _, nerr := r.a.sendChannel(ctx, r.i.ChannelID, []message{msg}, nil, allow); nerr != nil && err == nil {
				r.a.log.Warn("DM notice not posted", zap.Error(nerr))
			}
		}
		return ref, err
	}
	if r.userID != "" {
		reply.Text = "<@" + r.userID + "> " + reply.Text
	}
	ids, err := r.a.sendChannel(ctx, r.i.ChannelID, render(reply), nil, allow)
	if len(ids) == 0 {
		return "", err
	}
	return channelRef(r.i.ChannelID, ids), err
}

// toDM sends a reply to the interaction's user in a direct message.
func (r *interactionResponder) toDM(ctx context.Context, reply bridge.Reply) (bridge.MessageRef, error) {
	dm, err := r.a.session.UserChannelCreate(r.userID, discordgo.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("open DM: %w", err)
	}
	ids, err := r.a.sendChannel(ctx, dm.ID, render(reply), nil, nil)
	if len(ids) == 0 {
		return "", err
	}
	return channelRef(dm.ID, ids), err
}

// editWebhook edits an interaction's response or follow-up. discordgo's own
// WebhookMessageEdit puts every token in one rate-limit bucket and so one
// slow edit holds up all others (bwmarrin/discordgo#1384); the bucket here
// is the token's own.
func (a *Adapter) editWebhook(ctx context.Context, i *discordgo.Interaction, messageID string, m message) error {
	comps := m.Components
	if comps == nil {
		comps = []discordgo.MessageComponent{} // clears the buttons of what it replaces
	}
	edit := &discordgo.WebhookEdit{Content: &m.Content, Components: &comps, AllowedMentions: noMentions()}
	uri := discordgo.EndpointWebhookMessage(i.AppID, i.Token, messageID)
	bucket := discordgo.EndpointWebhookToken(i.AppID, i.Token) + "/messages"
	var err error
	if m.File == nil {
		_, err = a.session.RequestWithBucketID(http.MethodPatch, uri, edit, bucket, discordgo.WithContext(ctx))
	} else {
		err = a.editWebhookWithFile(ctx, uri, bucket, edit, m.File)
	}
	if err != nil {
		return fmt.Errorf("edit interaction message %s: %w", messageID, err)
	}
	return nil
}

func webhookRef(id string) bridge.MessageRef { return bridge.MessageRef("wh/" + id) }

// tokenExpired reports whether err says the interaction token is no longer valid.
func tokenExpired(err error) bool {
	restErr, ok := errors.AsType[*discordgo.RESTError](err)
	if !ok {
		return false
	}
	if restErr.Message != nil {
		switch restErr.Message.Code {
		case codeUnknownWebhook, codeUnknownInteraction, codeInvalidWebhookTok:
			return true
		}
	}
	return restErr.Response != nil && restErr.Response.StatusCode == http.StatusUnauthorized
}

// messageLink is a message's permalink, as Discord's "Copy Message Link"
// gives it; a DM's guild is "@me".
func messageLink(guild, channel, message string) string {
	if guild == "" {
		guild = "@me"
	}
	return "https://discord.com/channels/" + guild + "/" + channel + "/" + message
}
