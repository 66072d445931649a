package slack

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/postgres"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/pgtest"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func TestE2EReplicasAnswerOnceInOrder(t *testing.T) {
	// Two replicas on one PostgreSQL, each with its own Socket Mode
	// connection: the fake Slack spreads a DM's messages over both sockets,
	// and each message is answered once, the agent reading them in order.
	// The fake's post limit is lifted: six answers into one DM would wait
	// out its message a second for 4 s, and replicas contending for that
	// limit are TestBurstFromThreeProcessesWaitsOutPostLimit's subject.
	t.Parallel()
	dsn := pgtest.Schema(t)
	s, ws := newFakesOpts(t, nil, slacktest.Options{PostBurst: -1})
	var es []*e2e
	for range 2 {
		pg, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pg.Close() }) // after the replica's own cleanup
		es = append(es, startE2E(t, e2eOptions{slack: s, ws: ws, store: func(*sessionmap.Store) bridge.Store { return pg }}))
	}
	ctx := waitCtx(t)
	if err := s.WaitLiveConnections(ctx, 2); err != nil {
		t.Fatal(err)
	}
	texts := []string{"one", "two", "three", "four", "five", "six"}
	sockets := map[int]bool{}
	for _, text := range texts {
		d := es[0].sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: text}))
		sockets[d.Conn] = true
		es[0].ack(ctx, d)
	}
	if len(sockets) != 2 {
		t.Errorf("the messages went over sockets %v, want both replicas'", sockets)
	}
	for i, text := range texts {
		es[0].reply(ctx, e2eDM, fmt.Sprintf("[turn %d] You said: %s", i+1, text))
	}
	if got := es[0].agentMessages(); strings.Join(got, ",") != strings.Join(texts, ",") {
		t.Errorf("agent session got %q, want %q", got, texts)
	}
	for _, text := range texts {
		n := 0
		for _, m := range s.Messages() {
			if m.Channel == e2eDM && m.BotID != "" && strings.HasSuffix(m.Text, "You said: "+text) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%q answered %d times, want once", text, n)
		}
	}
}
