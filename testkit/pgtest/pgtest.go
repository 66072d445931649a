// Package pgtest gives tests a fresh schema on the test database, as net/http/httptest gives them a server.
//
// The database is FLOWBRIDGE_TEST_DATABASE_URL, by default the one CI and
// the development machines run (postgres@127.0.0.1:5432/test). Where none
// answers, the test is skipped with a hint, except under CI=true, where it
// fails.
package pgtest

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

// DefaultURL is the test database unless FLOWBRIDGE_TEST_DATABASE_URL names another.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Schema creates an empty schema on the test database, dropped when t
// ends, and returns a DSN whose search_path is that schema. Commits of
// that DSN do not wait for the WAL flush: tests need no durability.
func Schema(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("FLOWBRIDGE_TEST_DATABASE_URL")
	if dsn == "" {
		dsn = DefaultURL
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL does not answer, and CI must run these tests: %v", err)
		}
		t.Skipf("PostgreSQL does not answer (%v); to run these tests: FLOWBRIDGE_TEST_DATABASE_URL=postgres://user@host:5432/db?sslmode=disable go test ./...", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(t, dsn, schema)
}

// WithSearchPath returns dsn (a URL or key=value words) with its
// search_path set to schema. Its commits wait for no WAL flush: tests need
// no durability, the suite stays fast, and the store's behaviour does not
// depend on it.
func WithSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema + " synchronous_commit=off"
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("FLOWBRIDGE_TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	return u.String()
}
