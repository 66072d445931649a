package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// chanResponder signals each reply on a channel, with no locking or copying,
// so the benchmark measures the bridge rather than the test double.
type chanResponder chan struct{}

func (c chanResponder) Send(context.Context, bridge.Reply) (bridge.MessageRef, error) {
	c <- struct{}{}
	return "", nil
}

// platformResponder is chanResponder with the working indicator and the
// progress updates Slack's and Discord's responders have, so the core sets
// up both for each message as it does for theirs.
type platformResponder struct{ chanResponder }

func (platformResponder) Typing(context.Context) func() { return func() {} }

func (platformResponder) Progress(context.Context, bridge.MessageRef, bridge.Reply) error {
	return nil
}

// benchBridge is a bridge with cfg for the round-trip benchmarks: the fake
// API in memory, recording nothing, and a store that does not sync, so
// they measure the core rather than the disk. Shutdown and closing the
// store are cleanups.
func benchBridge(b *testing.B, cfg bridge.Config) *bridge.Bridge {
	b.Helper()
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
	b.Cleanup(func() { st.Close() })
	br, err := bridge.New(cfg, ws, st, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Shutdown(context.Background()) })
	return br
}

// cpuSince is the process's CPU time when a benchmark's loop began.
type cpuSince struct {
	at time.Duration
	ok bool
}

// measureCPU starts measuring the process's CPU time (user and system) for
// a benchmark's loop. It counts every goroutine's work, the store's commits
// and the fake API included, which ns/op misses when they overlap: it is
// the figure that tells a busy machine's throughput.
func measureCPU() cpuSince {
	at, ok := processCPU()
	return cpuSince{at, ok}
}

// report adds cpu-µs/op, the CPU time since measureCPU over n operations,
// where the process's CPU time can be read.
func (c cpuSince) report(b *testing.B, n int) {
	now, ok := processCPU()
	if !c.ok || !ok || n == 0 {
		return
	}
	b.ReportMetric(float64(now-c.at)/float64(time.Microsecond)/float64(n), "cpu-µs/op")
}

// fixedPlatform answers every event through r, as a platform whose
// responder costs nothing to build.
type fixedPlatform struct {
	testPlatform
	r bridge.Responder
}

func (p fixedPlatform) Responder(bridge.Event) (bridge.Responder, error) { return p.r, nil }

// BenchmarkChatRoundTrip measures one chat message in, reply out: routing,
// session lookup and store writes, the real HTTP client and the fake API in
// memory (no sockets), across 100 conversations.
func BenchmarkChatRoundTrip(b *testing.B) {
	br := benchBridge(b, defaultConfig())
	reply := make(chanResponder, 1)
	if _, _, err := br.Attach("bench", fixedPlatform{r: reply}); err != nil {
		b.Fatal(err)
	}
	convs := make([]string, 100)
	for i := range convs {
		convs[i] = fmt.Sprintf("bench/%d", i)
	}
	b.ReportAllocs()
	cpu := measureCPU()
	i := 0
	for b.Loop() {
		ev := bridge.Event{Kind: bridge.KindMessage, Platform: "bench", Conversation: convs[i%len(convs)], User: bridge.User{ID: "U1"}, Text: "hello"}
		if err := br.Receive(ev).Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		<-reply
		i++
	}
	cpu.report(b, i)
}

// BenchmarkChatRoundTripInbox measures one chat message the way a platform
// delivers it: with a platform key, so it is recorded in the inbox, its
// answer kept in the outbox, marked sent and its entry finished, under the
// default configuration (indicator delay, progress interval). It is the
// store path every Slack and Discord message takes; -benchmem's allocs/op
// count is what to compare, being steady where wall time is not.
func BenchmarkChatRoundTripInbox(b *testing.B) {
	cfg := bridge.DefaultConfig()
	def := defaultConfig()
	cfg.Flows, cfg.Agents, cfg.Admins = def.Flows, def.Agents, def.Admins
	br := benchBridge(b, cfg)
	reply := platformResponder{make(chanResponder, 1)}
	if _, _, err := br.Attach("bench", fixedPlatform{r: reply}); err != nil {
		b.Fatal(err)
	}
	convs := make([]string, 100)
	for i := range convs {
		convs[i] = fmt.Sprintf("bench/%d", i)
	}
	route := json.RawMessage(`{"channel":"C0456","thread":"1716212345.000100"}`)
	b.ReportAllocs()
	cpu := measureCPU()
	i := 0
	for b.Loop() {
		ev := bridge.Event{Kind: bridge.KindMessage, Platform: "bench", Conversation: convs[i%len(convs)], User: bridge.User{ID: "U1"}, Text: "hello", Key: "bench/msg/" + strconv.Itoa(i), Route: route}
		if err := br.Receive(ev).Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		<-reply.chanResponder
		i++
	}
	cpu.report(b, i)
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
