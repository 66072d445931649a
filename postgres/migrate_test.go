package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// appliedRows counts goose's records of applied migrations.
func appliedRows(t *testing.T, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+versionTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMigrateOnOpen(t *testing.T) {
	t.Parallel()
	s, dsn := openTest(t, Options{})
	current, latest, err := s.MigrationStatus(t.Context())
	if err != nil || current != latest || latest < 1 {
		t.Fatalf("MigrationStatus() after Open = %d, %d, %v, want the latest twice", current, latest, err)
	}
	rows := appliedRows(t, dsn)

	// A second Open over the migrated schema, and Migrate, change nothing.
	again := openDSN(t, dsn, Options{})
	if err := again.Migrate(t.Context()); err != nil {
		t.Errorf("Migrate() of a migrated schema = %v", err)
	}
	if got := appliedRows(t, dsn); got != rows {
		t.Errorf("%d migration records after a second Open, want %d", got, rows)
	}
	if c, l, err := again.MigrationStatus(t.Context()); err != nil || c != current || l != latest {
		t.Errorf("MigrationStatus() after a second Open = %d, %d, %v, want %d, %d", c, l, err, current, latest)
	}
	// Both see one database.
	if err := s.PutSession(t.Context(), store.Session{Key: "k", Agent: "a", SessionUUID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := again.Session(t.Context(), "k"); err != nil || !ok {
		t.Errorf("Session(k) through the second Store = %v, %v, want found", ok, err)
	}
}

func TestMigrateConcurrentOpens(t *testing.T) {
	// Replicas starting at once over a fresh schema: each Open succeeds,
	// and the migrations are applied once.
	t.Parallel()
	dsn := newSchema(t)
	const replicas = 8
	stores := make([]*Store, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range replicas {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), dsn, Options{})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open #%d = %v", i, err)
			continue
		}
		stores[i].Close()
	}
	s := openDSN(t, dsn, Options{NoMigrate: true})
	current, latest, err := s.MigrationStatus(t.Context())
	if err != nil || current != latest {
		t.Errorf("MigrationStatus() = %d, %d, %v, want the latest", current, latest, err)
	}
	if got, want := appliedRows(t, dsn), int(latest)+1; got != want { // goose records version 0 too
		t.Errorf("%d migration records, want %d: each migration once", got, want)
	}
}

func TestNoMigrate(t *testing.T) {
	t.Parallel()
	dsn := newSchema(t)
	s := openDSN(t, dsn, Options{NoMigrate: true})
	current, latest, err := s.MigrationStatus(t.Context())
	if err != nil || current != 0 || latest < 1 {
		t.Fatalf("MigrationStatus() of a fresh schema = %d, %d, %v, want 0 and the latest", current, latest, err)
	}
	// Status wrote nothing: not even goose's table.
	exec(t, dsn, `DO $$ BEGIN
		IF EXISTS (SELECT FROM pg_tables WHERE schemaname = current_schema()) THEN
			RAISE EXCEPTION 'tables exist';
		END IF; END $$`)
	if err := s.PutSession(t.Context(), store.Session{Key: "k", Agent: "a", SessionUUID: "s"}); err == nil {
		t.Error("PutSession before any migration = nil, want an error")
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	if c, l, err := s.MigrationStatus(t.Context()); err != nil || c != l || l != latest {
		t.Errorf("MigrationStatus() after Migrate = %d, %d, %v, want %d twice", c, l, err, latest)
	}
	if err := s.PutSession(t.Context(), store.Session{Key: "k", Agent: "a", SessionUUID: "s"}); err != nil {
		t.Errorf("PutSession after Migrate = %v", err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	s, dsn := openTest(t, Options{})
	_, latest, err := s.MigrationStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	exec(t, dsn, `INSERT INTO `+versionTable+` (version_id, is_applied) VALUES ($1, true)`, latest+1)
	if err := s.Migrate(t.Context()); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("Migrate() of a newer schema = %v, want ErrNewerSchema", err)
	}
	if s2, err := Open(t.Context(), dsn, Options{}); !errors.Is(err, ErrNewerSchema) {
		if err == nil {
			s2.Close()
		}
		t.Errorf("Open of a newer schema = %v, want ErrNewerSchema", err)
	}
}

func TestMigrationLockWaits(t *testing.T) {
	// A replica holding the lock (here a plain session) keeps Migrate
	// waiting until it lets go; a deadline ends the wait.
	t.Parallel()
	s, dsn := openTest(t, Options{})
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	const key = `$1, hashtext(coalesce(current_schema(), ''))`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`, lockClass); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := s.Migrate(short); !errors.Is(err, context.DeadlineExceeded) && (err == nil || !pgconnTimeout(err)) {
		t.Errorf("Migrate() while another holds the lock = %v, want the deadline", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(`+key+`)`, lockClass); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Errorf("Migrate() once the lock is free = %v", err)
	}
}

// pgconnTimeout reports whether err is a statement cut by its context.
func pgconnTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
