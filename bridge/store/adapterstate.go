package store

import (
	"context"
	"time"
)

// AdapterState is what an adapter keeps for itself rather than for a
// conversation: a Discord shard's gateway session, which the next process
// RESUMEs, or the bot's count of IDENTIFYs against Discord's daily budget.
// The text is the adapter's own encoding; the store does not read it.
type AdapterState struct {
	// Text is the adapter's state; "" when none is kept.
	Text string
	// Version is the record's version, which every write moves on: the
	// compare-and-set of PutAdapterState. It is 0 for a name never
	// written, and a name whose state was forgotten ("" written) keeps its
	// version, so that a write based on a read from before cannot succeed.
	Version int64
	// Updated is the caller's time of the last write.
	Updated time.Time
}

// AdapterStates keeps adapters' state under names of their choosing
// ("discord/gateway/0-of-1"), apart from every conversation's records: no
// prune, expiry or listing of conversations touches it. Replicas sharing a
// store share it, so a read-modify-write (a count every replica adds to)
// goes through PutAdapterState's compare-and-set and is retried when it
// loses.
type AdapterStates interface {
	// AdapterState returns the state kept under name; found is false when
	// none is ("" was written, or nothing), and s.Version is then still
	// the version to pass to PutAdapterState.
	AdapterState(ctx context.Context, name string) (s AdapterState, found bool, err error)
	// PutAdapterState writes text under name, stamped updated (which must
	// be set: ErrNoTime), if the version kept is still want (0: never
	// written), and reports whether it did; when another write came
	// first it writes nothing and reports false. "" forgets the state but
	// keeps its version.
	PutAdapterState(ctx context.Context, name, text string, updated time.Time, want int64) (ok bool, err error)
}

// LegacyAdapterStatePrefix starts the context-record keys (Contexts) under
// which flowbridge kept adapter state before AdapterStates: a backend
// moves such records to its adapter states when it opens or migrates a
// store, the name being the rest of the key.
const LegacyAdapterStatePrefix = "adapter-state/"
