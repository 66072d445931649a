package postgres

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var embedded embed.FS

// versionTable is where goose records the migrations applied.
const versionTable = "flowbridge_migrations"

// lockClass is the first key of the migration's advisory lock ("flow"); the
// second is the hash of the schema, so deployments in different schemas of
// one database do not wait for each other.
const lockClass = 0x666c6f77

func newProvider(db *sql.DB) (*goose.Provider, error) {
	migrations, err := fs.Sub(embedded, "migrations")
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, migrations,
		goose.WithTableName(versionTable),
		goose.WithDisableGlobalRegistry(true))
}

// Migrate applies the migrations the database lacks, under the schema's
// migration lock: of several replicas migrating at once, one applies them
// and the others wait, then find nothing to do. A database migrated by a
// newer flowbridge is left alone, with an error wrapping ErrNewerSchema.
func (s *Store) Migrate(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("migrate: %w", ErrClosed)
	}
	err := s.withMigrationLock(ctx, func() error {
		current, latest, err := s.MigrationStatus(ctx)
		if err != nil {
			return err
		}
		if current > latest {
			return fmt.Errorf("%w: version %d, this flowbridge knows up to %d", ErrNewerSchema, current, latest)
		}
		if current == latest {
			return nil
		}
		_, err = s.goose.Up(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// MigrationStatus returns the schema version of the database (0 before any
// migration) and the latest this flowbridge knows. It writes nothing.
func (s *Store) MigrationStatus(ctx context.Context) (current, latest int64, err error) {
	if s.closed.Load() {
		return 0, 0, fmt.Errorf("migration status: %w", ErrClosed)
	}
	sources := s.goose.ListSources()
	latest = sources[len(sources)-1].Version // goose refuses an empty set
	var exists bool
	err = s.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1)`,
		versionTable).Scan(&exists)
	if err != nil {
		return 0, 0, fmt.Errorf("migration status: %w", err)
	}
	if !exists {
		return 0, latest, nil
	}
	if current, err = s.goose.GetDBVersion(ctx); err != nil {
		return 0, 0, fmt.Errorf("migration status: %w", err)
	}
	return current, latest, nil
}

// withMigrationLock runs fn holding the schema's migration lock: a session
// advisory lock on a connection of its own, which waits (within ctx) while
// another holds it. fn runs its statements on other connections.
func (s *Store) withMigrationLock(ctx context.Context, fn func() error) (err error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	const key = `$1, hashtext(coalesce(current_schema(), ''))`
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`, lockClass); err != nil {
		// Cut off while waiting, the lock may have been granted all the
		// same: closing the session lets go of it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.Conn().Close(cctx)
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := c.Exec(uctx, `SELECT pg_advisory_unlock(`+key+`)`, lockClass); uerr != nil {
			// Closing the session lets go of its locks.
			_ = c.Conn().Close(uctx)
		}
	}()
	return fn()
}
