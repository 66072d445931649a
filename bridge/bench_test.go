package bridge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/bridge/workspace/workspacetest"
	"github.com/flowbridge/flowbridge/sessionmap"
)

// chanResponder signals each reply on a channel, with no locking or copying,
// so the benchmark measures the bridge rather than the test double.
type chanResponder chan struct{}

func (c chanResponder) Send(context.Context, bridge.Reply) (bridge.MessageRef, error) {
	c <- struct{}{}
	return "", nil
}

// BenchmarkChatRoundTrip measures one chat message in, reply out: routing,
// session lookup and store writes, the real HTTP client and the fake API in
// memory (no sockets), across 100 conversations.
func BenchmarkChatRoundTrip(b *testing.B) {
	fake := workspacetest.New(workspacetest.Options{NoRecord: true})
	fake.AddAgent(workspacetest.Agent{UUID: agentUUID})
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token", HTTPClient: fake.Client()})
	if err != nil {
		b.Fatal(err)
	}
	st, err := sessionmap.Open(filepath.Join(b.TempDir(), "s.db"), sessionmap.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	br, err := bridge.New(defaultConfig(), ws, st, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	defer br.Shutdown(context.Background())
	reply := make(chanResponder, 1)
	convs := make([]string, 100)
	for i := range convs {
		convs[i] = fmt.Sprintf("bench/%d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ev := bridge.Event{Kind: bridge.KindMessage, Platform: "bench", Conversation: convs[i%len(convs)], User: bridge.User{ID: "U1"}, Text: "hello", Reply: reply}
		if err := br.Handle(ev); err != nil {
			b.Fatal(err)
		}
		<-reply
		i++
	}
}

// BenchmarkParseFlowArgs measures the parameter parser on a typical command.
func BenchmarkParseFlowArgs(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := bridge.ParseFlowArgs(`healthcheck host=web1 service="nginx proxy" region=eu-west-1`); err != nil {
			b.Fatal(err)
		}
	}
}
