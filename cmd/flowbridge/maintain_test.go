package main

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
)

// maintainedStore records what maintain asks of a store.
type maintainedStore struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func (m *maintainedStore) record(op string, before time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[op] = append(m.calls[op], before)
	return 0, nil
}

func (m *maintainedStore) ExpireInbox(_ context.Context, before time.Time) (int, error) {
	return m.record("inbox", before)
}

func (m *maintainedStore) PruneAudit(_ context.Context, before time.Time) (int, error) {
	return m.record("audit", before)
}

func (m *maintainedStore) PruneAnswers(_ context.Context, before time.Time) (int, error) {
	return m.record("answers", before)
}

func (m *maintainedStore) PruneSessions(_ context.Context, before time.Time) (int, error) {
	return m.record("sessions", before)
}

func (m *maintainedStore) PruneReplies(_ context.Context, before time.Time) (int, error) {
	return m.record("replies", before)
}

// TestMaintainPrunesSessionsAndReplies: every minute maintain expires the
// inbox and prunes the audit; in its first minute and every hour after, it
// forgets sessions and latest replies past their retention, and never
// when their retention is 0 (keep forever).
func TestMaintainPrunesSessionsAndReplies(t *testing.T) {
	for _, keep := range []retention{
		{dedupe: 10 * time.Minute, audit: 90 * 24 * time.Hour, sessions: 90 * 24 * time.Hour, replies: 30 * 24 * time.Hour},
		{dedupe: 10 * time.Minute},
	} {
		synctest.Test(t, func(t *testing.T) {
			st := &maintainedStore{calls: map[string][]time.Time{}}
			ctx, cancel := context.WithCancel(t.Context())
			start := time.Now()
			var wg sync.WaitGroup
			wg.Go(func() { maintain(ctx, st, keep, zap.NewNop()) })
			time.Sleep(61*time.Minute + time.Second) // the bubble's clock: 61 ticks
			synctest.Wait()
			cancel()
			wg.Wait()
			type calls struct {
				n   int           // in 61 minutes
				ago time.Duration // before = now - ago
			}
			want := map[string]calls{"inbox": {61, keep.dedupe}}
			if keep.audit > 0 {
				want["audit"] = calls{61, keep.audit}
				want["answers"] = calls{61, keep.audit}
			}
			if keep.sessions > 0 {
				want["sessions"] = calls{2, keep.sessions} // minutes 1 and 61
				want["replies"] = calls{2, keep.replies}
			}
			for op, w := range want {
				got := st.calls[op]
				if len(got) != w.n {
					t.Errorf("retention %+v: %s called %d times in 61 minutes, want %d", keep, op, len(got), w.n)
					continue
				}
				if first := start.Add(time.Minute).Add(-w.ago); !got[0].Equal(first) {
					t.Errorf("retention %+v: first %s before %v, want %v", keep, op, got[0], first)
				}
			}
			for op := range st.calls {
				if _, ok := want[op]; !ok {
					t.Errorf("retention %+v: %s called %d times, want never", keep, op, len(st.calls[op]))
				}
			}
		})
	}
}
