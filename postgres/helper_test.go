package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/flowbridge/flowbridge/testkit/pgtest"
)

// defaultTestURL is the database the tests use unless
// FLOWBRIDGE_TEST_DATABASE_URL names another: the one CI and the
// development machines run.
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// TestMain drops the schemas openEmpty kept for reuse and closes the
// tests' own connections, then fails the tests if any goroutine is left.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(closingDB{m})
}

// closingDB runs the tests, then closes the tests' own access to the database.
type closingDB struct{ m *testing.M }

func (c closingDB) Run() int {
	code := c.m.Run()
	if err := testDB.close(); err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// testDB is the tests' own access to the database, shared by the package: a
// new connection costs the server tens of milliseconds, so the tests create
// and drop their schemas through one small pool, asked for once.
var testDB testDatabase

type testDatabase struct {
	once  sync.Once
	dsn   string
	admin *pgxpool.Pool
	err   error // why the database cannot be used

	mu   sync.Mutex
	free []pooledSchema // migrated, empty, for openEmpty
	made []string       // every schema openEmpty made, dropped by TestMain
}

// baseDSN returns the test database's DSN, or skips the test when it does
// not answer (fails it under CI, which runs one).
func baseDSN(t testing.TB) string {
	t.Helper()
	admin(t)
	return testDB.dsn
}

// admin returns the pool on the test database, or skips the test when it
// does not answer (fails it under CI, which runs one).
func admin(t testing.TB) *pgxpool.Pool {
	t.Helper()
	testDB.once.Do(func() {
		testDB.dsn = os.Getenv("FLOWBRIDGE_TEST_DATABASE_URL")
		if testDB.dsn == "" {
			testDB.dsn = defaultTestURL
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		testDB.admin, testDB.err = pgxpool.New(ctx, testDB.dsn)
		if testDB.err == nil {
			if testDB.err = testDB.admin.Ping(ctx); testDB.err != nil {
				testDB.admin.Close()
				testDB.admin = nil
			}
		}
	})
	if err := testDB.err; err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL does not answer, and CI must run these tests: %v", err)
		}
		t.Skipf("PostgreSQL does not answer (%v); to run these tests: FLOWBRIDGE_TEST_DATABASE_URL=postgres://user@host:5432/db?sslmode=disable go test ./postgres/", err)
	}
	return testDB.admin
}

// newSchema creates an empty schema for t, dropped when t ends, and returns
// a DSN whose search_path is that schema.
func newSchema(t testing.TB) string {
	t.Helper()
	name := createSchema(t)
	t.Cleanup(func() {
		if err := dropSchema(context.WithoutCancel(t.Context()), name); err != nil {
			t.Error(err)
		}
	})
	return pgtest.WithSearchPath(t, testDB.dsn, name)
}

func createSchema(t testing.TB) string {
	t.Helper()
	pool := admin(t)
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	return name
}

func dropSchema(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := testDB.admin.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", name, err)
	}
	return nil
}

// pooledSchema is a migrated schema openEmpty hands out.
type pooledSchema struct {
	name, dsn string
	tables    string // as Open left them
	empty     string // deletes every row but goose's, restarts the identities
}

// tablesQuery lists the tables of schema $1. Emptying a schema keeps them; a
// schema whose tables have changed is not reused.
const tablesQuery = `SELECT coalesce(string_agg(tablename, ',' ORDER BY tablename), '') FROM pg_tables WHERE schemaname = $1`

// emptyQuery returns the statements that make schema $1 what a freshly
// migrated one is: no rows but goose's, identities restarted.
const emptyQuery = `SELECT
	coalesce((SELECT string_agg(format('DELETE FROM %I.%I;', schemaname, tablename), ' ' ORDER BY tablename)
		FROM pg_tables WHERE schemaname = $1 AND tablename <> '` + versionTable + `'), '') || ' ' ||
	coalesce((SELECT string_agg(format('SELECT setval(%L, 1, false);', pg_get_serial_sequence(format('%I.%I', table_schema, table_name), column_name)), ' ')
		FROM information_schema.columns WHERE table_schema = $1 AND is_identity = 'YES'), '')`

// openEmpty opens a Store over an empty, migrated schema, for a test that
// uses the store through its methods only: a schema another test used and
// had emptied, or a new one. Creating and migrating a schema takes hundreds
// of milliseconds, emptying one a few, and the conformance suite opens a
// store per subtest. Once t and its stores are done, the schema is emptied
// for the next test. Tests of migrations, and tests that change a schema's
// structure, use openTest.
func openEmpty(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	pool := admin(t)
	testDB.mu.Lock()
	var ps pooledSchema
	if n := len(testDB.free); n > 0 {
		ps, testDB.free = testDB.free[n-1], testDB.free[:n-1]
	}
	testDB.mu.Unlock()
	if ps.name == "" {
		ps.name = createSchema(t)
		testDB.mu.Lock()
		testDB.made = append(testDB.made, ps.name)
		testDB.mu.Unlock()
		ps.dsn = pgtest.WithSearchPath(t, testDB.dsn, ps.name)
		_ = openDSN(t, ps.dsn, Options{}).Close() // migrates
		if err := pool.QueryRow(t.Context(), tablesQuery, ps.name).Scan(&ps.tables); err != nil {
			t.Fatalf("tables of schema %s: %v", ps.name, err)
		}
		if err := pool.QueryRow(t.Context(), emptyQuery, ps.name).Scan(&ps.empty); err != nil {
			t.Fatalf("how to empty schema %s: %v", ps.name, err)
		}
	}
	// Registered before the test's stores, so it runs after they close.
	t.Cleanup(func() {
		if err := reuse(context.WithoutCancel(t.Context()), ps); err != nil {
			t.Logf("schema %s is not reused: %v", ps.name, err)
		}
	})
	return openDSN(t, ps.dsn, opts), ps.dsn
}

// reuse empties ps and keeps it for the next test, unless its tables have
// changed.
func reuse(ctx context.Context, ps pooledSchema) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var tables string
	if err := testDB.admin.QueryRow(ctx, tablesQuery, ps.name).Scan(&tables); err != nil {
		return err
	}
	if tables != ps.tables {
		return fmt.Errorf("its tables are %q, were %q", tables, ps.tables)
	}
	if _, err := testDB.admin.Exec(ctx, ps.empty, pgx.QueryExecModeSimpleProtocol); err != nil {
		return err
	}
	testDB.mu.Lock()
	defer testDB.mu.Unlock()
	testDB.free = append(testDB.free, ps)
	return nil
}

// close drops the schemas openEmpty made and closes the pool.
func (d *testDatabase) close() error {
	if d.admin == nil {
		return nil
	}
	defer d.admin.Close()
	var errs []error
	for _, name := range d.made {
		errs = append(errs, dropSchema(context.Background(), name))
	}
	return errors.Join(errs...)
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
