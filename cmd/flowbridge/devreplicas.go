package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/postgres"
)

// devDatabase is the PostgreSQL dev -replicas uses unless -database or
// FLOWBRIDGE_DATABASE_URL names another: a local server's own database.
const devDatabase = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// msgNoPostgres says how to get the PostgreSQL dev -replicas needs.
const msgNoPostgres = `dev -replicas needs PostgreSQL, and %s does not answer (%v).
Start one, then run this again:
  docker run -d --name flowbridge-pg -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:16
or, on Debian or Ubuntu: sudo apt-get install postgresql && sudo pg_ctlcluster $(ls /etc/postgresql) main start
(then let user postgres in without a password from 127.0.0.1, or give -database postgres://USER:PASSWORD@HOST:5432/DB)`

// devReplicas runs cfg as n replicas in this process, sharing a fresh
// schema of the PostgreSQL database dsn (dropped at the end) and the fake
// workspace, so that a conversation is shared as it is between real
// replicas. The terminal is attached to them in turn: each line goes to the
// next replica, whose answer is marked with its number.
func devReplicas(ctx context.Context, env *environment, cfg *Config, n int, dsn string, log *zap.Logger) (err error) {
	where, err := postgres.Describe(dsn)
	if err != nil {
		return fmt.Errorf("dev -database: %w", err)
	}
	schema, drop, err := devSchema(ctx, dsn)
	if err != nil {
		return fmt.Errorf(msgNoPostgres, where, err)
	}
	defer func() {
		if derr := drop(); derr != nil && err == nil {
			err = derr
		}
	}()
	dsn, err = withSearchPath(dsn, schema)
	if err != nil {
		return err
	}

	interactive := isTerminal(env.stdin)
	if interactive {
		fmt.Fprintf(env.stdout, devReplicasBanner, n, where, schema)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		outMu   sync.Mutex
		errMu   sync.Mutex
		errs    []error
		inputs  = make([]*io.PipeWriter, n)
		waiting = make([]chan struct{}, n) // a token: replica k waits for a line
	)
	fail := func(k int, err error) {
		errMu.Lock()
		errs = append(errs, fmt.Errorf("replica %d: %w", k+1, err))
		errMu.Unlock()
		cancel()
	}
	for k := range n {
		in, input := io.Pipe()
		inputs[k] = input
		waiting[k] = make(chan struct{}, 1)
		rc := *cfg
		rc.Store.Driver, rc.Store.DSN = driverPostgres, bridge.Secret(dsn)
		started := make(chan struct{})
		renv := &environment{
			getenv: env.getenv, stdin: in, stderr: env.stderr,
			stdout:  &replicaOut{n: k + 1, w: env.stdout, mu: &outMu, waiting: waiting[k]},
			onServe: func(serveInfo) { close(started) },
		}
		wg.Go(func() {
			defer in.Close()
			if err := serve(ctx, renv, &rc, log.Named(fmt.Sprintf("replica%d", k+1)), serveOptions{prompt: true}); err != nil {
				fail(k, err)
			}
		})
		// The first replica migrates the schema; the others start on it.
		select {
		case <-started:
		case <-ctx.Done():
		}
	}
	// Each line to the next replica, once the one before has been answered.
	lines := bufio.NewScanner(env.stdin)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	ready := true
	for _, w := range waiting {
		ready = ready && waitToken(ctx, w)
	}
	for k := 0; ready; k = (k + 1) % n {
		if interactive {
			outMu.Lock()
			fmt.Fprint(env.stdout, "> ")
			outMu.Unlock()
		}
		if !lines.Scan() {
			break
		}
		if _, err := io.WriteString(inputs[k], lines.Text()+"\n"); err != nil {
			fail(k, err)
			break
		}
		ready = waitToken(ctx, waiting[k])
	}
	for _, in := range inputs {
		_ = in.Close() // the end of input ends each replica's console, and so the replica
	}
	wg.Wait()
	if err := lines.Err(); err != nil {
		errs = append(errs, fmt.Errorf("dev: read: %w", err))
	}
	return errors.Join(errs...)
}

const devReplicasBanner = `flowbridge dev: %d replicas sharing PostgreSQL %s (schema %s, dropped at exit),
a fake AI workspace and this terminal. Each line goes to the next replica in turn, whose answer is
marked with its number; the conversation is one, so the agent's turns count on whichever answers.
Ctrl-D quits.
`

func waitToken(ctx context.Context, c chan struct{}) bool {
	select {
	case <-c:
		return true
	case <-ctx.Done():
		return false
	}
}

// replicaOut is a replica console's output: its prompt ("> ", written when
// it waits for a line) becomes a token for the dispatcher, and the rest is
// shown marked with the replica's number.
type replicaOut struct {
	n       int
	w       io.Writer
	mu      *sync.Mutex
	waiting chan struct{}
}

func (o *replicaOut) Write(p []byte) (int, error) {
	if string(p) == "> " {
		select {
		case o.waiting <- struct{}{}:
		default:
		}
		return len(p), nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := fmt.Fprintf(o.w, "[replica %d] %s", o.n, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// devSchema creates a schema of its own in the database dsn, and returns it
// with the function that drops it.
func devSchema(ctx context.Context, dsn string) (string, func() error, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.WithoutCancel(cctx))
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "flowbridge_dev_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(cctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("dev: drop schema %s: %w", schema, err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("dev: drop schema %s: %w", schema, err)
		}
		return nil
	}
	return schema, drop, nil
}

// withSearchPath returns dsn (a URL or key=value words) using schema.
func withSearchPath(dsn, schema string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("dev -database: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
