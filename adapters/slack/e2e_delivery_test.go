package slack

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// sessionWith returns the messages of the agent session whose first message
// is first.
func (e *e2e) sessionWith(first string) []string {
	e.t.Helper()
	for _, s := range e.ws.Sessions(e2eAgent) {
		if m := e.ws.Messages(s); len(m) > 0 && m[0] == first {
			return m
		}
	}
	e.t.Fatalf("no agent session starts with %q", first)
	return nil
}

// TestE2EOrderInThreadAndDM sends 12 messages back to back into one thread
// and 12 into one DM, interleaved, without waiting for any ack: each
// conversation's messages reach the agent in the order Slack sent them.
func TestE2EOrderInThreadAndDM(t *testing.T) {
	t.Parallel()
	// What reaches the agent is checked, not how the 24 answers wait out
	// Slack's message a second per channel (TestBurstIntoOneChannelWaitsOutPostLimit).
	e := startE2E(t, e2eOptions{cfg: func(c *Config) { c.WorkingIndicator = IndicatorNone }, postBurst: -1})
	ctx := waitCtx(t)
	const n = 12
	var thread, dm []string
	var root string
	for i := range n {
		text := fmt.Sprintf("t%02d", i)
		if i == 0 {
			// The mention starts the thread; the replies need no mention.
			root = e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: text})).TS
		} else {
			e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, ThreadTS: root, Text: text}))
		}
		thread = append(thread, text)
		text = fmt.Sprintf("d%02d", i)
		e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: text}))
		dm = append(dm, text)
	}
	// The last answers, whatever they answer: the order is checked below.
	e.reply(ctx, e2eChannel, fmt.Sprintf("[turn %d] ", n))
	e.reply(ctx, e2eDM, fmt.Sprintf("[turn %d] ", n))
	if got := e.sessionWith(thread[0]); !slices.Equal(got, thread) {
		t.Errorf("thread session got %q, want %q", got, thread)
	}
	if got := e.sessionWith(dm[0]); !slices.Equal(got, dm) {
		t.Errorf("DM session got %q, want %q", got, dm)
	}
}

// TestE2ERedeliveryAfterRestartIsNotAnswered: Slack redelivers an event
// answered before a restart; the new process acknowledges it and answers
// nothing, over Socket Mode and over HTTP.
func TestE2ERedeliveryAfterRestartIsNotAnswered(t *testing.T) {
	const secret = "restart-secret"
	tests := []struct {
		name string
		cfg  func(*Config)
		// send delivers the DM text and returns how to deliver it again.
		send func(t *testing.T, e *e2e, ctx context.Context, text string) (again func(*e2e))
	}{
		{name: "socket mode", send: func(t *testing.T, e *e2e, ctx context.Context, text string) func(*e2e) {
			d := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: text}))
			return func(e *e2e) { e.ack(ctx, e.sent(e.slack.Redeliver(ctx, d.EnvelopeID))) }
		}},
		{name: "http mode", cfg: httpMode(secret), send: func(t *testing.T, e *e2e, ctx context.Context, text string) func(*e2e) {
			body, _, err := e.slack.MessageEventBody(slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: text})
			if err != nil {
				t.Fatal(err)
			}
			if status, _ := e.post(t, ctx, slacktest.ContentTypeJSON, body, secret, time.Now(), nil); status != http.StatusOK {
				t.Fatalf("status = %d, want 200", status)
			}
			return func(e *e2e) {
				retry := func(r *http.Request) { slacktest.SetRetry(r, 1, "http_timeout") }
				if status, _ := e.post(t, ctx, slacktest.ContentTypeJSON, body, secret, time.Now(), retry); status != http.StatusOK {
					t.Fatalf("retry status = %d, want 200", status)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := startE2E(t, e2eOptions{cfg: tt.cfg})
			ctx := waitCtx(t)
			again := tt.send(t, e, ctx, "before")
			e.reply(ctx, e2eDM, "You said: before")
			e = e.restart(tt.cfg)
			// Acknowledged once the core has found it in the inbox: had it
			// been taken, it would be answered before the next message.
			again(e)
			tt.send(t, e, ctx, "after")
			e.reply(ctx, e2eDM, "[turn 2] You said: after")
			if got := e.agentMessages(); !slices.Equal(got, []string{"before", "after"}) {
				t.Errorf("agent got %q, want [before after]", got)
			}
		})
	}
}

// TestE2ECrashResumesReceivedAndTellsSent stops a process without a
// shutdown while one DM message is with the agent (Sent) and another waits
// behind it (Received). The next process answers the waiting one, does not
// send the other again but tells its user, and answers no redelivery of
// what was answered before.
func TestE2ECrashResumesReceivedAndTellsSent(t *testing.T) {
	t.Parallel()
	gate, asked := make(chan struct{}), make(chan string, 10)
	s, ws := newFakes(t, func(turn int, msg string) string {
		asked <- msg
		if msg == "first" {
			<-gate // the agent never answers before the crash
		}
		return fmt.Sprintf("[turn %d] You said: %s", turn, msg)
	})
	ctx := waitCtx(t)

	// The first process, abandoned below as a crash would leave it. Its
	// logger is quiet: what it does after the crash does not concern the test.
	path := t.TempDir() + "/store.db"
	core1 := newTestCore(t, ws, path, zap.NewNop())
	a1, err := New(e2eConfig(s), core1, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	run1, cancel1 := context.WithCancel(context.Background())
	ran1 := make(chan error, 1)
	go func() { ran1 <- a1.Run(run1) }()
	first := &e2e{t: t, slack: s, ws: ws, a: a1, err: ran1}
	first.waitReady()

	zero := first.sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "zero"}))
	first.reply(ctx, e2eDM, "You said: zero")
	sent := first.sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "first"}))
	// Once the agent has it, it was marked Sent, and "zero" before it is closed.
	for msg := ""; msg != "first"; {
		select {
		case msg = <-asked:
		case <-ctx.Done():
			t.Fatal("the agent was never asked")
		}
	}
	received := first.sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "second"}))
	first.ack(ctx, received) // acknowledged, so recorded

	// The crash: the socket goes, the store is closed under the core.
	cancel1()
	if err := <-ran1; err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if err := core1.store.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Runs before the fakes close: the abandoned agent call must end first.
		close(gate)
		cut, cancel := context.WithCancel(context.Background())
		cancel()
		_ = core1.Shutdown(cut)
		core1.http.CloseIdleConnections()
	})

	e := startE2E(t, e2eOptions{slack: s, ws: ws, path: path})
	e.soleSocket()
	e.reply(ctx, e2eDM, "You said: second")
	notice, err := s.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.Channel == e2eDM && strings.Contains(m.Text, "restarted")
	})
	if err != nil {
		t.Fatalf("no notice for the message cut off by the crash: %v", err)
	}
	// A regular message marked with the event's key, not an ephemeral one:
	// a second start that finds the entry still open looks for it first.
	if notice.Ephemeral || !strings.Contains(string(notice.Metadata), "flowbridge_reply") {
		t.Errorf("notice = ephemeral %v, metadata %s; want a regular message marked for the outbox", notice.Ephemeral, notice.Metadata)
	}
	if strings.Contains(notice.Text, "You said") {
		t.Errorf("notice = %q, want no answer in it", notice.Text)
	}
	// Slack redelivers what the first process answered and what it had sent.
	e.ack(ctx, e.sent(s.Redeliver(ctx, zero.EnvelopeID)))
	e.ack(ctx, e.sent(s.Redeliver(ctx, sent.EnvelopeID)))
	e.sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "third"}))
	e.reply(ctx, e2eDM, "You said: third")
	if got, want := e.agentMessages(), []string{"zero", "first", "second", "third"}; !slices.Equal(got, want) {
		t.Errorf("agent got %q, want %q: each once", got, want)
	}
	answers := 0
	for _, m := range s.Messages() {
		if m.Channel == e2eDM && m.BotID != "" && strings.Contains(m.Text, "You said: zero") {
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("%q answered %d times, want once", "zero", answers)
	}
}

// TestE2EHTTPReplayAttackRunsFlowOnce: whoever captured one signed /flow
// request posts it three more times within its 5-minute window. The
// signature is valid each time; the flow runs once.
func TestE2EHTTPReplayAttackRunsFlowOnce(t *testing.T) {
	t.Parallel()
	const secret = "replay-secret"
	e := startE2E(t, e2eOptions{cfg: httpMode(secret)})
	ctx := waitCtx(t)
	body, d := e.slack.SlashCommandBody(slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=web1", UserID: e2eUser, ChannelID: e2eChannel})
	signedAt := time.Now()
	if status, _ := e.post(t, ctx, slacktest.ContentTypeForm, body, secret, signedAt, nil); status != http.StatusOK {
		t.Fatalf("status = %d, want 200", status)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if status, _ := e.post(t, ctx, slacktest.ContentTypeForm, body, secret, signedAt, nil); status != http.StatusOK {
				t.Errorf("replay status = %d, want 200", status)
			}
		})
	}
	wg.Wait()
	// Every replay was answered only once the inbox knew it: no run can follow.
	e.response(ctx, d.ResponseURL, "Checked web1")
	runs := 0
	for _, r := range e.ws.Requests() {
		if strings.HasSuffix(r.Path, "/run/sync") {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("flow ran %d times, want once", runs)
	}
}
