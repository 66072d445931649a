package bridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestShutdownStartsNothingNew: 15 conversations with 3 messages each, the
// first of each with the agent when the shutdown begins. Only those 15 get
// the grace; the 30 queued behind them start no agent call after the
// signal, and no user is told to send anything again. The next start
// answers the 30: 45 of 45 answered once. (On 32a4bef the queued messages
// were sent after the signal, cut off at the end of the grace, and their
// users told "Please send it again".)
func TestShutdownStartsNothingNew(t *testing.T) {
	t.Parallel()
	const convs, each = 15, 3
	st, _ := openStore(t)
	asked := make(chan string, convs*each)
	release := make(chan struct{})
	fake := newReplicaFake(t, workspacetest.Agent{Reply: func(_ int, msg string) string {
		asked <- msg
		<-release
		return "answer to " + msg
	}})
	first, err := bridge.New(defaultConfig(), mustWorkspace(t, fake), st, zaptest.NewLogger(t).Named("first"))
	if err != nil {
		t.Fatal(err)
	}
	attachTest(t, first)
	r := &restorer{recs: map[string]*recorder{}}
	for c := range convs {
		for m := range each {
			key := fmt.Sprintf("test/msg/%d-%d", c, m)
			if err := receive(first, keyed(fmt.Sprintf("c/%d", c), key, fmt.Sprintf("c%d-m%d", c, m), r.rec(key))).Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range convs {
		<-asked // the first message of every conversation is with the agent
	}
	shut := make(chan error)
	grace, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { shut <- first.Shutdown(grace) }()
	// The agent answers once the shutdown has begun: the answers are posted
	// within the grace, and the queued messages must not follow them.
	<-first.ClosingSignal()
	close(release)
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	first.Close()
	if n := len(asked); n != 0 {
		t.Errorf("%d agent calls started after the shutdown began, want 0", n)
	}

	next, err := bridge.New(defaultConfig(), mustWorkspace(t, fake), st, zaptest.NewLogger(t).Named("next"))
	if err != nil {
		t.Fatal(err)
	}
	if resumed, told, err := next.Attach("test", r); err != nil || resumed != convs*(each-1) || told != 0 {
		t.Fatalf("Attach = %d, %d, %v; want %d resumed, none told", resumed, told, err, convs*(each-1))
	}
	for range convs * (each - 1) {
		<-asked
	}
	if err := next.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	next.Close()
	answered := 0
	for c := range convs {
		for m := range each {
			got := r.rec(fmt.Sprintf("test/msg/%d-%d", c, m)).all()
			if len(got) != 1 || !strings.Contains(got[0].Text, fmt.Sprintf("answer to c%d-m%d", c, m)) {
				t.Errorf("c%d-m%d got %+v, want its answer once", c, m, got)
				continue
			}
			answered++
		}
	}
	if answered != convs*each {
		t.Errorf("%d of %d answered once", answered, convs*each)
	}
	if p := pendingKeys(t, st); len(p) != 0 {
		t.Errorf("pending after the restart: %v, want none", p)
	}
}
