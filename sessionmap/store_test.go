package sessionmap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func sameSession(a, b Session) bool {
	return a.Key == b.Key && a.Agent == b.Agent && a.SessionUUID == b.SessionUUID &&
		a.Created.Equal(b.Created) && a.LastUsed.Equal(b.LastUsed)
}

func TestSessionRoundTrip(t *testing.T) {
	s, _ := openTest(t, Options{})
	created := time.Date(2024, 5, 20, 13, 45, 12, 123456789, time.UTC)
	tests := []struct {
		name string
		rec  Session
	}{
		{"canonical uuid", Session{Key: "slack/T0123/C0456/1716212345.000100", Agent: "helper", SessionUUID: "0190f5a2-7c1e-7abc-8def-0123456789ab", Created: created, LastUsed: created.Add(time.Hour)}},
		{"upper-case uuid kept as given", Session{Key: "discord/1/2", Agent: "helper", SessionUUID: "0190F5A2-7C1E-7ABC-8DEF-0123456789AB", Created: created}},
		{"non-uuid session id", Session{Key: "console/local", Agent: "ops", SessionUUID: "sess_42", LastUsed: created}},
		{"zero times", Session{Key: "discord/guild/thread", Agent: "a", SessionUUID: "x"}},
		{"empty fields", Session{Key: "k"}},
		{"time before 1970", Session{Key: "old", Created: time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC)}},
		{"unicode", Session{Key: "slack/T/C/ü", Agent: "agént ✓", SessionUUID: "ß"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.PutSession(t.Context(), tt.rec); err != nil {
				t.Fatalf("PutSession(%+v) = %v", tt.rec, err)
			}
			got, ok, err := s.Session(t.Context(), tt.rec.Key)
			if err != nil || !ok || !sameSession(got, tt.rec) {
				t.Errorf("Session(%q) = %+v, %v, %v, want %+v, true, nil", tt.rec.Key, got, ok, err, tt.rec)
			}
		})
	}
}

func TestSessionMissingAndInvalid(t *testing.T) {
	s, _ := openTest(t, Options{})
	if got, ok, err := s.Session(t.Context(), "nope"); err != nil || ok || got != (Session{}) {
		t.Errorf("Session(%q) = %+v, %v, %v, want zero, false, nil", "nope", got, ok, err)
	}
	tests := []struct {
		name string
		rec  Session
	}{
		{"empty key", Session{}},
		{"key too long", Session{Key: strings.Repeat("k", bolt.MaxKeySize+1)}},
		{"time out of range", Session{Key: "k", Created: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.PutSession(t.Context(), tt.rec); err == nil {
				t.Errorf("PutSession(%.40q) = nil, want error", tt.rec.Key)
			}
		})
	}
}

func TestDeleteAndListSessions(t *testing.T) {
	s, _ := openTest(t, Options{})
	keys := []string{"slack/T1/C1", "slack/T1/C1/1.1", "slack/T1/C2", "slack/T2/C1", "discord/g/c", "console/local"}
	for _, k := range keys {
		if err := s.PutSession(t.Context(), Session{Key: k, Agent: "a", SessionUUID: "s-" + k}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"console/local", "discord/g/c", "slack/T1/C1", "slack/T1/C1/1.1", "slack/T1/C2", "slack/T2/C1"}},
		{"slack/T1/", []string{"slack/T1/C1", "slack/T1/C1/1.1", "slack/T1/C2"}},
		{"slack/T1/C1", []string{"slack/T1/C1", "slack/T1/C1/1.1"}},
		{"discord/", []string{"discord/g/c"}},
		{"zzz", nil},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			got, err := s.ListSessions(t.Context(), tt.prefix)
			if err != nil {
				t.Fatalf("ListSessions(%q) = %v", tt.prefix, err)
			}
			var gotKeys []string
			for _, r := range got {
				if r.SessionUUID != "s-"+r.Key {
					t.Errorf("ListSessions(%q) record %+v, want SessionUUID %q", tt.prefix, r, "s-"+r.Key)
				}
				gotKeys = append(gotKeys, r.Key)
			}
			if fmt.Sprint(gotKeys) != fmt.Sprint(tt.want) {
				t.Errorf("ListSessions(%q) keys = %q, want %q", tt.prefix, gotKeys, tt.want)
			}
		})
	}

	for _, tt := range []struct {
		key  string
		want bool
	}{{"slack/T1/C2", true}, {"slack/T1/C2", false}, {"never", false}} {
		if got, err := s.DeleteSession(t.Context(), tt.key); err != nil || got != tt.want {
			t.Errorf("DeleteSession(%q) = %v, %v, want %v, nil", tt.key, got, err, tt.want)
		}
	}
	if _, ok, _ := s.Session(t.Context(), "slack/T1/C2"); ok {
		t.Errorf("Session(%q) found after delete", "slack/T1/C2")
	}
	if got := s.Stats().Sessions; got != int64(len(keys)-1) {
		t.Errorf("Stats().Sessions = %d, want %d", got, len(keys)-1)
	}
}

func TestListSessionsAcrossChunks(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	s.chunk = 10
	const n = 3*10 + 7
	for i := range n {
		if err := s.PutSession(t.Context(), Session{Key: writerKey(i), SessionUUID: testUUID(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A key just past the prefix must not leak into the listing.
	if err := s.PutSession(t.Context(), Session{Key: "slack/T0123/C0457"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListSessions(t.Context(), "slack/T0123/C0456/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("ListSessions = %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if r.Key != writerKey(i) || r.SessionUUID != testUUID(i) {
			t.Fatalf("ListSessions[%d] = %+v, want key %q", i, r, writerKey(i))
		}
	}
}

func TestTextBuckets(t *testing.T) {
	s, _ := openTest(t, Options{})
	type pair struct {
		set func(ctx context.Context, key, v string) error
		get func(ctx context.Context, key string) (string, bool, error)
	}
	buckets := map[string]pair{
		"agent":      {s.SetConversationAgent, s.ConversationAgent},
		"last reply": {s.SetLastReply, s.LastReply},
	}
	steps := []struct {
		value  string
		want   string
		wantOK bool
	}{
		{"helper", "helper", true},
		{"ops ✓\n**markdown** `code`", "ops ✓\n**markdown** `code`", true},
		{"", "", false}, // empty removes
		{strings.Repeat("x", 40000), strings.Repeat("x", 40000), true},
	}
	for name, b := range buckets {
		t.Run(name, func(t *testing.T) {
			key := "slack/T/C/" + name
			if got, ok, err := b.get(t.Context(), key); err != nil || ok || got != "" {
				t.Errorf("get(%q) before set = %q, %v, %v, want \"\", false, nil", key, got, ok, err)
			}
			for _, st := range steps {
				if err := b.set(t.Context(), key, st.value); err != nil {
					t.Fatalf("set(%q, %.20q) = %v", key, st.value, err)
				}
				if got, ok, err := b.get(t.Context(), key); err != nil || ok != st.wantOK || got != st.want {
					t.Errorf("get(%q) after set(%.20q) = %.20q, %v, %v, want %.20q, %v, nil", key, st.value, got, ok, err, st.want, st.wantOK)
				}
			}
			if err := b.set(t.Context(), "", "x"); err == nil {
				t.Errorf("set(\"\", \"x\") = nil, want error")
			}
		})
	}
}

func TestDurableAcrossReopen(t *testing.T) {
	s, path := openTest(t, Options{})
	rec := Session{Key: "slack/T/C/1.2", Agent: "helper", SessionUUID: testUUID(7), Created: time.Unix(1716212345, 100), LastUsed: time.Unix(1716212399, 5)}
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	entry := AuditEntry{Time: at, Platform: "slack", User: "U1", UserName: "ann", Channel: "C1", Conversation: rec.Key, Flow: "healthcheck", Params: map[string]string{"host": "web1"}, Outcome: "ok", Detail: "fine", Duration: 1500 * time.Millisecond}
	for _, err := range []error{
		s.PutSession(t.Context(), rec),
		s.SetConversationAgent(t.Context(), rec.Key, "ops"),
		s.SetLastReply(t.Context(), rec.Key, "the answer"),
		s.AppendAudit(t.Context(), entry),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if first, err := s.Receive(t.Context(), store.InboxEntry{Key: "slack/ev/Ev1", Conversation: rec.Key, Event: []byte("e"), Received: at}); err != nil || !first {
		t.Fatalf("Receive = %v, %v, want true, nil", first, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if got, ok, err := s.Session(t.Context(), rec.Key); err != nil || !ok || !sameSession(got, rec) {
		t.Errorf("Session after reopen = %+v, %v, %v, want %+v", got, ok, err, rec)
	}
	if got, _, err := s.ConversationAgent(t.Context(), rec.Key); err != nil || got != "ops" {
		t.Errorf("ConversationAgent after reopen = %q, %v, want ops", got, err)
	}
	if got, _, err := s.LastReply(t.Context(), rec.Key); err != nil || got != "the answer" {
		t.Errorf("LastReply after reopen = %q, %v, want %q", got, err, "the answer")
	}
	if first, err := s.Receive(t.Context(), store.InboxEntry{Key: "slack/ev/Ev1", Received: at.Add(time.Minute)}); err != nil || first {
		t.Errorf("Receive(dup) after reopen = %v, %v, want false, nil", first, err)
	}
	got, err := s.Audit(t.Context(), AuditFilter{})
	if err != nil || len(got) != 1 || !sameAudit(got[0], entry) {
		t.Errorf("Audit after reopen = %+v, %v, want [%+v]", got, err, entry)
	}
	want := Stats{Open: true, Sessions: 1, Inbox: 1, AuditEntries: 1}
	if st := s.Stats(); st.Open != want.Open || st.Sessions != want.Sessions || st.Inbox != want.Inbox || st.AuditEntries != want.AuditEntries || st.FileSize <= 0 {
		t.Errorf("Stats() = %+v, want %+v with a positive FileSize", st, want)
	}
}

func TestFileMode(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		existing os.FileMode // 0: no file yet
	}{
		{"created", 0},
		{"existing world-readable", 0o644},
		{"existing group-writable", 0o660},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("s%d.db", i))
			if tt.existing != 0 {
				// A valid store left with loose permissions.
				s, err := Open(path, Options{})
				if err != nil {
					t.Fatal(err)
				}
				_ = s.Close()
				if err := os.Chmod(path, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().Perm(); got != 0o600 {
				t.Errorf("mode of %s = %v, want %v", path, got, fs.FileMode(0o600))
			}
		})
	}
}

func TestLockedInProcess(t *testing.T) {
	s, path := openTest(t, Options{})
	_ = s
	_, err := Open(path, Options{Timeout: time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open(%q) = %v, want ErrLocked", path, err)
	}
	if want := "store is locked by another flowbridge (" + path + ")"; err.Error() != want {
		t.Errorf("second Open error = %q, want %q", err, want)
	}
	if errors.Is(err, ErrCorrupt) {
		t.Errorf("second Open error %q also matches ErrCorrupt", err)
	}
}

func TestLockedByOtherProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "flowbridge.db")
	cmd, stdin, out := startHelper(t, modeHoldLock, path)
	if !out.Scan() || out.Text() != "locked" {
		t.Fatalf("helper said %q, %v, want %q", out.Text(), out.Err(), "locked")
	}

	_, err := Open(path, Options{Timeout: time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "store is locked by another flowbridge ("+path+")") {
		t.Fatalf("Open(%q) while another process holds it = %v, want ErrLocked naming the path", path, err)
	}

	// Once the other process lets go the store opens.
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper exited with %v", err)
	}
	s, err := Open(path, Options{Timeout: time.Millisecond})
	if err != nil {
		t.Fatalf("Open(%q) after the other process exited = %v", path, err)
	}
	_ = s.Close()
}

func TestOperationsAfterClose(t *testing.T) {
	s, _ := openTest(t, Options{})
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
	ops := map[string]func() error{
		"Session":              func() error { _, _, err := s.Session(t.Context(), "k"); return err },
		"PutSession":           func() error { return s.PutSession(t.Context(), Session{Key: "k"}) },
		"DeleteSession":        func() error { _, err := s.DeleteSession(t.Context(), "k"); return err },
		"ListSessions":         func() error { _, err := s.ListSessions(t.Context(), ""); return err },
		"ConversationAgent":    func() error { _, _, err := s.ConversationAgent(t.Context(), "k"); return err },
		"SetConversationAgent": func() error { return s.SetConversationAgent(t.Context(), "k", "a") },
		"LastReply":            func() error { _, _, err := s.LastReply(t.Context(), "k"); return err },
		"SetLastReply":         func() error { return s.SetLastReply(t.Context(), "k", "t") },
		"PutTurns":             func() error { _, err := s.PutTurns(t.Context(), []Turn{{Session: Session{Key: "k"}}}); return err },
		"Receive": func() error {
			_, err := s.Receive(t.Context(), store.InboxEntry{Key: "e", Received: time.Now()})
			return err
		},
		"MarkSent":              func() error { return s.MarkSent(t.Context(), "e", time.Now()) },
		"Finish":                func() error { return s.Finish(t.Context(), "e", "r", nil, time.Now()) },
		"Pending":               func() error { _, err := s.Pending(t.Context()); return err },
		"ExpireInbox":           func() error { _, err := s.ExpireInbox(t.Context(), time.Now()); return err },
		"AppendAudit":           func() error { return s.AppendAudit(t.Context(), AuditEntry{Flow: "f", Time: time.Now()}) },
		"Audit":                 func() error { _, err := s.Audit(t.Context(), AuditFilter{}); return err },
		"AuditNewest":           func() error { _, err := s.Audit(t.Context(), AuditFilter{Newest: true, Limit: 1}); return err },
		"PruneAudit":            func() error { _, err := s.PruneAudit(t.Context(), time.Now()); return err },
		"Backup":                func() error { _, err := s.Backup(&bytes.Buffer{}); return err },
		"Check":                 func() error { return s.Check() },
		"SetConversationAgent0": func() error { return s.SetConversationAgent(t.Context(), "k", "") },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			if err := op(); !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", name, err)
			}
		})
	}
	if st := s.Stats(); st != (Stats{}) {
		t.Errorf("Stats() after Close = %+v, want zero", st)
	}
}

func TestConcurrentSessions(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Options{NoSync: true})
	const workers, perWorker = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				rec := Session{Key: fmt.Sprintf("discord/g/%d/%d", w, i), Agent: "helper", SessionUUID: testUUID(w*perWorker + i), LastUsed: time.Unix(int64(i), 0)}
				if err := s.PutSession(t.Context(), rec); err != nil {
					errs <- err
					return
				}
				got, ok, err := s.Session(t.Context(), rec.Key)
				if err != nil || !ok || !sameSession(got, rec) {
					errs <- fmt.Errorf("Session(%q) = %+v, %v, %v, want %+v", rec.Key, got, ok, err, rec)
					return
				}
				// Readers of other workers' keys run alongside the writers.
				if _, _, err := s.Session(t.Context(), fmt.Sprintf("discord/g/%d/%d", (w+1)%workers, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	reportErrs(t, &wg, errs)
	if got := s.Stats().Sessions; got != workers*perWorker {
		t.Errorf("Stats().Sessions = %d, want %d", got, workers*perWorker)
	}
}

func TestCrashLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "flowbridge.db")
	cmd, _, out := startHelper(t, modeWriter, path)
	var acked []string
	for out.Scan() {
		acked = append(acked, out.Text())
		if len(acked) == 200 {
			// SIGKILL mid-loop; lines already in the pipe are still read.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = cmd.Wait()
	if len(acked) < 200 {
		t.Fatalf("helper acknowledged %d writes before dying, want at least 200", len(acked))
	}

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open after kill -9 = %v", err)
	}
	defer s.Close()
	for _, key := range acked {
		if _, ok, err := s.Session(t.Context(), key); err != nil || !ok {
			t.Errorf("Session(%q) after kill -9 = %v, %v, want present", key, ok, err)
		}
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check() after kill -9 = %v", err)
	}
}

func TestBackup(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Options{})
	for i := range 50 {
		if err := s.PutSession(t.Context(), Session{Key: writerKey(i), Agent: "helper", SessionUUID: testUUID(i), Created: time.Unix(int64(i), 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendAudit(t.Context(), AuditEntry{Flow: "healthcheck", Outcome: "ok", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := s.Backup(&buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("Backup = %d, %v; wrote %d bytes", n, err, buf.Len())
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open(backup) = %v", err)
	}
	defer b.Close()
	want, _ := s.ListSessions(t.Context(), "")
	got, err := b.ListSessions(t.Context(), "")
	if err != nil || len(got) != len(want) {
		t.Fatalf("backup ListSessions = %d records, %v, want %d", len(got), err, len(want))
	}
	for i := range want {
		if !sameSession(got[i], want[i]) {
			t.Errorf("backup record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if a, err := b.Audit(t.Context(), AuditFilter{}); err != nil || len(a) != 1 || a[0].Flow != "healthcheck" {
		t.Errorf("backup Audit = %+v, %v, want the healthcheck entry", a, err)
	}
	if st := b.Stats(); st.Sessions != 50 || st.AuditEntries != 1 {
		t.Errorf("backup Stats() = %+v, want 50 sessions and 1 audit entry", st)
	}
}

func TestStatsCounters(t *testing.T) {
	s, path := openTest(t, Options{})
	for _, k := range []string{"a", "b", "c", "a"} { // "a" twice: a replacement
		if err := s.PutSession(t.Context(), Session{Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DeleteSession(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Sessions; got != 2 {
		t.Errorf("Stats().Sessions = %d, want 2", got)
	}

	// A file whose counters are missing gets them rebuilt on open.
	s = reopenWithoutCounter(t, s, path, metaSessions)
	if got := s.Stats().Sessions; got != 2 {
		t.Errorf("Stats().Sessions after rebuild = %d, want 2", got)
	}
}

func TestBadRecordIsAnError(t *testing.T) {
	s, _ := openTest(t, Options{})
	bad := map[string][]byte{
		string(bucketSessions): {9, 9, 9},
		string(bucketAgents):   {},
		string(bucketReplies):  {7, 'x'},
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		for b, v := range bad {
			if err := tx.Bucket([]byte(b)).Put([]byte("bad"), v); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketAudit).Put(bytes.Repeat([]byte{0x80}, 16), []byte{1, '{'})
	})
	if err != nil {
		t.Fatal(err)
	}
	putRawInbox(t, s, "bad", 1, []byte{inboxV1, byte(store.Sent), 0, 0, 0, 0, 0, 0, 0, 1})
	now := time.Now()
	ops := map[string]func() error{
		"Session":           func() error { _, _, err := s.Session(t.Context(), "bad"); return err },
		"ListSessions":      func() error { _, err := s.ListSessions(t.Context(), ""); return err },
		"ConversationAgent": func() error { _, _, err := s.ConversationAgent(t.Context(), "bad"); return err },
		"LastReply":         func() error { _, _, err := s.LastReply(t.Context(), "bad"); return err },
		"PutTurns":          func() error { _, err := s.PutTurns(t.Context(), []Turn{{Session: Session{Key: "bad"}}}); return err },
		"MarkSent":          func() error { return s.MarkSent(t.Context(), "bad", now) },
		"Finish":            func() error { return s.Finish(t.Context(), "bad", "r", nil, now) },
		"Pending":           func() error { _, err := s.Pending(t.Context()); return err },
		"Audit":             func() error { _, err := s.Audit(t.Context(), AuditFilter{}); return err },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			err := op()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bad") {
				t.Errorf("%s on a bad record = %v, want ErrCorrupt naming the record", name, err)
			}
		})
	}
}

func TestOpenRefusesNewerFormat(t *testing.T) {
	s, path := openTest(t, Options{})
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaFormat, encodeCounter(formatVersion+1))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	newer := fmt.Sprintf("format %d", formatVersion+1)
	if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), newer) {
		t.Errorf("Open of a newer format = %v, want ErrCorrupt naming %s", err, newer)
	}
	// The failed open released the lock.
	if _, err := Open(path, Options{Timeout: time.Millisecond}); errors.Is(err, ErrLocked) {
		t.Errorf("Open after a refused open = %v, want the lock released", err)
	}
}

// TestGroupCommitIsolatesFailures runs writes that fail beside writes that
// succeed, all at once, so that they share batches: a Receive of a key
// bbolt cannot store, a MarkSent of a damaged entry (which fails inside the
// shared transaction) and a Finish of an unknown key each fail alone, and
// every other write lands.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	s, path := openTest(t, Options{})
	putRawInbox(t, s, "bad", 1, []byte{inboxV1, 99})
	const writers = 64
	huge := strings.Repeat("k", bolt.MaxKeySize+1)
	var wg sync.WaitGroup
	errs := make([]error, writers)
	wantOK := func(w int) bool { return w%4 >= 2 }
	for w := range writers {
		wg.Go(func() {
			switch w % 8 {
			case 0:
				_, errs[w] = s.Receive(t.Context(), store.InboxEntry{Key: huge, Event: []byte("x"), Received: time.Now()})
			case 1:
				errs[w] = s.MarkSent(t.Context(), "bad", time.Now())
			case 4:
				errs[w] = s.Finish(t.Context(), "never", "r", nil, time.Now())
			case 5:
				errs[w] = s.MarkSent(t.Context(), "bad", time.Now())
			case 2, 6:
				errs[w] = s.PutSession(t.Context(), Session{Key: fmt.Sprintf("k%02d", w), Agent: "a"})
			default:
				var ok bool
				ok, errs[w] = s.Receive(t.Context(), store.InboxEntry{Key: fmt.Sprintf("ev%02d", w), Event: []byte("x"), Received: time.Now()})
				if errs[w] == nil && !ok {
					errs[w] = errors.New("not new")
				}
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		switch {
		case wantOK(w) && err != nil:
			t.Errorf("writer %d = %v, want nil", w, err)
		case !wantOK(w) && err == nil:
			t.Errorf("writer %d = nil, want its own error", w)
		case w%8 == 0 && !strings.Contains(err.Error(), "exceeds"):
			t.Errorf("writer %d: Receive(huge key) = %v, want the size named", w, err)
		case w%8 == 1 && !errors.Is(err, ErrCorrupt):
			t.Errorf("writer %d: MarkSent(bad) = %v, want ErrCorrupt", w, err)
		case w%8 == 4 && !errors.Is(err, store.ErrUnknownEntry):
			t.Errorf("writer %d: Finish(never) = %v, want ErrUnknownEntry", w, err)
		}
	}
	_ = s.Close()
	// Open's check finds the damaged entry; without it, the rest serves.
	if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("Open beside the damaged entry = %v, want ErrCorrupt naming it", err)
	}
	s, err := Open(path, Options{Check: CheckOff})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.ListSessions(t.Context(), ""); err != nil || len(got) != writers/4 {
		t.Errorf("ListSessions after mixed writes = %d records, %v, want %d", len(got), err, writers/4)
	}
	got, err := s.Pending(t.Context())
	if err == nil || !errors.Is(err, ErrCorrupt) {
		t.Errorf("Pending() beside the damaged entry = %d entries, %v, want ErrCorrupt", len(got), err)
	}
	if st := s.Stats(); st.Inbox != writers/4 {
		t.Errorf("Stats().Inbox after mixed writes = %d, want %d", st.Inbox, writers/4)
	}
}

func TestPutTurns(t *testing.T) {
	s, _ := openTest(t, Options{})
	now := time.Unix(1700000000, 0).UTC()
	later := now.Add(time.Minute)
	put := func(key, uuid string) {
		t.Helper()
		if err := s.PutSession(t.Context(), Session{Key: key, Agent: "helper", SessionUUID: uuid, Created: now, LastUsed: now}); err != nil {
			t.Fatal(err)
		}
	}
	put("c/live", "s-1")
	put("c/replaced", "s-new")
	turns := []Turn{
		{Session: Session{Key: "c/live", Agent: "helper", SessionUUID: "s-1", Created: now, LastUsed: later}, Reply: "answer"},
		{Session: Session{Key: "c/replaced", Agent: "helper", SessionUUID: "s-old", Created: now, LastUsed: later}, Reply: "stale"},
		{Session: Session{Key: "c/reset", Agent: "helper", SessionUUID: "s-2", Created: now, LastUsed: later}, Reply: "gone"},
	}
	n, err := s.PutTurns(t.Context(), turns)
	if err != nil || n != 1 {
		t.Fatalf("PutTurns = %d, %v; want 1 applied", n, err)
	}
	if got, _, _ := s.Session(t.Context(), "c/live"); !got.LastUsed.Equal(later) {
		t.Errorf("live session LastUsed = %v, want %v", got.LastUsed, later)
	}
	if reply, ok, _ := s.LastReply(t.Context(), "c/live"); !ok || reply != "answer" {
		t.Errorf("LastReply(c/live) = %q, %v", reply, ok)
	}
	if got, _, _ := s.Session(t.Context(), "c/replaced"); got.SessionUUID != "s-new" || !got.LastUsed.Equal(now) {
		t.Errorf("a stale turn changed the newer session: %+v", got)
	}
	if _, ok, _ := s.Session(t.Context(), "c/reset"); ok {
		t.Error("a turn brought back a reset conversation's session")
	}
	if _, ok, _ := s.LastReply(t.Context(), "c/reset"); ok {
		t.Error("a turn of a reset conversation wrote its reply")
	}
	if st := s.Stats(); st.Sessions != 2 {
		t.Errorf("Stats().Sessions = %d, want 2", st.Sessions)
	}
}

// reopenWithoutCounter deletes a meta counter, closes s and opens the file
// again (closed at cleanup), so the counter has to be rebuilt.
func reopenWithoutCounter(t *testing.T, s *Store, path string, counter []byte) *Store {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(counter) })
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestOpenRefusesAMissingStore: once a store was created at a path, Open
// refuses to create a new, empty one there when the file is gone, naming
// the file and the way out; without the marker (a first start, or the user
// chose to start over) it creates one.
func TestOpenRefusesAMissingStore(t *testing.T) {
	s, path := openTest(t, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(CreatedMarker(path)); err != nil {
		t.Fatalf("no marker beside a new store: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{})
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "backup") || !strings.Contains(err.Error(), "delete "+CreatedMarker(path)) {
		t.Fatalf("Open of a lost store = %v, want ErrMissing naming %s, the backup and the marker", err, path)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open created %s after refusing: %v", path, err)
	}
	if err := os.Remove(CreatedMarker(path)); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("Open without the marker = %v, want a new store", err)
	}
	_ = s.Close()
}
