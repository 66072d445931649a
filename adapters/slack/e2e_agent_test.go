package slack

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// newFakesWith is newFakes with the fake Slack's options.
func newFakesWith(t *testing.T, o slacktest.Options) (*slacktest.Server, *workspacetest.Server) {
	t.Helper()
	s := slacktest.NewServer(o)
	t.Cleanup(s.Close)
	ws := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(ws.Close)
	ws.AddAgent(workspacetest.Agent{UUID: e2eAgent})
	return s, ws
}

func withAgentView(c *Config) { c.AgentView = true }

func TestE2EAgentView(t *testing.T) {
	t.Parallel()
	// The agent view's events and prompts are checked, not how its
	// answers wait out Slack's message a second per channel.
	s, ws := newFakesWith(t, slacktest.Options{AgentView: true, PostBurst: -1})
	e := startE2E(t, e2eOptions{cfg: withAgentView, slack: s, ws: ws})
	e.assistantOn()
	ctx := waitCtx(t)

	// Opening the Messages tab greets the DM, and the agent's prompts sit
	// at its top.
	viewing := []slacktest.ContextEntity{{Type: slacktest.EntityChannel, Value: e2eChannel}}
	e.ack(ctx, e.sent(e.slack.SendAppHomeOpened(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM, Entities: viewing})))
	if m := e.reply(ctx, e2eDM, "Ask me anything"); m.ThreadTS != "" {
		t.Errorf("greeting in thread %q, want the DM itself", m.ThreadTS)
	}
	dm, err := e.slack.WaitAssistant(ctx, e2eDM, "", func(th slacktest.AssistantThread) bool { return len(th.Prompts) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if want := []slacktest.Prompt{{Title: "Status", Message: "What is the status of prod?"}, {Title: "Restart", Message: "How do I restart nginx?"}}; !slices.Equal(dm.Prompts, want) {
		t.Errorf("DM prompts = %+v, want %+v", dm.Prompts, want)
	}
	// Opening it again greets no more; what the user views changes.
	e.ack(ctx, e.sent(e.slack.SendAppHomeOpened(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM, Entities: viewing})))
	e.ack(ctx, e.sent(e.slack.SendAppContextChanged(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM, Entities: []slacktest.ContextEntity{
		{Type: slacktest.EntityCanvas, Value: "F0SPEC"},
		{Type: slacktest.EntityMessage, Channel: "C0OTHER", MessageTS: "1700000000.000100"},
		{Type: "slack#/types/something_new", Value: "X1"},
	}})))

	// A message in the tab starts a thread, which is its conversation: the
	// status shows there while the agent works, and the answer goes there.
	first := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "How do I restart nginx?"}))
	if m := e.reply(ctx, e2eDM, "restart nginx"); m.ThreadTS != first.TS {
		t.Errorf("answer thread_ts = %q, want the message's %q", m.ThreadTS, first.TS)
	}
	th, err := e.slack.WaitAssistant(ctx, e2eDM, first.TS, func(th slacktest.AssistantThread) bool { return len(th.Statuses) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(th.Statuses, []string{DefaultAssistantStatus}) || th.Status != "" || len(th.Titles) != 0 {
		t.Errorf("thread = statuses %q, status now %q, titles %q; want one %q, none now, no title", th.Statuses, th.Status, th.Titles, DefaultAssistantStatus)
	}
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: first.TS, Text: "and apache?"}))
	e.reply(ctx, e2eDM, "[turn 2]")
	second := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "unrelated"}))
	if m := e.reply(ctx, e2eDM, "You said: unrelated"); m.ThreadTS != second.TS || !strings.Contains(m.Text, "[turn 1]") {
		t.Errorf("second thread's answer = %q in %q, want turn 1 in %q", m.Text, m.ThreadTS, second.TS)
	}

	got := e.agentSessions()
	want := [][]string{
		{"[Context: The user is viewing the canvas F0SPEC, and the message 1700000000.000100 in <#C0OTHER>.]\n\nHow do I restart nginx?", "and apache?"},
		{"unrelated"},
	}
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("agent sessions = %q, want %q", got, want)
	}
	greetings := 0
	for _, m := range e.slack.Messages() {
		if strings.Contains(m.Text, "Ask me anything") {
			greetings++
		}
		if strings.Contains(m.Text, "Thinking") {
			t.Errorf("a placeholder was posted with agent_view: %+v", m)
		}
	}
	if greetings != 1 {
		t.Errorf("%d greetings, want 1", greetings)
	}
}

func TestE2EAgentViewOffIgnoresItsEvents(t *testing.T) {
	t.Parallel()
	s, ws := newFakesWith(t, slacktest.Options{AgentView: true})
	e := startE2E(t, e2eOptions{slack: s, ws: ws})
	e.assistantOn()
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendAppHomeOpened(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM})))
	e.ack(ctx, e.sent(e.slack.SendAppContextChanged(ctx, slacktest.AgentEvent{User: e2eUser, Channel: e2eDM,
		Entities: []slacktest.ContextEntity{{Type: slacktest.EntityChannel, Value: e2eChannel}}})))
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "one"}))
	if m := e.reply(ctx, e2eDM, "You said: one"); m.ThreadTS != "" {
		t.Errorf("answer in thread %q, want the DM itself without agent_view", m.ThreadTS)
	}
	if got := e.agentSessions(); len(got) != 1 || !slices.Equal(got[0], []string{"one"}) {
		t.Errorf("agent sessions = %q, want one without context", got)
	}
	if n := len(e.slack.Messages()); n != 1 {
		t.Errorf("%d messages posted, want the answer alone", n)
	}
}

func TestFakeRefusesAgentEventsWithoutAgentView(t *testing.T) {
	t.Parallel()
	s := slacktest.NewServer(slacktest.Options{})
	t.Cleanup(s.Close)
	_, err := s.SendAppContextChanged(t.Context(), slacktest.AgentEvent{User: e2eUser, Channel: e2eDM})
	if !errors.Is(err, slacktest.ErrNotAgentView) {
		t.Errorf("SendAppContextChanged() without agent_view = %v, want ErrNotAgentView", err)
	}
}

// thread puts a root and n replies, by three people, the bot and a file
// among them, in channel; it returns the root's ts and the lines the agent
// should read for them, oldest first.
func seedThread(s *slacktest.Server, channel string, n int) (string, []string) {
	root := s.AddThreadMessage(slacktest.ThreadMessage{Channel: channel, User: "U0ALICE", Text: "Is prod down? <!here>"})
	lines := []string{"- Alice: Is prod down? @\u2060here"}
	who := []struct{ id, name string }{{"U0ALICE", "Alice"}, {"U0BOB", "Bob"}, {"U0CAROL", "Carol"}}
	for i := 1; i < n; i++ {
		m := slacktest.ThreadMessage{Channel: channel, ThreadTS: root, Text: fmt.Sprintf("reply %02d", i)}
		line := ""
		switch {
		case i == n-3:
			m.User, m.BotID = s.BotUserID(), s.BotID()
			line = fmt.Sprintf("- %s (you, an earlier answer): reply %02d", strings.ToLower(s.BotUserID()), i)
		case i == n-2:
			m.User, m.Files = "U0BOB", []string{"graph.png"}
			m.Text = fmt.Sprintf("reply %02d cc <@U0CAROL>", i)
			line = fmt.Sprintf("- Bob: reply %02d cc @Carol [files: graph.png]", i)
		default:
			w := who[i%len(who)]
			m.User = w.id
			line = fmt.Sprintf("- %s: reply %02d", w.name, i)
		}
		s.AddThreadMessage(m)
		lines = append(lines, line)
	}
	return root, lines
}

var threadNames = map[string]string{"U0ALICE": "Alice", "U0BOB": "Bob", "U0CAROL": "Carol"}

func withThreadContext(n int) func(*bridge.Config) {
	return func(c *bridge.Config) { c.ThreadContext = bridge.ThreadContext{Messages: n, Chars: 20000} }
}

func TestE2EMentionInThreadHearsTheThread(t *testing.T) {
	t.Parallel()
	s, ws := newFakesWith(t, slacktest.Options{UserNames: threadNames})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, core: withThreadContext(12)})
	ctx := waitCtx(t)
	root, lines := seedThread(s, e2eChannel, 30)

	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "what do you make of it?"}))
	if m := e.reply(ctx, e2eChannel, "what do you make of it?"); m.ThreadTS != root {
		t.Errorf("answer thread_ts = %q, want the thread %q", m.ThreadTS, root)
	}
	// A second mention in the thread is the same session: no thread again.
	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "and now?"}))
	e.reply(ctx, e2eChannel, "[turn 2]")

	want := "[Earlier in this thread, oldest first:]\n- (18 earlier messages left out)\n" + strings.Join(lines[len(lines)-12:], "\n") +
		"\n[End of the earlier messages. The new message follows.]\n\nwhat do you make of it?"
	got := e.agentSessions()
	if len(got) != 1 || len(got[0]) != 2 || got[0][0] != want || got[0][1] != "and now?" {
		t.Errorf("agent session = %q\nwant first message\n%q", got, want)
	}
}

func TestE2EThreadNotReadAnswersWithoutIt(t *testing.T) {
	t.Parallel()
	s, ws := newFakesWith(t, slacktest.Options{UserNames: threadNames})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, core: withThreadContext(10)})
	ctx := waitCtx(t)
	root, _ := seedThread(s, e2eChannel, 5)
	e.slack.RateLimit("conversations.replies", 1, 60)
	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "summary?"}))
	e.reply(ctx, e2eChannel, "You said: summary?")
	if got := e.agentSessions(); len(got) != 1 || !slices.Equal(got[0], []string{"summary?"}) {
		t.Errorf("agent session = %q, want the message alone when conversations.replies is rate limited", got)
	}
	if n := e.slack.CallCount("conversations.replies"); n != 1 {
		t.Errorf("conversations.replies called %d times, want 1 (no retry on ratelimited)", n)
	}
}

func TestE2EThreadRestrictedHistoryHearsNoBeginning(t *testing.T) {
	t.Parallel()
	// A commercially distributed app outside the Marketplace: one call a
	// minute, 15 messages a page. The first page (the thread's start) shows
	// the thread is longer; the window before the mention is rate limited,
	// and the agent hears the message alone, not the thread's opening.
	s, ws := newFakesWith(t, slacktest.Options{UserNames: threadNames, RestrictedHistory: true})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, core: withThreadContext(5)})
	ctx := waitCtx(t)
	root, _ := seedThread(s, e2eChannel, 30)
	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "summary?"}))
	e.reply(ctx, e2eChannel, "You said:")
	if got := e.agentSessions(); len(got) != 1 || !slices.Equal(got[0], []string{"summary?"}) {
		t.Errorf("agent session = %q, want the message alone", got)
	}
	if calls := e.slack.Calls(); !slices.ContainsFunc(calls, func(c slacktest.Call) bool { return c.Method == "conversations.replies" && c.Error == "ratelimited" }) {
		t.Error("the second call was not refused: the fake does not hold the restricted tier")
	}
}

func TestE2EAgentViewOverHTTP(t *testing.T) {
	t.Parallel()
	const secret = "agent-secret"
	s, ws := newFakesWith(t, slacktest.Options{AgentView: true})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, cfg: func(c *Config) { httpMode(secret)(c); c.AgentView = true }})
	e.assistantOn()
	ctx := waitCtx(t)
	body, err := e.slack.AppHomeOpenedBody(slacktest.AgentEvent{User: e2eUser, Channel: e2eDM})
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := e.post(t, ctx, "application/json", body, secret, time.Now(), nil); status != 200 {
		t.Fatalf("POST app_home_opened = %d", status)
	}
	if m := e.reply(ctx, e2eDM, "Ask me anything"); m.ThreadTS != "" {
		t.Errorf("greeting in thread %q, want the DM", m.ThreadTS)
	}
	if _, err := e.slack.WaitAssistant(ctx, e2eDM, "", func(th slacktest.AssistantThread) bool { return len(th.Prompts) == 2 }); err != nil {
		t.Error(err)
	}
}

// TestRestoreKeepsThreadContext: an event read back from the inbox after a
// restart still reads its thread, and an agent_view thread keeps its status.
func TestRestoreKeepsThreadContext(t *testing.T) {
	t.Parallel()
	a, err := New(validSocket(), idleCore{t}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		route       string
		earlier     bool
		statusReply bool
	}{
		{`{"kind":"chat","channel":"C0GENERAL","thread":"1700000000.000100","user_ts":"1700000001.000100","context_of":"1700000000.000100"}`, true, false},
		{`{"kind":"chat","channel":"C0GENERAL","thread":"1700000000.000100","user_ts":"1700000001.000100"}`, false, false},
		{`{"kind":"chat","channel":"D0ALICE","thread":"1700000000.000100","agent":true}`, false, true},
	} {
		ev := bridge.Event{Key: "k", Route: []byte(tt.route)}
		reply, err := a.Responder(ev)
		if err != nil {
			t.Fatalf("Responder(%s) = %v", tt.route, err)
		}
		rt, _ := routeOf(ev)
		if rt.readsThread() != tt.earlier {
			t.Errorf("route %s reads its thread = %v, want %v", tt.route, rt.readsThread(), tt.earlier)
		}
		if _, ok := reply.(*statusResponder); ok != tt.statusReply {
			t.Errorf("Responder(%s) = %T", tt.route, reply)
		}
	}
	if _, err := a.Responder(bridge.Event{Key: "k", Route: []byte(`{"kind":"chat","channel":"C0GENERAL","context_of":"nope"}`)}); err == nil {
		t.Error("Responder accepted a malformed context_of")
	}
}

// longThread puts a root by Alice and n replies by Alice, Bob and Carol in
// channel, the reply i posted at at(i) (the root at at(0)); it returns the
// root's ts and each reply's line as the agent reads it (lines[i-1] is
// reply i).
func longThread(s *slacktest.Server, clock *fakeClock, channel string, n int, at func(i int) time.Duration) (string, []string) {
	base := clock.Now()
	root := s.AddThreadMessage(slacktest.ThreadMessage{Channel: channel, User: "U0ALICE", Text: "the thread's opening"})
	who := []struct{ id, name string }{{"U0ALICE", "Alice"}, {"U0BOB", "Bob"}, {"U0CAROL", "Carol"}}
	lines := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		clock.Set(base.Add(at(i)))
		w := who[i%len(who)]
		s.AddThreadMessage(slacktest.ThreadMessage{Channel: channel, ThreadTS: root, User: w.id, Text: fmt.Sprintf("reply %04d", i)})
		lines = append(lines, fmt.Sprintf("- %s: reply %04d", w.name, i))
	}
	clock.Set(base.Add(at(n) + time.Second))
	return root, lines
}

// fakeClock is a settable clock for the fake's timestamps.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// TestE2EMentionAfterALongThreadHearsItsEnd: a mention after 1,200
// replies brings the agent the 20 just before it, in order, by name, and
// says how many came before; none from the thread's beginning. It costs a
// few conversations.replies (Tier 3) and a users.info per author at most.
func TestE2EMentionAfterALongThreadHearsItsEnd(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		at   func(i int) time.Duration
	}{
		{"evenly", func(i int) time.Duration { return time.Duration(i) * time.Minute }},
		// A slow week, then a burst in the last half hour.
		{"burst at the end", func(i int) time.Duration {
			if i <= 1000 {
				return time.Duration(i) * 10 * time.Minute
			}
			return 1000*10*time.Minute + time.Duration(i-1000)*5*time.Second
		}},
		// A busy start, then a quiet month.
		{"quiet end", func(i int) time.Duration {
			if i <= 1150 {
				return time.Duration(i) * time.Second
			}
			return 1150*time.Second + time.Duration(i-1150)*12*time.Hour
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
			s, ws := newFakesWith(t, slacktest.Options{UserNames: threadNames, Now: clock.Now, PostBurst: -1})
			e := startE2E(t, e2eOptions{slack: s, ws: ws, core: withThreadContext(20)})
			ctx := waitCtx(t)
			root, lines := longThread(s, clock, e2eChannel, 1200, tt.at)

			e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "where are we?"}))
			e.reply(ctx, e2eChannel, "where are we?")
			want := "[Earlier in this thread, oldest first:]\n- (1181 earlier messages left out)\n" +
				strings.Join(lines[len(lines)-20:], "\n") +
				"\n[End of the earlier messages. The new message follows.]\n\nwhere are we?"
			got := e.agentSessions()
			if len(got) != 1 || len(got[0]) != 1 || got[0][0] != want {
				t.Errorf("agent heard %q\nwant %q", got, want)
			}
			if n := e.slack.CallCount("conversations.replies"); n > maxThreadCalls {
				t.Errorf("conversations.replies called %d times for one mention, want at most %d", n, maxThreadCalls)
			}
			if n := e.slack.CallCount("users.info"); n > 4 {
				t.Errorf("users.info called %d times, want one per author at most (Alice, Bob, Carol, Dave)", n)
			}
		})
	}
}

// countingTransport counts the response bytes read through it.
type countingTransport struct {
	base http.RoundTripper
	read atomic.Int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &t.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestE2EThreadOfHugeRepliesIsReadWithinBounds: replies far larger than
// what the agent hears are not read whole: the bytes read stop at the page
// limit an answer (here 64 KiB in place of maxThreadPage, so the fakes stay
// quick; the thread's first page is over it), and the agent still hears the
// newest replies, cut to thread_context_chars, and how many came before.
func TestE2EThreadOfHugeRepliesIsReadWithinBounds(t *testing.T) {
	t.Parallel()
	const page = 64 << 10
	clock := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	s, ws := newFakesWith(t, slacktest.Options{UserNames: threadNames, Now: clock.Now, PostBurst: -1})
	counted := &countingTransport{}
	e := startE2E(t, e2eOptions{slack: s, ws: ws, core: withThreadContext(20), adapter: func(a *Adapter) {
		ct := a.historyHTTP.Transport.(cappedTransport)
		counted.base = ct.base
		ct.base, ct.max = counted, page
		a.historyHTTP.Transport = ct
	}})
	ctx := waitCtx(t)
	base := clock.Now()
	root := s.AddThreadMessage(slacktest.ThreadMessage{Channel: e2eChannel, User: "U0ALICE", Text: "the thread's opening"})
	for i := 1; i <= 12; i++ {
		clock.Set(base.Add(time.Duration(i) * time.Minute))
		s.AddThreadMessage(slacktest.ThreadMessage{Channel: e2eChannel, ThreadTS: root, User: "U0BOB",
			Text: fmt.Sprintf("reply %02d ", i) + strings.Repeat("x", 20<<10)})
	}
	clock.Set(base.Add(13 * time.Minute))
	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: "U0DAVE", ThreadTS: root, Text: "tl;dr?"}))
	e.reply(ctx, e2eChannel, "You said") // the echo starts with the thread
	got := e.agentSessions()
	if len(got) != 1 || len(got[0]) != 1 || !strings.Contains(got[0][0], "- Bob: reply 12 xxx") || len(got[0][0]) > 21_000 ||
		!strings.Contains(got[0][0], " earlier messages left out)") ||
		strings.Contains(got[0][0], "opening") || !strings.HasSuffix(got[0][0], "tl;dr?") {
		t.Errorf("agent heard %.300q… (%d bytes), want the newest reply cut to 20,000 characters, and nothing of the thread's opening", got, len(fmt.Sprint(got)))
	}
	if n, limit := counted.read.Load(), int64(maxThreadCalls)*(page+1); n > limit {
		t.Errorf("read %d bytes of conversations.replies, want at most %d", n, limit)
	}
}
