package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

// TestReplicasPGOutage runs two replicas on a throwaway PostgreSQL the test
// starts itself (initdb and pg_ctl from -pg-bin, on a free port, in a
// temporary directory; the shared database of the other tests is never
// touched), which is stopped for -pg-outage a third of the way into
// -pg-duration and started again. What a database outage must not do: tell
// a user "cannot save … try again" and then answer the message anyway,
// lose a message in silence, tell anyone "flowbridge restarted", or leave a
// replica's /readyz failing more than outageReadyWithin after the database
// is back. The run ends without -restart's SIGTERM and second start, which
// would tell the users of answers in flight that flowbridge restarted, and
// keeps flowbridge's default lease_ttl: with a lease shorter than the
// outage, a replica takes a conversation whose lease lapsed while its
// holder could not renew it, and tells its user flowbridge restarted. The
// README's longer run:
//
//	go test ./cmd/flowbridge-chaos -run PGOutage -v -args -pg-outage 10s -pg-duration 30s -pg-slack-ack-timeout 5s
func TestReplicasPGOutage(t *testing.T) {
	t.Parallel()
	bin := pgBinDir()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no initdb (-pg-bin %q, /usr/lib/postgresql/*/bin, PATH), and CI must run this test", *pgBin)
		}
		t.Skipf("no initdb (-pg-bin %q, /usr/lib/postgresql/*/bin, PATH)", *pgBin)
	}
	// A directory the server's user can reach (the test's is private).
	dir, err := os.MkdirTemp("", "flowbridge-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pg, err := startThrowawayPG(t.Context(), bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pg.stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	p := params{Replicas: 2, Platform: "both", Conversations: 40, Rate: 40, Burst: 2, APILatency: 50 * time.Millisecond,
		ReplyTimeout: 10 * time.Second, Duration: *pgDuration, SlackAckTimeout: *pgAckTimeout,
		WorkingIndicator: "none", flowbridge: flowbridgeBin(t), tmp: loadkit.TempDir{Parent: t.TempDir(), Log: t.Output()}}
	var stats outageStats
	got, err := runReplicas(t.Context(), p, p.Replicas, hooks{
		database: pg.dsn,
		fault:    func(drive context.Context, e *replicaEnv) error { return outage(drive, e, pg, *pgOutage, &stats) },
	})
	if err != nil {
		t.Fatalf("runReplicas: %v", err)
	}
	t.Logf("outage %+v; %d offered, %d answered once, %d told try again", stats, got.MessagesOffered, got.AnsweredOnce, got.ToldTryAgain)
	checkPromises(t, *got)
	if err := outageBroken(got, stats); err != nil {
		t.Error(err)
	}
	if got.AnsweredOnce == 0 || stats.BackAtSec == 0 {
		t.Errorf("%d answered once, database back at %.1f s; want answers around an outage", got.AnsweredOnce, stats.BackAtSec)
	}
}

// pgBinDir is where initdb and pg_ctl are: -pg-bin, the newest of
// /usr/lib/postgresql/*/bin (Debian's), or PATH's; "" if nowhere.
func pgBinDir() string {
	if *pgBin != "" {
		return *pgBin
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

var (
	pgBin        = flag.String("pg-bin", "", "TestReplicasPGOutage: where initdb and pg_ctl are (default: the newest /usr/lib/postgresql/*/bin, else PATH)")
	pgOutage     = flag.Duration("pg-outage", 2*time.Second, "TestReplicasPGOutage: how long the database is down")
	pgDuration   = flag.Duration("pg-duration", 10*time.Second, "TestReplicasPGOutage: how long the users talk")
	pgAckTimeout = flag.Duration("pg-slack-ack-timeout", 3*time.Second, "TestReplicasPGOutage: the fake Slack's wait for an ack (its three retries must outlast the outage, with pg_ctl's stop and start)")
)

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

// outage stops the database a third of the way into the run, starts it
// again after d, and measures how soon every replica is ready.
func outage(ctx context.Context, e *replicaEnv, pg *pgInstance, d time.Duration, stats *outageStats) error {
	if !loadkit.Pause(ctx, e.p.Duration/3) {
		return nil
	}
	stopped := time.Since(e.t0)
	if err := pg.stop(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("stop PostgreSQL: %w", err)
	}
	loadkit.Pause(context.WithoutCancel(ctx), d)
	if err := pg.start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start PostgreSQL again: %w", err)
	}
	back := time.Now()
	*stats = outageStats{OutageSec: d.Seconds(), StoppedAtSec: stopped.Seconds(), BackAtSec: back.Sub(e.t0).Seconds(), ReadyAfterSec: -1}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if e.allReady(context.WithoutCancel(ctx)) {
			stats.ReadyAfterSec = time.Since(back).Seconds()
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
func outageBroken(r *replicaResult, s outageStats) error {
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
	case s.ReadyAfterSec < 0:
		errs = append(errs, errors.New("a replica's /readyz never answered 200 again after the database came back"))
	case s.ReadyAfterSec > outageReadyWithin.Seconds():
		errs = append(errs, fmt.Errorf("/readyz answered 200 on every replica %.1f s after the database came back, want within %s", s.ReadyAfterSec, outageReadyWithin))
	}
	return errors.Join(errs...)
}
