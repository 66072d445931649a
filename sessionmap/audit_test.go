package sessionmap

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func sameAudit(a, b AuditEntry) bool {
	return a.Time.Equal(b.Time) && a.Platform == b.Platform && a.User == b.User &&
		a.UserName == b.UserName && a.Channel == b.Channel && a.Conversation == b.Conversation &&
		a.Flow == b.Flow && maps.Equal(a.Params, b.Params) && a.Outcome == b.Outcome &&
		a.Detail == b.Detail && a.Duration == b.Duration
}

func auditDetails(es []AuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Detail
	}
	return out
}

func TestAuditRoundTripAndOrder(t *testing.T) {
	s, _ := openTest(t, Options{})
	t0 := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	full := AuditEntry{
		Time: t0.Add(2 * time.Second), Platform: "slack", User: "U1", UserName: "Ann Ö", Channel: "C1",
		Conversation: "slack/T/C1/1.2", Flow: "healthcheck",
		Params:  map[string]string{"host": "web1", "service": "nginx \"proxy\"\n=x"},
		Outcome: "ok", Detail: "3", Duration: 2500 * time.Millisecond,
	}
	// Appended out of time order; read back in time order.
	entries := []AuditEntry{
		{Time: t0.Add(3 * time.Second), Flow: "a", Detail: "4"},
		full,
		{Time: t0, Flow: "b", Detail: "1"},
		{Time: t0.Add(time.Second), Flow: "c", Detail: "2"},
		{Time: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), Flow: "old", Detail: "0"},
	}
	for _, e := range entries {
		if err := s.AppendAudit(t.Context(), e); err != nil {
			t.Fatalf("AppendAudit(%+v) = %v", e, err)
		}
	}
	got, err := s.Audit(t.Context(), AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[0 1 2 3 4]"; fmt.Sprint(auditDetails(got)) != want {
		t.Fatalf("Audit order = %v, want %v", auditDetails(got), want)
	}
	if !sameAudit(got[3], full) {
		t.Errorf("Audit entry = %+v, want %+v", got[3], full)
	}
}

func TestAuditSameNanosecond(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	s.chunk = 7
	at := time.Unix(1700000000, 42)
	const n = 40 // also crosses read chunks
	for i := range n {
		if err := s.AppendAudit(t.Context(), AuditEntry{Time: at, Detail: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Audit(t.Context(), AuditFilter{})
	if err != nil || len(got) != n {
		t.Fatalf("Audit = %d entries, %v, want %d", len(got), err, n)
	}
	for i, e := range got {
		if e.Detail != fmt.Sprint(i) || !e.Time.Equal(at) {
			t.Fatalf("Audit[%d] = %q at %v, want %q at %v", i, e.Detail, e.Time, fmt.Sprint(i), at)
		}
	}
	newest, err := s.Audit(t.Context(), AuditFilter{Newest: true, Limit: 3})
	if want := fmt.Sprint([]int{n - 3, n - 2, n - 1}); err != nil || fmt.Sprint(auditDetails(newest)) != want {
		t.Errorf("Audit(Newest, Limit 3) = %v, %v, want %v", auditDetails(newest), err, want)
	}
	if st := s.Stats(); st.AuditEntries != n {
		t.Errorf("Stats().AuditEntries = %d, want %d", st.AuditEntries, n)
	}
}

func TestAuditFilter(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	t0 := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	// Entry i at t0+i minutes; flows alternate, users cycle over three,
	// outcomes cycle over ok, error, refused, timeout.
	flows := []string{"healthcheck", "restart"}
	users := []string{"U1", "U2", "U3"}
	outcomes := []string{"ok", "error", "refused", "timeout"}
	for i := range 24 {
		e := AuditEntry{
			Time: t0.Add(time.Duration(i) * time.Minute), Platform: []string{"slack", "discord"}[i/12],
			Flow: flows[i%2], User: users[i%3], Outcome: outcomes[i%4], Detail: fmt.Sprint(i),
		}
		if err := s.AppendAudit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		f    AuditFilter
		want string
	}{
		{"all", AuditFilter{Limit: 3}, "[0 1 2]"},
		{"since inclusive", AuditFilter{Since: t0.Add(20 * time.Minute)}, "[20 21 22 23]"},
		{"since between entries", AuditFilter{Since: t0.Add(20*time.Minute + time.Nanosecond)}, "[21 22 23]"},
		{"until exclusive", AuditFilter{Until: t0.Add(3 * time.Minute)}, "[0 1 2]"},
		{"window", AuditFilter{Since: t0.Add(5 * time.Minute), Until: t0.Add(8 * time.Minute)}, "[5 6 7]"},
		{"flow", AuditFilter{Flow: "restart", Limit: 4}, "[1 3 5 7]"},
		{"user", AuditFilter{User: "U3"}, "[2 5 8 11 14 17 20 23]"},
		{"outcome", AuditFilter{Outcome: "refused"}, "[2 6 10 14 18 22]"},
		{"platform", AuditFilter{Platform: "discord", Limit: 2}, "[12 13]"},
		{"anded", AuditFilter{Flow: "healthcheck", User: "U1", Outcome: "refused"}, "[6 18]"},
		{"anded with since", AuditFilter{Flow: "healthcheck", User: "U1", Outcome: "refused", Since: t0.Add(7 * time.Minute)}, "[18]"},
		{"newest", AuditFilter{Newest: true, Limit: 3}, "[21 22 23]"},
		{"newest filtered before until", AuditFilter{Newest: true, Limit: 2, User: "U2", Until: t0.Add(20 * time.Minute)}, "[16 19]"},
		{"newest since", AuditFilter{Newest: true, Since: t0.Add(21 * time.Minute)}, "[21 22 23]"},
		{"nothing", AuditFilter{Flow: "nosuch"}, "[]"},
		{"empty window", AuditFilter{Since: t0.Add(time.Hour)}, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Audit(t.Context(), tt.f)
			if err != nil || fmt.Sprint(auditDetails(got)) != tt.want {
				t.Errorf("Audit(%+v) = %v, %v, want %s", tt.f, auditDetails(got), err, tt.want)
			}
		})
	}
}

func TestPruneAudit(t *testing.T) {
	s, _ := openTest(t, Options{NoSync: true})
	t0 := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	const chunk = 8
	s.chunk = chunk
	const n = 2*chunk + 3 // more than one prune transaction
	for i := range n {
		if err := s.AppendAudit(t.Context(), AuditEntry{Time: t0.Add(time.Duration(i) * time.Second), Detail: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		before   time.Time
		wantGone int
	}{
		{t0, 0},
		{t0.Add(2 * chunk * time.Second), 2 * chunk},
		{t0.Add(2 * chunk * time.Second), 0},
		{t0.Add(time.Hour), 3},
	}
	left := n
	for _, st := range steps {
		gone, err := s.PruneAudit(t.Context(), st.before)
		if err != nil || gone != st.wantGone {
			t.Fatalf("PruneAudit(%v) = %d, %v, want %d, nil", st.before, gone, err, st.wantGone)
		}
		left -= gone
		got, err := s.Audit(t.Context(), AuditFilter{})
		if err != nil || len(got) != left {
			t.Fatalf("Audit after PruneAudit(%v) = %d entries, %v, want %d", st.before, len(got), err, left)
		}
		if left > 0 && got[0].Time.Before(st.before) {
			t.Errorf("Audit after PruneAudit(%v) starts at %v", st.before, got[0].Time)
		}
		if st := s.Stats(); st.AuditEntries != int64(left) {
			t.Errorf("Stats().AuditEntries = %d, want %d", st.AuditEntries, left)
		}
	}
}

func TestAppendAuditTimes(t *testing.T) {
	s, _ := openTest(t, Options{})
	if err := s.AppendAudit(t.Context(), AuditEntry{Flow: "f"}); !errors.Is(err, store.ErrNoTime) {
		t.Errorf("AppendAudit(zero time) = %v, want ErrNoTime: the caller's clock gives it", err)
	}
	if err := s.AppendAudit(t.Context(), AuditEntry{Time: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Errorf("AppendAudit(year 2300) = nil, want an error")
	}
}
