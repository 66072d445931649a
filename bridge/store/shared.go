package store

import (
	"context"
	"time"
)

// Leases are named claims on work among replicas. A lease names a
// conversation (its key) or one inbox entry (EntryLease); its holder alone
// runs that work until the lease expires.
//
// Expiry is judged by the store's clock (on PostgreSQL, the database's
// now()), not by the caller's: replicas' clocks differ, and one clock
// among them is what makes two claimants agree on whether a lease is live.
// The ttl is a duration for that reason, not a time.
type Leases interface {
	// Claim takes or renews holder's lease on name for ttl and reports
	// whether holder has it.
	Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// Renew renews holder's leases among names and returns those renewed.
	Renew(ctx context.Context, holder string, names []string, ttl time.Duration) ([]string, error)
	// Release gives up holder's lease on name.
	Release(ctx context.Context, name, holder string) error
	// Holders returns the holders of live leases, each once, in no
	// particular order. Every process that runs work keeps a lease of its
	// own (ReplicaLease) while it runs, idle or not, so these are the live
	// processes sharing the store: one alone knows that no other is
	// recording its conversations' events.
	Holders(ctx context.Context) ([]string, error)
}

// ReplicaLease names the lease a process holds for as long as it runs,
// beside those of its work, so that Holders lists it while it is idle too.
func ReplicaLease(holder string) string { return "replica:" + holder }

// SharedInbox is the inbox as the core's dispatcher reads it: what a
// process (one of several replicas, or the only one) needs to find the work
// it is to do.
type SharedInbox interface {
	// PendingOf returns the conversation's unanswered entries in the
	// platform's order: by Order, ties by Seq.
	PendingOf(ctx context.Context, conversation string) ([]InboxEntry, error)
	// Unleased returns conversations with unanswered entries older than
	// minAge and no live lease, neither the conversation's nor the entry's.
	// Age, like lease expiry, is judged by the store's clock, against the
	// entries' Received (the recording replica's clock): minAge is a grace
	// of seconds, far above the skew between replicas' clocks.
	Unleased(ctx context.Context, minAge time.Duration, limit int) ([]string, error)
	// Listen calls f with the conversation of every entry recorded, by any
	// replica, until ctx ends or the connection fails; f("") first.
	Listen(ctx context.Context, f func(conversation string)) error
	// MarkSentUnder is MarkSent made only while holder's lease on name is
	// live, in one step; otherwise it changes nothing and returns an error
	// wrapping ErrLeaseLost.
	MarkSentUnder(ctx context.Context, key, name, holder string, now time.Time) error
}

// Tokens keep what a button names (a result that may be shared, a flow run
// waiting for its Run), so that a press after a restart, or reaching any
// replica, finds it.
type Tokens interface {
	// PutToken keeps data under id until expires, replacing what id held.
	// It may delete tokens expired before now, other than due ones
	// (DueTokenPrefix).
	PutToken(ctx context.Context, id string, data []byte, expires, now time.Time) error
	// TakeToken removes the token id and returns it, expired or not; of
	// several takers, one gets it. ok is false when there is none.
	TakeToken(ctx context.Context, id string) (data []byte, expires time.Time, ok bool, err error)
	// DueTokens returns the IDs of at most limit tokens under prefix, which
	// starts with DueTokenPrefix, that expired before now, earliest expiry
	// first. It removes nothing: the caller takes each (TakeToken), so
	// that of several replicas listing at once, one acts on each.
	DueTokens(ctx context.Context, prefix string, now time.Time, limit int) ([]string, error)
}

// DueTokenPrefix starts the ID of a token whose expiry is news for
// someone (a request for approval nobody answered: its requester is told).
// Such a token outlives its expiry until it is taken: no sweep deletes it,
// and DueTokens finds it, so that its expiry is acted on once even after a
// restart.
const DueTokenPrefix = "due:"
