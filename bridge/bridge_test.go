package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

func TestChatReusesSessionAndResetStartsNew(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	wantContains(t, "reply 1", h.ask("c/1", "hello").Text, "[turn 1]", "hello")
	wantContains(t, "reply 2", h.ask("c/1", "again").Text, "[turn 2]")
	if got := len(h.fake.Sessions(agentUUID)); got != 1 {
		t.Fatalf("sessions after two messages = %d, want 1", got)
	}
	_, status := h.command("c/1", bridge.CommandAgent, "status")
	sess := h.fake.Sessions(agentUUID)[0]
	wantContains(t, "status", status.Text, "helper", sess)

	_, reset := h.command("c/1", bridge.CommandAgent, "reset")
	wantContains(t, "reset", reset.Text, "new conversation")
	wantContains(t, "after reset", h.ask("c/1", "hi").Text, "[turn 1]")
	if got := len(h.fake.Sessions(agentUUID)); got != 2 {
		t.Fatalf("sessions after reset = %d, want 2", got)
	}
	// Another conversation has its own session.
	wantContains(t, "other conversation", h.ask("c/2", "hey").Text, "[turn 1]")
}

func TestChatSessionSurvivesRestart(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	h.ask("c/1", "one")
	// A new bridge on the same store continues the same Agent session.
	h.restart(defaultConfig())
	wantContains(t, "after restart", h.ask("c/1", "two").Text, "[turn 2] You said: two")
	if n := len(h.fake.Sessions(agentUUID)); n != 1 {
		t.Errorf("sessions after a restart = %d, want 1 (reused)", n)
	}
}

func TestChatRecoversFromExpiredSession(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	h.ask("c/1", "one")
	old := h.fake.Sessions(agentUUID)[0]
	h.fake.ExpireSession(old)
	r := h.ask("c/1", "two")
	wantContains(t, "reply", r.Text, "new one was started", "[turn 1] You said: two")
	if r.Kind != bridge.ReplyAgent {
		t.Errorf("kind = %v, want agent reply", r.Kind)
	}
	// The message was sent to the old session once and the new one once.
	var chats int
	for _, req := range h.fake.Requests() {
		if strings.HasSuffix(req.Path, "/chat") && strings.Contains(string(req.Body), "two") {
			chats++
		}
	}
	if chats != 2 {
		t.Errorf("chat requests for the message = %d, want 2 (expired session, then new)", chats)
	}
	wantContains(t, "next reply", h.ask("c/1", "three").Text, "[turn 2]")
}

func TestChatErrorsBecomeSentences(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"unauthorized", http.StatusUnauthorized, `{"error":"bad token"}`, "API token"},
		{"bad request", http.StatusBadRequest, `{}`, "invalid"},
		{"server error", http.StatusInternalServerError, `oops`, "HTTP 500"},
		{"html", http.StatusOK, `<html>gateway</html>`, "could not read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
				s.AddAgent(workspacetest.Agent{UUID: agentUUID, Status: tc.status, Body: tc.body})
			})
			r := h.ask("c/1", "hello")
			if r.Kind != bridge.ReplyError {
				t.Errorf("kind = %v, want error", r.Kind)
			}
			wantContains(t, "reply", r.Text, tc.want)
		})
	}
	t.Run("unknown agent", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Agents[0].UUID = "no-such-agent"
		h := newHarness(t, cfg, nil)
		wantContains(t, "reply", h.ask("c/1", "hello").Text, "agent could not be found")
	})
	t.Run("unreachable", func(t *testing.T) {
		h := newHarness(t, defaultConfig(), nil)
		h.fake.Close()
		wantContains(t, "reply", h.ask("c/1", "hello").Text, "could not be reached")
	})
}

func TestMessagesOfAConversationRunInOrder(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
		s.AddAgent(workspacetest.Agent{UUID: agentUUID, Reply: func(turn int, msg string) string {
			if msg == "first" {
				<-release
			}
			mu.Lock()
			seen = append(seen, msg)
			mu.Unlock()
			return fmt.Sprintf("[turn %d] %s", turn, msg)
		}})
	})
	rec := newRecorder()
	var wg sync.WaitGroup
	send := func(ev bridge.Event) {
		wg.Add(1)
		ev = onDone(ev, wg.Done)
		if err := handle(h.b, ev); err != nil {
			t.Fatalf("Handle: %v", err)
		}
	}
	send(event("c/1", bridge.KindMessage, "first", rec))
	send(event("c/1", bridge.KindMessage, "second", rec))
	send(command("c/1", bridge.CommandAgent, "reset", rec))
	send(event("c/1", bridge.KindMessage, "third", rec))
	// A flow in the same conversation does not wait behind the blocked chat.
	flowRec := newRecorder()
	flowDone := make(chan struct{})
	fev := command("c/1", bridge.CommandFlow, "healthcheck host=a", flowRec)
	fev = onDone(fev, func() { close(flowDone) })
	if err := handle(h.b, fev); err != nil {
		t.Fatal(err)
	}
	<-flowDone
	wantContains(t, "flow result", flowRec.last(t).Text, "checked a")
	close(release)
	wg.Wait()

	var texts []string
	for _, r := range rec.all() {
		texts = append(texts, r.Text)
	}
	got := strings.Join(texts, " | ")
	want := "[turn 1] first | [turn 2] second | Done: the next message here starts a new conversation. | [turn 1] third"
	if got != want {
		t.Errorf("replies = %q, want %q", got, want)
	}
}

func TestConversationsRunInParallel(t *testing.T) {
	arrived := make(chan string, 2)
	release := make(chan struct{})
	h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
		s.AddAgent(workspacetest.Agent{UUID: agentUUID, Reply: func(turn int, msg string) string {
			arrived <- msg
			<-release
			return msg
		}})
	})
	var wg sync.WaitGroup
	for _, c := range []string{"c/a", "c/b"} {
		wg.Add(1)
		ev := event(c, bridge.KindMessage, c, newRecorder())
		ev = onDone(ev, wg.Done)
		if err := handle(h.b, ev); err != nil {
			t.Fatal(err)
		}
	}
	// Both messages reach the agent while neither has been answered.
	got := map[string]bool{<-arrived: true, <-arrived: true}
	if !got["c/a"] || !got["c/b"] {
		t.Errorf("arrived = %v, want both conversations", got)
	}
	close(release)
	wg.Wait()
}

func TestQueueOverflowIsAnsweredBusy(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	cfg := defaultConfig()
	cfg.QueueSize = 2
	h := newHarness(t, cfg, func(s *workspacetest.Server) {
		s.AddAgent(workspacetest.Agent{UUID: agentUUID, Reply: func(turn int, msg string) string {
			started <- struct{}{}
			<-release
			return msg
		}})
	})
	var wg sync.WaitGroup
	handle := func(text string, rec *recorder) error {
		wg.Add(1)
		ev := event("c/1", bridge.KindMessage, text, rec)
		ev = onDone(ev, wg.Done)
		return handle(h.b, ev)
	}
	if err := handle("m0", newRecorder()); err != nil {
		t.Fatal(err)
	}
	<-started // m0 is with the agent; the queue is empty again
	for _, m := range []string{"m1", "m2"} {
		if err := handle(m, newRecorder()); err != nil {
			t.Fatalf("Handle(%s) = %v, want queued", m, err)
		}
	}
	busy := newRecorder()
	if err := handle("m3", busy); !errors.Is(err, bridge.ErrBusy) {
		t.Fatalf("Handle(m3) = %v, want ErrBusy", err)
	}
	close(release)
	for range 2 {
		<-started
	}
	wg.Wait()
	r := busy.last(t)
	if r.Kind != bridge.ReplyError || !r.Ephemeral {
		t.Errorf("busy reply = %+v, want an ephemeral error", r)
	}
	wantContains(t, "busy reply", r.Text, "still working")
}

func TestInFlightLimit(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	cfg := defaultConfig()
	cfg.MaxInFlight = 1
	h := newHarness(t, cfg, func(s *workspacetest.Server) {
		s.AddAgent(workspacetest.Agent{UUID: agentUUID, Reply: func(turn int, msg string) string {
			started <- struct{}{}
			<-release
			return msg
		}})
	})
	done := make(chan struct{})
	ev := event("c/1", bridge.KindMessage, "slow", newRecorder())
	ev = onDone(ev, func() { close(done) })
	if err := handle(h.b, ev); err != nil {
		t.Fatal(err)
	}
	<-started
	r := h.ask("c/2", "blocked")
	wantContains(t, "reply", r.Text, "busy")
	close(release)
	<-done
}

func TestFlowCommands(t *testing.T) {
	cases := []struct {
		name, args string
		kind       bridge.ReplyKind
		wants      []string
	}{
		{"run", `healthcheck host=web1 service="nginx proxy"`, bridge.ReplyFlow, []string{"checked web1 nginx proxy"}},
		{"curly quotes", `healthcheck host=web1 service=“nginx proxy”`, bridge.ReplyFlow, []string{"checked web1 nginx proxy"}},
		{"help", "help", bridge.ReplyInfo, []string{"healthcheck", "`host` (required)", "`service` (optional)", "check a service"}},
		{"empty", "", bridge.ReplyInfo, []string{"healthcheck"}},
		{"unknown flow", "nosuch host=a", bridge.ReplyError, []string{"nosuch", "`healthcheck`"}},
		{"missing", "healthcheck", bridge.ReplyError, []string{"needs `host`", "Usage: `/flow healthcheck host=… [service=…]`"}},
		{"unknown param", "healthcheck host=a colour=red", bridge.ReplyError, []string{"no parameter `colour`", "`host`, `service`"}},
		{"bad quoting", `healthcheck host="web1`, bridge.ReplyError, []string{"unterminated quote"}},
		{"not key=value", "healthcheck web1", bridge.ReplyError, []string{"key=value", `"web1"`}},
		{"duplicate", "healthcheck host=a host=b", bridge.ReplyError, []string{"given twice"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, defaultConfig(), nil)
			_, r := h.command("c/1", bridge.CommandFlow, tc.args)
			if r.Kind != tc.kind {
				t.Errorf("kind = %v, want %v (%q)", r.Kind, tc.kind, r.Text)
			}
			wantContains(t, "reply", r.Text, tc.wants...)
		})
	}
}

func TestFlowRunAcknowledgesThenReplaces(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	rec, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=web1 service=nginx")
	all := rec.all()
	if len(all) != 2 || all[0].Kind != bridge.ReplyProgress || rec.updates != 1 {
		t.Fatalf("replies = %+v, updates %d; want progress then one update", all, rec.updates)
	}
	wantContains(t, "progress", all[0].Text, "Running *healthcheck*")
	if !r.Ephemeral || !all[0].Ephemeral {
		t.Error("a non-public flow's replies should be ephemeral")
	}
	wantContains(t, "footer", r.Footer, "healthcheck", "run by ann")
	if len(r.Buttons) != 1 || r.Buttons[0].Action.ID != bridge.ActionShare {
		t.Fatalf("buttons = %+v, want one share button", r.Buttons)
	}
	// The request carried the placeholders as strings and the timeout in seconds.
	var found bool
	for _, req := range h.fake.Requests() {
		if strings.Contains(req.Path, "/run/sync") {
			found = true
			if req.Query.Get("timeout") != "30" || !strings.Contains(string(req.Body), `"host":"web1"`) {
				t.Errorf("run request query %v body %s", req.Query, req.Body)
			}
		}
	}
	if !found {
		t.Fatal("no run request")
	}

	// Share posts it publicly, attributed, once, and dismisses the private copy.
	share := newRecorder()
	ev := event("c/1", bridge.KindAction, "", share)
	ev.User = bridge.User{ID: "U2", Name: "bob"}
	ev.Action = r.Buttons[0].Action
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	posted := share.last(t)
	if posted.Ephemeral || posted.Text != r.Text || !strings.Contains(posted.Footer, "shared by bob") || share.dismiss != 1 {
		t.Errorf("shared = %+v (dismissed %d), want public copy shared by bob, dismissed once", posted, share.dismiss)
	}
	again := newRecorder()
	ev = via(ev, again)
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "second share", again.last(t).Text, "can no longer be shared")
}

func TestFlowOutcomes(t *testing.T) {
	t.Parallel()
	t.Run("json output", func(t *testing.T) {
		h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
			s.AddFlow(workspacetest.Flow{UUID: flowUUID, Output: map[string]any{"hosts": []string{"a", "b"}}})
		})
		_, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=a")
		wantContains(t, "reply", r.Text, "```json\n{\n  \"hosts\": [")
	})
	t.Run("timeout", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Flows[0].Timeout = time.Second
		h := newHarness(t, cfg, func(s *workspacetest.Server) {
			s.AddFlow(workspacetest.Flow{UUID: flowUUID, Delay: time.Hour})
		})
		_, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=a")
		if r.Kind != bridge.ReplyError {
			t.Errorf("kind = %v, want error", r.Kind)
		}
		wantContains(t, "reply", r.Text, "did not finish within 1 second")
		entries, err := h.store.Audit(t.Context(), auditAll())
		if err != nil || len(entries) != 2 || entries[0].Outcome != bridge.OutcomeStarted || entries[1].Outcome != bridge.OutcomeTimeout {
			t.Errorf("audit = %+v, %v; want started, then timeout", entries, err)
		}
	})
	t.Run("public", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Flows[0].Public = true
		h := newHarness(t, cfg, nil)
		_, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=a")
		if r.Ephemeral || len(r.Buttons) != 0 {
			t.Errorf("public result = %+v, want public with no share button", r)
		}
	})
	t.Run("capped by platform", func(t *testing.T) {
		h := newHarness(t, defaultConfig(), nil)
		rec := newRecorder()
		ev := command("c/1", bridge.CommandFlow, "healthcheck host=a", rec)
		ev.MaxFlowTimeout = 10 * time.Second
		if err := h.do(ev); err != nil {
			t.Fatal(err)
		}
		for _, req := range h.fake.Requests() {
			if strings.Contains(req.Path, "/run/sync") && req.Query.Get("timeout") != "10" {
				t.Errorf("timeout = %s, want 10", req.Query.Get("timeout"))
			}
		}
	})
	t.Run("server error is not retried", func(t *testing.T) {
		h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
			s.AddFlow(workspacetest.Flow{UUID: flowUUID, Status: 500, Body: "boom"})
		})
		_, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=a")
		wantContains(t, "reply", r.Text, "HTTP 500")
		var runs int
		for _, req := range h.fake.Requests() {
			if strings.Contains(req.Path, "/run/sync") {
				runs++
			}
		}
		if runs != 1 {
			t.Errorf("runs = %d, want 1: a flow that may have run is never retried", runs)
		}
	})
}

func TestTextCommandsInChat(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	rec := newRecorder()
	if err := h.do(event("c/1", bridge.KindMessage, "!flow healthcheck host=t1", rec)); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "!flow", rec.last(t).Text, "checked t1")
	wantContains(t, "!agent", h.ask("c/1", "!agent status").Text, "Agent: *helper*")
	// "!flowers" is chat, not a command.
	wantContains(t, "chat", h.ask("c/1", "!flowers are nice").Text, "You said: !flowers")
}

func TestAgentUseIsForAdmins(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	_, r := h.command("c/1", bridge.CommandAgent, "use other")
	wantContains(t, "non-admin", r.Text, "Only flowbridge admins")

	rec := newRecorder()
	ev := command("c/1", bridge.CommandAgent, "use other", rec)
	ev.User.ID = "U-admin"
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "admin", rec.last(t).Text, "now talks to *other*")
	wantContains(t, "chat", h.ask("c/1", "hi").Text, "other agent, turn 1")

	ev = command("c/1", bridge.CommandAgent, "use nobody", newRecorder())
	ev.User.ID = "U-admin"
	rec = replyOf(ev).(*recorder)
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "unknown agent", rec.last(t).Text, "no agent *nobody*", "`helper`", "`other`")
}

func TestAgentShare(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	_, r := h.command("c/1", bridge.CommandAgent, "share")
	wantContains(t, "nothing yet", r.Text, "no agent reply")
	h.ask("c/1", "tell me")
	_, r = h.command("c/1", bridge.CommandAgent, "share")
	if r.Ephemeral || r.Kind != bridge.ReplyAgent {
		t.Errorf("share = %+v, want a public agent reply", r)
	}
	wantContains(t, "shared", r.Text, "You said: tell me")
	wantContains(t, "footer", r.Footer, "shared by ann")
}

func TestAccessRules(t *testing.T) {
	cfg := defaultConfig()
	cfg.Flows = []bridge.Flow{
		healthcheck(),
		{Name: "restart", UUID: flowUUID, Allow: []string{"group:S-ops", "channel:C-ops", "U-boss"}},
		{Name: "locked", UUID: flowUUID},
	}
	h := newHarness(t, cfg, nil)
	cases := []struct {
		name    string
		user    bridge.User
		channel string
		flow    string
		allowed bool
	}{
		{"everyone", bridge.User{ID: "U1"}, "C1", "healthcheck", true},
		{"group", bridge.User{ID: "U1", Groups: []string{"S-ops"}}, "C1", "restart", true},
		{"channel", bridge.User{ID: "U1"}, "C-ops", "restart", true},
		{"user", bridge.User{ID: "U-boss"}, "C1", "restart", true},
		{"refused", bridge.User{ID: "U1"}, "C1", "restart", false},
		{"no rule", bridge.User{ID: "U-boss"}, "C1", "locked", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			ev := command("c/1", bridge.CommandFlow, tc.flow, rec)
			ev.User, ev.Channel = tc.user, tc.channel
			if err := h.do(ev); err != nil {
				t.Fatal(err)
			}
			r := rec.last(t)
			refused := strings.Contains(r.Text, "may not run") || strings.Contains(r.Text, "No one may run")
			if refused == tc.allowed {
				t.Errorf("reply = %q, allowed = %v", r.Text, tc.allowed)
			}
		})
	}
	// Help lists only what the caller may run.
	_, help := h.command("c/1", bridge.CommandFlow, "help")
	if strings.Contains(help.Text, "restart") || strings.Contains(help.Text, "locked") {
		t.Errorf("help = %q, lists flows the caller may not run", help.Text)
	}
	entries, _ := h.store.Audit(t.Context(), auditAll())
	var refused int
	for _, e := range entries {
		if e.Outcome == bridge.OutcomeRefused {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("refused audit entries = %d, want 2", refused)
	}
}

func TestConfirmation(t *testing.T) {
	cfg := defaultConfig()
	cfg.Flows[0].Confirm = true
	h := newHarness(t, cfg, nil)
	_, ask := h.command("c/1", bridge.CommandFlow, "healthcheck host=web1")
	if ask.Kind != bridge.ReplyConfirm || len(ask.Buttons) != 2 {
		t.Fatalf("reply = %+v, want a confirmation with two buttons", ask)
	}
	wantContains(t, "question", ask.Text, "healthcheck", "`host` = `web1`")
	press := func(user string, b bridge.Button) bridge.Reply {
		rec := newRecorder()
		ev := event("c/1", bridge.KindAction, "", rec)
		ev.User.ID, ev.Action = user, b.Action
		if err := h.do(ev); err != nil {
			t.Fatal(err)
		}
		return rec.last(t)
	}
	wantContains(t, "other user", press("U2", ask.Buttons[0]).Text, "Only the person who asked")
	wantContains(t, "confirm", press("U1", ask.Buttons[0]).Text, "checked web1")
	wantContains(t, "twice", press("U1", ask.Buttons[0]).Text, "expired or was already answered")

	_, ask = h.command("c/1", bridge.CommandFlow, "healthcheck host=web2")
	wantContains(t, "cancel", press("U1", ask.Buttons[1]).Text, "Cancelled")
	for _, req := range h.fake.Requests() {
		if strings.Contains(string(req.Body), "web2") {
			t.Error("a cancelled flow was run")
		}
	}
}

func TestLimits(t *testing.T) {
	cfg := defaultConfig()
	cfg.Limits = bridge.Limits{MaxMessageBytes: 100, MaxParams: 2, MaxValueBytes: 10}
	h := newHarness(t, cfg, nil)
	wantContains(t, "long message", h.ask("c/1", strings.Repeat("x", 101)).Text, "too long")
	_, r := h.command("c/1", bridge.CommandFlow, "healthcheck host=a service=b x=c")
	wantContains(t, "params", r.Text, "Too many parameters")
	_, r = h.command("c/1", bridge.CommandFlow, "healthcheck host="+strings.Repeat("h", 11))
	wantContains(t, "value", r.Text, "too long")
	_, r = h.command("c/1", bridge.CommandFlow, "healthcheck host="+strings.Repeat("h", 101))
	wantContains(t, "line", r.Text, "too long")

	// The flow rate applies to every request, valid or not, so bad requests
	// cannot be sent without limit either.
	cfg.Limits = bridge.Limits{FlowsPerMinute: 1, Burst: 1}
	h = newHarness(t, cfg, nil)
	_, r = h.command("c/1", bridge.CommandFlow, "healthcheck host=a")
	wantContains(t, "first", r.Text, "checked a")
	_, r = h.command("c/1", bridge.CommandFlow, "healthcheck nonsense")
	wantContains(t, "rate", r.Text, "faster than allowed")
}

func TestInvalidInputIsCleaned(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	r := h.ask("c/1", "bad \xff utf8 \x00\x07 here")
	wantContains(t, "reply", r.Text, "bad \uFFFD utf8  here")
}

func TestShutdownFinishesWorkAndKeepsNew(t *testing.T) {
	// Work under way when the shutdown begins is finished; an event that
	// arrives after it is recorded for the next start, not run: every
	// event takes the one path, the console's lines too.
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		b, fake := newBubbleBridge(t, defaultConfig(), workspacetest.Agent{Reply: func(turn int, msg string) string {
			<-release
			return "finished " + msg
		}})
		rec := newRecorder()
		done := make(chan struct{})
		ev := event("c/1", bridge.KindMessage, "work", rec)
		ev = onDone(ev, func() { close(done) })
		if err := handle(b, ev); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the message is with the agent
		shut := make(chan error)
		go func() { shut <- b.Shutdown(context.Background()) }()
		synctest.Wait() // Shutdown is waiting for the message

		late := newRecorder()
		if err := handle(b, event("c/2", bridge.KindMessage, "late", late)); !errors.Is(err, bridge.ErrClosed) {
			t.Errorf("Handle after Shutdown = %v, want ErrClosed: recorded for the next start", err)
		}
		close(release)
		if err := <-shut; err != nil {
			t.Fatalf("Shutdown = %v", err)
		}
		b.Close()
		<-done
		wantContains(t, "in-flight reply", rec.last(t).Text, "finished work")
		if got := late.all(); len(got) != 0 {
			t.Errorf("late event answered %+v, want nothing before the next start", got)
		}
		if n := len(fake.Sessions(agentUUID)); n != 1 {
			t.Errorf("sessions = %d, want 1: the late message must not reach the API", n)
		}
	})
}

func TestShutdownGraceCutsOff(t *testing.T) {
	h := newHarness(t, defaultConfig(), func(s *workspacetest.Server) {
		s.AddFlow(workspacetest.Flow{UUID: flowUUID, Delay: time.Hour})
	})
	rec := newRecorder()
	done := make(chan struct{})
	ev := command("c/1", bridge.CommandFlow, "healthcheck host=a", rec)
	ev = onDone(ev, func() { close(done) })
	if err := handle(h.b, ev); err != nil {
		t.Fatal(err)
	}
	<-rec.notify // the progress reply: the flow is running
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace at all
	if err := h.b.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	<-done
	wantContains(t, "cut-off reply", rec.last(t).Text, "cut off")
}

func TestFloodGetsOneBusyNotice(t *testing.T) {
	// A user floods a DM while the agent works on the first message: the
	// messages beyond the queue are refused, and told so by one notice,
	// whose count is brought up to date in place where the platform can,
	// not by one notice each.
	for _, editable := range []bool{true, false} {
		t.Run(fmt.Sprint("editable=", editable), func(t *testing.T) {
			release := make(chan struct{})
			cfg := defaultConfig()
			cfg.QueueSize = 2
			h := newHarness(t, cfg, func(s *workspacetest.Server) {
				s.AddAgent(workspacetest.Agent{UUID: agentUUID, Reply: func(turn int, msg string) string {
					<-release
					return "answer to " + msg
				}})
			})
			p := newProgresser()
			p.refuse = !editable
			const flood = 500
			refused := 0
			began := time.Now()
			for i := range flood {
				ev := event("dm/1", bridge.KindMessage, fmt.Sprint("m", i), nil)
				ev = via(ev, p)
				switch err := handle(h.b, ev); {
				case errors.Is(err, bridge.ErrBusy):
					refused++
				case err != nil:
					t.Fatalf("Handle(m%d) = %v", i, err)
				}
			}
			if refused < flood-3 {
				t.Fatalf("%d of %d messages refused, want all but the queue's and the running one", refused, flood)
			}
			close(release)
			p.waitReplies(t, flood-refused, "answer to")
			if err := h.b.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Each refused message is recorded (a synced write) before it is
			// refused, so the flood takes as long as the disk says; the
			// notice is rewritten at most every 5 s meanwhile, and once more
			// at shutdown.
			rewrites := 2 + int(time.Since(began)/(5*time.Second))
			var notices []bridge.Reply
			for _, r := range p.all() {
				if strings.Contains(r.Text, "still working") {
					notices = append(notices, r)
				}
			}
			if len(notices) != 1 || !notices[0].Ephemeral || notices[0].Kind != bridge.ReplyError {
				t.Fatalf("%d refused messages got notices %+v, want one ephemeral error", refused, notices)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if !editable {
				if len(p.at) != 1 {
					t.Errorf("%d rewrites tried of a notice that cannot be edited, want 1", len(p.at))
				}
				return
			}
			if len(p.texts) == 0 || len(p.texts) > rewrites {
				t.Fatalf("notice rewritten %d times, want 1 to %d", len(p.texts), rewrites)
			}
			wantContains(t, "last busy notice", p.texts[len(p.texts)-1], fmt.Sprintf("did not take the %d you sent", refused))
		})
	}
}
