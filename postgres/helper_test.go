package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// defaultTestURL is the database the tests use unless
// FLOWBRIDGE_TEST_DATABASE_URL names another: the one CI and the
// development machines run.
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// baseDSN returns the test database's DSN, or skips the test when it does
// not answer (fails it under CI, which runs one).
func baseDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("FLOWBRIDGE_TEST_DATABASE_URL")
	if dsn == "" {
		dsn = defaultTestURL
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL does not answer, and CI must run these tests: %v", err)
		}
		t.Skipf("PostgreSQL does not answer (%v); to run these tests: FLOWBRIDGE_TEST_DATABASE_URL=postgres://user@host:5432/db?sslmode=disable go test ./postgres/", err)
	}
	return dsn
}

// newSchema creates an empty schema for t, dropped when t ends, and returns
// a DSN whose search_path is that schema.
func newSchema(t testing.TB) string {
	t.Helper()
	base := baseDSN(t)
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	exec(t, base, "CREATE SCHEMA "+name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return withSearchPath(t, base, name)
}

// withSearchPath returns dsn with its search_path set to schema.
func withSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("FLOWBRIDGE_TEST_DATABASE_URL: %v", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

// exec runs one statement on a connection of its own.
func exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// openTest opens a Store over a fresh schema, closed when t ends, and
// returns it with its DSN.
func openTest(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	dsn := newSchema(t)
	return openDSN(t, dsn, opts), dsn
}

// openDSN opens a Store over dsn, closed when t ends.
func openDSN(t testing.TB, dsn string, opts Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
