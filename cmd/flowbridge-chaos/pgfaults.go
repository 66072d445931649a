package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

// Database faults during a -replicas run: -pg-kill-every terminates the
// run's PostgreSQL backends (pg_terminate_backend, as an administrator, a
// failover or a connection reaper does), -pg-restart-every stops the server
// and starts it again. A replica's connections are named by the
// application_name of its DSN (the run's schema and the replica), so a kill
// reaches this run's replicas and nothing else on a shared server. A restart
// reaches everything on the server: it is refused on the shared test
// server's port (sharedPGPort) unless -pg-restart-cmd says what to run.

// sharedPGPort is the port of the PostgreSQL the tests and the other
// engineers' runs share: the built-in restart never touches a server there.
const sharedPGPort = 5432

// pgRestartTimeout bounds one stop or start of the server.
const pgRestartTimeout = time.Minute

// pgReadyWithin bounds the wait for every replica's /readyz after a restart.
const pgReadyWithin = 30 * time.Second

// pgStats count the database faults a run made.
type pgStats struct {
	// PGKills are the rounds of pg_terminate_backend that ended at least
	// one of the run's backends; PGBackendsKilled the backends they ended.
	PGKills          int `json:"pg_kills"`
	PGBackendsKilled int `json:"pg_backends_killed"`
	PGRestarts       int `json:"pg_restarts"`
	// PGDownSec is each restart's time from the stop command to the start
	// command's return; PGReadyAfterSec how soon after it every replica's
	// /readyz answered 200 (-1: not within pgReadyWithin, or the users
	// stopped first).
	PGRestartedAtSec []float64 `json:"pg_restarted_at_sec,omitempty"`
	PGDownSec        []float64 `json:"pg_down_sec,omitempty"`
	PGReadyAfterSec  []float64 `json:"pg_ready_after_sec,omitempty"`
}

// pgFaulting reports whether the run makes database faults.
func (p *params) pgFaulting() bool { return p.PGKillEvery > 0 || p.PGRestartEvery > 0 }

// replicaAppName is the application_name replica idx's connections carry:
// the run's schema, so pgKillRound finds them, and the replica.
func replicaAppName(schema string, idx int) string {
	return fmt.Sprintf("%s/r%d", schema, idx)
}

// withAppName returns dsn (a postgres:// URL) with application_name set.
func withAppName(dsn, name string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("the run's DSN: %w", err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// pgServer stops and starts the PostgreSQL server of a run's DSN.
type pgServer struct {
	stop, start []string // argv
}

// newPGServer returns how to stop and start the server dsn points at: cmd
// through sh, with " stop" and " start" appended, when given; else the
// Debian cluster (pg_lsclusters) listening on the DSN's port, which must be
// local and not sharedPGPort.
func newPGServer(ctx context.Context, dsn, cmd string) (*pgServer, error) {
	if cmd != "" {
		return &pgServer{stop: []string{"sh", "-c", cmd + " stop"}, start: []string{"sh", "-c", cmd + " start"}}, nil
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	host, port := cfg.Host, int(cfg.Port)
	if !strings.HasPrefix(host, "/") && host != "localhost" && host != "127.0.0.1" && host != "::1" {
		return nil, fmt.Errorf("-pg-restart-every: -dsn points at %s, not this machine: give -pg-restart-cmd", host)
	}
	if port == sharedPGPort {
		return nil, fmt.Errorf("-pg-restart-every: -dsn is the PostgreSQL on port %d, which other tests share; "+
			"point -dsn at a cluster of its own (pg_createcluster 15 chaos --port 5433 -- --auth=trust) or give -pg-restart-cmd", sharedPGPort)
	}
	out, err := exec.CommandContext(ctx, "pg_lsclusters", "--no-header").Output()
	if err != nil {
		return nil, fmt.Errorf("-pg-restart-every: pg_lsclusters (or give -pg-restart-cmd): %w", err)
	}
	version, name, err := clusterOnPort(out, port)
	if err != nil {
		return nil, fmt.Errorf("-pg-restart-every: %w; give -pg-restart-cmd", err)
	}
	return &pgServer{
		stop:  []string{"pg_ctlcluster", version, name, "stop", "-m", "fast"},
		start: []string{"pg_ctlcluster", version, name, "start"},
	}, nil
}

// clusterOnPort finds, in pg_lsclusters' output, the cluster on port.
func clusterOnPort(lsclusters []byte, port int) (version, name string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(lsclusters))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[2] == strconv.Itoa(port) {
			return f[0], f[1], nil
		}
	}
	return "", "", fmt.Errorf("no PostgreSQL cluster on port %d in pg_lsclusters", port)
}

func (s *pgServer) run(ctx context.Context, argv []string) error {
	ctx, cancel := context.WithTimeout(ctx, pgRestartTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return nil
}

// pgFaults kills the run's backends and restarts the server on their
// timers until ctx ends. A restart begun finishes: the server is never
// left stopped.
func (e *replicaEnv) pgFaults(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	if e.p.PGKillEvery > 0 {
		wg.Go(func() {
			for loadkit.Pause(ctx, jitter(e.p.PGKillEvery)) {
				if err := e.pgKillRound(ctx); err != nil {
					errs[0] = err
					return
				}
			}
		})
	}
	if e.p.PGRestartEvery > 0 {
		wg.Go(func() {
			for loadkit.Pause(ctx, jitter(e.p.PGRestartEvery)) {
				if err := e.pgRestart(ctx); err != nil {
					errs[1] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// jitter is uniform over [d/2, 3d/2): about d apart, never in lockstep with
// the users' cycles or the other faults.
func jitter(d time.Duration) time.Duration { return d/2 + mrand.N(d) }

// pgKillRound terminates every backend of the run's replicas. A server that
// does not answer (being restarted) skips the round.
func (e *replicaEnv) pgKillRound(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(cctx, e.dsn)
	if err != nil {
		return nil
	}
	defer c.Close(context.WithoutCancel(ctx))
	var n int
	err = c.QueryRow(cctx, `SELECT count(*) FROM (
		SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
		WHERE starts_with(application_name, $1) AND pid <> pg_backend_pid()) t WHERE ended`, e.schema+"/").Scan(&n)
	if err != nil {
		if ctx.Err() != nil || e.p.PGRestartEvery > 0 {
			return nil // cut off by the end or by a restart
		}
		return fmt.Errorf("terminate the run's backends: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if n > 0 {
		e.stats.PGKills++
		e.stats.PGBackendsKilled += n
		e.lastFault = time.Now()
	}
	return nil
}

// pgRestart stops the server, waits -pg-down, starts it again and measures
// how soon every replica is ready.
func (e *replicaEnv) pgRestart(ctx context.Context) error {
	at := time.Since(e.t0)
	began := time.Now()
	e.mu.Lock()
	e.lastFault = began
	e.mu.Unlock()
	// Once stopped, the server is started again whatever ctx says.
	keep := context.WithoutCancel(ctx)
	if err := e.pg.run(keep, e.pg.stop); err != nil {
		return fmt.Errorf("stop PostgreSQL: %w", err)
	}
	loadkit.Pause(keep, e.p.PGDown)
	if err := e.pg.run(keep, e.pg.start); err != nil {
		return fmt.Errorf("start PostgreSQL again: %w", err)
	}
	back := time.Now()
	ready := -1.0
	deadline := back.Add(pgReadyWithin)
	for time.Now().Before(deadline) {
		if e.allReady(ctx) {
			ready = time.Since(back).Seconds()
			break
		}
		if !loadkit.Pause(ctx, 50*time.Millisecond) {
			break
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.PGRestarts++
	e.stats.PGRestartedAtSec = append(e.stats.PGRestartedAtSec, at.Seconds())
	e.stats.PGDownSec = append(e.stats.PGDownSec, back.Sub(began).Seconds())
	e.stats.PGReadyAfterSec = append(e.stats.PGReadyAfterSec, ready)
	e.lastFault = time.Now()
	return nil
}

// panicsInLogs returns the lines of the replicas' logs (every start's) that
// mention a panic, each with its log's name.
func (e *replicaEnv) panicsInLogs() []string {
	logs, _ := filepath.Glob(filepath.Join(e.dir, "replica-*.log"))
	var out []string
	for _, l := range logs {
		f, err := os.Open(l)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if bytes.Contains(bytes.ToLower(sc.Bytes()), []byte("panic")) {
				out = append(out, filepath.Base(l)+": "+oneLine(sc.Text()))
			}
		}
		f.Close()
	}
	return out
}
