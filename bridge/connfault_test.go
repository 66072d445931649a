package bridge_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/sessionmap"
)

// errConnCut is what a database gives a write whose connection was cut
// (pg_terminate_backend): the next write, on a new connection, goes through.
var errConnCut = errors.New("FATAL: terminating connection due to administrator command (SQLSTATE 57P01)")

// sessionCut fails the first PutSession, as a cut connection does.
type sessionCut struct {
	*sessionmap.Store
	cut atomic.Bool
}

func (s *sessionCut) PutSession(ctx context.Context, sess store.Session) error {
	if s.cut.CompareAndSwap(false, true) {
		return errConnCut
	}
	return s.Store.PutSession(ctx, sess)
}

func TestNewSessionSavedThroughACutConnection(t *testing.T) {
	// A message that starts a session whose save meets a cut connection is
	// answered: the save is made again on the next connection, not given up
	// with "Something went wrong… try again" and the new session lost.
	b, fake := bridgeOnStore(t, func(st *sessionmap.Store) bridge.Store { return &sessionCut{Store: st} })
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	rec := newRecorder()
	h := &harness{t: t, b: b}
	if err := h.receive(keyed("c/1", "test/msg/1", "hello", rec)); err != nil {
		t.Fatal(err)
	}
	got := rec.last(t)
	if got.Kind != bridge.ReplyAgent || !strings.Contains(got.Text, "You said: hello") {
		t.Errorf("reply = %+v, want the agent's answer", got)
	}
	if n := len(fake.Sessions(agentUUID)); n != 1 {
		t.Errorf("workspace sessions = %d, want 1 (the one made, kept)", n)
	}
}

// receiveCut fails the Receive of one key after a later Receive has
// succeeded: a write on a cut connection whose failure comes back after
// another write, begun later on a new connection, went through.
type receiveCut struct {
	*sessionmap.Store
	key   string
	begun chan struct{} // closed once the cut write has begun
	later chan struct{} // closed once a later Receive succeeded
}

func (s *receiveCut) Receive(ctx context.Context, e store.InboxEntry) (bool, error) {
	if e.Key == s.key {
		close(s.begun)
		<-s.later
		return false, errConnCut
	}
	fresh, err := s.Store.Receive(ctx, e)
	if err == nil {
		select {
		case <-s.later:
		default:
			close(s.later)
		}
	}
	return fresh, err
}

func TestRefusedRecordBringsTheStoresRecovery(t *testing.T) {
	// An event the store could not record is left to the platform; Discord
	// does not send it again, so its adapter reads what it missed when the
	// store answers again (OnStoreRecovered). That must come even when the
	// failure came back after a later write had succeeded, which left no
	// fault in force: nothing read the message again, and it was lost.
	cut := &receiveCut{key: "test/msg/cut", begun: make(chan struct{}), later: make(chan struct{})}
	b, _ := bridgeOnStore(t, func(st *sessionmap.Store) bridge.Store { cut.Store = st; return cut })
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	recovered := make(chan struct{}, 1)
	b.OnStoreRecovered(func() {
		select {
		case recovered <- struct{}{}:
		default:
		}
	})
	refused := receive(b, keyed("c/1", "test/msg/cut", "lost?", newRecorder()))
	<-cut.begun
	if err := receive(b, keyed("c/2", "test/msg/ok", "fine", newRecorder())).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := refused.Wait(t.Context()); !errors.Is(err, bridge.ErrNotSaved) {
		t.Fatalf("the cut Receive = %v, want ErrNotSaved", err)
	}
	// The probe looks every second; ten is a bound for a failure, not a
	// wait the test counts on.
	select {
	case <-recovered:
	case <-time.After(10 * time.Second):
		t.Fatal("the store's recovery was never told: what was refused is never read again")
	}
}
