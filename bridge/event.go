package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Kind says what an Event asks of the bridge.
type Kind int

const (
	// KindMessage is a chat message for the conversation's Agent. Text that starts
	// with "!flow" or "!agent" is handled as the matching command instead.
	KindMessage Kind = iota + 1
	// KindCommand is a slash command: Command names it ("flow" or "agent") and
	// Text holds its arguments.
	KindCommand
	// KindAction is a button press on a message the bridge sent earlier.
	KindAction
	// KindOpen is a conversation the platform opened for the bot (Slack's
	// assistant thread): the core greets it with its agent's suggested
	// prompts. Text holds what the user has open beside it, if anything
	// (see KindContext).
	KindOpen
	// KindContext says what the user of a conversation now has open beside
	// it (Slack's assistant thread context: the channel they are viewing),
	// as a sentence for the agent in Text; "" when nothing. The core keeps
	// it and passes it to the agent with the next message.
	KindContext
	// KindTitle says the user renamed the conversation (Slack's agent
	// session title): Text holds the new title. The core keeps it, and
	// "/agent status" shows it.
	KindTitle
	// KindScheduled is a run of a schedule ([[schedules]]) the scheduler
	// claimed: Flow and Params are the schedule's, User its user
	// (Scheduled.User), Route the platform's route of its channel. Only the
	// core makes one (RunScheduled); Receive refuses it from an adapter,
	// since it runs a flow with no access rule asked.
	KindScheduled
)

func (k Kind) String() string {
	switch k {
	case KindMessage:
		return "message"
	case KindCommand:
		return "command"
	case KindAction:
		return "action"
	case KindOpen:
		return "open"
	case KindContext:
		return "context"
	case KindTitle:
		return "title"
	case KindScheduled:
		return "scheduled"
	}
	return "unknown"
}

// Command words an adapter passes in Event.Command.
const (
	CommandFlow  = "flow"
	CommandAgent = "agent"
)

// Action IDs the bridge puts on buttons and expects back in Event.Action.
const (
	ActionShare   = "share"
	ActionConfirm = "confirm"
	ActionCancel  = "cancel"
	// ActionStop stops a running agent turn or flow run. Its Value is the
	// inbox key of the entry to stop (the core puts it on the Stop button of
	// the working message); "" stops whatever of the user's runs in the
	// conversation (Slack's native Stop in agent view, the console's /stop).
	ActionStop = "stop"
)

// Event is one thing that happened on a platform, already translated by its adapter.
type Event struct {
	Kind Kind
	// Platform is the adapter's name: "slack", "discord" or "console".
	Platform string
	// Conversation is the key of the conversation the event belongs to, such as
	// "slack/T0123/C0456/1716212345.000100" or "discord/<guild>/<thread>". Messages
	// with one key share an Agent session and are handled one at a time.
	Conversation string
	// Parent is the conversation key of the channel a thread conversation
	// belongs to ("" for a channel, a DM, or a thread in channel scope). A
	// thread without an agent choice of its own uses its channel's, and a
	// user's answers there are what "/agent share" in the channel shares.
	Parent string
	// Team is the Slack team or Discord guild ID ("" in DMs where unknown).
	Team string
	// Channel is the platform channel ID, used by channel access rules.
	Channel string
	User    User
	// Text is the message text (KindMessage) or the command's arguments (KindCommand),
	// with any mention of the bot already removed.
	Text string
	// Command is CommandFlow or CommandAgent for KindCommand.
	Command string
	// Action is the pressed button for KindAction.
	Action Action
	// MaxFlowTimeout caps a flow's timeout where the platform cannot deliver a
	// result after some time (Discord interaction tokens live 15 minutes); 0 means no cap.
	MaxFlowTimeout time.Duration
	// Flow and Params are a flow command's name and parameters when the
	// platform sent them typed (Discord's options): the core then parses no
	// text. Flow "" means Text holds the command line.
	Flow   string
	Params map[string]string
	// Files are the files attached to a chat message; the core reads the
	// text ones into the message (see Fetcher).
	Files []Attachment

	// Key is the event's platform key, unique per platform event, such as
	// "slack/msg/C0456/1716212345.000100" or "discord/int/1234". An event
	// with a key is recorded in the inbox before the platform is
	// acknowledged, answered once however often the platform delivers it,
	// and carried across a crash. An event without one gets one from the
	// core, unique to this process, and is kept all the same.
	Key string
	// Order is the event's place in the platform's own order of its
	// conversation, where the platform gives one: a Slack message's ts in
	// microseconds, a Discord snowflake. Replicas run a conversation's
	// events in it whichever replica received them; 0 stands for the time
	// the event was received, in microseconds since the Unix epoch (the
	// scale of Slack's ts).
	Order int64
	// Route is the adapter's own record of where and how to answer (JSON).
	// It is kept with the event in the inbox; everything the core asks the
	// adapter about the event (Platform) is derived from it, after a
	// restart as on the event's first run.
	Route json.RawMessage

	// reply answers the event: built by its platform (Platform.Responder)
	// from Route, for a live event and a restored one alike. It is the
	// core's, never stored.
	reply Responder
	// platform is the adapter the event came through (Attach), asked to
	// acknowledge, prepare and read before it.
	platform Platform

	// entry follows the event's inbox entry through its states.
	entry *entry
	// alone marks an event answered outside its conversation's order (a
	// busy reply), which replicas must not run as a turn of it.
	alone bool
	// approver, on a flow run someone approved for its requester (User),
	// is the approver's user ID: the run's audit entries name them.
	approver string
	// schedule, on a KindScheduled event, is the schedule's name, and
	// giveUp when its run stops waiting for a scheduled slot (Unix
	// nanoseconds; 0: as long as the bridge runs). Both are kept in the
	// inbox, so that a run taken up after a restart is the same value.
	schedule string
	giveUp   int64
	// missed marks a KindScheduled event that runs no flow but reports,
	// in Text, the runs of the schedule missed while no flowbridge was up
	// (ReportMissed): told through the outbox like any answer.
	missed bool
}

// User is the person behind an event.
type User struct {
	ID   string
	Name string
	// Groups holds Slack user group IDs or Discord role IDs, for access rules.
	Groups []string
}

// Action is a pressed button: the ID and value the bridge put on it.
type Action struct {
	ID    string
	Value string
	// Message and Link are set by the adapter on a press: the platform's
	// reference of the message the button is on ("C0456/1716212345.000100"
	// on Slack, "<channel>/<message>" on Discord) and its permalink, where
	// the platform tells them. A vote records them.
	Message string `json:",omitempty"`
	Link    string `json:",omitempty"`
}

// Platform is what the core asks of an adapter about one of its events.
// Every answer is derived from the event itself, its Route above all, so
// that an event received this moment and one read back from the inbox after
// a restart, or run by another replica, are the same value on the same
// path. An adapter hands its Platform to the core with Attach before it
// hands it events.
type Platform interface {
	// Responder returns what answers ev, built from its Route. It may also
	// implement Updater, Typist, Dismisser, Fetcher, FileSender, Titler,
	// Progresser and Talker. An error drops the event: its route cannot
	// be answered.
	Responder(ev Event) (Responder, error)
	// Acknowledge tells the platform that ev is taken, where the platform
	// needs telling beyond the adapter's own acknowledgement of the
	// delivery (Discord's deferred interaction response). The core calls it
	// once ev is recorded and before it runs, so the answer never overtakes
	// it; an adapter with nothing to tell returns nil.
	Acknowledge(ctx context.Context, ev Event) error
	// Prepare completes ev on the dispatcher, in the conversation's order,
	// just before it runs: the lookups an acknowledgement must not wait for
	// (the user's name and groups, whether the bot takes part in a thread).
	// It returns false when ev turns out not to be for the bot; it is then
	// dropped without a reply. It may change ev's Conversation, Parent,
	// User and Route (a thread started for the answer); the core then
	// builds the responder anew from the route.
	Prepare(ctx context.Context, ev *Event) bool
	// Earlier reads what was said before ev in the place it was written (a
	// Slack thread it mentions the bot in, the Discord messages it replies
	// to): at most max messages, oldest first, and nil where there is
	// nothing to read. The core asks only for the first message of a
	// conversation's session, and tells the agent what it returns.
	Earlier(ctx context.Context, ev Event, max int) ([]Earlier, error)
}

// ErrNotAttached refuses an event of a platform whose adapter has not
// called Attach.
var ErrNotAttached = errors.New("platform not attached")

// SessionStatus is the state of a conversation's agent session as the
// platform shows it (Slack's agent sessions): it follows the inbox.
type SessionStatus string

// The statuses the core sets (Slack's enum).
const (
	// SessionProcessing: a turn or flow runs; the platform offers Stop.
	SessionProcessing SessionStatus = "processing"
	// SessionSuspended: a flow waits for someone's approval.
	SessionSuspended SessionStatus = "suspended"
	// SessionActive: answered, waiting for the user.
	SessionActive SessionStatus = "active"
	// SessionClosed: the conversation was reset (/agent reset).
	SessionClosed SessionStatus = "closed"
)

// SessionStatuser is implemented by responders of a platform that shows a
// conversation's agent session and its status (Slack's agent view). The
// core sets the status as the conversation's inbox moves: processing when a
// turn or flow starts, suspended while an approval waits, active once
// answered or stopped, closed on reset. A failure is the adapter's to log.
type SessionStatuser interface {
	SetSessionStatus(ctx context.Context, status SessionStatus)
}

// Talker is implemented by responders of a platform that is not talked to
// as Slack and Discord are (mentions, DMs, threads, text commands in
// threads): the console. HowToTalk is the sentence /agent help opens with
// there, in place of the chat platforms' one.
type Talker interface {
	HowToTalk() string
}

// ReplyKind tells an adapter what a reply is, so it can style it.
type ReplyKind int

const (
	ReplyAgent    ReplyKind = iota + 1 // an Agent's answer
	ReplyFlow                          // a Flow's result
	ReplyInfo                          // help, status and other bridge messages
	ReplyError                         // something went wrong or input was refused
	ReplyProgress                      // work has started ("Running healthcheck…")
	ReplyConfirm                       // a question with Run / Cancel buttons
)

// Reply is what the bridge sends back. Text is Markdown; the adapter renders it
// for its platform, splits it within the platform's limits and makes sure it
// cannot ping anyone.
type Reply struct {
	Kind ReplyKind
	Text string
	// Ephemeral asks for a message only the event's user sees, where the platform
	// can; elsewhere the adapter sends it normally.
	Ephemeral bool
	// Footer is a short context line (which flow, who ran it, how long it took).
	Footer string
	// Buttons are rendered below the text; a press comes back as a KindAction event.
	Buttons []Button
	// Replace marks the answer to a pressed question (a confirmation's Run
	// or Cancel): adapters put it in place of the message the button was
	// on, where the platform can, so no live buttons are left behind.
	Replace bool
	// File, when set, is posted as an attachment with Text as its summary
	// (set only where the responder's FileSender accepted it).
	File *File
	// Prompts are suggestions the user can pick as their next message (a
	// greeting's); adapters show them where the platform can.
	Prompts []Prompt
	// Once, when set, names the reply (the inbox key of the event it
	// answers) so that it is posted at most once however often it is sent:
	// adapters pass it to the platform's own de-duplication (Discord's
	// nonce) or mark the message with it (Slack's message metadata), and
	// post it where a later send can find it, even when Ephemeral asks for
	// a kind of message the platform cannot find again (Slack's
	// chat.postEphemeral). The core names every reply it keeps in the
	// outbox: answers, and the notices and refusals given in their place.
	Once string `json:"-"`
	// Again says an earlier send of this reply (the same Once) may have
	// been posted: an adapter whose platform does not de-duplicate looks
	// for the marked message before posting.
	Again bool `json:"-"`
}

// Button is a pressable control on a reply.
type Button struct {
	Action Action
	Label  string
	// Style is "" (default), "primary" or "danger".
	Style string
}

// MessageRef identifies a sent message for a later Update; adapters choose its form.
type MessageRef string

// Responder sends replies for one event. An adapter implements it per event.
type Responder interface {
	Send(ctx context.Context, r Reply) (MessageRef, error)
}

// ErrNotPosted is wrapped by a Responder's error when the platform
// certainly posted nothing of the reply (it refused it: a 429, an error
// answer), so that sending it again needs no look for it first.
var ErrNotPosted = errors.New("reply not posted")

// Updater is implemented by responders that can replace a sent message in place.
type Updater interface {
	Update(ctx context.Context, ref MessageRef, r Reply) error
}

// Typist is implemented by responders that can show the bridge is working
// (a typing indicator, a reaction, a placeholder). Typing returns at once,
// doing its platform calls in the background; the returned stop is called
// before the reply is sent. The bridge calls Typing only when an answer takes
// longer than Config.IndicatorDelay.
type Typist interface {
	Typing(ctx context.Context) (stop func())
}

// Dismisser is implemented by responders of button presses that can remove the
// ephemeral message the button was on (after "Share with channel").
type Dismisser interface {
	Dismiss(ctx context.Context) error
}
