package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/sessionmap"
)

// TestConfigStore: the driver decides which of path and dsn is needed, and
// the dsn, a secret, shows in no problem, however it fails to parse.
func TestConfigStore(t *testing.T) {
	const pw = "pw-9a8b7c"
	tests := []struct {
		name, store string
		env         map[string]string
		want        string // "" means accepted
	}{
		{"bbolt by default", "", nil, ""},
		{"postgres", `driver = "postgres"` + "\n" + `dsn = "postgres://fb:` + pw + `@db:5432/fb"`, nil, ""},
		{"postgres from the environment", `driver = "postgres"` + "\n" + `dsn = "${DB_URL}"`, map[string]string{"DB_URL": "host=db user=fb password=" + pw}, ""},
		{"unknown driver", `driver = "sqlite"`, nil, `store.driver: "sqlite" is not "bbolt" or "postgres"`},
		{"postgres without dsn", `driver = "postgres"`, nil, `store.dsn: required with driver "postgres"`},
		{"dsn variable unset", `driver = "postgres"` + "\n" + `dsn = "${DB_URL}"`, nil, "store.dsn: environment variable DB_URL is not set"},
		{"dsn that does not parse", `driver = "postgres"` + "\n" + `dsn = "host=db password = ` + pw + ` port=x"`, nil, "store.dsn: the DSN does not parse: invalid port"},
		{"bbolt without path", `path = ""`, nil, `store.path: required with driver "bbolt"`},
		{"postgres needs no path", `driver = "postgres"` + "\n" + `path = ""` + "\n" + `dsn = "postgres://db/fb"`, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig([]byte(testConfig("", "[store]\n"+tt.store+"\n")), mapEnv(tt.env))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("parseConfig([store] %s) = %v, want it accepted", tt.store, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("parseConfig([store] %s) = %v, want %q", tt.store, err, tt.want)
			case err != nil && strings.Contains(err.Error(), pw):
				t.Errorf("parseConfig([store] %s) = %v: it shows the password", tt.store, err)
			}
		})
	}
}

// TestConfigStoreWarnings: a dsn beside driver bbolt is most likely a
// replica about to keep a file of its own; check-config says so.
func TestConfigStoreWarnings(t *testing.T) {
	path := writeFile(t, testConfig("", "[store]\ndsn = \"postgres://fb:pw-9a8b7c@db/fb\"\n"))
	out, _, err := runCmd(t, nil, "", "check-config", "-config", path)
	if err != nil {
		t.Fatalf("check-config = %v, want a warning at most", err)
	}
	if !strings.Contains(out, `warning: store.dsn: set, but store.driver is "bbolt"`) || strings.Contains(out, "pw-9a8b7c") {
		t.Errorf("check-config output:\n%s\nwant the store.dsn warning, without the password", out)
	}
	path = writeFile(t, testConfig("", "[store]\ndriver = \"postgres\"\ndsn = \"postgres://fb:pw-9a8b7c@db.internal:6543/fb\"\n"))
	out, _, err = runCmd(t, nil, "", "check-config", "-config", path)
	if err != nil || !strings.Contains(out, "store PostgreSQL fb@db.internal:6543/fb") || strings.Contains(out, "pw-9a8b7c") {
		t.Errorf("check-config = %v:\n%s\nwant the database named, without the password", err, out)
	}
}

// TestBackupWithoutFile: /backup cannot copy a database; it says so, and
// what to use instead.
func TestBackupWithoutFile(t *testing.T) {
	h := adminHandler(AdminConfig{}, adminDeps{store: pgStore{}, registry: prometheus.NewRegistry(), log: zaptest.NewLogger(t)})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/backup", nil))
	if rec.Code != http.StatusNotImplemented || !strings.Contains(rec.Body.String(), "pg_dump") {
		t.Errorf("GET /backup = %d %q, want 501 pointing to pg_dump", rec.Code, rec.Body)
	}
}

// TestStoreCheckNamesJournal: journal segments the flowbridge before this
// one left beside the file (it stopped without applying them) make store
// check fail, naming them and what to do: this one cannot read them.
func TestStoreCheckNamesJournal(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := sessionmap.Open(path, sessionmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCmd(t, nil, "", "store", "check", "-file", path); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("store check of a sound store = %v:\n%s", err, out)
	}
	seg := path + ".journal.000007"
	if err := os.WriteFile(seg, []byte("frames"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd(t, nil, "", "store", "check", "-file", path)
	if !errors.Is(err, sessionmap.ErrUnappliedJournal) || !strings.Contains(err.Error(), seg) || !strings.Contains(err.Error(), "SIGTERM") {
		t.Errorf("store check beside a journal = %v, want ErrUnappliedJournal naming %s and what to do", err, seg)
	}
}

// TestRunKnowsItsStore: run and dev refuse a store file that is not the
// one they served from, with the way out, before anything is answered:
// another flowbridge's file put in its place, and, with store.id set, a
// store directory found empty.
func TestRunKnowsItsStore(t *testing.T) {
	t.Parallel()
	mine := filepath.Join(t.TempDir(), "mine.db")
	other := filepath.Join(t.TempDir(), "other.db")
	for _, p := range []string{mine, other} {
		if out, errOut, err := runCmd(t, nil, "hello\n", "dev", "-store", p); err != nil {
			t.Fatalf("dev -store %s: %v\n%s\n%s", p, err, out, errOut)
		}
	}
	b, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mine, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd(t, nil, "hello\n", "dev", "-store", mine)
	if !errors.Is(err, sessionmap.ErrForeign) || !strings.Contains(err.Error(), mine) || !strings.Contains(err.Error(), "delete "+sessionmap.CreatedMarker(mine)) {
		t.Errorf("dev on another flowbridge's store = %v, want ErrForeign naming %s and the marker", err, mine)
	}

	cfg := writeConfig(t, "http://127.0.0.1:1", "")
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const id = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	text = bytes.Replace(text, []byte("[store]\n"), []byte("[store]\nid = \""+id+"\"\n"), 1)
	if err := os.WriteFile(cfg, text, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCmd(t, map[string]string{"TEST_TOKEN": "t"}, "", "run", "-config", cfg)
	if !errors.Is(err, sessionmap.ErrMissing) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "store.id") {
		t.Errorf("run with store.id and no store file = %v, want ErrMissing naming the store ID", err)
	}
}

// TestStoreCompact: `store compact` compacts a bbolt file offline and says
// by how much, keeping its records.
func TestStoreCompact(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "store.db")
	st, err := sessionmap.Open(path, sessionmap.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	now := time.Now()
	for i := range 300 {
		key := fmt.Sprintf("slack/T1/C1/%d.000100", i)
		if err := st.PutSession(ctx, sessionmap.Session{Key: key, Agent: "a", SessionUUID: "123e4567-e89b-12d3-a456-426614174000", Created: now, LastUsed: now}); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if _, err := st.DeleteSession(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCmd(t, nil, "", "store", "compact", "-file", path)
	if err != nil || !strings.Contains(out, "compacted from") {
		t.Fatalf("store compact = %v:\n%s", err, out)
	}
	st, err = sessionmap.Open(path, sessionmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok, err := st.Session(ctx, "slack/T1/C1/0.000100"); err != nil || !ok {
		t.Errorf("the kept session after compaction: %v, %v", ok, err)
	}
	if _, _, err := runCmd(t, nil, "", "store", "compact", "-file", path); !errors.Is(err, sessionmap.ErrLocked) {
		t.Errorf("store compact of a store in use = %v, want ErrLocked", err)
	}
}
