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

func (a *Adapter) onInteraction(ctx context.Context, ic *discordgo.InteractionCreate) {
	i := ic.Interaction
	if i == nil || i.ID == "" || i.Token == "" {
		return
	}
	inter := *i // the event's copy; the adapter only reads it
	if inter.AppID == "" {
		inter.AppID = a.cfg.ApplicationID
	}
	switch inter.Type {
	case discordgo.InteractionApplicationCommand:
		a.onCommand(ctx, &inter)
	case discordgo.InteractionApplicationCommandAutocomplete:
		a.onAutocomplete(ctx, &inter)
	case discordgo.InteractionMessageComponent:
		a.onComponent(ctx, &inter)
	}
}

// firstAck reports whether this process has not acknowledged the
// interaction yet (and records that it now will), backed by the store so a
// replayed event after a restart or resume is not acknowledged twice.
func (a *Adapter) firstAck(id string) bool {
	a.interMu.Lock()
	if a.interactions[id] {
		a.interMu.Unlock()
		return false
	}
	if len(a.interactions) >= maxRemembered {
		clear(a.interactions)
	}
	a.interactions[id] = true
	a.interMu.Unlock()
	return a.core.FirstDelivery("discord/int/" + id)
}

func (a *Adapter) onCommand(ctx context.Context, i *discordgo.Interaction) {
	data, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	if !ok {
		return
	}
	log := a.log.WithLazy(zap.String("interaction", i.ID), zap.String("command", data.Name))
	if !a.firstAck(i.ID) {
		log.Debug("repeated interaction skipped")
		return
	}
	text, ephemeral, known := a.commandText(data)
	if !known {
		err := a.session.InteractionRespond(i, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{
				Content:         "This command is not offered any more; the bridge's commands are `/flow` and `/agent`.",
				Flags:           discordgo.MessageFlagsEphemeral,
				AllowedMentions: noMentions(),
			},
		}, discordgo.WithContext(ctx))
		if err != nil {
			log.Warn("unknown command not answered", zap.Error(err))
		}
		return
	}
	// Answer first: Discord drops the interaction after 3 seconds.
	resp := &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{AllowedMentions: noMentions()},
	}
	if ephemeral {
		resp.Data.Flags = discordgo.MessageFlagsEphemeral
	}
	if err := a.session.InteractionRespond(i, resp, discordgo.WithContext(ctx)); err != nil {
		log.Warn("interaction not acknowledged", zap.Error(err))
		return
	}
	a.handleInteraction(ctx, i, bridge.Event{Kind: bridge.KindCommand, Command: data.Name, Text: text}, ephemeral, log)
}

// commandText rebuilds the command line the core parses from the typed
// options: "NAME key=value …" for /flow, "SUBCOMMAND [NAME]" for /agent.
func (a *Adapter) commandText(data discordgo.ApplicationCommandInteractionData) (text string, ephemeral, known bool) {
	var sub *discordgo.ApplicationCommandInteractionDataOption
	if len(data.Options) > 0 && data.Options[0] != nil && data.Options[0].Type == discordgo.ApplicationCommandOptionSubCommand {
		sub = data.Options[0]
	}
	switch data.Name {
	case bridge.CommandFlow:
		if sub == nil {
			return "help", true, true
		}
		ephemeral = true
		if f, ok := a.core.Flow(sub.Name); ok {
			ephemeral = !f.Public
		}
		return flowLine(sub), ephemeral, true
	case bridge.CommandAgent:
		if sub == nil {
			return agentHelp, true, true
		}
		words := []string{sub.Name}
		for _, o := range sub.Options {
			if o != nil {
				words = append(words, bridge.QuoteArg(optionValue(o)))
			}
		}
		return strings.Join(words, " "), sub.Name != agentShare, true
	}
	return "", true, false
}

// flowLine writes a /flow subcommand as "NAME key=value …", quoting values
// so the core's parser gets them back exactly.
func flowLine(sub *discordgo.ApplicationCommandInteractionDataOption) string {
	var b strings.Builder
	b.WriteString(sub.Name)
	for _, o := range sub.Options {
		if o == nil {
			continue
		}
		b.WriteString(" ")
		b.WriteString(o.Name)
		b.WriteString("=")
		b.WriteString(bridge.QuoteArg(optionValue(o)))
	}
	return b.String()
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

func (a *Adapter) onComponent(ctx context.Context, i *discordgo.Interaction) {
	data, ok := i.Data.(discordgo.MessageComponentInteractionData)
	if !ok {
		return
	}
	log := a.log.WithLazy(zap.String("interaction", i.ID), zap.String("custom_id", data.CustomID))
	if !a.firstAck(i.ID) {
		log.Debug("repeated interaction skipped")
		return
	}
	if err := a.session.InteractionRespond(i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}, discordgo.WithContext(ctx)); err != nil {
		log.Warn("button press not acknowledged", zap.Error(err))
		return
	}
	ephemeral := i.Message != nil && i.Message.Flags&discordgo.MessageFlagsEphemeral != 0
	a.handleInteraction(ctx, i, bridge.Event{Kind: bridge.KindAction, Action: parseCustomID(data.CustomID)}, ephemeral, log)
}

// handleInteraction completes an acknowledged interaction's event and hands it to the core.
func (a *Adapter) handleInteraction(ctx context.Context, i *discordgo.Interaction, ev bridge.Event, ephemeral bool, log *zap.Logger) {
	var member *discordgo.Member
	if i.Member != nil {
		member = i.Member
	}
	ev.Platform = Platform
	ev.Team = i.GuildID
	ev.User = userOf(i.User, member)
	ev.MaxFlowTimeout = maxFlowTimeout
	if i.GuildID == "" {
		ev.Conversation = Platform + "/@me/" + i.ChannelID
		ev.Channel = i.ChannelID
	} else {
		p := a.place(ctx, i.GuildID, i.ChannelID)
		ev.Conversation, ev.Channel = p.key, p.channel
	}
	ev.Reply = &interactionResponder{
		a:         a,
		i:         i,
		component: i.Type == discordgo.InteractionMessageComponent,
		ephemeral: ephemeral,
		userID:    ev.User.ID,
	}
	if err := a.core.Handle(ev); err != nil {
		log.Debug("event not taken", zap.Error(err))
	}
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

	mu           sync.Mutex
	originalUsed bool
	expired      bool
	noticed      bool // the channel was told a private result went by DM
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
	r.originalUsed = true
	r.mu.Unlock()
	if expired {
		return r.toChannel(ctx, reply)
	}
	if r.component && !reply.Ephemeral {
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
		params := &discordgo.WebhookParams{Content: m.Content, Components: m.Components, AllowedMentions: noMentions()}
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
	if _, err := a.session.RequestWithBucketID(http.MethodPatch, uri, edit, bucket, discordgo.WithContext(ctx)); err != nil {
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
