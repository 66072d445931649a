package store

import (
	"context"
	"time"
)

// Context is what the user of a conversation has open beside it, as the
// platform reports it (Slack's assistant thread context: the channel they
// are viewing), in a sentence for the agent.
type Context struct {
	// Key is the conversation key. (Adapters' own state is a record of
	// its own: AdapterStates.)
	Key string
	// Text is the sentence; never empty in a stored record.
	Text string
	// Told is set once the agent has been sent Text, so it is sent once
	// per change rather than with every message.
	Told bool
	// Updated is when the record was last written.
	Updated time.Time
}

// Contexts keeps each conversation's context.
type Contexts interface {
	// ConversationContext returns the conversation's context; ok is false
	// when it has none.
	ConversationContext(ctx context.Context, key string) (c Context, ok bool, err error)
	// PutConversationContext stores c under c.Key, replacing any previous
	// record; an empty c.Text deletes it.
	PutConversationContext(ctx context.Context, c Context) error
}
