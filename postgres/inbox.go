package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// Receive records e, with State Received, a new Seq and Updated equal to
// Received, and reports true; or reports false and writes nothing when the
// inbox holds e.Key already, whatever its state. A zero e.Received is
// refused. Of any number of deliveries of one key, on any number of
// replicas, exactly one is new: Receives under way at once share one
// INSERT … ON CONFLICT (key) DO NOTHING, and so one commit (see s.recv).
// A key that is empty or longer than MaxKeyLen, a conversation key longer
// than that, or a time PostgreSQL cannot hold is an error of this call
// alone: it is refused before it joins a batch.
func (s *Store) Receive(ctx context.Context, e store.InboxEntry) (bool, error) {
	err := checkKey("inbox key", e.Key)
	if err == nil && e.Conversation != "" {
		err = checkKey("conversation key", e.Conversation)
	}
	if err == nil {
		err = checkTime("received", e.Received)
	}
	if err != nil {
		return false, fmt.Errorf("receive: %w", err)
	}
	if s.closed.Load() {
		return false, fmt.Errorf("receive %q: %w", e.Key, ErrClosed)
	}
	// The batch's statement is not this call's to cut off (insertKeys):
	// ctx is checked before the entry joins one.
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("receive %q: %w", e.Key, err)
	}
	r := &receiveReq{e: e}
	s.recv.Do(r)
	if r.err != nil {
		return false, fmt.Errorf("receive %q: %w", e.Key, r.err)
	}
	return r.isNew, nil
}

// Receives under way at once share one statement and one commit
// (groupcommit.Group, s.recv): a lone Receive never waits for company, and
// under load each commit carries every event that arrived while the one
// before ran. (One batch at a time beats two or four here: the commit's
// flush is the cost, and fewer commits carry more each.)

// A batch holds at most maxBatch entries and, past its leader's,
// maxBatchBytes of events.
const (
	maxBatch      = 256
	maxBatchBytes = 4 << 20
)

type receiveReq struct {
	e     store.InboxEntry
	isNew bool
	err   error
}

// batchLen returns how many of queue join a leader's batch.
func batchLen(queue []*receiveReq) int {
	n, size := 0, 0
	for n < len(queue) && n < maxBatch-1 && size+len(queue[n].e.Event) <= maxBatchBytes {
		size += len(queue[n].e.Event)
		n++
	}
	return n
}

// receiveBatch inserts the entries of a batch, each unless its key is held
// already, and returns the keys it inserted. Seqs follow the batch's order
// (the lowest to its first entry), but rows go in in key order: a row
// inserted and not yet committed holds up a batch of another replica that
// inserts the same key, so two batches that met the same keys in opposite
// orders would deadlock. Of two entries of one key in a batch, the first is
// inserted and the second conflicts with it.
const receiveBatch = `
	WITH seqs AS (
		SELECT nextval(pg_get_serial_sequence('inbox', 'seq')) AS seq
		FROM generate_series(1, cardinality($1::text[]))),
	numbered AS (
		SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM seqs)
	INSERT INTO inbox (key, seq, conversation, ord, state, event, received, updated) OVERRIDING SYSTEM VALUE
	SELECT e.key, numbered.seq, e.conversation, e.ord, $5, e.event, e.received, e.received
	FROM unnest($1::text[], $2::text[], $3::bytea[], $4::timestamptz[], $6::bigint[])
		WITH ORDINALITY AS e(key, conversation, event, received, ord, n)
	JOIN numbered USING (n)
	ORDER BY e.key, e.n
	ON CONFLICT (key) DO NOTHING
	RETURNING key`

// receiveOne is receiveBatch for a batch of one.
const receiveOne = `
	INSERT INTO inbox (key, conversation, event, received, updated, state, ord) VALUES ($1, $2, $3, $4, $4, $5, $6)
	ON CONFLICT (key) DO NOTHING`

// insertBatch inserts batch and sets each request's result: new for the
// first request of each key inserted, or the statement's error for all,
// since then none was written.
func (s *Store) insertBatch(batch []*receiveReq) {
	inserted, err := s.insertKeys(batch)
	for _, r := range batch {
		r.err = err
		if inserted[r.e.Key] {
			r.isNew = true
			delete(inserted, r.e.Key)
		}
	}
}

// lockConversations takes a transaction's advisory lock on each of the
// batch's conversations, in one order (the subquery's) so that two batches
// never wait on each other. Why: seqs are given when a row is inserted and
// become visible when its transaction commits, and two replicas' inserts
// of one conversation could commit in the other order than their seqs. A
// holder that read the inbox between the two commits would see the higher
// seq alone and run it first. Under the lock, a conversation's entries
// commit in seq order, so what a reader sees of it is always a prefix.
const lockConversations = `
	SELECT pg_advisory_xact_lock(h) FROM (
		SELECT DISTINCT hashtextextended(c, 0) AS h FROM unnest($1::text[]) AS c
		WHERE c <> '' ORDER BY 1) AS convs`

// insertKeys inserts batch in one transaction (the lock, then one statement;
// one round trip) and returns the keys it inserted.
func (s *Store) insertKeys(batch []*receiveReq) (map[string]bool, error) {
	// The statement is the whole batch's, not one caller's: no caller's
	// context may cut it off for the others, so it runs under the store's
	// own deadline alone.
	ctx, cancel, err := s.op(context.Background())
	if err != nil {
		return nil, err
	}
	defer cancel()
	keys, convs := make([]string, len(batch)), make([]string, len(batch))
	events, received := make([][]byte, len(batch)), make([]time.Time, len(batch))
	ords := make([]int64, len(batch))
	for i, r := range batch {
		keys[i], convs[i], events[i], received[i], ords[i] = r.e.Key, r.e.Conversation, r.e.Event, r.e.Received, r.e.Order
	}
	// A batch of statements runs as one implicit transaction.
	b := &pgx.Batch{}
	b.Queue(lockConversations, convs)
	if len(batch) == 1 { // alone: the plain statement takes half the time
		e := batch[0].e
		b.Queue(receiveOne, e.Key, e.Conversation, e.Event, e.Received, int16(store.Received), e.Order)
	} else {
		b.Queue(receiveBatch, keys, convs, events, received, int16(store.Received), ords)
	}
	br := s.pool.SendBatch(ctx, b)
	got, err := readInserted(br, len(batch) == 1, keys)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	inserted := make(map[string]bool, len(got))
	for _, k := range got {
		inserted[k] = true
	}
	return inserted, nil
}

// readInserted reads insertKeys' results: the lock's, then the keys the
// insert wrote.
func readInserted(br pgx.BatchResults, one bool, keys []string) ([]string, error) {
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	if one {
		tag, err := br.Exec()
		if err != nil || tag.RowsAffected() != 1 {
			return nil, err
		}
		return keys[:1], nil
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// errAnswered is a state change asked of an entry that is answered.
var errAnswered = errors.New("inbox entry is answered already")

// MarkSent moves the entry to Sent: its request is about to leave for the
// workspace. An entry already Sent stays as it is; an Answered one is an
// error, since an entry never goes back. A key the inbox does not hold gives
// an error wrapping store.ErrUnknownEntry. A zero now is refused (store.ErrNoTime).
func (s *Store) MarkSent(ctx context.Context, key string, now time.Time) error {
	return s.markSent(ctx, key, "", "", now)
}

// MarkSentUnder is MarkSent made only while holder's lease on name (a
// conversation key or a store.EntryLease) is live by the database's clock,
// in the same statement, which holds the lease row until it commits: a
// replica that stalled past its lease cannot mark an entry sent, and so
// never sends it, once the lease has lapsed or passed to another replica.
// Then it returns an error wrapping store.ErrLeaseLost and changes nothing.
func (s *Store) MarkSentUnder(ctx context.Context, key, name, holder string, now time.Time) error {
	return s.markSent(ctx, key, name, holder, now)
}

const (
	markSentSQL      = `UPDATE inbox SET state = $2, updated = $3 WHERE key = $1 AND state = $4`
	markSentUnderSQL = `
		WITH lease AS (
			SELECT FROM leases WHERE conversation = $5 AND holder = $6 AND expires_at >= now() FOR SHARE)
		UPDATE inbox SET state = $2, updated = $3
		WHERE key = $1 AND state = $4 AND EXISTS (SELECT FROM lease)`
)

// markSent moves the entry of key from Received to Sent, under holder's
// lease on name when name is set, and tells why when it moved nothing.
func (s *Store) markSent(ctx context.Context, key, name, holder string, now time.Time) error {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return fmt.Errorf("mark sent %q: %w", key, err)
	}
	defer cancel()
	if err := checkTime("now", now); err != nil {
		return fmt.Errorf("mark sent %q: %w", key, err)
	}
	update, args := markSentSQL, []any{key, int16(store.Sent), now, int16(store.Received)}
	if name != "" {
		update, args = markSentUnderSQL, append(args, name, holder)
	}
	err = s.moved(ctx, key, store.Sent, func() (int64, error) {
		tag, err := s.pool.Exec(ctx, update, args...)
		return tag.RowsAffected(), err
	})
	var changed *changedError
	switch {
	case errors.Is(err, errAnswered):
		err = fmt.Errorf("%w: %w", store.ErrAlreadySent, err)
	case name != "" && errors.As(err, &changed) && changed.now == store.Received:
		// Still received, so what failed was the lease.
		err = fmt.Errorf("%w: %q is not %s's", store.ErrLeaseLost, name, holder)
	}
	if err != nil {
		return fmt.Errorf("mark sent %q: %w", key, err)
	}
	return nil
}

// finishEntry answers an entry that is not answered yet, dropping its event.
const finishEntry = `UPDATE inbox SET state = $2, reply = $3, updated = $4, event = NULL, outbox = NULL WHERE key = $1 AND state < $2`

// finishWithTurn is finishEntry and applyTurn in one statement: the turn's
// UPDATE runs only when the entry's did.
const finishWithTurn = `
	WITH moved AS (
		UPDATE inbox SET state = $2, reply = $3, updated = $4, event = NULL, outbox = NULL
		WHERE key = $1 AND state < $2
		RETURNING key),` + turnAfterMoved

// turnAfterMoved ends a statement whose CTE moved changed an inbox entry:
// it applies the turn ($5 to $11, turnArgs) only when the entry moved, and
// counts the entries moved.
const turnAfterMoved = `
	turn AS (
		UPDATE sessions SET agent = $6, created = $8, last_used = $9
		WHERE key = $5 AND session_uuid = $7 AND EXISTS (SELECT FROM moved)
		RETURNING key),
	reply AS (
		INSERT INTO last_replies (conversation, reply)
		SELECT DISTINCT k, $10 FROM turn, unnest(turn.key || $11::text[]) AS k ORDER BY k
		ON CONFLICT (conversation) DO UPDATE SET reply = EXCLUDED.reply)
	SELECT count(*) FROM moved`

// Finish moves the entry (Received or Sent) to Answered with the reply's
// reference. When turn is not nil it is applied in the same statement, by
// PutTurns' rule: only while turn.Session.Key still maps to
// turn.Session.SessionUUID. A key the inbox does not hold gives an error
// wrapping store.ErrUnknownEntry, and an entry answered already an error;
// either way nothing is written, the turn included. A zero now is
// refused (store.ErrNoTime). A stopped entry (Stop) is answered all the
// same, whether or not an answer was kept for it before the stop.
func (s *Store) Finish(ctx context.Context, key, reply string, turn *store.Turn, now time.Time) error {
	if turn != nil {
		if err := checkTurn(*turn); err != nil {
			return fmt.Errorf("finish %q: %w", key, err)
		}
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return fmt.Errorf("finish %q: %w", key, err)
	}
	defer cancel()
	if err := checkTime("now", now); err != nil {
		return fmt.Errorf("finish %q: %w", key, err)
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

// putReply keeps an entry's answer until it is posted; the entry becomes
// Sent, so that no process sends its request again. A stopped entry is
// left alone, in the same statement as Stop's compare-and-set (stopEntry)
// on the same row, so that of the two exactly one goes first.
const putReply = `UPDATE inbox SET state = $2, outbox = $3, updated = $4 WHERE key = $1 AND state < $5 AND stopped_by = ''`

// putReplyWithTurn is putReply and applyTurn in one statement, as
// finishWithTurn is.
const putReplyWithTurn = `
	WITH moved AS (
		UPDATE inbox SET state = $2, outbox = $3, updated = $4
		WHERE key = $1 AND state < $12 AND stopped_by = ''
		RETURNING key),` + turnAfterMoved

// PutReply keeps reply as the answer of the entry (Received or Sent) until
// it is posted: the entry becomes Sent with reply in its outbox column,
// and turn, when not nil, is applied in the same statement by Finish's
// rule. An answered entry gives an error wrapping store.ErrAlreadySent, a
// stopped one (Stop) one wrapping store.ErrStopped, a key the inbox does
// not hold one wrapping store.ErrUnknownEntry; in each case nothing is
// written. A zero now is refused (store.ErrNoTime).
func (s *Store) PutReply(ctx context.Context, key string, reply []byte, turn *store.Turn, now time.Time) error {
	if turn != nil {
		if err := checkTurn(*turn); err != nil {
			return fmt.Errorf("put reply %q: %w", key, err)
		}
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return fmt.Errorf("put reply %q: %w", key, err)
	}
	defer cancel()
	if err := checkTime("now", now); err != nil {
		return fmt.Errorf("put reply %q: %w", key, err)
	}
	if reply == nil {
		reply = []byte{} // NULL is "no answer kept"
	}
	args := []any{key, int16(store.Sent), reply, now}
	if !storable(key) {
		return fmt.Errorf("put reply %q: %w", key, store.ErrUnknownEntry)
	}
	var n int64
	if turn == nil {
		tag, err := s.pool.Exec(ctx, putReply, append(args, int16(store.Answered))...)
		if err != nil {
			return fmt.Errorf("put reply %q: %w", key, err)
		}
		n = tag.RowsAffected()
	} else {
		args = append(append(args, turnArgs(*turn)...), int16(store.Answered))
		if err := s.pool.QueryRow(ctx, putReplyWithTurn, args...).Scan(&n); err != nil {
			return fmt.Errorf("put reply %q: %w", key, err)
		}
	}
	if n > 0 {
		return nil
	}
	return fmt.Errorf("put reply %q: %w", key, s.whyNoReply(ctx, key))
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
		// Only MarkSent gets here (Finish moves to Answered, above): the
		// entry was marked sent by someone else, whose it is to answer.
		return store.ErrAlreadySent
	}
	// The entry moved under the statement, between its snapshot and its
	// lock; or, for MarkSentUnder, it is as it was and the lease failed.
	return &changedError{now: cur}
}

// changedError is a state change that found its entry in another state
// than the statement expected, and neither answered nor in the target one.
type changedError struct{ now store.InboxState }

func (e *changedError) Error() string {
	return fmt.Sprintf("inbox entry changed to %v meanwhile", e.now)
}

// Pending returns the entries not yet answered (Received or Sent), in Seq
// order, with their events.
func (s *Store) Pending(ctx context.Context) ([]store.InboxEntry, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, fmt.Errorf("pending inbox: %w", err)
	}
	defer cancel()
	out, err := s.pending(ctx, `
		SELECT key, seq, conversation, ord, state, event, reply, outbox, stopped_by, received, updated
		FROM inbox WHERE state < $1 ORDER BY seq`, int16(store.Answered))
	if err != nil {
		return nil, fmt.Errorf("pending inbox: %w", err)
	}
	return out, nil
}

// PendingOf returns the conversation's entries not yet answered, in the
// platform's order (Order, then Seq), with their events: the work of the
// replica holding the conversation's lease.
func (s *Store) PendingOf(ctx context.Context, conversation string) ([]store.InboxEntry, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("pending inbox of %q: %w", conversation, ErrClosed)
	}
	if !storable(conversation) {
		return nil, nil
	}
	out, err := s.pending(ctx, `
		SELECT key, seq, conversation, ord, state, event, reply, outbox, stopped_by, received, updated
		FROM inbox WHERE conversation = $2 AND state < $1 ORDER BY ord, seq`, int16(store.Answered), conversation)
	if err != nil {
		return nil, fmt.Errorf("pending inbox of %q: %w", conversation, err)
	}
	return out, nil
}

func (s *Store) pending(ctx context.Context, q string, args ...any) ([]store.InboxEntry, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.InboxEntry, error) {
		var e store.InboxEntry
		var seq int64
		var state int16
		err := row.Scan(&e.Key, &seq, &e.Conversation, &e.Order, &state, &e.Event, &e.Reply, &e.Outbox, &e.StoppedBy, &e.Received, &e.Updated)
		e.Seq, e.State = uint64(seq), store.InboxState(state)
		return e, err
	})
}

// ExpireInbox deletes the answered entries last updated before before, and
// returns how many, in statements of at most s.batch rows: a backlog never
// holds many row locks for long. Rows another replica is deleting are
// skipped (it counts them). Entries not yet answered stay, however old.
func (s *Store) ExpireInbox(ctx context.Context, before time.Time) (int, error) {
	n, err := s.deleteBatches(ctx, `
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
func (s *Store) deleteBatches(ctx context.Context, q string, before time.Time, more ...any) (int, error) {
	total := 0
	for {
		ctx, cancel, err := s.op(ctx)
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

// LastOrders returns, for each conversation with inbox entries whose key
// starts with keyPrefix and that were received at or after since, the
// highest Order among them: how far the platform's order of the
// conversation was recorded (a Discord adapter catches up on what came
// after). Entries without an Order are left out.
func (s *Store) LastOrders(ctx context.Context, keyPrefix string, since time.Time) (map[string]int64, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("last orders: %w", ErrClosed)
	}
	like := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(keyPrefix) + "%"
	rows, err := s.pool.Query(ctx, `
		SELECT conversation, max(ord) FROM inbox
		WHERE key LIKE $1 AND received >= $2 AND ord > 0 AND conversation <> ''
		GROUP BY conversation`, like, since)
	if err != nil {
		return nil, fmt.Errorf("last orders: %w", err)
	}
	out := make(map[string]int64)
	var conv string
	var ord int64
	_, err = pgx.ForEachRow(rows, []any{&conv, &ord}, func() error {
		out[conv] = ord
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("last orders: %w", err)
	}
	return out, nil
}

// EntryState returns the state of the entry key; ok is false when the inbox
// holds none.
func (s *Store) EntryState(ctx context.Context, key string) (store.InboxState, bool, error) {
	if s.closed.Load() {
		return 0, false, fmt.Errorf("entry state %q: %w", key, ErrClosed)
	}
	if !storable(key) {
		return 0, false, nil
	}
	var state int16
	err := s.pool.QueryRow(ctx, `SELECT state FROM inbox WHERE key = $1`, key).Scan(&state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("entry state %q: %w", key, err)
	}
	return store.InboxState(state), true, nil
}
