package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// Session returns the session of the conversation key; ok is false when the
// conversation has none.
func (s *Store) Session(ctx context.Context, key string) (rec store.Session, ok bool, err error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return store.Session{}, false, fmt.Errorf("session %q: %w", key, err)
	}
	defer cancel()
	if !storable(key) {
		return store.Session{}, false, nil
	}
	var created, lastUsed *time.Time
	rec.Key = key
	err = s.pool.QueryRow(ctx, `SELECT agent, session_uuid, created, last_used FROM sessions WHERE key = $1`, key).
		Scan(&rec.Agent, &rec.SessionUUID, &created, &lastUsed)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Session{}, false, nil
	}
	if err != nil {
		return store.Session{}, false, fmt.Errorf("session %q: %w", key, err)
	}
	rec.Created, rec.LastUsed = timeOf(created), timeOf(lastUsed)
	return rec, true, nil
}

// PutSession stores rec under rec.Key, replacing any previous record.
func (s *Store) PutSession(ctx context.Context, rec store.Session) error {
	if err := checkSession(rec); err != nil {
		return fmt.Errorf("put session: %w", err)
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return fmt.Errorf("put session %q: %w", rec.Key, err)
	}
	defer cancel()
	_, err = s.pool.Exec(ctx, `
		INSERT INTO sessions (key, agent, session_uuid, created, last_used) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (key) DO UPDATE SET agent = EXCLUDED.agent, session_uuid = EXCLUDED.session_uuid,
			created = EXCLUDED.created, last_used = EXCLUDED.last_used`,
		rec.Key, rec.Agent, rec.SessionUUID, nullTime(rec.Created), nullTime(rec.LastUsed))
	if err != nil {
		return fmt.Errorf("put session %q: %w", rec.Key, err)
	}
	return nil
}

// checkSession refuses a record the Store cannot keep as it is.
func checkSession(rec store.Session) error {
	return errors.Join(
		checkKey("conversation key", rec.Key),
		checkText("agent", rec.Agent),
		checkText("session id", rec.SessionUUID))
}

// DeleteSession forgets the session of the conversation key and reports
// whether there was one. The conversation's agent choice and last reply stay.
func (s *Store) DeleteSession(ctx context.Context, key string) (bool, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return false, fmt.Errorf("delete session %q: %w", key, err)
	}
	defer cancel()
	if !storable(key) {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE key = $1`, key)
	if err != nil {
		return false, fmt.Errorf("delete session %q: %w", key, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ListSessions returns the sessions whose key starts with prefix ("" for
// all), in byte order of their keys: a range scan of the primary key.
func (s *Store) ListSessions(ctx context.Context, prefix string) ([]store.Session, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions %q: %w", prefix, err)
	}
	defer cancel()
	if checkText("", prefix) != nil {
		return nil, nil // no key holds what the prefix does
	}
	const q = `SELECT key, agent, session_uuid, created, last_used FROM sessions`
	var rows pgx.Rows
	switch end, bounded := prefixEnd(prefix); {
	case prefix == "":
		rows, err = s.pool.Query(ctx, q+` ORDER BY key`)
	case bounded:
		rows, err = s.pool.Query(ctx, q+` WHERE key >= $1 AND key < $2 ORDER BY key`, prefix, end)
	default:
		rows, err = s.pool.Query(ctx, q+` WHERE key >= $1 ORDER BY key`, prefix)
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions %q: %w", prefix, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Session, error) {
		var rec store.Session
		var created, lastUsed *time.Time
		err := row.Scan(&rec.Key, &rec.Agent, &rec.SessionUUID, &created, &lastUsed)
		rec.Created, rec.LastUsed = timeOf(created), timeOf(lastUsed)
		return rec, err
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions %q: %w", prefix, err)
	}
	return out, nil
}

// prefixEnd returns the least string above every string that starts with
// prefix (valid UTF-8): prefix with its last code point incremented, the
// surrogates skipped. UTF-8 sorts by bytes as code points do, so with keys
// compared as bytes, "starts with prefix" is the range [prefix, end).
// bounded is false when prefix is all U+10FFFF, which no string passes.
func prefixEnd(prefix string) (end string, bounded bool) {
	for p := prefix; p != ""; {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF: // the surrogates follow, and are not text
			r = 0xE000
		default:
			r++
		}
		return p + string(r), true
	}
	return "", false
}

// ConversationAgent returns the agent the conversation chose with
// /agent use; ok is false when it uses the default agent.
func (s *Store) ConversationAgent(ctx context.Context, key string) (string, bool, error) {
	agent, ok, err := s.text(ctx, `SELECT agent FROM conversation_agents WHERE conversation = $1`, key)
	if err != nil {
		return "", false, fmt.Errorf("conversation agent %q: %w", key, err)
	}
	return agent, ok, nil
}

// SetConversationAgent records the conversation's agent; an empty agent
// removes the choice, so the conversation falls back to the default.
func (s *Store) SetConversationAgent(ctx context.Context, key, agent string) error {
	err := errors.Join(checkKey("conversation key", key), checkText("agent", agent))
	if err != nil {
		return fmt.Errorf("set conversation agent: %w", err)
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return fmt.Errorf("set conversation agent %q: %w", key, err)
	}
	defer cancel()
	if agent == "" {
		_, err = s.pool.Exec(ctx, `DELETE FROM conversation_agents WHERE conversation = $1`, key)
	} else {
		_, err = s.pool.Exec(ctx, `
			INSERT INTO conversation_agents (conversation, agent) VALUES ($1, $2)
			ON CONFLICT (conversation) DO UPDATE SET agent = EXCLUDED.agent`, key, agent)
	}
	if err != nil {
		return fmt.Errorf("set conversation agent %q: %w", key, err)
	}
	return nil
}

// LastReply returns the latest Agent reply of the conversation, for
// /agent share; ok is false when there is none.
func (s *Store) LastReply(ctx context.Context, key string) (string, bool, error) {
	text, ok, err := s.text(ctx, `SELECT reply FROM last_replies WHERE conversation = $1`, key)
	if err != nil {
		return "", false, fmt.Errorf("last reply %q: %w", key, err)
	}
	return text, ok, nil
}

// text runs q, a query of one text column by key.
func (s *Store) text(ctx context.Context, q, key string) (text string, ok bool, err error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return "", false, err
	}
	defer cancel()
	if !storable(key) {
		return "", false, nil
	}
	err = s.pool.QueryRow(ctx, q, key).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return text, true, nil
}

// applyTurn writes a turn's session and reply only while the conversation
// still maps to the turn's session: the UPDATE's WHERE is the whole rule,
// and the reply is written (for the conversation and the turn's Also keys)
// for the row it updated, or not at all. It returns 1 when the turn was
// applied, else 0.
const applyTurn = `
	WITH turn AS (
		UPDATE sessions SET agent = $2, created = $4, last_used = $5
		WHERE key = $1 AND session_uuid = $3
		RETURNING key),
	reply AS (
		INSERT INTO last_replies (conversation, reply)
		SELECT DISTINCT k, $6 FROM turn, unnest(turn.key || $7::text[]) AS k ORDER BY k
		ON CONFLICT (conversation) DO UPDATE SET reply = EXCLUDED.reply)
	SELECT count(*) FROM turn`

// turnArgs are the arguments of applyTurn, after checkTurn.
func turnArgs(t store.Turn) []any {
	also := t.Also
	if also == nil {
		also = []string{}
	}
	return []any{t.Session.Key, t.Session.Agent, t.Session.SessionUUID,
		nullTime(t.Session.Created), nullTime(t.Session.LastUsed), cleanText(t.Reply), also}
}

func checkTurn(t store.Turn) error {
	err := checkSession(t.Session)
	for _, k := range t.Also {
		err = errors.Join(err, checkKey("reply key", k))
	}
	if err != nil {
		return fmt.Errorf("turn: %w", err)
	}
	return nil
}

// PutTurns records answered messages in one transaction, each by the rule
// of Finish: a turn is applied only while its conversation still maps to
// the turn's session, so a turn written after /agent reset (or after a new
// session replaced the old one) does not bring the old mapping back. Turns
// apply in order, so the later of two for one conversation wins. It reports
// how many were applied; a turn the Store cannot keep fails the call before
// anything is written.
func (s *Store) PutTurns(ctx context.Context, turns []store.Turn) (int, error) {
	if len(turns) == 0 {
		return 0, nil
	}
	for _, t := range turns {
		if err := checkTurn(t); err != nil {
			return 0, fmt.Errorf("put turns: %w", err)
		}
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return 0, fmt.Errorf("put %d turns: %w", len(turns), err)
	}
	defer cancel()
	var applied int
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		applied = 0
		var b pgx.Batch
		for _, t := range turns {
			b.Queue(applyTurn, turnArgs(t)...).QueryRow(func(row pgx.Row) error {
				var n int
				err := row.Scan(&n)
				applied += n
				return err
			})
		}
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return 0, fmt.Errorf("put %d turns: %w", len(turns), err)
	}
	return applied, nil
}
