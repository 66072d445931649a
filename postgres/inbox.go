package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// Receive records e, with State Received, a new Seq and Updated equal to
// Received, and reports true; or reports false and writes nothing when the
// inbox holds e.Key already, whatever its state. A zero e.Received is the
// current time. It is one INSERT … ON CONFLICT DO NOTHING, so of any number
// of deliveries of one key, on any number of replicas, exactly one is new.
// A key that is empty or longer than MaxKeyLen, or a conversation key longer
// than that, is an error of this call alone.
func (s *Store) Receive(e store.InboxEntry) (bool, error) {
	err := checkKey("inbox key", e.Key)
	if err == nil && e.Conversation != "" {
		err = checkKey("conversation key", e.Conversation)
	}
	if err != nil {
		return false, fmt.Errorf("receive: %w", err)
	}
	ctx, cancel, err := s.op()
	if err != nil {
		return false, fmt.Errorf("receive %q: %w", e.Key, err)
	}
	defer cancel()
	if e.Received.IsZero() {
		e.Received = time.Now()
	}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO inbox (key, conversation, state, event, received, updated) VALUES ($1, $2, $3, $4, $5, $5)
		ON CONFLICT (key) DO NOTHING`,
		e.Key, e.Conversation, int16(store.Received), e.Event, e.Received)
	if err != nil {
		return false, fmt.Errorf("receive %q: %w", e.Key, err)
	}
	return tag.RowsAffected() == 1, nil
}

// errAnswered is a state change asked of an entry that is answered.
var errAnswered = errors.New("inbox entry is answered already")

// MarkSent moves the entry to Sent: its request is about to leave for the
// workspace. An entry already Sent stays as it is; an Answered one is an
// error, since an entry never goes back. A key the inbox does not hold gives
// an error wrapping store.ErrUnknownEntry. A zero now is the current time.
func (s *Store) MarkSent(key string, now time.Time) error {
	ctx, cancel, err := s.op()
	if err != nil {
		return fmt.Errorf("mark sent %q: %w", key, err)
	}
	defer cancel()
	if now.IsZero() {
		now = time.Now()
	}
	err = s.moved(ctx, key, store.Sent, func() (int64, error) {
		tag, err := s.pool.Exec(ctx, `UPDATE inbox SET state = $2, updated = $3 WHERE key = $1 AND state = $4`,
			key, int16(store.Sent), now, int16(store.Received))
		return tag.RowsAffected(), err
	})
	if err != nil {
		return fmt.Errorf("mark sent %q: %w", key, err)
	}
	return nil
}

// finishEntry answers an entry that is not answered yet, dropping its event.
const finishEntry = `UPDATE inbox SET state = $2, reply = $3, updated = $4, event = NULL WHERE key = $1 AND state < $2`

// finishWithTurn is finishEntry and applyTurn in one statement: the turn's
// UPDATE runs only when the entry's did.
const finishWithTurn = `
	WITH answered AS (
		UPDATE inbox SET state = $2, reply = $3, updated = $4, event = NULL
		WHERE key = $1 AND state < $2
		RETURNING key),
	turn AS (
		UPDATE sessions SET agent = $6, created = $8, last_used = $9
		WHERE key = $5 AND session_uuid = $7 AND EXISTS (SELECT FROM answered)
		RETURNING key),
	reply AS (
		INSERT INTO last_replies (conversation, reply)
		SELECT DISTINCT k, $10 FROM turn, unnest(turn.key || $11::text[]) AS k
		ON CONFLICT (conversation) DO UPDATE SET reply = EXCLUDED.reply)
	SELECT count(*) FROM answered`

// Finish moves the entry (Received or Sent) to Answered with the reply's
// reference. When turn is not nil it is applied in the same statement, by
// PutTurns' rule: only while turn.Session.Key still maps to
// turn.Session.SessionUUID. A key the inbox does not hold gives an error
// wrapping store.ErrUnknownEntry, and an entry answered already an error;
// either way nothing is written, the turn included. A zero now is the
// current time.
func (s *Store) Finish(key, reply string, turn *store.Turn, now time.Time) error {
	if turn != nil {
		if err := checkTurn(*turn); err != nil {
			return fmt.Errorf("finish %q: %w", key, err)
		}
	}
	ctx, cancel, err := s.op()
	if err != nil {
		return fmt.Errorf("finish %q: %w", key, err)
	}
	defer cancel()
	if now.IsZero() {
		now = time.Now()
	}
	args := []any{key, int16(store.Answered), cleanText(reply), now}
	err = s.moved(ctx, key, store.Answered, func() (n int64, err error) {
		if turn == nil {
			tag, err := s.pool.Exec(ctx, finishEntry, args...)
			return tag.RowsAffected(), err
		}
		err = s.pool.QueryRow(ctx, finishWithTurn, append(args, turnArgs(*turn)...)...).Scan(&n)
		return n, err
	})
	if err != nil {
		return fmt.Errorf("finish %q: %w", key, err)
	}
	return nil
}

// moved runs move, a state change of the entry of key to state that reports
// the rows it changed, and when it changed none tells why: the key is
// unknown (store.ErrUnknownEntry), the entry is answered already, or (for
// Sent) it was Sent already, which is no error.
func (s *Store) moved(ctx context.Context, key string, state store.InboxState, move func() (int64, error)) error {
	if !storable(key) {
		return store.ErrUnknownEntry
	}
	n, err := move()
	if err != nil || n > 0 {
		return err
	}
	var v int16
	err = s.pool.QueryRow(ctx, `SELECT state FROM inbox WHERE key = $1`, key).Scan(&v)
	cur := store.InboxState(v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrUnknownEntry
	case err != nil:
		return err
	case cur == store.Answered:
		return errAnswered
	case cur == state:
		return nil
	}
	// The entry moved under the statement, between its snapshot and its lock.
	return fmt.Errorf("inbox entry changed to %v meanwhile", cur)
}

// Pending returns the entries not yet answered (Received or Sent), in Seq
// order, with their events.
func (s *Store) Pending() ([]store.InboxEntry, error) {
	ctx, cancel, err := s.op()
	if err != nil {
		return nil, fmt.Errorf("pending inbox: %w", err)
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT key, seq, conversation, state, event, reply, received, updated
		FROM inbox WHERE state < $1 ORDER BY seq`, int16(store.Answered))
	if err != nil {
		return nil, fmt.Errorf("pending inbox: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.InboxEntry, error) {
		var e store.InboxEntry
		var seq int64
		var state int16
		err := row.Scan(&e.Key, &seq, &e.Conversation, &state, &e.Event, &e.Reply, &e.Received, &e.Updated)
		e.Seq, e.State = uint64(seq), store.InboxState(state)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("pending inbox: %w", err)
	}
	return out, nil
}

// ExpireInbox deletes the answered entries last updated before before, and
// returns how many, in statements of at most s.batch rows: a backlog never
// holds many row locks for long. Rows another replica is deleting are
// skipped (it counts them). Entries not yet answered stay, however old.
func (s *Store) ExpireInbox(before time.Time) (int, error) {
	n, err := s.deleteBatches(`
		DELETE FROM inbox WHERE key IN (
			SELECT key FROM inbox WHERE state = $3 AND updated < $1
			ORDER BY updated LIMIT $2 FOR UPDATE SKIP LOCKED)`, before, int16(store.Answered))
	if err != nil {
		return n, fmt.Errorf("expire inbox: %w", err)
	}
	return n, nil
}

// deleteBatches runs q (a DELETE of at most $2 rows older than $1, with
// more arguments after) until a run deletes fewer than s.batch, and returns
// the rows deleted. Each run is its own transaction under its own deadline.
func (s *Store) deleteBatches(q string, before time.Time, more ...any) (int, error) {
	total := 0
	for {
		ctx, cancel, err := s.op()
		if err != nil {
			return total, err
		}
		tag, err := s.pool.Exec(ctx, q, append([]any{before, s.batch}, more...)...)
		cancel()
		if err != nil {
			return total, err
		}
		total += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(s.batch) {
			return total, nil
		}
	}
}
