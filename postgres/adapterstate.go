package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// AdapterState returns the state kept under name; found is false when none
// is, s.Version being then the version to write over.
func (s *Store) AdapterState(ctx context.Context, name string) (store.AdapterState, bool, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return store.AdapterState{}, false, fmt.Errorf("adapter state %q: %w", name, err)
	}
	defer cancel()
	if !storable(name) {
		return store.AdapterState{}, false, nil
	}
	var st store.AdapterState
	err = s.pool.QueryRow(ctx, `SELECT text, version, updated FROM adapter_states WHERE name = $1`, name).
		Scan(&st.Text, &st.Version, &st.Updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.AdapterState{}, false, nil
	}
	if err != nil {
		return store.AdapterState{}, false, fmt.Errorf("adapter state %q: %w", name, err)
	}
	return st, st.Text != "", nil
}

// PutAdapterState writes text under name if the version kept is still
// want: an INSERT that does nothing when the row exists for want 0, an
// UPDATE of the row at version want otherwise. Under read committed, of
// two concurrent UPDATEs at one version the second re-reads the row the
// first wrote, finds its version moved on, and updates nothing.
func (s *Store) PutAdapterState(ctx context.Context, name, text string, updated time.Time, want int64) (bool, error) {
	if err := errors.Join(checkKey("adapter state name", name), checkText("adapter state", text)); err != nil {
		return false, fmt.Errorf("put adapter state: %w", err)
	}
	if updated.IsZero() {
		return false, fmt.Errorf("put adapter state %q: %w", name, store.ErrNoTime)
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return false, fmt.Errorf("put adapter state %q: %w", name, err)
	}
	defer cancel()
	at := updated.Truncate(time.Microsecond)
	var n int64
	if want == 0 {
		tag, err := s.pool.Exec(ctx, `
			INSERT INTO adapter_states (name, text, version, updated) VALUES ($1, $2, 1, $3)
			ON CONFLICT (name) DO NOTHING`, name, text, at)
		if err != nil {
			return false, fmt.Errorf("put adapter state %q: %w", name, err)
		}
		n = tag.RowsAffected()
	} else {
		tag, err := s.pool.Exec(ctx, `
			UPDATE adapter_states SET text = $2, version = version + 1, updated = $3
			WHERE name = $1 AND version = $4`, name, text, at, want)
		if err != nil {
			return false, fmt.Errorf("put adapter state %q: %w", name, err)
		}
		n = tag.RowsAffected()
	}
	return n == 1, nil
}
