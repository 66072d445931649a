package loadkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/postgres"
)

// NewSchema creates a schema of its own for a run on the database at base
// and returns a DSN whose search_path is it, its name, and how to drop it.
func NewSchema(ctx context.Context, base string) (dsn, name string, drop func(context.Context) error, err error) {
	where, err := postgres.Describe(base)
	if err != nil {
		return "", "", nil, fmt.Errorf("-dsn: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", "", nil, fmt.Errorf("-dsn: want a postgres:// URL, to give the run a schema of its own (search_path)")
	}
	connect := func(ctx context.Context) (*pgx.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL at %s: %w (set -dsn or FLOWBRIDGE_TEST_DATABASE_URL)", where, err)
		}
		return c, nil
	}
	c, err := connect(ctx)
	if err != nil {
		return "", "", nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = "flowbridge_load_" + hex.EncodeToString(b[:])
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", "", nil, fmt.Errorf("create schema %s at %s: %w", name, where, err)
	}
	drop = func(ctx context.Context) error {
		c, err := connect(ctx)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", name, err)
		}
		return nil
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), name, drop, nil
}
