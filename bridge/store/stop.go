package store

import (
	"context"
	"errors"
	"time"
)

// ErrStopped is returned (wrapped) by Outbox.PutReply for an entry a user
// stopped: its answer must not be posted. Nothing is written.
var ErrStopped = errors.New("inbox entry stopped")

// Stops keeps the Stop a user pressed on an entry's work (a running agent
// turn or flow run). A stop is one more fact of an inbox entry, kept like
// its state: a process that runs the entry, on any replica and after any
// restart, reads it and posts nothing of the entry's answer.
type Stops interface {
	// Stop marks the entry key stopped by who (a user ID) and reports
	// true. An entry answered already, or stopped already, is left as it
	// is (the first stop's who kept) and Stop reports false; a key the
	// inbox does not hold gives an error wrapping ErrUnknownEntry.
	Stop(ctx context.Context, key, who string, now time.Time) (bool, error)
}
