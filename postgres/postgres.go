package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/internal/groupcommit"
)

// The Store is the whole of what the core keeps durably, and what replicas
// share.
var _ store.Store = (*Store)(nil)

// Sentinel errors; every error the Store returns that matches one of them
// wraps it, so callers test with errors.Is.
var (
	// ErrClosed means the Store was used after Close.
	ErrClosed = errors.New("store is closed")
	// ErrNewerSchema means the database was migrated by a newer flowbridge,
	// whose records this one could misread.
	ErrNewerSchema = errors.New("database schema is newer than this flowbridge")
	// ErrReadOnly means the database answers but takes no writes: a hot
	// standby, or a session that is read-only by default.
	ErrReadOnly = errors.New("database is read-only (a standby, or default_transaction_read_only is on)")
)

// MaxKeyLen is the longest conversation key, inbox key or lease holder, in
// bytes, the Store accepts. Platform keys are far shorter; a longer one is a
// bug or an attack, and is refused before anything is written.
const MaxKeyLen = 512

// DefaultTimeout bounds each call of a store.Store method when
// Options.Timeout is not set.
const DefaultTimeout = 10 * time.Second

// defaultBatch bounds how many rows one statement of ExpireInbox or
// PruneAudit deletes.
const defaultBatch = 1000

// Options tune Open.
type Options struct {
	// MaxConns caps the pool's connections. Zero keeps the DSN's
	// pool_max_conns, or pgxpool's default (the larger of 4 and the number
	// of CPUs). The Store needs at least 2: migrating holds one for its lock
	// while goose uses another.
	MaxConns int32
	// Timeout bounds each call of a store.Store method within its context's
	// own deadline, so that a call made under a context without one still
	// ends. Zero or negative means DefaultTimeout.
	Timeout time.Duration
	// NoMigrate makes Open leave the schema as it is, for a command that
	// shows MigrationStatus before it calls Migrate. A Store opened so over a
	// database that lacks migrations fails its calls.
	NoMigrate bool
}

// Store is the PostgreSQL-backed state of one or several flowbridge
// replicas. It is safe for concurrent use by many goroutines, and several
// Stores (in one process or many) may share a database: every method is
// atomic on its own.
type Store struct {
	pool    *pgxpool.Pool
	db      *sql.DB // the pool seen through database/sql, for goose
	goose   *goose.Provider
	timeout time.Duration
	batch   int                             // rows per statement in bulk deletes; tests shrink it
	recv    *groupcommit.Group[*receiveReq] // Receive's group commit

	closed    atomic.Bool
	closeOnce sync.Once
}

// Open connects to the database of dsn (a URL or keyword/value string, as
// pgx reads them) and, unless opts.NoMigrate, brings its schema up to date.
// It fails when the database does not answer within ctx, or was migrated by
// a newer flowbridge (ErrNewerSchema). Errors name no password.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if opts.MaxConns < 0 {
		return nil, fmt.Errorf("open postgres: MaxConns %d is negative", opts.MaxConns)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if cfg.MaxConns < 2 {
		return nil, fmt.Errorf("open postgres: a pool of %d connections; the store needs at least 2", cfg.MaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s := &Store{
		pool:    pool,
		db:      stdlib.OpenDBFromPool(pool),
		timeout: opts.Timeout,
		batch:   defaultBatch,
	}
	s.recv = groupcommit.New(s.insertBatch, batchLen)
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.goose, err = newProvider(s.db); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if !opts.NoMigrate {
		if err := s.Migrate(ctx); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("open postgres: %w", err)
		}
	}
	return s, nil
}

// Describe parses dsn as Open does, without connecting, and returns where
// it points, as user@host:port/database: no password. Its error names no
// password either, so a config check can show it.
func Describe(dsn string) (string, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return "", err
	}
	c := cfg.ConnConfig
	return fmt.Sprintf("%s@%s/%s", c.User, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), c.Database), nil
}

// parseDSN is pgxpool.ParseConfig with an error that does not repeat dsn.
// pgx masks the password in the connection string it quotes, but only where
// it can tell where the password is ("password = secret", with spaces, is
// valid and quoted as it is), so the quoted string is left out altogether:
// what remains is pgx's reason, such as "invalid port".
func parseDSN(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err == nil {
		return cfg, nil
	}
	reason := "not a connection string"
	if _, ok := errors.AsType[*pgconn.ParseConfigError](err); ok {
		// "cannot parse `<dsn, masked>`: <reason>"; pgx's reasons hold no
		// backquote, so the last "`: " ends the quoted string.
		if text := err.Error(); strings.HasPrefix(text, "cannot parse `") {
			if i := strings.LastIndex(text, "`: "); i >= 0 {
				reason = text[i+len("`: "):]
			}
		}
	} else if !strings.Contains(err.Error(), dsn) {
		reason = err.Error()
	}
	return nil, fmt.Errorf("the DSN does not parse: %s (it is not shown, as it may hold a password); write a URL, postgres://user:password@host:5432/database?sslmode=require, or key=value pairs", reason)
}

// Close closes the pool, waiting for calls under way; later calls fail with
// ErrClosed. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		_ = s.db.Close() // closes no connection of the pool
		s.pool.Close()
	})
	return nil
}

// Ping checks that the database answers and takes writes, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	defer cancel()
	// A database that answers but takes no writes (a standby after a
	// failover, default_transaction_read_only) is no store: the probe that
	// clears a write fault would call it healthy, and readiness would flap
	// between each refused write and the next probe.
	var readOnly string
	if err := s.pool.QueryRow(ctx, "SHOW transaction_read_only").Scan(&readOnly); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if readOnly != "off" {
		return fmt.Errorf("ping: %w", ErrReadOnly)
	}
	return nil
}

// op returns the context of one store.Store call: the caller's, bounded by
// s.timeout; or ErrClosed.
func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

// checkKey refuses a key the Store does not keep: empty, longer than
// MaxKeyLen, or text PostgreSQL cannot hold (invalid UTF-8 or a NUL byte).
func checkKey(what, key string) error {
	switch {
	case key == "":
		return fmt.Errorf("empty %s", what)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%s of %d bytes exceeds %d", what, len(key), MaxKeyLen)
	}
	return checkText(what, key)
}

// checkText refuses text PostgreSQL cannot hold.
func checkText(what, s string) error {
	switch {
	case !utf8.ValidString(s):
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%s %q holds a NUL byte", what, s)
	}
	return nil
}

// storable reports whether a key could be stored at all: a lookup of one
// that could not finds nothing, without asking the database.
func storable(key string) bool { return len(key) <= MaxKeyLen && checkText("", key) == nil }

// cleanText returns s with what PostgreSQL text cannot hold (invalid UTF-8
// and NUL bytes) replaced by U+FFFD. It is used for text shown to people
// (replies, audit details), which is better kept a little altered than lost
// with the write it belongs to.
func cleanText(s string) string {
	if checkText("", s) == nil {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// PostgreSQL's timestamptz runs from 4713 BC to 294276 AD.
var (
	minTime = time.Date(-4712, 1, 2, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(294276, 12, 30, 0, 0, 0, 0, time.UTC)
)

// checkTime refuses a time PostgreSQL cannot hold, and a zero time: the
// caller's clock gives every time (store.ErrNoTime).
func checkTime(what string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%s: %w", what, store.ErrNoTime)
	}
	if t.Before(minTime) || t.After(maxTime) {
		return fmt.Errorf("%s time %v out of range", what, t)
	}
	return nil
}

// nullTime is t for a timestamptz parameter, with the zero time as NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// timeOf is the time of a nullable timestamptz, NULL being the zero time.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
