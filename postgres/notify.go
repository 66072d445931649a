package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen calls f with the conversation key of every inbox entry recorded
// from the moment it returns f("") on, by this or any replica sharing the
// schema, until ctx ends (it then returns nil) or its connection fails (it
// returns why). It holds a connection of its own, not one of the pool's.
// The caller listens again after a failure; notifications sent in between
// are lost, which the f("") of the next Listen signals: look for work then.
func (s *Store) Listen(ctx context.Context, f func(conversation string)) error {
	if s.closed.Load() {
		return fmt.Errorf("listen: %w", ErrClosed)
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return listenErr(ctx, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	// The channel of the trigger of migration 00003.
	var channel string
	if err := conn.QueryRow(cctx, `SELECT 'flowbridge_inbox_' || md5(current_schema())`).Scan(&channel); err != nil {
		return listenErr(ctx, err)
	}
	if _, err := conn.Exec(cctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		return listenErr(ctx, err)
	}
	f("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return listenErr(ctx, err)
		}
		f(n.Payload)
	}
}

func listenErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("listen: %w", err)
}
