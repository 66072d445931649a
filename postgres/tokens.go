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

// PutToken keeps data under id until expires, replacing what id held. The
// tokens are what a button carries the name of (a flow run waiting for its
// Run, a result waiting to be shared), kept here so that a press reaching
// any replica finds them. Each call also deletes a few tokens expired
// before now, so they never pile up; due ones (store.DueTokenPrefix) stay
// until taken.
func (s *Store) PutToken(ctx context.Context, id string, data []byte, expires, now time.Time) error {
	err := checkKey("token", id)
	if err == nil {
		err = errors.Join(checkTime("expiry", expires), checkTime("now", now))
	}
	if err != nil {
		return fmt.Errorf("put token: %w", err)
	}
	if s.closed.Load() {
		return fmt.Errorf("put token: %w", ErrClosed)
	}
	if _, err := s.pool.Exec(ctx, `
		WITH expired AS (
			DELETE FROM tokens WHERE id IN (
				SELECT id FROM tokens WHERE expires_at < $4 AND NOT starts_with(id, $5)
				ORDER BY expires_at LIMIT 16 FOR UPDATE SKIP LOCKED))
		INSERT INTO tokens (id, data, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data, expires_at = EXCLUDED.expires_at`,
		id, data, expires, now, store.DueTokenPrefix); err != nil {
		return fmt.Errorf("put token: %w", err)
	}
	return nil
}

// TakeToken removes the token id and returns its data and expiry; ok is
// false when there is none. Of any number of takers, on any replicas, one
// gets it. An expired token is returned too: the caller says it expired.
func (s *Store) TakeToken(ctx context.Context, id string) (data []byte, expires time.Time, ok bool, err error) {
	if s.closed.Load() {
		return nil, time.Time{}, false, fmt.Errorf("take token: %w", ErrClosed)
	}
	if !storable(id) {
		return nil, time.Time{}, false, nil
	}
	err = s.pool.QueryRow(ctx, `DELETE FROM tokens WHERE id = $1 RETURNING data, expires_at`, id).Scan(&data, &expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, time.Time{}, false, nil
	case err != nil:
		return nil, time.Time{}, false, fmt.Errorf("take token: %w", err)
	}
	return data, expires, true, nil
}

// DueTokens returns the IDs of at most limit tokens under prefix (which
// starts with store.DueTokenPrefix) expired before now, earliest expiry
// first, through the expiry index. Replicas listing at once see the same
// IDs; TakeToken gives each to one of them.
func (s *Store) DueTokens(ctx context.Context, prefix string, now time.Time, limit int) ([]string, error) {
	if !strings.HasPrefix(prefix, store.DueTokenPrefix) {
		return nil, fmt.Errorf("due tokens under %q: the prefix must start with %q", prefix, store.DueTokenPrefix)
	}
	if err := checkTime("now", now); err != nil {
		return nil, fmt.Errorf("due tokens: %w", err)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("due tokens: %w", ErrClosed)
	}
	if !storable(prefix) || limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT id FROM tokens WHERE expires_at < $2 AND starts_with(id, $1)
		ORDER BY expires_at, id LIMIT $3`, prefix, now, limit)
	if err != nil {
		return nil, fmt.Errorf("due tokens: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("due tokens: %w", err)
	}
	return ids, nil
}
