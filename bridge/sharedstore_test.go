package bridge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/pgtest"
)

// sharedStore is how one replica reaches the store it shares with the
// others. Close cuts that replica off, as a killed process's connections
// go with it; the others go on with the store.
type sharedStore interface {
	store.Store
	Close() error
}

// forEachSharedStore runs test once on each store replicas can share, as
// the subtests bbolt and postgres; open gives one replica its own view of
// the subtest's store, closed when the subtest ends.
//
// On bbolt the replicas are Bridges of this process on one
// sessionmap.Store: its file admits one process, but the store honours
// each lease's holder and its Listen hears every entry recorded through
// it, so the Bridges run the one dispatcher as replicas, as they do on
// PostgreSQL. That half needs nothing outside the process. The postgres
// half is skipped where PostgreSQL does not answer (CI runs it: pgtest).
func forEachSharedStore(t *testing.T, test func(t *testing.T, open func() sharedStore)) {
	t.Helper()
	t.Run("bbolt", func(t *testing.T) {
		t.Parallel()
		// Durability is not under test here, as pgtest's schemas do not
		// wait for the WAL flush.
		st, err := sessionmap.Open(filepath.Join(t.TempDir(), "store.db"), sessionmap.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		// The first cleanup, so the last to run: after every replica's.
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		})
		test(t, func() sharedStore { return newBboltView(st) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.Schema(t)
		test(t, func() sharedStore { return openShared(t, dsn) })
	})
}

// bboltView is one replica's view of the bbolt store the replicas of a
// test share in this process. Until Close it is the store itself. Close
// models what a killed process leaves behind and nothing more: every call
// the replica makes from then on fails with sessionmap.ErrClosed, as a
// closed PostgreSQL pool refuses its calls; its Listen ends and hears
// nothing more; it renews and releases nothing, so its leases lapse at
// their TTL in the store, where the other replicas find them. A call
// under way when the view closes finishes, as a statement under way
// finishes while a pool closes. Other replicas' views, and the store, go
// on.
//
// It forwards each method of store.Store by name, embedding nothing: a
// method added to the contract fails to build here until this view
// decides what a dead replica's call of it does.
type bboltView struct {
	st   *sessionmap.Store
	dead context.Context // done once the view is closed
	kill context.CancelFunc
}

var _ sharedStore = (*bboltView)(nil)

func newBboltView(st *sessionmap.Store) *bboltView {
	dead, kill := context.WithCancel(context.Background())
	return &bboltView{st: st, dead: dead, kill: kill}
}

// Close cuts this replica off the store; the store stays open.
func (v *bboltView) Close() error {
	v.kill()
	return nil
}

// cut returns the error of op on a closed view, or nil while it is open.
func (v *bboltView) cut(op string) error {
	if v.dead.Err() != nil {
		return fmt.Errorf("%s: %w", op, sessionmap.ErrClosed)
	}
	return nil
}

// Listen is the store's Listen, ended when the view closes: a dead
// process hears nothing, and its listener fails as a closed pool's does.
func (v *bboltView) Listen(ctx context.Context, f func(conversation string)) error {
	if err := v.cut("listen"); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(v.dead, cancel)
	defer stop()
	err := v.st.Listen(ctx, func(conv string) {
		if v.dead.Err() == nil {
			f(conv)
		}
	})
	if err := v.cut("listen"); err != nil {
		return err
	}
	return err
}

func (v *bboltView) Session(ctx context.Context, key string) (store.Session, bool, error) {
	if err := v.cut("session"); err != nil {
		return store.Session{}, false, err
	}
	return v.st.Session(ctx, key)
}

func (v *bboltView) PutSession(ctx context.Context, s store.Session) error {
	if err := v.cut("put session"); err != nil {
		return err
	}
	return v.st.PutSession(ctx, s)
}

func (v *bboltView) DeleteSession(ctx context.Context, key string) (bool, error) {
	if err := v.cut("delete session"); err != nil {
		return false, err
	}
	return v.st.DeleteSession(ctx, key)
}

func (v *bboltView) ListSessions(ctx context.Context, prefix string) ([]store.Session, error) {
	if err := v.cut("list sessions"); err != nil {
		return nil, err
	}
	return v.st.ListSessions(ctx, prefix)
}

func (v *bboltView) ConversationAgent(ctx context.Context, key string) (string, bool, error) {
	if err := v.cut("conversation agent"); err != nil {
		return "", false, err
	}
	return v.st.ConversationAgent(ctx, key)
}

func (v *bboltView) SetConversationAgent(ctx context.Context, key, agent string) error {
	if err := v.cut("set conversation agent"); err != nil {
		return err
	}
	return v.st.SetConversationAgent(ctx, key, agent)
}

func (v *bboltView) LastReply(ctx context.Context, key string) (string, bool, error) {
	if err := v.cut("last reply"); err != nil {
		return "", false, err
	}
	return v.st.LastReply(ctx, key)
}

func (v *bboltView) PutTurns(ctx context.Context, turns []store.Turn) (int, error) {
	if err := v.cut("put turns"); err != nil {
		return 0, err
	}
	return v.st.PutTurns(ctx, turns)
}

func (v *bboltView) Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if err := v.cut("claim"); err != nil {
		return false, err
	}
	return v.st.Claim(ctx, name, holder, ttl)
}

func (v *bboltView) Renew(ctx context.Context, holder string, names []string, ttl time.Duration) ([]string, error) {
	if err := v.cut("renew"); err != nil {
		return nil, err
	}
	return v.st.Renew(ctx, holder, names, ttl)
}

func (v *bboltView) Release(ctx context.Context, name, holder string) error {
	if err := v.cut("release"); err != nil {
		return err
	}
	return v.st.Release(ctx, name, holder)
}

func (v *bboltView) Holders(ctx context.Context) ([]string, error) {
	if err := v.cut("holders"); err != nil {
		return nil, err
	}
	return v.st.Holders(ctx)
}

func (v *bboltView) PendingOf(ctx context.Context, conversation string) ([]store.InboxEntry, error) {
	if err := v.cut("pending of"); err != nil {
		return nil, err
	}
	return v.st.PendingOf(ctx, conversation)
}

func (v *bboltView) Unleased(ctx context.Context, minAge time.Duration, limit int) ([]string, error) {
	if err := v.cut("unleased"); err != nil {
		return nil, err
	}
	return v.st.Unleased(ctx, minAge, limit)
}

func (v *bboltView) MarkSentUnder(ctx context.Context, key, name, holder string, now time.Time) error {
	if err := v.cut("mark sent under"); err != nil {
		return err
	}
	return v.st.MarkSentUnder(ctx, key, name, holder, now)
}

func (v *bboltView) PutToken(ctx context.Context, id string, data []byte, expires, now time.Time) error {
	if err := v.cut("put token"); err != nil {
		return err
	}
	return v.st.PutToken(ctx, id, data, expires, now)
}

func (v *bboltView) TakeToken(ctx context.Context, id string) ([]byte, time.Time, bool, error) {
	if err := v.cut("take token"); err != nil {
		return nil, time.Time{}, false, err
	}
	return v.st.TakeToken(ctx, id)
}

func (v *bboltView) DueTokens(ctx context.Context, prefix string, now time.Time, limit int) ([]string, error) {
	if err := v.cut("due tokens"); err != nil {
		return nil, err
	}
	return v.st.DueTokens(ctx, prefix, now, limit)
}

func (v *bboltView) Receive(ctx context.Context, e store.InboxEntry) (bool, error) {
	if err := v.cut("receive"); err != nil {
		return false, err
	}
	return v.st.Receive(ctx, e)
}

func (v *bboltView) MarkSent(ctx context.Context, key string, now time.Time) error {
	if err := v.cut("mark sent"); err != nil {
		return err
	}
	return v.st.MarkSent(ctx, key, now)
}

func (v *bboltView) Finish(ctx context.Context, key, reply string, turn *store.Turn, now time.Time) error {
	if err := v.cut("finish"); err != nil {
		return err
	}
	return v.st.Finish(ctx, key, reply, turn, now)
}

func (v *bboltView) Pending(ctx context.Context) ([]store.InboxEntry, error) {
	if err := v.cut("pending"); err != nil {
		return nil, err
	}
	return v.st.Pending(ctx)
}

func (v *bboltView) EntryState(ctx context.Context, key string) (store.InboxState, bool, error) {
	if err := v.cut("entry state"); err != nil {
		return 0, false, err
	}
	return v.st.EntryState(ctx, key)
}

func (v *bboltView) ExpireInbox(ctx context.Context, before time.Time) (int, error) {
	if err := v.cut("expire inbox"); err != nil {
		return 0, err
	}
	return v.st.ExpireInbox(ctx, before)
}

func (v *bboltView) PutReply(ctx context.Context, key string, reply []byte, turn *store.Turn, now time.Time) error {
	if err := v.cut("put reply"); err != nil {
		return err
	}
	return v.st.PutReply(ctx, key, reply, turn, now)
}

func (v *bboltView) Stop(ctx context.Context, key, who string, now time.Time) (bool, error) {
	if err := v.cut("stop"); err != nil {
		return false, err
	}
	return v.st.Stop(ctx, key, who, now)
}

func (v *bboltView) LastOrders(ctx context.Context, keyPrefix string, since time.Time) (map[string]int64, error) {
	if err := v.cut("last orders"); err != nil {
		return nil, err
	}
	return v.st.LastOrders(ctx, keyPrefix, since)
}

func (v *bboltView) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	if err := v.cut("append audit"); err != nil {
		return err
	}
	return v.st.AppendAudit(ctx, e)
}

func (v *bboltView) Audit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	if err := v.cut("audit"); err != nil {
		return nil, err
	}
	return v.st.Audit(ctx, f)
}

func (v *bboltView) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	if err := v.cut("prune audit"); err != nil {
		return 0, err
	}
	return v.st.PruneAudit(ctx, before)
}

func (v *bboltView) ConversationContext(ctx context.Context, key string) (store.Context, bool, error) {
	if err := v.cut("conversation context"); err != nil {
		return store.Context{}, false, err
	}
	return v.st.ConversationContext(ctx, key)
}

func (v *bboltView) PutConversationContext(ctx context.Context, c store.Context) error {
	if err := v.cut("put conversation context"); err != nil {
		return err
	}
	return v.st.PutConversationContext(ctx, c)
}

func (v *bboltView) AdapterState(ctx context.Context, name string) (store.AdapterState, bool, error) {
	if err := v.cut("adapter state"); err != nil {
		return store.AdapterState{}, false, err
	}
	return v.st.AdapterState(ctx, name)
}

func (v *bboltView) PutAdapterState(ctx context.Context, name, text string, updated time.Time, want int64) (bool, error) {
	if err := v.cut("put adapter state"); err != nil {
		return false, err
	}
	return v.st.PutAdapterState(ctx, name, text, updated, want)
}

func (v *bboltView) PutVote(ctx context.Context, vote store.Vote) (string, error) {
	if err := v.cut("put vote"); err != nil {
		return "", err
	}
	return v.st.PutVote(ctx, vote)
}

func (v *bboltView) Votes(ctx context.Context, f store.FeedbackFilter) ([]store.Vote, error) {
	if err := v.cut("votes"); err != nil {
		return nil, err
	}
	return v.st.Votes(ctx, f)
}

func (v *bboltView) PutAnswer(ctx context.Context, a store.Answer) error {
	if err := v.cut("put answer"); err != nil {
		return err
	}
	return v.st.PutAnswer(ctx, a)
}

func (v *bboltView) Answer(ctx context.Context, platform, reply string) (store.Answer, bool, error) {
	if err := v.cut("answer"); err != nil {
		return store.Answer{}, false, err
	}
	return v.st.Answer(ctx, platform, reply)
}

func (v *bboltView) PruneAnswers(ctx context.Context, before time.Time) (int, error) {
	if err := v.cut("prune answers"); err != nil {
		return 0, err
	}
	return v.st.PruneAnswers(ctx, before)
}

func (v *bboltView) ClaimRun(ctx context.Context, name string, at time.Time) (bool, error) {
	if err := v.cut("claim run"); err != nil {
		return false, err
	}
	return v.st.ClaimRun(ctx, name, at)
}

func (v *bboltView) LastRun(ctx context.Context, name string) (time.Time, bool, error) {
	if err := v.cut("last run"); err != nil {
		return time.Time{}, false, err
	}
	return v.st.LastRun(ctx, name)
}

func (v *bboltView) Ping(ctx context.Context) error {
	if err := v.cut("ping"); err != nil {
		return err
	}
	return v.st.Ping(ctx)
}

// meeting is a replica's store that tells (met closed) when the replica,
// looking at the processes live on the store (store.Holders), first finds
// n of them, itself included. A replica looks when it attaches, on a
// goroutine of its own, and then every second, so replicas started a
// moment apart may each believe itself alone, and hold nothing back for
// the platform's order, for up to a second (bridge/orderhold.go). A test
// of the order hold between running replicas waits until they have met.
type meeting struct {
	sharedStore
	n    int
	met  chan struct{}
	once sync.Once
}

func newMeeting(st sharedStore, n int) *meeting {
	return &meeting{sharedStore: st, n: n, met: make(chan struct{})}
}

func (m *meeting) Holders(ctx context.Context) ([]string, error) {
	holders, err := m.sharedStore.Holders(ctx)
	if err == nil && len(holders) >= m.n {
		m.once.Do(func() { close(m.met) })
	}
	return holders, err
}

// waitMet waits until each of the replicas on ms has found the others.
func waitMet(t *testing.T, ms ...*meeting) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for i, m := range ms {
		select {
		case <-m.met:
		case <-timeout:
			t.Fatalf("replica %d never found the %d replicas live", i, m.n)
		}
	}
}
