package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// PutVote records v as its user's vote on its reply and returns the value it
// replaced. The row is locked while it is read and written, so of two
// replicas taking presses of one user at once, the second sees the first's
// vote.
func (s *Store) PutVote(ctx context.Context, v store.Vote) (string, error) {
	if err := checkTime("vote", v.Time); err != nil {
		return "", fmt.Errorf("put vote: %w", err)
	}
	if v.Reply == "" || v.User == "" {
		return "", errors.New("put vote: reply and user are required")
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return "", fmt.Errorf("put vote: %w", err)
	}
	defer cancel()
	var previous string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		previous = ""
		reply, platform, user := cleanText(v.Reply), cleanText(v.Platform), cleanText(v.User)
		err := tx.QueryRow(ctx, `SELECT vote FROM feedback WHERE reply = $1 AND platform = $2 AND user_id = $3 FOR UPDATE`,
			reply, platform, user).Scan(&previous)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if previous == v.Value {
			return nil
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO feedback (reply, platform, user_id, user_name, conversation, session, agent, vote, at,
				message, link, turn, excerpt)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (reply, platform, user_id) DO UPDATE SET
				user_name = EXCLUDED.user_name, conversation = EXCLUDED.conversation, session = EXCLUDED.session,
				agent = EXCLUDED.agent, vote = EXCLUDED.vote, at = EXCLUDED.at, message = EXCLUDED.message,
				link = EXCLUDED.link, turn = EXCLUDED.turn, excerpt = EXCLUDED.excerpt`,
			reply, platform, user, cleanText(v.UserName), cleanText(v.Conversation), cleanText(v.Session),
			cleanText(v.Agent), cleanText(v.Value), v.Time, cleanText(v.Message), cleanText(v.Link),
			cleanText(v.Turn), cleanText(v.Excerpt))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("put vote: %w", err)
	}
	return previous, nil
}

// Votes returns the votes f selects, oldest first.
func (s *Store) Votes(ctx context.Context, f store.FeedbackFilter) ([]store.Vote, error) {
	var l listQuery
	l.window(f.Since, f.Until)
	l.equal("agent", f.Agent)
	l.equal("user_id", f.User)
	l.equal("vote", f.Value)
	l.equal("platform", f.Platform)
	l.equal("reply", f.Reply)
	q := l.sql(`SELECT reply, platform, user_id, user_name, conversation, session, agent, vote, at,
		message, link, turn, excerpt FROM feedback`, "at, reply, platform, user_id", f.Limit)
	return list(ctx, s, "votes", q, l.args, func(row pgx.CollectableRow) (store.Vote, error) {
		var v store.Vote
		err := row.Scan(&v.Reply, &v.Platform, &v.User, &v.UserName, &v.Conversation, &v.Session, &v.Agent, &v.Value, &v.Time,
			&v.Message, &v.Link, &v.Turn, &v.Excerpt)
		return v, err
	})
}

// PutAnswer records a, replacing the Answer with its platform and reply.
func (s *Store) PutAnswer(ctx context.Context, a store.Answer) error {
	if a.Reply == "" {
		return errors.New("put answer: reply is required")
	}
	if err := checkTime("answer", a.Time); err != nil {
		return fmt.Errorf("put answer: %w", err)
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return fmt.Errorf("put answer: %w", err)
	}
	defer cancel()
	_, err = s.pool.Exec(ctx, `
		INSERT INTO feedback_answers (platform, reply, conversation, agent, session, turn, excerpt, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (platform, reply) DO UPDATE SET
			conversation = EXCLUDED.conversation, agent = EXCLUDED.agent, session = EXCLUDED.session,
			turn = EXCLUDED.turn, excerpt = EXCLUDED.excerpt, at = EXCLUDED.at`,
		cleanText(a.Platform), cleanText(a.Reply), cleanText(a.Conversation), cleanText(a.Agent),
		cleanText(a.Session), cleanText(a.Turn), cleanText(a.Excerpt), a.Time)
	if err != nil {
		return fmt.Errorf("put answer: %w", err)
	}
	return nil
}

// Answer returns the Answer recorded under platform and reply.
func (s *Store) Answer(ctx context.Context, platform, reply string) (store.Answer, bool, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return store.Answer{}, false, fmt.Errorf("answer: %w", err)
	}
	defer cancel()
	var a store.Answer
	err = s.pool.QueryRow(ctx, `
		SELECT platform, reply, conversation, agent, session, turn, excerpt, at
		FROM feedback_answers WHERE platform = $1 AND reply = $2`, cleanText(platform), cleanText(reply)).
		Scan(&a.Platform, &a.Reply, &a.Conversation, &a.Agent, &a.Session, &a.Turn, &a.Excerpt, &a.Time)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Answer{}, false, nil
	case err != nil:
		return store.Answer{}, false, fmt.Errorf("answer: %w", err)
	}
	return a, true, nil
}

// PruneAnswers deletes the Answers recorded before before, in batches.
func (s *Store) PruneAnswers(ctx context.Context, before time.Time) (int, error) {
	n, err := s.deleteBatches(ctx, `
		DELETE FROM feedback_answers WHERE (platform, reply) IN (
			SELECT platform, reply FROM feedback_answers WHERE at < $1 ORDER BY at LIMIT $2 FOR UPDATE SKIP LOCKED)`, before)
	if err != nil {
		return n, fmt.Errorf("prune answers: %w", err)
	}
	return n, nil
}
