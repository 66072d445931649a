package bridge

import (
	"context"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/bridge/workspace"
)

// Workspace is the AI workspace API the bridge calls; *workspace.Client implements it.
type Workspace interface {
	RunFlowSync(ctx context.Context, flowUUID string, params map[string]string, timeout time.Duration) (*workspace.FlowRun, error)
	Chat(ctx context.Context, agentUUID, sessionUUID, message string) (*workspace.ChatReply, error)
	CreateSession(ctx context.Context, agentUUID string) (string, error)
}

// Store is what the bridge keeps durably (store.Store: sessions, the inbox
// and outbox, the audit log, contexts, feedback, schedules). Both backends
// implement it; a store.Shared (PostgreSQL) makes the bridge a replica. The
// records and interfaces are defined once, in bridge/store.
type Store = store.Store

// The durable records, under the names the bridge has always used.
type (
	// Session is the Agent session a conversation is mapped to.
	Session = store.Session
	// Turn is an answered message: the session with LastUsed moved on, and the reply.
	Turn = store.Turn
	// AuditEntry records one flow run, refusal or confirmation.
	AuditEntry = store.AuditEntry
)

// Audit outcomes.
const (
	OutcomeStarted     = store.OutcomeStarted
	OutcomeOK          = store.OutcomeOK
	OutcomeFailed      = store.OutcomeFailed
	OutcomeError       = store.OutcomeError
	OutcomeTimeout     = store.OutcomeTimeout
	OutcomeRefused     = store.OutcomeRefused
	OutcomeInvalid     = store.OutcomeInvalid
	OutcomeConfirm     = store.OutcomeConfirm
	OutcomeCancelled   = store.OutcomeCancelled
	OutcomeCutOff      = store.OutcomeCutOff
	OutcomeStopped     = store.OutcomeStopped
	OutcomeInterrupted = store.OutcomeInterrupted
	OutcomeExpired     = store.OutcomeExpired
)
