package postgres

import (
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
func (s *Store) PutVote(v store.Vote) (string, error) {
	if v.Time.IsZero() {
		v.Time = time.Now()
	}
	if v.Reply == "" || v.User == "" {
		return "", errors.New("put vote: reply and user are required")
	}
	ctx, cancel, err := s.op()
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
			INSERT INTO feedback (reply, platform, user_id, user_name, conversation, session, agent, vote, at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (reply, platform, user_id) DO UPDATE SET
				user_name = EXCLUDED.user_name, conversation = EXCLUDED.conversation, session = EXCLUDED.session,
				agent = EXCLUDED.agent, vote = EXCLUDED.vote, at = EXCLUDED.at`,
			reply, platform, user, cleanText(v.UserName), cleanText(v.Conversation), cleanText(v.Session),
			cleanText(v.Agent), cleanText(v.Value), v.Time)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("put vote: %w", err)
	}
	return previous, nil
}

// Votes returns the votes f selects, oldest first.
func (s *Store) Votes(f store.FeedbackFilter) ([]store.Vote, error) {
	var l listQuery
	l.window(f.Since, f.Until)
	l.equal("agent", f.Agent)
	l.equal("user_id", f.User)
	l.equal("vote", f.Value)
	l.equal("platform", f.Platform)
	l.equal("reply", f.Reply)
	q := l.sql(`SELECT reply, platform, user_id, user_name, conversation, session, agent, vote, at FROM feedback`, "at, reply, platform, user_id", f.Limit)
	return list(s, "votes", q, l.args, func(row pgx.CollectableRow) (store.Vote, error) {
		var v store.Vote
		err := row.Scan(&v.Reply, &v.Platform, &v.User, &v.UserName, &v.Conversation, &v.Session, &v.Agent, &v.Value, &v.Time)
		return v, err
	})
}
