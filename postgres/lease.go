package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
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

// Holders returns the holders of live leases by the database's clock,
// each once: with each replica's own lease (store.ReplicaLease), the live
// replicas sharing the schema.
func (s *Store) Holders(ctx context.Context) ([]string, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("holders: %w", ErrClosed)
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT holder FROM leases WHERE expires_at >= now()`)
	if err != nil {
		return nil, fmt.Errorf("holders: %w", err)
	}
	holders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("holders: %w", err)
	}
	return holders, nil
}

// Renew moves on, to ttl from now, the leases of holder among names, and
// returns the names it renewed: a name missing from them is no longer
// holder's (another holder took it over after it expired). One statement
// renews every lease a replica holds, so a heartbeat costs one round trip
// however many conversations it runs.
func (s *Store) Renew(ctx context.Context, holder string, names []string, ttl time.Duration) ([]string, error) {
	if ttl < time.Microsecond {
		return nil, fmt.Errorf("renew: lease of %v: want a microsecond or more", ttl)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("renew: %w", ErrClosed)
	}
	if len(names) == 0 || !storable(holder) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
		UPDATE leases SET expires_at = now() + $3 * interval '1 microsecond'
		WHERE holder = $1 AND conversation = ANY($2::text[])
		RETURNING conversation`, holder, names, ttl.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("renew: %w", err)
	}
	renewed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("renew: %w", err)
	}
	return renewed, nil
}

// Unleased returns, in no particular order and at most limit of them, the
// conversations that have unanswered inbox entries received more than
// minAge ago, none of whose leases is live: neither the conversation's nor
// the entry's own (store.EntryLease). They are the work of a replica that
// died (its leases expired) or whose signal was missed. minAge leaves the
// replica that just recorded an entry the time to claim it.
func (s *Store) Unleased(ctx context.Context, minAge time.Duration, limit int) ([]string, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("unleased: %w", ErrClosed)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT i.conversation FROM inbox i
		WHERE i.state < $1 AND i.received < now() - $2 * interval '1 microsecond'
		AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.conversation = i.conversation AND l.expires_at >= now())
		AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.conversation = $4 || i.key AND l.expires_at >= now())
		LIMIT $3`, int16(store.Answered), minAge.Microseconds(), limit, store.EntryLease(""))
	if err != nil {
		return nil, fmt.Errorf("unleased: %w", err)
	}
	convs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("unleased: %w", err)
	}
	return convs, nil
}
