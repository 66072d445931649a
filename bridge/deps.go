package bridge

import (
	"context"
	"time"

	"github.com/flowbridge/flowbridge/bridge/workspace"
)

// Workspace is the AI workspace API the bridge calls; *workspace.Client implements it.
type Workspace interface {
	RunFlowSync(ctx context.Context, flowUUID string, params map[string]string, timeout time.Duration) (*workspace.FlowRun, error)
	Chat(ctx context.Context, agentUUID, sessionUUID, message string) (*workspace.ChatReply, error)
	CreateSession(ctx context.Context, agentUUID string) (string, error)
}

// Session is the Agent session a conversation is mapped to.
type Session struct {
	Agent       string // agent name
	SessionUUID string
	Created     time.Time
	LastUsed    time.Time
}

// AuditEntry records one flow run, refusal or confirmation.
type AuditEntry struct {
	Time         time.Time
	Platform     string
	User         string
	UserName     string
	Channel      string
	Conversation string
	Flow         string
	Params       map[string]string
	Outcome      string
	Detail       string
	Duration     time.Duration
}

// Audit outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"
	OutcomeTimeout   = "timeout"
	OutcomeRefused   = "refused"
	OutcomeInvalid   = "invalid"
	OutcomeConfirm   = "confirm_asked"
	OutcomeCancelled = "cancelled"
	OutcomeCutOff    = "cut_off"
)

// Store keeps what must survive a restart: which session each conversation
// uses, its chosen agent, its latest agent reply, seen platform events and the
// audit log. sessionmap/bridgestore adapts the bbolt store to it.
type Store interface {
	LoadSession(key string) (Session, bool, error)
	SaveSession(key string, s Session) error
	DeleteSession(key string) (bool, error)
	ConversationAgent(key string) (string, bool, error)
	SetConversationAgent(key, agent string) error
	LastReply(key string) (string, bool, error)
	// SaveTurns records answered messages in one write, each only while its
	// conversation still maps to the turn's session.
	SaveTurns(turns []Turn) error
	// EventSeen reports whether a platform event ID was recorded and has not expired.
	EventSeen(id string, now time.Time) (bool, error)
	// MarkEvents records delivered event IDs, to expire ttl after now.
	MarkEvents(ids []string, ttl time.Duration, now time.Time) error
	AppendAudit(e AuditEntry) error
}
