package bridge_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/sessionmap"
)

// readOutage is a store whose reads of a conversation's agent and session
// fail, and whose probe fails, while down is set: a database restarted or
// its backend terminated between a message's recording and its run.
type readOutage struct {
	bridge.Store
	down  *atomic.Bool
	tried chan struct{}
	once  *sync.Once
}

func (s readOutage) failed() error {
	if s.down.Load() {
		s.once.Do(func() { close(s.tried) })
		return errDown
	}
	return nil
}

func (s readOutage) ConversationAgent(ctx context.Context, key string) (string, bool, error) {
	if err := s.failed(); err != nil {
		return "", false, err
	}
	return s.Store.ConversationAgent(ctx, key)
}

func (s readOutage) Session(ctx context.Context, key string) (bridge.Session, bool, error) {
	if err := s.failed(); err != nil {
		return bridge.Session{}, false, err
	}
	return s.Store.Session(ctx, key)
}

func (s readOutage) Ping(ctx context.Context) error {
	if s.down.Load() {
		return errDown
	}
	return s.Store.Ping(ctx)
}

// TestStoreReadsRideOutAnOutage: the store stops answering after a message
// is recorded and before its run reads the conversation's agent: the run
// waits for the store as a write does, and the user gets the answer, not
// "something went wrong, try again" (32a4bef told them so at once).
func TestStoreReadsRideOutAnOutage(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	tried := make(chan struct{})
	b, _ := bridgeOnStore(t, func(st *sessionmap.Store) bridge.Store {
		return readOutage{Store: st, down: &down, tried: tried, once: new(sync.Once)}
	})
	rec := newRecorder()
	done := make(chan struct{})
	ev := keyed("c/1", "test/msg/1", "hello", rec)
	ev = onDone(ev, func() { close(done) })
	if err := receive(b, ev).Wait(t.Context()); err != nil {
		t.Fatalf("Receive = %v", err)
	}
	<-tried // the run met the outage
	down.Store(false)
	<-done
	got := rec.all()
	if len(got) != 1 || got[0].Kind != bridge.ReplyAgent {
		t.Fatalf("replies = %+v, want the agent's answer alone", got)
	}
	wantContains(t, "answer", got[0].Text, "You said: hello")
	if err := b.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.Close()
}
