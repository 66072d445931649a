package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// The store keeps the Stops contract beside the inbox and outbox it guards.
var _ store.Stops = (*Store)(nil)

// stopEntry is Stop's compare-and-set: the row changes only while it is
// not answered and nobody stopped it, judged on the row as it is when the
// statement holds its lock, so a PutReply committed meanwhile is seen (and
// is no obstacle), and of two Stops the first keeps its who.
const stopEntry = `UPDATE inbox SET stopped_by = $2, updated = $3 WHERE key = $1 AND state < $4 AND stopped_by = ''`

// Stop marks the entry of key stopped by who, updated at now, and reports
// true: PutReply then refuses it (store.ErrStopped). An entry answered
// already, or stopped already, is left as it is, the first stop's who kept,
// and Stop reports false. A key the inbox does not hold gives an error
// wrapping store.ErrUnknownEntry. A zero now is refused (store.ErrNoTime),
// and so is an empty who.
func (s *Store) Stop(ctx context.Context, key, who string, now time.Time) (bool, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return false, fmt.Errorf("stop %q: %w", key, err)
	}
	defer cancel()
	if err := checkTime("now", now); err != nil {
		return false, fmt.Errorf("stop %q: %w", key, err)
	}
	if err := checkKey("stopping user", who); err != nil {
		return false, fmt.Errorf("stop %q: %w", key, err)
	}
	if !storable(key) {
		return false, fmt.Errorf("stop %q: %w", key, store.ErrUnknownEntry)
	}
	tag, err := s.pool.Exec(ctx, stopEntry, key, who, now, int16(store.Answered))
	if err != nil {
		return false, fmt.Errorf("stop %q: %w", key, err)
	}
	if tag.RowsAffected() > 0 {
		return true, nil
	}
	// Nothing changed: answered or stopped already, which is no error, or
	// no such entry.
	var held bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM inbox WHERE key = $1)`, key).Scan(&held); err != nil {
		return false, fmt.Errorf("stop %q: %w", key, err)
	}
	if !held {
		return false, fmt.Errorf("stop %q: %w", key, store.ErrUnknownEntry)
	}
	return false, nil
}

// whyNoReply tells why PutReply's statement changed no row: the key is
// unknown, the entry is answered, or it is stopped. The row is read after
// the statement, and only ever moves on (answered, stopped), never back,
// so what it says holds of the statement too.
func (s *Store) whyNoReply(ctx context.Context, key string) error {
	var state int16
	var by string
	err := s.pool.QueryRow(ctx, `SELECT state, stopped_by FROM inbox WHERE key = $1`, key).Scan(&state, &by)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrUnknownEntry
	case err != nil:
		return err
	case store.InboxState(state) == store.Answered:
		return fmt.Errorf("%w: %w", store.ErrAlreadySent, errAnswered)
	case by != "":
		return fmt.Errorf("%w by %s", store.ErrStopped, by)
	}
	// Not answered, not stopped, yet not changed: it cannot be, since
	// neither goes back; say so rather than report success.
	return fmt.Errorf("inbox entry %v and not stopped, yet its answer was not written", store.InboxState(state))
}
