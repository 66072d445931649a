// Package store declares flowbridge's durable state: the records the core keeps and the interfaces a backend implements, split by concern.
//
// The records are defined here once, so the core and every backend (bbolt in
// sessionmap, PostgreSQL for replicas) share them instead of copying fields
// across a boundary. The package imports nothing of the project; storetest
// holds the conformance suite every backend passes.
//
// Every method takes a context first, the caller's: a backend stops
// waiting when it ends (PostgreSQL cancels its statement), or, where a
// commit cannot be abandoned once begun (bbolt), checks it before a change
// starts. Times a store records or compares are the caller's, from the
// core's one clock (bridge.Config.Now), never the backend's own; the one
// exception is lease expiry, judged by the store's clock (see Leases).
package store

import (
	"context"
	"errors"
	"time"
)

// Session maps a conversation to an Agent session of the AI workspace.
type Session struct {
	// Key is the conversation key, e.g. "slack/T0123/C0456/1716212345.000100".
	Key string
	// Agent is the name of the agent the session belongs to.
	Agent string
	// SessionUUID is the workspace's session UUID.
	SessionUUID string
	// Created is when the session was created; LastUsed when the
	// conversation last used it.
	Created, LastUsed time.Time
}

// Turn is one answered message of a conversation: its session with LastUsed
// moved on, and the reply, which becomes the conversation's latest.
type Turn struct {
	Session Session
	Reply   string
	// Also names more keys whose latest reply becomes Reply when the turn
	// is applied: the core keeps a user's latest reply in a channel there,
	// for "/agent share" typed in the channel rather than in the thread.
	Also []string
}

// Sessions keeps which Agent session each conversation uses, the agent it
// chose and its latest agent reply.
type Sessions interface {
	// Session returns the session of the conversation key; ok is false when
	// the conversation has none.
	Session(ctx context.Context, key string) (s Session, ok bool, err error)
	// PutSession stores s under s.Key, replacing any previous record.
	PutSession(ctx context.Context, s Session) error
	// DeleteSession forgets the conversation's session and reports whether
	// there was one.
	DeleteSession(ctx context.Context, key string) (bool, error)
	// ListSessions returns the sessions whose key starts with prefix, in key order.
	ListSessions(ctx context.Context, prefix string) ([]Session, error)
	// ConversationAgent returns the agent the conversation chose.
	ConversationAgent(ctx context.Context, key string) (agent string, ok bool, err error)
	// SetConversationAgent records the conversation's agent; "" forgets it.
	SetConversationAgent(ctx context.Context, key, agent string) error
	// LastReply returns the conversation's latest agent reply.
	LastReply(ctx context.Context, key string) (text string, ok bool, err error)
	// PutTurns records answered messages that have no inbox entry (the
	// console's), in one write, each only while its conversation still maps
	// to the turn's session. It reports how many were applied.
	PutTurns(ctx context.Context, turns []Turn) (int, error)
}

// InboxState is where an inbox entry is on its way to an answer.
type InboxState int

// The states of an inbox entry, in the only order they are taken.
const (
	// Received: recorded before the platform was acknowledged; nothing of it
	// has reached the AI workspace. After a crash it is processed normally.
	Received InboxState = iota + 1
	// Sent: its request may have reached the workspace. After a crash it is
	// never sent again; its user is told instead.
	Sent
	// Answered: its user has the answer (or was told why there is none). It
	// is kept until it expires, so that late retries are recognised.
	Answered
)

func (s InboxState) String() string {
	switch s {
	case Received:
		return "received"
	case Sent:
		return "sent"
	case Answered:
		return "answered"
	}
	return "unknown"
}

// InboxEntry is one platform event held in the inbox.
type InboxEntry struct {
	// Key is the event's platform key, unique per platform event, such as
	// "slack/msg/C0456/1716212345.000100" or "discord/int/1234".
	Key string
	// Seq orders entries by arrival; Receive assigns it.
	Seq uint64
	// Conversation is the conversation key of the event.
	Conversation string
	// Order is the event's place in its platform's order of the
	// conversation (bridge.Event.Order). A shared inbox returns a
	// conversation's entries in it, ties in Seq order; others keep Seq
	// order and may leave it 0.
	Order int64
	State InboxState
	// Event is the event as the core encoded it; the store does not read it.
	Event []byte
	// Reply names the answer (a message reference) once answered.
	Reply string
	// Outbox is the answer of a Sent entry recorded before it was posted
	// (Outbox.PutReply), in the core's encoding; nil until then, and once
	// answered. After a crash the core posts it, once, instead of telling
	// the user the request may be lost.
	Outbox []byte
	// StoppedBy is who stopped the entry's work (Stops.Stop); "" when
	// nobody did.
	StoppedBy string
	// Received is when the entry was recorded; Updated when its state last changed.
	Received, Updated time.Time
}

// ErrUnknownEntry is returned (wrapped) for a state change of a key the
// inbox does not hold.
var ErrUnknownEntry = errors.New("no such inbox entry")

// ErrAlreadySent is returned (wrapped) by MarkSent for an entry that is no
// longer Received: another process (a replica, or one that started while
// this one was answering) marked it sent or answered it, and it is that
// process's to answer. MarkSent is the compare-and-set that makes a request
// leave for the workspace at most once.
var ErrAlreadySent = errors.New("inbox entry sent or answered already")

// ErrNoTime is returned (wrapped) for a change whose time is zero (an
// entry's Received, a now, an audit entry's, a vote's or an answer's Time):
// every time a store records is the caller's, from the core's one clock,
// and a store never fills one in from its own.
var ErrNoTime = errors.New("zero time: the caller gives the time")

// ErrLeaseLost is returned (wrapped) by a state change made under a lease
// (SharedInbox.MarkSentUnder) that the holder no longer has: it expired,
// or another holder took it. Nothing is changed; the work is the lease's
// next holder's.
var ErrLeaseLost = errors.New("lease lost")

// Inbox holds platform events from before their acknowledgement until they
// are answered, and answered ones until they expire. Every method writes
// before it returns (durably, for a persistent backend); concurrent writes
// may share one commit.
type Inbox interface {
	// Receive records e (with State Received, a new Seq and Updated equal to
	// e.Received, which must be set) and reports true, or reports false and
	// writes nothing when an entry with e.Key is already held, whatever its
	// state.
	Receive(ctx context.Context, e InboxEntry) (bool, error)
	// MarkSent moves the entry from Received to Sent: its request is about
	// to leave for the workspace. An entry already Sent or Answered gives an
	// error wrapping ErrAlreadySent, whoever moved it.
	MarkSent(ctx context.Context, key string, now time.Time) error
	// Finish moves the entry to Answered with the reply's reference. When
	// turn is not nil it is applied in the same write, and only while
	// turn.Session.Key still maps to turn.Session.SessionUUID (a reset or a
	// newer session since is left alone).
	Finish(ctx context.Context, key, reply string, turn *Turn, now time.Time) error
	// Pending returns the entries not yet answered, in Seq order.
	Pending(ctx context.Context) ([]InboxEntry, error)
	// EntryState returns the state of the entry key; ok is false when the
	// inbox holds no such entry (never received, or expired).
	EntryState(ctx context.Context, key string) (state InboxState, ok bool, err error)
	// ExpireInbox deletes the answered entries last updated before before,
	// and returns how many.
	ExpireInbox(ctx context.Context, before time.Time) (int, error)
}

// Outbox is implemented by an inbox that keeps an entry's answer from when
// it is known until the platform has accepted it: the outbound half of the
// inbox's promise. Finish then closes the entry.
type Outbox interface {
	// PutReply records reply as the answer of the entry (Received or Sent),
	// which becomes Sent with Outbox set to reply, replacing any answer
	// recorded before. When turn is not nil it is applied in the same
	// write, by Finish's rule. An Answered entry gives an error wrapping
	// ErrAlreadySent, a stopped one (Stops) one wrapping ErrStopped, and a
	// key the inbox does not hold one wrapping ErrUnknownEntry; in each
	// case nothing is written.
	PutReply(ctx context.Context, key string, reply []byte, turn *Turn, now time.Time) error
}

// RecentInbox says how far each conversation's platform order was
// recorded: what an adapter whose platform does not redeliver (Discord)
// needs to fetch what it missed while down.
type RecentInbox interface {
	// LastOrders returns, per conversation with entries keyed under
	// keyPrefix and received at or after since, their highest Order.
	LastOrders(ctx context.Context, keyPrefix string, since time.Time) (map[string]int64, error)
}

// AuditEntry records one flow run, refusal or confirmation.
type AuditEntry struct {
	// Time is when it happened; AppendAudit refuses a zero Time (ErrNoTime).
	Time         time.Time
	Platform     string
	User         string
	UserName     string
	Channel      string
	Conversation string
	Flow         string
	Params       map[string]string
	// Outcome is one of the Outcome constants.
	Outcome  string
	Detail   string
	Duration time.Duration
	// Approver is who answered a flow's request for approval (the user ID
	// of the approver who approved or refused it); "" for a run nobody
	// else approved.
	Approver string
}

// Audit outcomes: every value the core writes, and no other.
const (
	// OutcomeStarted is written before a flow run is sent, so a crash during
	// the run still leaves a trace of it.
	OutcomeStarted   = "started"
	OutcomeOK        = "ok"
	OutcomeFailed    = "failed" // the workspace answered that the flow failed
	OutcomeError     = "error"
	OutcomeTimeout   = "timeout"
	OutcomeRefused   = "refused"
	OutcomeInvalid   = "invalid"
	OutcomeConfirm   = "confirm_asked"
	OutcomeCancelled = "cancelled"
	OutcomeCutOff    = "cut_off"
	// OutcomeStopped is a run its user (or an admin) stopped: its result,
	// if the flow finished in the workspace, was not posted.
	OutcomeStopped = "stopped"
	// OutcomeInterrupted is written at start-up for a run that was under way
	// when the previous process stopped.
	OutcomeInterrupted = "interrupted"
	// OutcomeExpired is written for a request for approval that nobody
	// answered in time.
	OutcomeExpired = "expired"
)

// Outcomes lists every audit outcome, for validation and help texts.
var Outcomes = []string{OutcomeStarted, OutcomeOK, OutcomeFailed, OutcomeError, OutcomeTimeout, OutcomeRefused,
	OutcomeInvalid, OutcomeConfirm, OutcomeCancelled, OutcomeCutOff, OutcomeStopped, OutcomeInterrupted, OutcomeExpired}

// AuditFilter selects audit entries; its conditions are ANDed and zero
// values match everything.
type AuditFilter struct {
	// Since (inclusive) and Until (exclusive) bound the entries' time.
	Since, Until time.Time
	// Flow, User, Outcome and Platform match exactly when set.
	Flow, User, Outcome, Platform string
	// Limit caps the entries returned (0: no cap).
	Limit int
	// Newest keeps the Limit most recent entries instead of the oldest; the
	// result is still oldest first.
	Newest bool
}

// Audit is the append-only log of flow runs.
type Audit interface {
	// AppendAudit appends e.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// Audit returns the entries f selects, oldest first.
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	// PruneAudit deletes the entries older than before and returns how many.
	PruneAudit(ctx context.Context, before time.Time) (int, error)
}

// Prober says whether the store answers. After a failed write the core
// probes it until it does, so that its readiness recovers without waiting
// for traffic.
type Prober interface {
	// Ping returns nil when the store answers, within ctx.
	Ping(ctx context.Context) error
}

// Store is everything the core keeps durably; every backend implements all
// of it (sessionmap.Store and postgres.Store claim it at compile time). It
// is one contract whether one process uses the store (bbolt, which admits
// one process, so one holder of every lease) or several replicas share it
// (PostgreSQL): the core runs the same delivery path on both.
type Store interface {
	Sessions
	Leases
	SharedInbox
	Tokens
	Inbox
	Outbox
	Stops
	RecentInbox
	Audit
	Contexts
	AdapterStates
	Feedback
	Schedules
	Prober
}

// EntryLease names the lease under which one inbox entry runs on its own,
// beside its conversation's order (a flow run, a button press), when
// replicas share a store: the conversation's lease is the conversation key,
// an entry's is this name of its key, so a replica that dies while running
// it loses it like any other lease.
func EntryLease(key string) string { return "entry:" + key }
