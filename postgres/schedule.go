package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClaimRun records at as the latest run of the schedule name unless a run
// at at or later is recorded already. One statement: of replicas claiming
// the same run at once, the row lock lets one move last_run and the others
// find it moved.
func (s *Store) ClaimRun(ctx context.Context, name string, at time.Time) (bool, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return false, fmt.Errorf("claim run: %w", err)
	}
	defer cancel()
	var one int
	err = s.pool.QueryRow(ctx, `
		INSERT INTO schedule_runs (schedule, last_run) VALUES ($1, $2)
		ON CONFLICT (schedule) DO UPDATE SET last_run = EXCLUDED.last_run
		WHERE schedule_runs.last_run < EXCLUDED.last_run
		RETURNING 1`, cleanText(name), at).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim run: %w", err)
	}
	return true, nil
}

// LastRun returns the latest run recorded for name.
func (s *Store) LastRun(ctx context.Context, name string) (time.Time, bool, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("last run: %w", err)
	}
	defer cancel()
	var at time.Time
	err = s.pool.QueryRow(ctx, `SELECT last_run FROM schedule_runs WHERE schedule = $1`, cleanText(name)).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("last run: %w", err)
	}
	return at, true, nil
}
