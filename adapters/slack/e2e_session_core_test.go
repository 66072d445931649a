package slack

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestE2EAgentSessionStopWithCore: with the real core, a thread's session
// goes processing while its turn runs; Slack's Stop ends the turn, the
// session goes active, the presser is told, and nothing of the answer is
// posted. A rename reaches the core as the conversation's title, which
// "/agent status" shows.
func TestE2EAgentSessionStopWithCore(t *testing.T) {
	t.Parallel()
	s := agentSessionFake(t, slacktest.Options{PostBurst: -1})
	ws := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(ws.Close)
	// The turn would take a minute: only a Stop ends it within the test.
	ws.AddAgent(workspacetest.Agent{UUID: e2eAgent, Delay: time.Minute})
	e := startE2E(t, e2eOptions{cfg: withAgentView, slack: s, ws: ws})
	ctx := waitCtx(t)

	first := e.sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "<@" + s.BotUserID() + "> a long question"}))
	processing := func(a slacktest.AgentSession) bool { return a.Status == slacktest.SessionProcessing }
	if _, err := s.WaitSession(ctx, e2eDM, first.TS, processing); err != nil {
		t.Fatalf("session never processing: %v (sessions %+v)", err, s.Sessions())
	}
	e.sent(s.PressStop(ctx, slacktest.StopPress{Channel: e2eDM, ThreadTS: first.TS, User: e2eUser}))
	session, err := s.WaitSession(ctx, e2eDM, first.TS, func(a slacktest.AgentSession) bool { return a.Status == slacktest.SessionActive })
	if err != nil {
		t.Fatalf("session never active after Stop: %v (sessions %+v)", err, s.Sessions())
	}
	if !slices.Equal(session.Statuses, []string{"processing", "active"}) || session.Title != "a long question" || !slices.Equal(session.StoppedBy, []string{e2eUser}) {
		t.Errorf("session = statuses %q, title %q, stopped by %q; want processing, active, %q, %s", session.Statuses, session.Title, session.StoppedBy, "a long question", e2eUser)
	}
	told, err := s.WaitMessage(ctx, func(m slacktest.Message) bool { return m.Channel == e2eDM && m.BotID != "" && m.ThreadTS == first.TS })
	if err != nil {
		t.Fatalf("the presser was not told: %v", err)
	}
	if told.Ephemeral && told.User != e2eUser {
		t.Errorf("Stop's answer shown to %q, want the presser %s", told.User, e2eUser)
	}
	for _, m := range s.Messages() {
		if strings.Contains(m.Text, "You said") {
			t.Errorf("the stopped turn's answer was posted: %+v", m)
		}
	}
	if _, err := s.RenameSession(ctx, slacktest.SessionRename{Channel: e2eDM, ThreadTS: first.TS, User: e2eUser, Title: "Long <@U0BOB> questions"}); err != nil {
		t.Fatal(err)
	}
	e.sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: first.TS, Text: "!agent status"}))
	if _, err := s.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.ThreadTS == first.TS && strings.Contains(m.Text, "Title: Long questions")
	}); err != nil {
		t.Errorf("/agent status does not show the rename: %v\nmessages: %+v", err, s.MessageLog())
	}
}

// TestE2EStopButtonWithCore: the Stop button on a public flow's working
// message, pressed by the person who ran it, stops the flow: they are told
// what that means, and the flow's result is never posted.
func TestE2EStopButtonWithCore(t *testing.T) {
	t.Parallel()
	s, ws := newFakesOpts(t, nil, slacktest.Options{PostBurst: -1})
	ws.AddFlow(workspacetest.Flow{UUID: "flow-long", Template: "Long done {host}", Delay: time.Minute})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, core: func(c *bridge.Config) {
		c.Flows = append(c.Flows, bridge.Flow{Name: "long", UUID: "flow-long", Public: true, Timeout: 5 * time.Minute,
			Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "host", Required: true}}})
	}})
	ctx := waitCtx(t)

	e.sent(s.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "!flow long host=web1"}))
	working, err := s.WaitMessage(ctx, func(m slacktest.Message) bool {
		return strings.Contains(m.Text, "Running") && slices.ContainsFunc(m.Buttons(), func(b slacktest.Button) bool { return b.ActionID == bridge.ActionStop })
	})
	if err != nil {
		t.Fatalf("no working message with a Stop button: %v\nmessages: %+v", err, s.MessageLog())
	}
	press := e.sent(s.PressButton(ctx, working, bridge.ActionStop, e2eUser))
	e.ack(ctx, press)
	if _, err := s.WaitMessage(ctx, func(m slacktest.Message) bool { return strings.Contains(m.Text, "Stopped long") }); err != nil {
		t.Fatalf("the presser was not told: %v\nmessages: %+v", err, s.MessageLog())
	}
	// The working message, public, says Stopped in place, its Stop
	// button gone.
	if _, err := s.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.TS == working.TS && m.Op == "chat.update" && strings.Contains(m.Text, "Stopped") && len(m.Buttons()) == 0
	}); err != nil {
		t.Errorf("the working message was not rewritten Stopped: %v\nmessages: %+v", err, s.MessageLog())
	}
	for _, m := range s.Messages() {
		if strings.Contains(m.Text, "Long done") {
			t.Errorf("the stopped flow's result was posted: %+v", m)
		}
	}
}

// TestE2EAgentSessionStatusesFollowTheInbox: in agent view, the fake
// Slack's record of agents.sessions.setStatus follows each thread's inbox:
// processing → active for a chat turn; processing → suspended → processing
// → active for a flow that waited for approval; closed on /agent reset.
func TestE2EAgentSessionStatusesFollowTheInbox(t *testing.T) {
	t.Parallel()
	s := agentSessionFake(t, slacktest.Options{PostBurst: -1})
	ws := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(ws.Close)
	ws.AddAgent(workspacetest.Agent{UUID: e2eAgent})
	ws.AddFlow(workspacetest.Flow{UUID: e2eFlow, Template: "checked {host}"})
	e := startE2E(t, e2eOptions{cfg: withAgentView, slack: s, ws: ws, core: func(c *bridge.Config) {
		c.Flows = append(c.Flows, bridge.Flow{Name: "approved", UUID: e2eFlow, Confirm: true, Approvers: []string{e2eUser},
			Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "host", Required: true}}})
	}})
	ctx := waitCtx(t)
	statuses := func(thread string, want ...string) {
		t.Helper()
		last := want[len(want)-1]
		session, err := s.WaitSession(ctx, e2eDM, thread, func(a slacktest.AgentSession) bool {
			return len(a.Statuses) >= len(want) && a.Status == last
		})
		if err != nil {
			t.Fatalf("session of %s never %s: %v (sessions %+v)", thread, last, err, s.Sessions())
		}
		if !slices.Equal(session.Statuses, want) {
			t.Errorf("session of %s went %q, want %q", thread, session.Statuses, want)
		}
	}

	chat := e.sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "<@" + s.BotUserID() + "> hello"}))
	statuses(chat.TS, "processing", "active")

	ask := e.sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "!flow approved host=web1"}))
	request, err := s.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.ThreadTS == ask.TS && slices.ContainsFunc(m.Buttons(), func(b slacktest.Button) bool { return b.ActionID == bridge.ActionConfirm })
	})
	if err != nil {
		t.Fatalf("no request for approval: %v\nmessages: %+v", err, s.MessageLog())
	}
	statuses(ask.TS, "processing", "suspended")
	var approve slacktest.Button
	for _, b := range request.Buttons() {
		if b.ActionID == bridge.ActionConfirm {
			approve = b
		}
	}
	e.ack(ctx, e.sent(s.SendBlockAction(ctx, slacktest.BlockAction{
		UserID: e2eUser, ChannelID: e2eDM, MessageTS: request.TS, ThreadTS: ask.TS,
		ActionID: approve.ActionID, BlockID: approve.BlockID, Value: approve.Value, Label: approve.Label,
	})))
	if _, err := s.WaitMessage(ctx, func(m slacktest.Message) bool { return strings.Contains(m.Text, "checked web1") }); err != nil {
		t.Fatalf("the approved flow's result was not posted: %v\nmessages: %+v", err, s.MessageLog())
	}
	statuses(ask.TS, "processing", "suspended", "processing", "active")

	e.sent(s.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: chat.TS, Text: "!agent reset"}))
	statuses(chat.TS, "processing", "active", "closed")
}
