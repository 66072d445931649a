package slack

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Slack's limits on assistant threads. Slack documents the number of
// suggested prompts; it states no length for a status, a prompt's title or
// message: Slack refuses a status past 50 characters, and prompts render as
// buttons that send their message, so they are held to a button's text and
// an input label's length.
const (
	MaxSuggestedPrompts = 4
	MaxStatusLength     = 50
	MaxPromptTitle      = 75
	MaxPromptMessage    = 2000
	// maxTitle is how much of the first message names an assistant thread.
	maxTitle = 80
)

// MaxAgentDescription is Slack's limit on the manifest's agent_description.
const MaxAgentDescription = 300

// DefaultAgentDescription is the manifest's agent_description unless
// slack.agent_description says otherwise.
const DefaultAgentDescription = "Ask the AI agent in a thread of its own; it sees what you are viewing in Slack."

// DefaultAssistantStatus is what the assistant thread shows while the agent works.
const DefaultAssistantStatus = "is thinking…"

// AssistantScope is the bot scope assistant threads need (suggested prompts
// and titles; setStatus also takes chat:write).
const AssistantScope = "assistant:write"

// receiveAssistant hands an assistant thread event to the core: a thread
// the user opened (bridge.KindOpen) or what they view beside it changed
// (bridge.KindContext). Without slack.assistant both are ignored (nil).
//
// Its place in the conversation's order is its event_ts, on the clock of
// the messages' ts: a context change and the message the user sends after
// it run in that order, whatever the skew between Slack's clock and this
// machine's (the core would otherwise order it by the time it was
// received, on this machine's clock).
func (a *Adapter) receiveAssistant(log *zap.Logger, team, eventID, eventTS string, kind bridge.Kind, at slackevents.AssistantThread) *bridge.Receipt {
	if !a.cfg.Assistant {
		log.Debug("assistant event while slack.assistant is off")
		return nil
	}
	err := checkFields(
		field{"team_id", team, optional(isID)},
		field{"event_id", eventID, isTrigger},
		field{"channel_id", at.ChannelID, isID},
		field{"thread_ts", at.ThreadTimeStamp, isTS},
		field{"user_id", at.UserID, isID},
		field{"context.channel_id", at.Context.ChannelID, optional(isID)},
	)
	if err != nil {
		a.refuse(log, err)
		return nil
	}
	// One greeting per thread, however often Slack delivers its start; each
	// context change is its own event.
	key := "slack/ctx/" + eventID
	if kind == bridge.KindOpen {
		key = "slack/open/" + at.ChannelID + "/" + at.ThreadTimeStamp
	}
	return a.receive(log, bridge.Event{
		Kind:         kind,
		Conversation: conversationKey(team, at.ChannelID, at.ThreadTimeStamp),
		Parent:       conversationKey(team, at.ChannelID, ""),
		Team:         team,
		Channel:      at.ChannelID,
		User:         bridge.User{ID: at.UserID},
		Text:         contextText(at.Context.ChannelID),
		Key:          key,
		Order:        tsOrder(eventTS),
	}, route{Kind: kindChat, Channel: at.ChannelID, Thread: at.ThreadTimeStamp, User: at.UserID, Assistant: true})
}

// contextText is the sentence that tells the agent which channel the user
// views beside the thread; "" for none.
func contextText(channel string) string {
	if channel == "" {
		return ""
	}
	return "The user is viewing the Slack channel <#" + channel + ">."
}

// statusResponder answers where Slack shows the app's status while it
// works and suggested prompts with a greeting: an assistant thread, or a
// thread of an agent_view app's Messages tab.
type statusResponder struct {
	*responder
	// agent marks the Messages tab of an agent_view app, whose prompts
	// belong to the whole DM: Slack ignores them for a thread.
	agent     bool
	statusSet atomic.Bool
}

// assistantResponder answers in an assistant thread, which also takes its
// title from its first message.
type assistantResponder struct {
	*statusResponder
}

var (
	_ bridge.Titler = (*assistantResponder)(nil)
	_ bridge.Typist = (*statusResponder)(nil)
)

// Typing sets the thread's status; Slack clears it when the reply is
// posted. Where Slack refuses the status (the app lacks the scope), or
// there is no thread to show it in, the placeholder message shows instead.
func (r *statusResponder) Typing(ctx context.Context) (stop func()) {
	if r.Thread == "" {
		return r.responder.Typing(ctx)
	}
	var fallback func()
	done := make(chan struct{})
	go func() { // owned by stop, which waits for it
		defer close(done)
		if err := r.setStatus(ctx, r.a.cfg.AssistantStatus); err != nil {
			r.a.log.Debug("assistant status not set; showing a placeholder", zap.Error(err))
			fallback = r.responder.Typing(ctx)
		}
	}()
	return sync.OnceFunc(func() {
		<-done
		if fallback != nil {
			fallback()
		}
	})
}

func (r *statusResponder) setStatus(ctx context.Context, status string) error {
	err := r.a.withRetry(ctx, "assistant.threads.setStatus", func() error {
		return r.a.api.SetAssistantThreadsStatusContext(ctx, slackgo.AssistantThreadsSetStatusParameters{
			ChannelID: r.Channel, ThreadTS: r.Thread, Status: status})
	})
	if err == nil {
		r.statusSet.Store(status != "")
	}
	return err
}

// Send posts the reply in the thread, then its suggested prompts. An
// ephemeral reply does not clear the status in Slack, so it is cleared here.
func (r *statusResponder) Send(ctx context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	ref, err := r.responder.Send(ctx, rep)
	if err != nil {
		return ref, err
	}
	if rep.Ephemeral && r.statusSet.Load() {
		if err := r.setStatus(ctx, ""); err != nil {
			r.a.log.Debug("assistant status not cleared", zap.Error(err))
		}
	}
	if len(rep.Prompts) > 0 {
		if err := r.suggest(ctx, rep.Prompts); err != nil {
			// The greeting is out; the prompts are a convenience.
			r.a.log.Warn("suggested prompts not set", zap.Error(err))
		}
	}
	return ref, nil
}

func (r *statusResponder) suggest(ctx context.Context, prompts []bridge.Prompt) error {
	params := slackgo.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: r.Channel, ThreadTS: r.Thread}
	if r.agent {
		params.ThreadTS = ""
	}
	for _, p := range prompts[:min(len(prompts), MaxSuggestedPrompts)] {
		params.AddPrompt(truncate.Bytes(p.Title, MaxPromptTitle), truncate.Bytes(p.Message, MaxPromptMessage))
	}
	return r.a.withRetry(ctx, "assistant.threads.setSuggestedPrompts", func() error {
		return r.a.api.SetAssistantThreadsSuggestedPromptsContext(ctx, params)
	})
}

// Title names the thread after text, the first message of its session.
func (r *assistantResponder) Title(ctx context.Context, text string) error {
	title := threadTitle(text)
	if title == "" {
		return nil
	}
	return r.a.withRetry(ctx, "assistant.threads.setTitle", func() error {
		return r.a.api.SetAssistantThreadsTitleContext(ctx, slackgo.AssistantThreadsSetTitleParameters{
			ChannelID: r.Channel, ThreadTS: r.Thread, Title: title})
	})
}

// threadTitle is the start of a message on one line, cut at a word within maxTitle.
func threadTitle(text string) string { return titleOf(text, maxTitle) }

// titleOf is the start of text on one line, cut at a word within max runes.
func titleOf(text string, max int) string {
	title := strings.Join(strings.Fields(text), " ")
	if runes(title) <= max {
		return title
	}
	cut := []rune(title)[:max-1]
	if i := strings.LastIndexFunc(string(cut), unicode.IsSpace); i > max/2 {
		return strings.TrimRightFunc(string(cut)[:i], unicode.IsPunct) + "…"
	}
	return string(cut) + "…"
}
