package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

// -pg-outage: the replicas run on a throwaway PostgreSQL the harness starts
// itself (initdb and pg_ctl from -pg-bin, on a free port, in the run's
// temporary directory; the shared database of -dsn is never touched),
// which is stopped for the given time a third of the way into -duration
// and started again. What a database outage must not do: tell a user
// "cannot save … try again" and then answer the message anyway, lose a
// message in silence, tell anyone "flowbridge restarted", or leave a
// replica's /readyz failing more than outageReadyWithin after the database
// is back, with or without traffic.

// outageReadyWithin is how soon every replica's /readyz must answer 200
// once the database is back.
const outageReadyWithin = 5 * time.Second

// pgInstance is a throwaway PostgreSQL cluster.
type pgInstance struct {
	bin, data, logFile string
	port               int
	asUser             string // run the server as this OS user ("" for the current one)
}

// startThrowawayPG creates a cluster under dir (a directory of its own,
// removed by the caller) and starts it on a free port.
func startThrowawayPG(ctx context.Context, bin, dir string) (*pgInstance, error) {
	port, err := loadkit.FreePort()
	if err != nil {
		return nil, err
	}
	p := &pgInstance{bin: bin, data: filepath.Join(dir, "pgdata"), logFile: filepath.Join(dir, "postgres.log")}
	_, ps, err := net.SplitHostPort(port)
	if err == nil {
		p.port, err = strconv.Atoi(ps)
	}
	if err != nil {
		return nil, fmt.Errorf("free port %q: %w", port, err)
	}
	// PostgreSQL refuses to run as root: as root, run it as postgres.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("-pg-outage as root needs a postgres user to run the server: %w", err)
		}
		p.asUser = "postgres"
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{dir} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	if err := p.run(ctx, "initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, err
	}
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// dsn is the cluster's postgres database.
func (p *pgInstance) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

func (p *pgInstance) start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", p.port, filepath.Dir(p.data))
	return p.run(ctx, "pg_ctl", "-D", p.data, "-o", opts, "-l", p.logFile, "-w", "-t", "30", "start")
}

// stop stops the server at once: clients see their connections closed.
func (p *pgInstance) stop(ctx context.Context) error {
	return p.run(ctx, "pg_ctl", "-D", p.data, "-m", "fast", "-w", "-t", "30", "stop")
}

func (p *pgInstance) run(ctx context.Context, prog string, args ...string) error {
	path := filepath.Join(p.bin, prog)
	var cmd *exec.Cmd
	if p.asUser != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", p.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", prog, err, out)
	}
	return nil
}

// outageStats is what -pg-outage measured.
type outageStats struct {
	OutageSec     float64 `json:"pg_outage_sec"`
	StoppedAtSec  float64 `json:"pg_stopped_at_sec"`
	BackAtSec     float64 `json:"pg_back_at_sec"`
	ReadyAfterSec float64 `json:"ready_after_pg_back_sec"`
	// ReadyAfterSec is -1 when some replica never became ready again.
}

// outage stops the database a third of the way into -duration, starts it
// again after -pg-outage, and measures how soon every replica is ready.
func (e *replicaEnv) outage(ctx context.Context) error {
	if !loadkit.Pause(ctx, e.p.Duration/3) {
		return nil
	}
	stopped := time.Since(e.t0)
	if err := e.pg.stop(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("stop PostgreSQL: %w", err)
	}
	loadkit.Pause(context.WithoutCancel(ctx), e.p.PGOutage)
	if err := e.pg.start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start PostgreSQL again: %w", err)
	}
	back := time.Now()
	e.mu.Lock()
	e.outageStats = outageStats{OutageSec: e.p.PGOutage.Seconds(), StoppedAtSec: stopped.Seconds(), BackAtSec: back.Sub(e.t0).Seconds(), ReadyAfterSec: -1}
	e.mu.Unlock()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if e.allReady(context.WithoutCancel(ctx)) {
			e.mu.Lock()
			e.outageStats.ReadyAfterSec = time.Since(back).Seconds()
			e.mu.Unlock()
			return nil
		}
		select {
		case <-deadline.C:
			return nil
		case <-tick.C:
		}
	}
}

// outageBroken returns the promises a -pg-outage run saw broken.
func (r *replicaResult) outageBroken() error {
	if r.OutageSec == 0 {
		return nil
	}
	var errs []error
	if r.ToldTryAgainAnswered > 0 {
		errs = append(errs, fmt.Errorf("%d users told \"cannot save … try again\" whose message was then answered", r.ToldTryAgainAnswered))
	}
	if r.Lost > 0 {
		errs = append(errs, fmt.Errorf("%d messages neither answered nor told", r.Lost))
	}
	if r.ToldRestartedChat > 0 {
		errs = append(errs, fmt.Errorf("%d users told flowbridge restarted, though nothing restarted", r.ToldRestartedChat))
	}
	switch {
	case r.ReadyAfterSec < 0:
		errs = append(errs, errors.New("a replica's /readyz never answered 200 again after the database came back"))
	case r.ReadyAfterSec > outageReadyWithin.Seconds():
		errs = append(errs, fmt.Errorf("/readyz answered 200 on every replica %.1f s after the database came back, want within %s", r.ReadyAfterSec, outageReadyWithin))
	}
	return errors.Join(errs...)
}
