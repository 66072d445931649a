package postgres

import (
	"context"
	"fmt"
	"time"
)

// pruneSessions deletes a batch of sessions last used (never used:
// created) before $1, at most $2 of them, with their conversations' agent
// choices, contexts and latest replies, and counts them. Rows another
// replica has locked (a turn moving last_used on) are skipped, and a
// session whose last_used moved past $1 meanwhile is not deleted.
const pruneSessions = `
	WITH gone AS (
		DELETE FROM sessions WHERE key IN (
			SELECT key FROM sessions WHERE coalesce(last_used, created) < $1
			ORDER BY key LIMIT $2 FOR UPDATE SKIP LOCKED)
		AND coalesce(last_used, created) < $1
		RETURNING key
	), agents AS (
		DELETE FROM conversation_agents WHERE conversation IN (SELECT key FROM gone)
	), contexts AS (
		DELETE FROM conversation_contexts WHERE conversation IN (SELECT key FROM gone)
	), replies AS (
		DELETE FROM last_replies WHERE conversation IN (SELECT key FROM gone)
	)
	SELECT count(*) FROM gone`

// PruneSessions forgets the sessions last used (a session never used:
// created) before before, and with each its conversation's agent choice,
// context and latest reply, and returns how many, in statements of at most
// s.batch sessions. A session with neither time is kept. Latest replies
// carry no time here, so they go with their session only.
func (s *Store) PruneSessions(ctx context.Context, before time.Time) (int, error) {
	total := 0
	for {
		octx, cancel, err := s.op(ctx)
		if err != nil {
			return total, fmt.Errorf("prune sessions: %w", err)
		}
		var n int
		err = s.pool.QueryRow(octx, pruneSessions, before, s.batch).Scan(&n)
		cancel()
		if err != nil {
			return total, fmt.Errorf("prune sessions: %w", err)
		}
		total += n
		if n < s.batch {
			return total, nil
		}
	}
}
