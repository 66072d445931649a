package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Claim takes or renews the lease of holder on the conversation for ttl, and
// reports whether holder has it: true when the lease was free, expired or
// holder's already (its expiry then moves to ttl from now), false when
// another holder's has not expired. It is one statement (see the package
// documentation), so of several claimants exactly one wins, and expiry is
// judged by the database's clock. ttl is at least a microsecond.
func (s *Store) Claim(ctx context.Context, conversation, holder string, ttl time.Duration) (bool, error) {
	err := errors.Join(checkKey("conversation key", conversation), checkKey("lease holder", holder))
	if err == nil && ttl < time.Microsecond {
		err = fmt.Errorf("lease of %v: want a microsecond or more", ttl)
	}
	if err != nil {
		return false, fmt.Errorf("claim: %w", err)
	}
	if s.closed.Load() {
		return false, fmt.Errorf("claim %q: %w", conversation, ErrClosed)
	}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO leases AS l (conversation, holder, expires_at)
		VALUES ($1, $2, now() + $3 * interval '1 microsecond')
		ON CONFLICT (conversation) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
		WHERE l.expires_at < now() OR l.holder = EXCLUDED.holder`,
		conversation, holder, ttl.Microseconds())
	if err != nil {
		return false, fmt.Errorf("claim %q: %w", conversation, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Release gives up holder's lease on the conversation, so another holder
// may Claim it at once. A lease that is not holder's (another's, or none)
// is left alone, and that is no error.
func (s *Store) Release(ctx context.Context, conversation, holder string) error {
	if s.closed.Load() {
		return fmt.Errorf("release %q: %w", conversation, ErrClosed)
	}
	if !storable(conversation) || !storable(holder) {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE conversation = $1 AND holder = $2`, conversation, holder); err != nil {
		return fmt.Errorf("release %q: %w", conversation, err)
	}
	return nil
}
