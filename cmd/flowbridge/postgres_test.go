package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/postgres"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// testDatabaseURL is the PostgreSQL the tests use unless
// FLOWBRIDGE_TEST_DATABASE_URL names another, as in postgres/.
const testDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// dbPassword goes into the tests' DSNs: the test database trusts its
// clients and never asks for it, so it is only there to be looked for.
const dbPassword = "db-pass-5e6f7a8b"

// testSchema creates an empty schema for t, dropped when t ends, and returns
// a DSN whose search_path is that schema and which carries dbPassword. It
// skips t when the database does not answer, and fails it under CI.
func testSchema(t *testing.T) string {
	t.Helper()
	base := os.Getenv("FLOWBRIDGE_TEST_DATABASE_URL")
	if base == "" {
		base = testDatabaseURL
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL does not answer, and CI must run these tests: %v", err)
		}
		t.Skipf("PostgreSQL does not answer (%v); to run these tests: FLOWBRIDGE_TEST_DATABASE_URL=postgres://user@host:5432/db?sslmode=disable go test ./cmd/flowbridge/", err)
	}
	defer conn.Close(ctx)
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("FLOWBRIDGE_TEST_DATABASE_URL must be a postgres:// URL here, to add a schema to it (%v)", err)
	}
	if _, has := u.User.Password(); !has {
		u.User = url.UserPassword(u.User.Username(), dbPassword)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// onPostgres rewrites a config file's [store] to use the database of the
// environment variable FB_DATABASE_URL.
func onPostgres(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), "[store]\n", "[store]\ndriver = \"postgres\"\ndsn = \"${FB_DATABASE_URL}\"\n", 1))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serving is one flowbridge run in this process, started by startServing.
type serving struct {
	stdin       *io.PipeWriter
	out, errOut *syncBuffer
	admin       string
	done        chan error
	cancel      context.CancelFunc
}

// startServing runs "flowbridge run -config path" with env and waits until
// it serves.
func startServing(t *testing.T, path string, env map[string]string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &serving{stdin: pw, out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1), cancel: cancel}
	addr := make(chan string, 1)
	e := &environment{getenv: mapEnv(env), stdin: pr, stdout: s.out, stderr: s.errOut, onServe: func(i serveInfo) { addr <- i.AdminAddr }}
	go func() { s.done <- cmdRun(ctx, e, []string{"-config", path}) }()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		select {
		case <-s.done:
		case <-time.After(60 * time.Second):
			t.Error("run did not return after cancel")
		}
	})
	select {
	case s.admin = <-addr:
	case err := <-s.done:
		t.Fatalf("run: %v\n%s", err, s.errOut)
	}
	s.errOut.waitFor(t, "flowbridge running", s.done)
	return s
}

// stop ends the run and returns its result.
func (s *serving) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("run did not return after cancel")
		return nil
	}
}

// TestRunOnPostgres: with driver postgres, a conversation continues across a
// restart ([turn 3]); no bbolt file is made; /readyz reports the database,
// /backup points to pg_dump; the CLI reads and changes sessions and reads the
// audit in the database while the bridge runs; and the DSN's password is
// nowhere in what flowbridge wrote.
func TestRunOnPostgres(t *testing.T) {
	t.Parallel()
	fake := workspacetest.NewServer(workspacetest.Options{Token: "secret-token-123"})
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: "agent-1"})
	fake.AddFlow(workspacetest.Flow{UUID: "flow-json", Output: map[string]any{"ok": true}})
	path := writeConfig(t, fake.URL, "")
	onPostgres(t, path)
	env := map[string]string{"TEST_TOKEN": "secret-token-123", "FB_DATABASE_URL": testSchema(t)}

	var written strings.Builder
	out, errOut, err := runCmd(t, env, "one\ntwo\n/flow report\n", "run", "-config", path)
	written.WriteString(out + errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "[turn 2] You said: two") || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("first run's output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "store.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a bbolt file was made beside the config (stat: %v); the state belongs in PostgreSQL", err)
	}

	// The second run, on the same schema, continues the conversation.
	r := startServing(t, path, env)
	r.stdin.Write([]byte("three\n"))
	r.out.waitFor(t, "[turn 3] You said: three", r.done)
	if sessions := fake.Sessions("agent-1"); len(sessions) != 1 {
		t.Errorf("workspace sessions = %v, want the first run's one, reused", sessions)
	}

	code, body := adminGet(t, r.admin, "/readyz", "")
	if code != http.StatusOK || !strings.Contains(body, `"store":"ok"`) {
		t.Errorf("/readyz = %d %s, want the store ok", code, body)
	}
	code, body = adminGet(t, r.admin, "/backup", "")
	if code != http.StatusNotImplemented || !strings.Contains(body, "pg_dump") {
		t.Errorf("/backup = %d %q, want 501 pointing to pg_dump", code, body)
	}
	written.WriteString(body)

	// While it runs, the CLI talks to the database: the config's admin
	// listener (127.0.0.1:0) could not be found anyway.
	out, errOut, err = runCmd(t, env, "", "sessions", "list", "-config", path)
	written.WriteString(out + errOut)
	if err != nil || !strings.Contains(out, "console/local") {
		t.Errorf("sessions list: %v\n%s", err, out)
	}
	out, errOut, err = runCmd(t, env, "", "audit", "-config", path, "-json")
	written.WriteString(out + errOut)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	var outcomes []string
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var e struct{ Flow, Outcome string }
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("audit JSON: %v\n%s", err, out)
		}
		outcomes = append(outcomes, e.Flow+":"+e.Outcome)
	}
	if got := strings.Join(outcomes, ","); got != "report:started,report:ok" {
		t.Errorf("audit = %s, want report:started,report:ok", got)
	}
	const bound = "11111111-2222-3333-4444-555555555555"
	if _, _, err := runCmd(t, env, "", "sessions", "reset", "console/local", "-config", path); err != nil {
		t.Errorf("sessions reset: %v", err)
	}
	if _, _, err := runCmd(t, env, "", "sessions", "bind", "console/local", bound, "-config", path); err != nil {
		t.Errorf("sessions bind: %v", err)
	}
	fake.AddSession("agent-1", bound)
	r.stdin.Write([]byte("/agent status\n"))
	r.out.waitFor(t, bound, r.done)

	if err := r.stop(t); err != nil {
		t.Fatalf("run: %v\n%s", err, r.errOut)
	}
	written.WriteString(r.out.String() + r.errOut.String())
	if !strings.Contains(written.String(), `"text":"three"`) {
		t.Error("debug logging of message text is missing; the password scan below proves little without it")
	}
	if i := strings.Index(written.String(), dbPassword); i >= 0 {
		t.Errorf("the DSN's password was written: …%s…", written.String()[max(0, i-200):i+len(dbPassword)])
	}
}

// TestMigrateCommand: migrate shows the schema version; -apply applies what
// is pending, and again finds nothing to do; the CLI refuses a database not
// migrated yet, with the way out. bbolt has nothing to migrate.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "http://127.0.0.1:1", "")
	onPostgres(t, path)
	env := map[string]string{"TEST_TOKEN": "x", "FB_DATABASE_URL": testSchema(t)}
	version := regexp.MustCompile(`schema version (\d+) of (\d+)`)

	out, _, err := runCmd(t, env, "", "migrate", "-config", path)
	m := version.FindStringSubmatch(out)
	if err != nil || m == nil || m[1] != "0" || !strings.Contains(out, "pending: flowbridge migrate -apply") {
		t.Fatalf("migrate on an empty schema = %v:\n%s\nwant version 0 and the migrations pending", err, out)
	}
	latest := m[2]
	if _, _, err := runCmd(t, env, "", "sessions", "list", "-config", path); err == nil || !strings.Contains(err.Error(), "flowbridge migrate -apply") {
		t.Errorf("sessions list before migrating = %v, want it refused, naming migrate -apply", err)
	}

	out, _, err = runCmd(t, env, "", "migrate", "-apply", "-config", path)
	if m := version.FindStringSubmatch(out); err != nil || !strings.Contains(out, "migrated") || m == nil || m[1] != latest {
		t.Fatalf("migrate -apply = %v:\n%s\nwant migrated to version %s", err, out, latest)
	}
	for _, args := range [][]string{{"migrate", "-apply"}, {"migrate"}} {
		out, _, err = runCmd(t, env, "", append(args, "-config", path)...)
		if err != nil || !strings.Contains(out, fmt.Sprintf("schema version %s of %s, up to date", latest, latest)) {
			t.Errorf("%s after migrating = %v:\n%s\nwant up to date", strings.Join(args, " "), err, out)
		}
	}
	if out, _, err := runCmd(t, env, "", "sessions", "list", "-config", path); err != nil || !strings.Contains(out, "CONVERSATION") {
		t.Errorf("sessions list after migrating = %v:\n%s", err, out)
	}
	if out, _, err := runCmd(t, env, "", "store", "check", "-config", path); err != nil || !strings.Contains(out, "OK") {
		t.Errorf("store check = %v:\n%s", err, out)
	}

	bbolt := writeConfig(t, "http://127.0.0.1:1", "")
	out, _, err = runCmd(t, map[string]string{"TEST_TOKEN": "x"}, "", "migrate", "-apply", "-config", bbolt)
	if err != nil || !strings.Contains(out, "upgrades itself") {
		t.Errorf("migrate with bbolt = %v:\n%s\nwant nothing to migrate", err, out)
	}
}

// TestReplicasShareOnePostgres: two bridges on one database at once, each
// with its own Slack Socket Mode connection to one fake Slack. Both start (no
// lock); both answer; and an event Slack delivers again, on the other
// replica's connection, is recognised there and not answered twice.
func TestReplicasShareOnePostgres(t *testing.T) {
	t.Parallel()
	fake := workspacetest.NewServer(workspacetest.Options{Token: "secret-token-123"})
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: "agent-1"})
	sl := slacktest.NewServer(slacktest.Options{BotToken: secretSlackBot, AppToken: secretSlackApp, Delivery: slacktest.DeliverRoundRobin})
	t.Cleanup(sl.Close)
	env := map[string]string{"TEST_TOKEN": "secret-token-123", "FB_DATABASE_URL": testSchema(t), "FB_SLACK_BOT": secretSlackBot, "FB_SLACK_APP": secretSlackApp}
	slackOn := fmt.Sprintf(`
[slack]
enabled = true
bot_token = "${FB_SLACK_BOT}"
app_token = "${FB_SLACK_APP}"
api_url = %q
`, sl.APIURL())
	ctx := waitCtx(t)

	var replicas []*serving
	for i := range 2 {
		path := writeConfig(t, fake.URL, slackOn)
		text, _ := os.ReadFile(path)
		os.WriteFile(path, []byte(strings.Replace(string(text), "[console]\nenabled = true", "[console]\nenabled = false", 1)), 0o600)
		onPostgres(t, path)
		replicas = append(replicas, startServing(t, path, env))
		// Replica i holds socket i+1: round robin then alternates between them.
		if err := sl.WaitLiveConnections(ctx, i+1); err != nil {
			t.Fatal(err)
		}
	}

	// Slack delivers a DM to one replica, and, as if it had seen no ack in
	// time, again to the other.
	const text = "hello replicas"
	first, err := sl.SendMessage(ctx, slacktest.MessageEvent{Channel: "D0ALICE", ChannelType: "im", User: slackUser, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sl.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "You said: "+text) }); err != nil {
		t.Fatalf("no answer: %v", err)
	}
	retry, err := sl.Redeliver(ctx, first.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if retry.Conn == first.Conn || retry.EventID != first.EventID {
		t.Fatalf("first delivery %+v, retry %+v: want the same event on the other socket", first, retry)
	}
	// A replica acknowledges once the inbox has judged the event: from here
	// on it is answered or dropped.
	if _, err := sl.WaitAck(ctx, retry.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	dropped := replicas[retry.Conn-1]
	if _, metrics := adminGet(t, dropped.admin, "/metrics", ""); !strings.Contains(metrics, `flowbridge_deduplicated_events_total{platform="slack"} 1`) {
		t.Errorf("the replica that got the retry counted no duplicate:\n%s", grepLines(metrics, "flowbridge_deduplicated"))
	}

	// Both replicas serve: the next two events go one to each.
	for _, who := range []string{"U0BOB", "U0CAROL"} {
		d, err := sl.SendMessage(ctx, slacktest.MessageEvent{Channel: "D" + who[1:], ChannelType: "im", User: who, Text: "hi from " + who})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sl.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "You said: hi from "+who) }); err != nil {
			t.Fatalf("no answer to %s on socket %d: %v", who, d.Conn, err)
		}
	}
	conns := map[int]bool{}
	for _, d := range sl.Deliveries() {
		conns[d.Conn] = true
	}
	if !conns[1] || !conns[2] {
		t.Errorf("deliveries went to sockets %v, want both replicas'", conns)
	}

	for i, r := range replicas {
		if err := r.stop(t); err != nil {
			t.Errorf("replica %d: %v\n%s", i+1, err, r.errOut)
		}
	}
	answers := 0
	for _, m := range sl.MessageLog() {
		if strings.Contains(m.Text, "You said: "+text) || strings.Contains(string(m.Blocks), "You said: "+text) {
			answers++
		}
	}
	sent := 0
	for _, req := range fake.Requests() {
		if strings.Contains(string(req.Body), text) {
			sent++
		}
	}
	if answers != 1 || sent != 1 {
		t.Errorf("the redelivered event was sent to the agent %d times and answered in %d Slack messages, want 1 and 1", sent, answers)
	}
}

// grepLines returns the lines of text containing s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestReadyzReportsDatabase: /readyz pings the database, and says why when it
// cannot.
func TestReadyzReportsDatabase(t *testing.T) {
	t.Parallel()
	st, err := postgres.Open(t.Context(), testSchema(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h := adminHandler(AdminConfig{}, adminDeps{store: pgStore{st}, registry: prometheus.NewRegistry(), log: zaptest.NewLogger(t)})
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := readyz(); code != http.StatusOK || !strings.Contains(body, `"store":"ok"`) {
		t.Errorf("/readyz = %d %s, want the store ok", code, body)
	}
	_ = st.Close()
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, `"store":"ping: store is closed"`) {
		t.Errorf("/readyz with the store closed = %d %s, want 503 saying so", code, body)
	}
}
