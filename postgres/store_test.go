package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/storetest"

	"github.com/flowbridge/flowbridge/testkit/pgtest"
)

var _ store.Outbox = (*Store)(nil)

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		batch int
	}{
		{"default batches", defaultBatch},
		// Every bulk delete takes several statements.
		{"batches of 3", 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Each variant has schemas of its own; most of the time is
			// spent waiting on the server, so the two overlap well.
			t.Parallel()
			var mu sync.Mutex
			dsns := make(map[store.Store]string)
			storetest.Run(t, storetest.Opener{
				Open: func(t *testing.T) store.Store {
					// The schema is migrated already; TestMigrateOnOpen
					// covers Open over a migrated schema, and Reopen opens
					// as flowbridge does.
					s, dsn := openEmpty(t, Options{NoMigrate: true})
					s.batch = tt.batch
					mu.Lock()
					dsns[s] = dsn
					mu.Unlock()
					return s
				},
				Reopen: func(t *testing.T, st store.Store) store.Store {
					mu.Lock()
					dsn := dsns[st]
					mu.Unlock()
					if err := st.(*Store).Close(); err != nil {
						t.Fatalf("Close() = %v", err)
					}
					s := openDSN(t, dsn, Options{})
					s.batch = tt.batch
					mu.Lock()
					dsns[s] = dsn
					mu.Unlock()
					return s
				},
			})
		})
	}
}

func at(n int) time.Time {
	return time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Microsecond)
}

func TestKeyBounds(t *testing.T) {
	t.Parallel()
	s, _ := openEmpty(t, Options{})
	long := strings.Repeat("k", MaxKeyLen+1)
	fits := strings.Repeat("k", MaxKeyLen)
	tests := []struct {
		name string
		call func() error
	}{
		{"Receive long key", func() error {
			_, err := s.Receive(t.Context(), store.InboxEntry{Key: long, Conversation: "c", Received: time.Now()})
			return err
		}},
		{"Receive long conversation", func() error {
			_, err := s.Receive(t.Context(), store.InboxEntry{Key: "k/1", Conversation: long, Received: time.Now()})
			return err
		}},
		{"Receive NUL key", func() error {
			_, err := s.Receive(t.Context(), store.InboxEntry{Key: "k\x00", Conversation: "c", Received: time.Now()})
			return err
		}},
		{"Receive invalid UTF-8", func() error {
			_, err := s.Receive(t.Context(), store.InboxEntry{Key: "k\xff", Conversation: "c", Received: time.Now()})
			return err
		}},
		{"PutSession long key", func() error {
			return s.PutSession(t.Context(), store.Session{Key: long, Agent: "a", SessionUUID: "s"})
		}},
		{"SetConversationAgent long key", func() error { return s.SetConversationAgent(t.Context(), long, "a") }},
		{"PutTurns with one long key", func() error {
			_, err := s.PutTurns(t.Context(), []store.Turn{
				{Session: store.Session{Key: "ok", Agent: "a", SessionUUID: "s"}, Reply: "r"},
				{Session: store.Session{Key: long, Agent: "a", SessionUUID: "s"}, Reply: "r"},
			})
			return err
		}},
		{"Finish with a long turn key", func() error {
			return s.Finish(t.Context(), "k/none", "ref", &store.Turn{Session: store.Session{Key: long, Agent: "a", SessionUUID: "s"}}, at(1))
		}},
		{"Claim long conversation", func() error {
			_, err := s.Claim(t.Context(), long, "replica-1", time.Second)
			return err
		}},
	}
	if err := s.PutSession(t.Context(), store.Session{Key: "ok", Agent: "a", SessionUUID: "s", Created: at(0)}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil {
				t.Fatalf("%s = nil, want an error", tt.name)
			}
			if errors.Is(err, store.ErrUnknownEntry) {
				t.Errorf("%s = %v, want a refusal before any lookup", tt.name, err)
			}
		})
	}
	// Nothing of the refused calls was written, and a key of the bound fits.
	if got := pendingKeys(t, s); len(got) != 0 {
		t.Errorf("Pending() after refused Receives = %q, want none", got)
	}
	if _, ok, err := s.LastReply(t.Context(), "ok"); err != nil || ok {
		t.Errorf("LastReply(ok) after a refused PutTurns = %v, %v, want none: the batch is all or nothing", ok, err)
	}
	if ok, err := s.Receive(t.Context(), store.InboxEntry{Key: fits, Conversation: fits, Received: time.Now()}); err != nil || !ok {
		t.Errorf("Receive of a %d-byte key = %v, %v, want true, nil", len(fits), ok, err)
	}
	if err := s.PutSession(t.Context(), store.Session{Key: fits, Agent: "a", SessionUUID: "s"}); err != nil {
		t.Errorf("PutSession of a %d-byte key = %v", len(fits), err)
	}
	// Looking a key up that could not be stored finds nothing.
	for _, key := range []string{long, "k\x00", "k\xff"} {
		if _, ok, err := s.Session(t.Context(), key); err != nil || ok {
			t.Errorf("Session(%q) = %v, %v, want false, nil", key, ok, err)
		}
		if err := s.MarkSent(t.Context(), key, at(1)); !errors.Is(err, store.ErrUnknownEntry) {
			t.Errorf("MarkSent(%q) = %v, want ErrUnknownEntry", key, err)
		}
	}
}

func pendingKeys(t *testing.T, s *Store) []string {
	t.Helper()
	p, err := s.Pending(t.Context())
	if err != nil {
		t.Fatalf("Pending() = %v", err)
	}
	var keys []string
	for _, e := range p {
		keys = append(keys, e.Key)
	}
	return keys
}

func TestPrefixEnd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix  string
		want    string
		bounded bool
	}{
		{"slack/T1/", "slack/T10", true},
		{"a", "b", true},
		{"a\x7f", "a\u0080", true},
		{"é", "ê", true},
		{"a\uD7FF", "a\uE000", true},
		{"a\U0010FFFF", "b", true},
		{"\U0010FFFF\U0010FFFF", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		end, bounded := prefixEnd(tt.prefix)
		if end != tt.want || bounded != tt.bounded {
			t.Errorf("prefixEnd(%q) = %q, %v, want %q, %v", tt.prefix, end, bounded, tt.want, tt.bounded)
		}
	}
}

func TestListSessionsEdges(t *testing.T) {
	t.Parallel()
	s, _ := openEmpty(t, Options{})
	keys := []string{"a\U0010FFFF", "a\U0010FFFFb", "b", "a\uD7FF", "a\uD7FFx", "a\uE000"}
	for _, k := range keys {
		if err := s.PutSession(t.Context(), store.Session{Key: k, Agent: "a", SessionUUID: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		prefix string
		want   string
	}{
		{"a\U0010FFFF", "[a\U0010FFFF a\U0010FFFFb]"},
		{"a\uD7FF", "[a\uD7FF a\uD7FFx]"},
		{"\U0010FFFF", "[]"},
		{"a\xff", "[]"},
		{"a\x00", "[]"},
	}
	for _, tt := range tests {
		list, err := s.ListSessions(t.Context(), tt.prefix)
		var got []string
		for _, r := range list {
			got = append(got, r.Key)
		}
		if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", strings.Fields(strings.Trim(tt.want, "[]"))) {
			t.Errorf("ListSessions(%q) = %q, %v, want %s", tt.prefix, got, err, tt.want)
		}
	}
}

func TestCleanText(t *testing.T) {
	t.Parallel()
	s, _ := openEmpty(t, Options{})
	e := store.AuditEntry{Time: at(1), Flow: "f", Detail: "bad \xff and \x00 bytes", Params: map[string]string{"k\x00": "v\xfe"}}
	if err := s.AppendAudit(t.Context(), e); err != nil {
		t.Fatalf("AppendAudit with text PostgreSQL cannot hold = %v, want it kept altered", err)
	}
	got, err := s.Audit(t.Context(), store.AuditFilter{})
	if err != nil || len(got) != 1 {
		t.Fatalf("Audit() = %+v, %v", got, err)
	}
	if want := "bad \uFFFD and \uFFFD bytes"; got[0].Detail != want || got[0].Params["k\uFFFD"] != "v\uFFFD" {
		t.Errorf("Audit()[0] = %+v, want Detail %q and the param cleaned", got[0], want)
	}
	// A reply too: the entry is answered whatever its text.
	if err := s.PutSession(t.Context(), store.Session{Key: "c", Agent: "a", SessionUUID: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(t.Context(), store.InboxEntry{Key: "k", Conversation: "c", Received: time.Now()}); err != nil {
		t.Fatal(err)
	}
	turn := store.Turn{Session: store.Session{Key: "c", Agent: "a", SessionUUID: "s", LastUsed: at(2)}, Reply: "r\x00"}
	if err := s.Finish(t.Context(), "k", "ref\xff", &turn, at(2)); err != nil {
		t.Fatalf("Finish with a NUL in the reply = %v", err)
	}
	if got, _, err := s.LastReply(t.Context(), "c"); err != nil || got != "r\uFFFD" {
		t.Errorf("LastReply(c) = %q, %v, want %q", got, err, "r\uFFFD")
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	s, _ := openEmpty(t, Options{})
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping() = %v", err)
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"Ping":            s.Ping(ctx),
		"PutSession":      s.PutSession(ctx, store.Session{Key: "k", Agent: "a", SessionUUID: "s"}),
		"Session":         third(s.Session(ctx, "k")),
		"Receive":         second(s.Receive(ctx, store.InboxEntry{Key: "k", Received: time.Now()})),
		"MarkSent":        s.MarkSent(ctx, "k", at(0)),
		"Pending":         second(s.Pending(ctx)),
		"AppendAudit":     s.AppendAudit(ctx, store.AuditEntry{Flow: "f", Time: time.Now()}),
		"ExpireInbox":     second(s.ExpireInbox(ctx, at(0))),
		"Claim":           second(s.Claim(ctx, "c", "h", time.Second)),
		"Release":         s.Release(ctx, "c", "h"),
		"Migrate":         s.Migrate(ctx),
		"MigrationStatus": third(s.MigrationStatus(ctx)),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func second[A, B any](_ A, b B) B        { return b }
func third[A, B, C any](_ A, _ B, c C) C { return c }

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dsn := baseDSN(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tests := []struct {
		name string
		dsn  string
		opts Options
		want string
	}{
		{"bad dsn", "postgres://a b", Options{}, "open postgres"},
		{"one connection", dsn, Options{MaxConns: 1}, "at least 2"},
		{"negative", dsn, Options{MaxConns: -1}, "negative"},
		{"no such schema", pgtest.WithSearchPath(t, dsn, "t_missing_schema"), Options{}, "migrate"},
		{"nobody listening", "postgres://postgres:secret-pw@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", Options{}, "open postgres"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(ctx, tt.dsn, tt.opts)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) = nil error, want one", tt.dsn)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "secret-pw") {
				t.Errorf("Open(%q) = %v, want an error naming %q and no password", tt.dsn, err, tt.want)
			}
		})
	}
}

func TestTurnAlso(t *testing.T) {
	// Also keys that repeat, or name the conversation itself, are written
	// once; a stale turn writes none of them.
	t.Parallel()
	s, _ := openEmpty(t, Options{})
	sess := store.Session{Key: "slack/T/C/1.1", Agent: "a", SessionUUID: "s", Created: at(0), LastUsed: at(0)}
	if err := s.PutSession(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	turns := []store.Turn{
		{Session: sess, Reply: "first", Also: []string{"slack/T/C#U1", "slack/T/C#U1", sess.Key}},
		{Session: store.Session{Key: sess.Key, Agent: "a", SessionUUID: "stale"}, Reply: "stale", Also: []string{"slack/T/C#U2"}},
	}
	if n, err := s.PutTurns(t.Context(), turns); err != nil || n != 1 {
		t.Fatalf("PutTurns = %d, %v, want 1", n, err)
	}
	for key, want := range map[string]string{sess.Key: "first", "slack/T/C#U1": "first", "slack/T/C#U2": ""} {
		if got, ok, err := s.LastReply(t.Context(), key); err != nil || got != want || ok != (want != "") {
			t.Errorf("LastReply(%q) = %q, %v, %v, want %q", key, got, ok, err, want)
		}
	}
	if _, err := s.PutTurns(t.Context(), []store.Turn{{Session: sess, Reply: "x", Also: []string{strings.Repeat("k", MaxKeyLen+1)}}}); err == nil {
		t.Error("PutTurns with a long Also key = nil error, want one")
	}
}

// TestPingRefusesAReadOnlyDatabase: a database that answers but takes no
// writes (a standby after a failover) is not ready, or the probe that
// clears a write fault would call it healthy and readiness would flap.
func TestPingRefusesAReadOnlyDatabase(t *testing.T) {
	t.Parallel()
	s, dsn := openTest(t, Options{})
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping() on a writable database = %v", err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_transaction_read_only", "on") // a runtime parameter, as a standby's
	u.RawQuery = q.Encode()
	ro := openDSN(t, u.String(), Options{NoMigrate: true})
	err = ro.Ping(t.Context())
	if !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Ping() on a read-only database = %v, want ErrReadOnly", err)
	}
	// And the refusal is true: a write there fails.
	if werr := ro.PutSession(t.Context(), store.Session{Key: "k", Agent: "a", SessionUUID: "s", LastUsed: at(0)}); werr == nil {
		t.Error("PutSession on the read-only database succeeded; the test's database is not read-only")
	}
}
