package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestRunReplicasPGKill runs two replicas on PostgreSQL, briefly, on both
// platforms, while their backends are terminated about every 400 ms
// (-pg-kill-every): the promises must hold, and no user may be told
// "cannot save" or "could not read" (the store rides a dropped connection
// out), nor a replica panic. The kills must reach this run's connections
// only: a bystander's on the same server, named like another run's
// replica, survives them.
//
// Two breaks it met are fixed and fail it: a user told "Something went
// wrong" (a new session's save not retried), and a Discord message whose
// record failed just before a replica stopped, never read again (the stop
// saved a gateway sequence number past it, so the next process's resume
// skipped it).
func TestRunReplicasPGKill(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	bystander := connectAs(t, dsn, replicaAppName("flowbridge_load_000000000000", 0))
	args := []string{"-json", "-replicas", "2", "-dsn", dsn, "-pg-kill-every", "400ms", "-duration", "3s", "-burst", "2",
		"-slack-ack-timeout", "1s", "-conversations", "40", "-rate", "40", "-reply-timeout", "8s", "-tmpdir", t.TempDir(), "-flowbridge", flowbridgeBin(t)}
	got, runErr := runReplicasJSON(t, args)
	checkPromises(t, got)
	if runErr != nil {
		t.Errorf("run(%q) = %v", args, runErr)
	}
	if got.PGKills == 0 || got.PGBackendsKilled < 2 || got.Kills != 0 {
		t.Errorf("%d rounds of pg_terminate_backend ending %d backends, %d SIGKILLs; want kills of backends, no SIGKILL", got.PGKills, got.PGBackendsKilled, got.Kills)
	}
	for name, n := range map[string]int{
		"told \"cannot save\"":        got.ToldTryAgain,
		"told \"could not read\"":     got.ToldCouldNotRead,
		"neither answered nor told":   got.Lost,
		"log lines mentioning panic":  got.Panics,
		"told \"restarted while…\"":   got.ToldRestartedChat,
		"told something else":         got.ToldOther,
		"Discord messages never seen": got.DiscordNotAcked,
	} {
		if n != 0 {
			t.Errorf("%s: %d, want 0 (notices %v, panics %q)", name, n, got.NoticesByText, got.PanicDetail)
		}
	}
	if got.AnsweredOnce == 0 {
		t.Errorf("no message answered once in %+v", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := bystander.Ping(ctx); err != nil {
		t.Errorf("another run's connection on the same server: %v; want it untouched", err)
	}
}

// connectAs opens a connection to dsn under application_name name, closed
// with the test.
func connectAs(t *testing.T, dsn, name string) *pgx.Conn {
	t.Helper()
	named, err := withAppName(dsn, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(t.Context(), named)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestWithAppName(t *testing.T) {
	got, err := withAppName("postgres://u@h:5433/db?sslmode=disable&search_path=flowbridge_load_ab", "flowbridge_load_ab/r1")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("application_name") != "flowbridge_load_ab/r1" || q.Get("search_path") != "flowbridge_load_ab" || q.Get("sslmode") != "disable" || u.Host != "h:5433" {
		t.Errorf("withAppName = %q, want the DSN with application_name added and the rest kept", got)
	}
}

func TestNewPGServer(t *testing.T) {
	tests := []struct {
		name, dsn, cmd string
		want           []string // stop's argv
		wantErr        string
	}{
		{"a command", "postgres://postgres@127.0.0.1:5432/test", "pg_ctl -D /x -w", []string{"sh", "-c", "pg_ctl -D /x -w stop"}, ""},
		{"the shared server", "postgres://postgres@127.0.0.1:5432/test", "", nil, "port 5432"},
		{"no port is 5432", "postgres://postgres@localhost/test", "", nil, "port 5432"},
		{"another machine", "postgres://postgres@db.internal:5433/test", "", nil, "not this machine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newPGServer(t.Context(), tt.dsn, tt.cmd)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("newPGServer(%q, %q) = %v, %v; want an error naming %q", tt.dsn, tt.cmd, got, err, tt.wantErr)
				}
			case err != nil || strings.Join(got.stop, "\x00") != strings.Join(tt.want, "\x00"):
				t.Errorf("newPGServer(%q, %q) = %+v, %v; want stop %q", tt.dsn, tt.cmd, got, err, tt.want)
			}
		})
	}
}

func TestClusterOnPort(t *testing.T) {
	out := []byte("15  chaos   5433 online postgres /var/lib/postgresql/15/chaos /var/log/postgresql/postgresql-15-chaos.log\n" +
		"15  main    5432 online postgres /var/lib/postgresql/15/main  /var/log/postgresql/postgresql-15-main.log\n")
	if v, n, err := clusterOnPort(out, 5433); v != "15" || n != "chaos" || err != nil {
		t.Errorf("clusterOnPort(5433) = %q, %q, %v; want 15, chaos", v, n, err)
	}
	if _, _, err := clusterOnPort(out, 5434); err == nil {
		t.Error("clusterOnPort(5434) found a cluster; want an error")
	}
}
