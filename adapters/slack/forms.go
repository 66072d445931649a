package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Flow forms: a modal that offers the flows the user may run and one input
// per parameter of the chosen flow. "/flow" alone, "/flow NAME" without a
// required parameter, and the "Run a flow" message shortcut open it; its
// submission runs the flow through the core as /flow does.
const (
	formCallback = "flow_form"
	// ShortcutCallback is the callback_id of the "Run a flow" message shortcut.
	ShortcutCallback = "run_flow"
	flowBlock        = "flow" // block_id and action_id of the flow select
	paramBlock       = "param:"
	valueAction      = "value"
	// formTimeout bounds opening or updating a form: Slack's trigger_id
	// lasts 3 seconds, and the envelope waits for its ack meanwhile.
	formTimeout = 2500 * time.Millisecond

	// Slack's limits on a modal (reference/views/modal-views, reference/block-kit).
	maxViewBlocks   = 100
	maxViewTitle    = 24
	maxInputLabel   = 2000
	maxInputHint    = 2000
	maxOptions      = 100
	maxOptionText   = 75
	maxOptionValue  = 150
	maxPlaceholder  = 150
	maxPrivateMeta  = 3000
	maxFormParams   = maxViewBlocks - 1 // beside the flow select
	maxViewIDLength = 64
)

// FormCore is what flow forms need of the core; *bridge.Bridge has it.
type FormCore interface {
	FormFlows(ev bridge.Event) []bridge.Flow
	CheckFlowForm(ev bridge.Event, name string, params map[string]string) map[string]string
}

// formMeta is where a form's result goes, kept in the view's private_metadata.
type formMeta struct {
	Team        string `json:"m,omitempty"`
	Channel     string `json:"c"`
	Thread      string `json:"t,omitempty"`
	ResponseURL string `json:"u,omitempty"`
}

func (m formMeta) check() error {
	return checkFields(
		field{"team_id", m.Team, optional(isID)},
		field{"channel", m.Channel, isID},
		field{"thread", m.Thread, optional(isTS)},
		field{"response_url", m.ResponseURL, optional(isResponseURL)},
	)
}

// forms returns the core's form methods, or nil when forms are off.
func (a *Adapter) forms() FormCore {
	fc, ok := a.core.(FormCore)
	if !ok || !a.cfg.FlowForms {
		return nil
	}
	return fc
}

// formEvent is the user's event where a form is used, with the groups
// the access rules need.
func (a *Adapter) formEvent(ctx context.Context, meta formMeta, user, name string) bridge.Event {
	return bridge.Event{Platform: platform, Team: meta.Team, Channel: meta.Channel, User: a.users.lookup(ctx, user, name)}
}

// commandForm opens the flow form for a /flow command that is "/flow"
// alone or names a flow the user may run without one of its required
// parameters. It reports false when the command is for the core instead:
// help, a parse error, an unknown or refused flow, a complete command, or
// a form Slack would not open.
func (a *Adapter) commandForm(ctx context.Context, log *zap.Logger, cmd slackgo.SlashCommand) bool {
	fc := a.forms()
	if fc == nil {
		return false
	}
	name, params, err := bridge.ParseFlowArgs(inboundText(cmd.Text, ""))
	if err != nil || strings.EqualFold(name, "help") {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, formTimeout)
	defer cancel()
	meta := formMeta{Team: cmd.TeamID, Channel: cmd.ChannelID, ResponseURL: cmd.ResponseURL}
	flows := fc.FormFlows(a.formEvent(ctx, meta, cmd.UserID, cmd.UserName))
	if len(flows) == 0 {
		return false
	}
	if name != "" {
		f, ok := findFlow(flows, name)
		if !ok || !missingRequired(f, params) {
			return false
		}
		name = f.Name
	}
	if err := a.openForm(ctx, cmd.TriggerID, flows, name, params, meta); err != nil {
		log.Warn("flow form not opened; answering in text", zap.Error(err))
		return false
	}
	return true
}

func findFlow(flows []bridge.Flow, name string) (bridge.Flow, bool) {
	for _, f := range flows {
		if strings.EqualFold(f.Name, name) {
			return f, true
		}
	}
	return bridge.Flow{}, false
}

func missingRequired(f bridge.Flow, params map[string]string) bool {
	for _, p := range f.Params {
		if p.Required && strings.TrimSpace(params[p.Name]) == "" {
			return true
		}
	}
	return false
}

func (a *Adapter) openForm(ctx context.Context, trigger string, flows []bridge.Flow, selected string, values map[string]string, meta formMeta) error {
	view, err := formView(flows, selected, values, meta)
	if err != nil {
		return err
	}
	_, err = a.api.OpenViewContext(ctx, trigger, view)
	if err != nil {
		return fmt.Errorf("views.open: %w", err)
	}
	return nil
}

// receiveInteractive hands an interaction to the core, or answers it here:
// a flow form's submission is checked and, when valid, handed on (its
// errors otherwise are the payload to acknowledge with); a choice in the
// form updates it; the shortcut opens it; the rest are button presses.
func (a *Adapter) receiveInteractive(ctx context.Context, cb slackgo.InteractionCallback) (*bridge.Receipt, any) {
	switch {
	case cb.Type == slackgo.InteractionTypeViewSubmission && cb.View.CallbackID == formCallback:
		return a.submitForm(ctx, cb)
	case cb.Type == slackgo.InteractionTypeBlockActions && cb.View.CallbackID == formCallback:
		a.formChoice(ctx, cb)
		return nil, nil
	case cb.Type == slackgo.InteractionTypeMessageAction && cb.CallbackID == ShortcutCallback:
		a.shortcutForm(ctx, cb)
		return nil, nil
	case cb.Type == slackgo.InteractionTypeViewSubmission, cb.Type == slackgo.InteractionTypeMessageAction:
		return nil, nil
	}
	return a.receiveInteraction(cb), nil
}

// shortcutForm opens the form from the "Run a flow" shortcut on a message;
// the result goes to the message's thread.
func (a *Adapter) shortcutForm(ctx context.Context, cb slackgo.InteractionCallback) {
	log := a.log.WithLazy(zap.String("shortcut", ShortcutCallback))
	fc := a.forms()
	if fc == nil {
		log.Debug("message shortcut while slack.flow_forms is off")
		return
	}
	thread := cb.Message.ThreadTimestamp
	if thread == "" {
		thread = cb.Message.Timestamp
	}
	if thread == "" {
		thread = cb.MessageTs
	}
	team := cb.Team.ID
	meta := formMeta{Team: team, Channel: cb.Channel.ID, Thread: thread}
	if a.cfg.SessionScope == ScopeChannel {
		meta.Thread = ""
	}
	err := errors.Join(meta.check(), checkFields(
		field{"user_id", cb.User.ID, isID},
		field{"trigger_id", cb.TriggerID, isTrigger},
		field{"thread_ts", thread, isTS},
	))
	if err != nil {
		a.refuse(log, err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, formTimeout)
	defer cancel()
	flows := fc.FormFlows(a.formEvent(ctx, meta, cb.User.ID, cb.User.Name))
	if len(flows) == 0 {
		// Nothing to offer: say so where the shortcut was used.
		r := a.newResponder(route{Kind: kindAction, Channel: meta.Channel, Thread: thread, User: cb.User.ID})
		if _, err := r.Send(ctx, bridge.Reply{Kind: bridge.ReplyInfo, Ephemeral: true, Text: "No flows are available to you here."}); err != nil {
			log.Debug("no-flows notice not sent", zap.Error(err))
		}
		return
	}
	if err := a.openForm(ctx, cb.TriggerID, flows, "", nil, meta); err != nil {
		log.Warn("flow form not opened", zap.Error(err))
	}
}

// formChoice updates the form for the flow just chosen in it.
func (a *Adapter) formChoice(ctx context.Context, cb slackgo.InteractionCallback) {
	log := a.log.WithLazy(zap.String("view", truncate.Bytes(cb.View.ID, 64)))
	fc := a.forms()
	if fc == nil || len(cb.ActionCallback.BlockActions) == 0 {
		return
	}
	act := cb.ActionCallback.BlockActions[0]
	if act.ActionID != flowBlock {
		return
	}
	var meta formMeta
	err := errors.Join(json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta), meta.check(), checkFields(
		field{"user_id", cb.User.ID, isID},
		field{"view_id", cb.View.ID, shorterThan(maxViewIDLength)},
		field{"hash", cb.View.Hash, shorterThan(maxViewIDLength)},
		field{"flow", act.SelectedOption.Value, shorterThan(maxOptionValue)},
	))
	if err != nil {
		a.refuse(log, err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, formTimeout)
	defer cancel()
	flows := fc.FormFlows(a.formEvent(ctx, meta, cb.User.ID, cb.User.Name))
	view, err := formView(flows, act.SelectedOption.Value, formValues(cb.View.State), meta)
	if err != nil {
		log.Info("flow form not updated", zap.Error(err))
		return
	}
	// The hash makes Slack refuse an update of a view changed since: a
	// later choice's update wins.
	if _, err := a.api.UpdateViewContext(ctx, view, "", cb.View.Hash, cb.View.ID); err != nil {
		log.Info("flow form not updated", zap.Error(err))
	}
}

// formValues reads the parameters typed or chosen in a form's inputs.
func formValues(state *slackgo.ViewState) map[string]string {
	out := map[string]string{}
	if state == nil {
		return out
	}
	for block, actions := range state.Values {
		name, ok := strings.CutPrefix(block, paramBlock)
		if !ok {
			continue
		}
		for _, v := range actions {
			val := v.Value
			if v.SelectedOption.Value != "" {
				val = v.SelectedOption.Value
			}
			if strings.TrimSpace(val) != "" {
				out[name] = val
			}
		}
	}
	return out
}

// submitForm checks a submitted form and hands the flow run to the core.
// Errors are shown in the form (response_action "errors", by block_id).
func (a *Adapter) submitForm(ctx context.Context, cb slackgo.InteractionCallback) (*bridge.Receipt, any) {
	log := a.log.WithLazy(zap.String("view", truncate.Bytes(cb.View.ID, 64)))
	fc := a.forms()
	if fc == nil {
		return nil, nil
	}
	var meta formMeta
	var flow string
	if cb.View.State != nil {
		flow = cb.View.State.Values[flowBlock][flowBlock].SelectedOption.Value
	}
	err := errors.Join(json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta), meta.check(), checkFields(
		field{"user_id", cb.User.ID, isID},
		field{"user_name", cb.User.Name, shorterThan(256)},
		field{"view_id", cb.View.ID, isID},
		field{"hash", cb.View.Hash, func(s string) bool { return s != "" && len(s) <= maxViewIDLength && !strings.Contains(s, "/") }},
		field{"flow", flow, shorterThan(maxOptionValue)},
	))
	if err != nil {
		a.refuse(log, err)
		return nil, slackgo.NewErrorsViewSubmissionResponse(map[string]string{flowBlock: "This form could not be read. Please open it again."})
	}
	params := formValues(cb.View.State)
	lookup, cancel := context.WithTimeout(ctx, formTimeout)
	ev := a.formEvent(lookup, meta, cb.User.ID, cb.User.Name)
	cancel()
	if problems := fc.CheckFlowForm(ev, flow, params); len(problems) > 0 {
		shown := map[string]bool{}
		for _, b := range cb.View.Blocks.BlockSet {
			if in, ok := b.(*slackgo.InputBlock); ok {
				shown[in.BlockID] = true
			}
		}
		errs := make(map[string]string, len(problems))
		for name, msg := range problems {
			// A parameter the form has no room for is reported on the flow.
			block := paramBlock + name
			if name == "" || !shown[block] {
				block = flowBlock
			}
			if errs[block] != "" {
				msg = errs[block] + " " + msg
			}
			errs[block] = plainText(msg)
		}
		return nil, slackgo.NewErrorsViewSubmissionResponse(errs)
	}
	key := conversationKey(meta.Team, meta.Channel, "")
	parent := ""
	if meta.Thread != "" {
		key, parent = conversationKey(meta.Team, meta.Channel, meta.Thread), key
	}
	rt := route{Kind: kindCommand, Channel: meta.Channel, User: cb.User.ID, ResponseURL: meta.ResponseURL}
	if meta.ResponseURL == "" {
		// From the shortcut: answered in the message's thread.
		rt = route{Kind: kindAction, Channel: meta.Channel, Thread: meta.Thread, User: cb.User.ID}
	}
	return a.receive(log, bridge.Event{
		Kind:         bridge.KindCommand,
		Conversation: key,
		Parent:       parent,
		Team:         meta.Team,
		Channel:      meta.Channel,
		User:         bridge.User{ID: cb.User.ID, Name: cb.User.Name},
		Command:      bridge.CommandFlow,
		Flow:         flow,
		Params:       params,
		// The view and its hash name one submission: Slack's retries of it
		// are answered once, and a changed form submitted again is new.
		Key: "slack/view/" + cb.View.ID + "/" + cb.View.Hash,
	}, rt), nil
}

// plainText strips the Markdown emphasis the core's sentences carry: form
// errors are shown as plain text.
func plainText(s string) string {
	return strings.NewReplacer("*", "", "`", "").Replace(s)
}

func plain(s string, limit int) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.PlainTextType, truncate.Bytes(s, limit), false, false)
}

// formView builds the flow form: the flows to choose from, and the chosen
// one's parameters with values filled in, within Slack's limits.
func formView(flows []bridge.Flow, selected string, values map[string]string, meta formMeta) (slackgo.ModalViewRequest, error) {
	if len(flows) == 0 {
		return slackgo.ModalViewRequest{}, errors.New("no flows to offer")
	}
	md, err := json.Marshal(meta)
	if err != nil || len(md) > maxPrivateMeta {
		return slackgo.ModalViewRequest{}, fmt.Errorf("form metadata of %d bytes: %v", len(md), err)
	}
	var chosen *bridge.Flow
	options := make([]*slackgo.OptionBlockObject, 0, min(len(flows), maxOptions))
	for i := range flows[:min(len(flows), maxOptions)] {
		f := &flows[i]
		var desc *slackgo.TextBlockObject
		if f.Description != "" {
			desc = plain(f.Description, maxOptionText)
		}
		options = append(options, slackgo.NewOptionBlockObject(f.Name, plain(f.Name, maxOptionText), desc))
		if strings.EqualFold(f.Name, selected) {
			chosen = f
		}
	}
	sel := slackgo.NewOptionsSelectBlockElement(slackgo.OptTypeStatic, plain("Choose a flow", maxPlaceholder), flowBlock, options...)
	var hint *slackgo.TextBlockObject
	if chosen != nil {
		for _, o := range options {
			if o.Value == chosen.Name {
				sel.InitialOption = o
			}
		}
		if chosen.Description != "" {
			hint = plain(chosen.Description, maxInputHint)
		}
	}
	flowInput := slackgo.NewInputBlock(flowBlock, plain("Flow", maxInputLabel), hint, sel)
	flowInput.DispatchAction = true // choosing a flow shows its parameters
	blocks := []slackgo.Block{flowInput}
	switch {
	case chosen == nil:
		blocks = append(blocks, slackgo.NewContextBlock("choose", plain("Choose a flow to see its parameters.", maxInputHint)))
	case len(chosen.Params) == 0:
		blocks = append(blocks, slackgo.NewContextBlock("none", plain("This flow takes no parameters.", maxInputHint)))
	default:
		for _, p := range chosen.Params[:min(len(chosen.Params), maxFormParams)] {
			blocks = append(blocks, paramInput(p, values[p.Name]))
		}
	}
	return slackgo.ModalViewRequest{
		Type:            slackgo.VTModal,
		Title:           plain("Run a flow", maxViewTitle),
		Submit:          plain("Run", maxViewTitle),
		Close:           plain("Cancel", maxViewTitle),
		CallbackID:      formCallback,
		PrivateMetadata: string(md),
		Blocks:          slackgo.Blocks{BlockSet: blocks},
	}, nil
}

// paramInput is one parameter's input: a select where the parameter has
// choices Slack can offer, else a text field; optional unless required.
func paramInput(p bridge.Param, value string) *slackgo.InputBlock {
	var hint *slackgo.TextBlockObject
	if p.Description != "" {
		hint = plain(p.Description, maxInputHint)
	}
	var el slackgo.BlockElement
	if selectable(p.Choices) {
		opts := make([]*slackgo.OptionBlockObject, len(p.Choices))
		var initial *slackgo.OptionBlockObject
		for i, c := range p.Choices {
			opts[i] = slackgo.NewOptionBlockObject(c, plain(c, maxOptionText), nil)
			if c == value {
				initial = opts[i]
			}
		}
		s := slackgo.NewOptionsSelectBlockElement(slackgo.OptTypeStatic, plain("Choose", maxPlaceholder), valueAction, opts...)
		s.InitialOption = initial
		el = s
	} else {
		var ph *slackgo.TextBlockObject
		if len(p.Suggestions) > 0 {
			ph = plain("e.g. "+strings.Join(p.Suggestions, ", "), maxPlaceholder)
		}
		in := slackgo.NewPlainTextInputBlockElement(ph, valueAction)
		in.InitialValue = value
		el = in
	}
	return slackgo.NewInputBlock(paramBlock+p.Name, plain(p.Name, maxInputLabel), hint, el).WithOptional(!p.Required)
}

// selectable reports whether choices fit a static select: at most 100, each
// a value Slack takes whole.
func selectable(choices []string) bool {
	if len(choices) == 0 || len(choices) > maxOptions {
		return false
	}
	for _, c := range choices {
		if c == "" || len(c) > maxOptionValue {
			return false
		}
	}
	return true
}
