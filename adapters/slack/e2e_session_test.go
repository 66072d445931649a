package slack

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// eventsCore keeps the events the adapter hands it and records none: each
// delivery is acknowledged at once (a nil receipt). The tests that use it
// look at the adapter's translation alone, whatever the core makes of it.
type eventsCore struct {
	got chan bridge.Event
	mu  sync.Mutex
	bad map[string]int
}

func newEventsCore() *eventsCore {
	return &eventsCore{got: make(chan bridge.Event, 100), bad: make(map[string]int)}
}

func (c *eventsCore) Receive(ev bridge.Event) *bridge.Receipt {
	c.got <- ev
	return nil
}

func (*eventsCore) Attach(string, bridge.Platform) (int, int, error) { return 0, 0, nil }

func (c *eventsCore) Refused(reason string) {
	c.mu.Lock()
	c.bad[reason]++
	c.mu.Unlock()
}

// next waits for the next event handed to the core.
func (c *eventsCore) next(t *testing.T, ctx context.Context) bridge.Event {
	t.Helper()
	select {
	case ev := <-c.got:
		return ev
	case <-ctx.Done():
		t.Fatal("no event reached the core")
		return bridge.Event{}
	}
}

// startAdapter runs the adapter on the fake Slack in socket mode with core,
// until the test ends.
func startAdapter(t *testing.T, s *slacktest.Server, core Core, log *zap.Logger, change func(*Config)) *Adapter {
	t.Helper()
	cfg := e2eConfig(s)
	if change != nil {
		change(&cfg)
	}
	a, err := New(cfg, core, log)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil after cancel", err)
		}
	})
	select {
	case <-a.ready:
	case err := <-done:
		t.Fatalf("Run() ended before connecting: %v", err)
	case <-time.After(waitDeadline):
		t.Fatal("adapter did not connect")
	}
	return a
}

// agentSessionFake is a fake Slack whose app is declared an agent and
// shows as one (agent view), with opts' other options.
func agentSessionFake(t *testing.T, opts slacktest.Options) *slacktest.Server {
	t.Helper()
	opts.Agent, opts.AgentView = true, true
	opts.Channels = append(opts.Channels, slacktest.Channel{ID: e2eDM, IsIM: true, User: e2eUser})
	s := slacktest.NewServer(opts)
	t.Cleanup(s.Close)
	return s
}

// setStatus sets the session status of ev's conversation through the
// responder the adapter builds for ev, as the core does.
func setStatus(t *testing.T, ctx context.Context, a *Adapter, ev bridge.Event, status bridge.SessionStatus) {
	t.Helper()
	r, err := a.Responder(ev)
	if err != nil {
		t.Fatalf("Responder(%s) = %v", ev.Key, err)
	}
	ss, ok := r.(bridge.SessionStatuser)
	if !ok {
		t.Fatalf("responder of %s is a %T, not a SessionStatuser", ev.Key, r)
	}
	ss.SetSessionStatus(ctx, status)
}

// TestE2EAgentSessionStopAndRename: in agent view, the responder of a
// thread's first message creates its session (named after the message)
// and moves its status; Slack's Stop button then arrives as an ActionStop
// in the thread's conversation, answered in the thread to the presser, and
// a rename as a KindTitle, cleaned.
func TestE2EAgentSessionStopAndRename(t *testing.T) {
	t.Parallel()
	s := agentSessionFake(t, slacktest.Options{})
	core := newEventsCore()
	a := startAdapter(t, s, core, zaptest.NewLogger(t), withAgentView)
	ctx := waitCtx(t)

	text := "<@" + s.BotUserID() + "> How do I restart nginx on <@U0BOB|bob>'s web servers &amp; keep the cache warm? <!here>"
	first := sentTo(t)(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: text}))
	msg := core.next(t, ctx)
	if want := conversationKey(s.TeamID(), e2eDM, first.TS); msg.Conversation != want {
		t.Fatalf("message conversation = %q, want %q", msg.Conversation, want)
	}
	setStatus(t, ctx, a, msg, bridge.SessionProcessing)
	session, ok := s.Session(e2eDM, first.TS)
	if !ok {
		t.Fatal("no agent session after SetSessionStatus(processing)")
	}
	const wantTitle = "How do I restart nginx on bob's web servers & keep the…"
	if session.Title != wantTitle || session.InitiatorUserID != e2eUser || !slices.Equal(session.Statuses, []string{"processing"}) {
		t.Errorf("session = title %q, initiator %q, statuses %q; want %q, %s, [processing]",
			session.Title, session.InitiatorUserID, session.Statuses, wantTitle, e2eUser)
	}
	if n := runes(session.Title); n > maxFirstTitle {
		t.Errorf("title of %d runes, want at most %d", n, maxFirstTitle)
	}

	// Slack shows Stop while the session is processing; the press stops
	// whatever of the presser's runs in the thread.
	if _, err := s.PressStop(ctx, slacktest.StopPress{Channel: e2eDM, ThreadTS: first.TS, User: e2eUser}); err != nil {
		t.Fatal(err)
	}
	stop := core.next(t, ctx)
	if stop.Kind != bridge.KindAction || stop.Action != (bridge.Action{ID: bridge.ActionStop}) ||
		stop.Conversation != msg.Conversation || stop.Parent != msg.Parent || stop.User.ID != e2eUser ||
		stop.Channel != e2eDM || stop.Platform != platform || stop.Order == 0 ||
		!strings.HasPrefix(stop.Key, "slack/stop/"+e2eDM+"/"+first.TS+"/") {
		t.Errorf("Stop event = %+v, want an ActionStop without value by %s in %s", stop, e2eUser, msg.Conversation)
	}
	if stop.Order <= msg.Order {
		t.Errorf("Stop order %d, want after its message's %d", stop.Order, msg.Order)
	}
	var rt route
	if err := json.Unmarshal(stop.Route, &rt); err != nil {
		t.Fatal(err)
	}
	if rt.Channel != e2eDM || rt.Thread != first.TS || rt.User != e2eUser || !rt.Agent || rt.Title != "" {
		t.Errorf("Stop route = %+v, want the thread, to the presser, in agent view, no title", rt)
	}
	// The Stop's responder answers in the thread, privately to the
	// presser, and moves the status away from processing, as Slack wants.
	r, err := a.Responder(stop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Send(ctx, bridge.Reply{Kind: bridge.ReplyInfo, Text: "Stopped.", Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	r.(bridge.SessionStatuser).SetSessionStatus(ctx, bridge.SessionActive)
	m, err := s.WaitMessage(ctx, func(m slacktest.Message) bool { return strings.Contains(m.Text, "Stopped.") })
	if err != nil {
		t.Fatal(err)
	}
	if !m.Ephemeral || m.User != e2eUser || m.ThreadTS != first.TS {
		t.Errorf("Stop's answer = ephemeral %v to %q in thread %q, want ephemeral to %s in %s", m.Ephemeral, m.User, m.ThreadTS, e2eUser, first.TS)
	}
	if got := s.SessionStatuses(e2eDM, first.TS); !slices.Equal(got, []string{"processing", "active"}) {
		t.Errorf("statuses = %q, want processing, active", got)
	}
	// A later message in the thread names no session: it has one.
	sentTo(t)(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: first.TS, Text: "and apache?"}))
	reply := core.next(t, ctx)
	if err := json.Unmarshal(reply.Route, &rt); err != nil || rt.Title != "" {
		t.Errorf("route of a reply in the thread = %+v (%v), want no title", rt, err)
	}

	// A rename arrives as the thread's new title, cleaned and on one line.
	if _, err := s.RenameSession(ctx, slacktest.SessionRename{Channel: e2eDM, ThreadTS: first.TS, User: e2eUser, Title: "nginx\n  restarts &lt;prod&gt; <@U0BOB>"}); err != nil {
		t.Fatal(err)
	}
	title := core.next(t, ctx)
	if title.Kind != bridge.KindTitle || title.Text != "nginx restarts <prod>" || title.Conversation != msg.Conversation ||
		title.User.ID != e2eUser || title.Order == 0 || !strings.HasPrefix(title.Key, "slack/title/"+e2eDM+"/"+first.TS+"/") {
		t.Errorf("rename event = %+v, want KindTitle %q in %s", title, "nginx restarts <prod>", msg.Conversation)
	}
}

// sentTo fails the test when a delivery to the app failed.
func sentTo(t *testing.T) func(slacktest.Delivery, error) slacktest.Delivery {
	return func(d slacktest.Delivery, err error) slacktest.Delivery {
		t.Helper()
		if err != nil {
			t.Fatalf("delivering to the app: %v", err)
		}
		return d
	}
}

// TestAgentSessionEventsHTTP: in HTTP mode the session events Slack POSTs
// arrive as over Socket Mode.
func TestAgentSessionEventsHTTP(t *testing.T) {
	t.Parallel()
	s := agentSessionFake(t, slacktest.Options{})
	core := newEventsCore()
	a := startAdapter(t, s, core, zaptest.NewLogger(t), func(c *Config) {
		httpMode("http-secret")(c)
		withAgentView(c)
	})
	e := &e2e{t: t, slack: s, a: a}
	ctx := waitCtx(t)
	const thread = "1700000000.000100"
	ev := bridge.Event{Key: "k", Route: mustRoute(t, route{Kind: kindChat, Channel: e2eDM, Thread: thread, User: e2eUser, UserTS: thread, Agent: true, Title: "first"})}
	setStatus(t, ctx, a, ev, bridge.SessionProcessing)

	body, _, err := s.PressStopBody(slacktest.StopPress{Channel: e2eDM, ThreadTS: thread, User: "U0BOB"})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := e.post(t, ctx, "application/json", body, "http-secret", time.Now(), nil); code != 200 {
		t.Fatalf("POST agent_session_stopped = %d, want 200", code)
	}
	stop := core.next(t, ctx)
	want := conversationKey(s.TeamID(), e2eDM, thread)
	if stop.Kind != bridge.KindAction || stop.Action.ID != bridge.ActionStop || stop.Action.Value != "" || stop.Conversation != want || stop.User.ID != "U0BOB" {
		t.Errorf("Stop event = %+v, want ActionStop by U0BOB in %s", stop, want)
	}
	body, _, err = s.RenameSessionBody(slacktest.SessionRename{Channel: e2eDM, ThreadTS: thread, User: e2eUser, Title: "Renamed"})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := e.post(t, ctx, "application/json", body, "http-secret", time.Now(), nil); code != 200 {
		t.Fatalf("POST agent_session_title_changed = %d, want 200", code)
	}
	if title := core.next(t, ctx); title.Kind != bridge.KindTitle || title.Text != "Renamed" || title.Conversation != want {
		t.Errorf("rename event = %+v, want KindTitle Renamed in %s", title, want)
	}
}

func mustRoute(t *testing.T, rt route) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(rt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAgentSessionStatusProblemsWarnOnce: Slack's refusal (an app not
// declared an agent) and its warning (no agent_session_stopped
// subscription) are logged once at Warn however many turns meet them, and
// never stop the answer; outside agent view no status is set at all.
func TestAgentSessionStatusProblemsWarnOnce(t *testing.T) {
	t.Parallel()
	const thread = "1700000000.000100"
	ev := bridge.Event{Key: "k", Route: mustRoute(t, route{Kind: kindChat, Channel: e2eDM, Thread: thread, User: e2eUser, Agent: true})}
	tests := []struct {
		name     string
		opts     slacktest.Options
		agent    bool // slack.agent_view
		want     string
		statuses []string
	}{
		{"not subscribed", slacktest.Options{Agent: true, AgentView: true, BotEvents: []string{"message.im"}}, true,
			"does not subscribe to agent_session_stopped", []string{"processing", "active", "processing"}},
		{"not an agent", slacktest.Options{AgentView: true}, true, "not declared an agent", nil},
		{"agent view off", slacktest.Options{Agent: true, AgentView: true}, false, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.opts.Channels = []slacktest.Channel{{ID: e2eDM, IsIM: true, User: e2eUser}}
			s := slacktest.NewServer(tt.opts)
			t.Cleanup(s.Close)
			seen, logs := observer.New(zap.WarnLevel)
			log := zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), seen))
			a := startAdapter(t, s, newEventsCore(), log, func(c *Config) { c.AgentView = tt.agent })
			ctx := waitCtx(t)
			for _, st := range []bridge.SessionStatus{bridge.SessionProcessing, bridge.SessionActive} {
				setStatus(t, ctx, a, ev, st)
			}
			// A status reaches Slack even once the run it reports on was
			// cancelled (a Stop cancels the turn's context).
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			setStatus(t, cancelled, a, ev, bridge.SessionProcessing)
			if got := s.SessionStatuses(e2eDM, thread); !slices.Equal(got, tt.statuses) {
				t.Errorf("statuses = %q, want %q", got, tt.statuses)
			}
			var warned []string
			for _, e := range logs.All() {
				warned = append(warned, e.Message)
			}
			switch {
			case tt.want == "" && len(warned) != 0:
				t.Errorf("warnings %q, want none", warned)
			case tt.want != "" && (len(warned) != 1 || !strings.Contains(warned[0], tt.want)):
				t.Errorf("warnings %q, want one that says %q", warned, tt.want)
			}
		})
	}
}

// TestE2EStopButton: the Stop button the core puts on a working message
// comes back as an ActionStop with the entry's key, in the conversation of
// the thread it is in; the presser's answer does not take the working
// message's place (the run rewrites that one itself).
func TestE2EStopButton(t *testing.T) {
	t.Parallel()
	s := slacktest.NewServer(slacktest.Options{})
	t.Cleanup(s.Close)
	core := newEventsCore()
	a := startAdapter(t, s, core, zaptest.NewLogger(t), nil)
	ctx := waitCtx(t)

	mention := sentTo(t)(s.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "long job"}))
	msg := core.next(t, ctx)
	run, err := a.Responder(msg)
	if err != nil {
		t.Fatal(err)
	}
	stopButton := bridge.Button{Action: bridge.Action{ID: bridge.ActionStop, Value: msg.Key}, Label: "Stop", Style: "danger"}
	if _, err := run.Send(ctx, bridge.Reply{Kind: bridge.ReplyProgress, Text: "Working on it…", Buttons: []bridge.Button{stopButton}}); err != nil {
		t.Fatal(err)
	}
	working, err := s.WaitMessage(ctx, func(m slacktest.Message) bool { return strings.Contains(m.Text, "Working on it") })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PressButton(ctx, working, bridge.ActionStop, "U0BOB"); err != nil {
		t.Fatal(err)
	}
	press := core.next(t, ctx)
	if press.Kind != bridge.KindAction || press.Action.ID != bridge.ActionStop || press.Action.Value != msg.Key ||
		press.Conversation != msg.Conversation || press.User.ID != "U0BOB" || press.Action.Message != e2eChannel+"/"+working.TS {
		t.Errorf("press = %+v, want ActionStop %q by U0BOB in %s (thread %s)", press, msg.Key, msg.Conversation, mention.TS)
	}
	var rt route
	if err := json.Unmarshal(press.Route, &rt); err != nil || rt.ReplaceOnSend {
		t.Errorf("press route = %+v (%v), want no ReplaceOnSend", rt, err)
	}
	r, err := a.Responder(press)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Send(ctx, bridge.Reply{Kind: bridge.ReplyInfo, Text: "Stopped.", Ephemeral: true, Replace: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitMessage(ctx, func(m slacktest.Message) bool { return strings.Contains(m.Text, "Stopped.") && m.Ephemeral }); err != nil {
		t.Fatal(err)
	}
	if after, ok := s.Message(e2eChannel, working.TS); !ok || !strings.Contains(after.Text, "Working on it") {
		t.Errorf("working message after the Stop's answer = %+v (found %v), want it as it was", after, ok)
	}
}

func TestPressConversation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		cfg             func(*Config)
		channel, thread string
		key, parent     string
	}{
		{"channel", nil, "C1", "", "slack/T1/C1", ""},
		{"channel thread", nil, "C1", "1.2", "slack/T1/C1/1.2", "slack/T1/C1"},
		{"channel scope", func(c *Config) { c.SessionScope = ScopeChannel }, "C1", "1.2", "slack/T1/C1", ""},
		{"dm thread", nil, "D1", "1.2", "slack/T1/D1", ""},
		{"agent view dm thread", withAgentView, "D1", "1.2", "slack/T1/D1/1.2", "slack/T1/D1"},
		{"agent view dm thread, channel scope", func(c *Config) { c.AgentView, c.SessionScope = true, ScopeChannel }, "D1", "1.2", "slack/T1/D1/1.2", "slack/T1/D1"},
		{"assistant thread", func(c *Config) { c.Assistant = true }, "D1", "1.2", "slack/T1/D1/1.2", "slack/T1/D1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testAdapter(t, tt.cfg)
			key, parent := a.pressConversation("T1", tt.channel, tt.thread)
			if key != tt.key || parent != tt.parent {
				t.Errorf("pressConversation(%q, %q) = %q, %q; want %q, %q", tt.channel, tt.thread, key, parent, tt.key, tt.parent)
			}
		})
	}
}

func TestCleanTitle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"<@UBOT> hello", 60, "hello"},
		{"ask <@U1|alice> and <!subteam^S1|@ops> <!here>", 60, "ask alice and"},
		{"a &lt;b&gt; &amp; <https://x.example|link>", 60, "a <b> & link (https://x.example)"},
		{"line one\n\tline two", 60, "line one line two"},
		{strings.Repeat("word ", 30), 20, "word word word…"},
		{"<@U1>", 60, ""},
	}
	for _, tt := range tests {
		if got := cleanTitle(tt.in, tt.max); got != tt.want {
			t.Errorf("cleanTitle(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if got := cleanTitle(tt.in, tt.max); runes(got) > tt.max {
			t.Errorf("cleanTitle(%q, %d) has %d runes", tt.in, tt.max, runes(got))
		}
	}
}
