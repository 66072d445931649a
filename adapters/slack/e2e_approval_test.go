package slack

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// approvalCore adds to the tests' catalog "approved", a flow whose runs a
// member of the user group S0OPS approves, on a clock the test moves.
func approvalCore(offset *atomic.Int64) func(*bridge.Config) {
	start := time.Now()
	return func(c *bridge.Config) {
		c.Flows = append(c.Flows, bridge.Flow{Name: "approved", UUID: e2eFlow, Confirm: true, Approvers: []string{"group:S0OPS"},
			Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "host", Required: true}}})
		c.Now = func() time.Time { return start.Add(time.Duration(offset.Load())) }
	}
}

// TestE2EApproval: a request for approval is posted in the channel; the
// requester's own press and a stranger's are refused, naming who may
// approve; after a restart, an approver's press runs the flow, once, and
// the requester is told. A second request, left open past its time, is
// told to its requester by the sweep.
func TestE2EApproval(t *testing.T) {
	t.Parallel()
	const boss = "U0BOSS"
	var offset atomic.Int64
	// The fake Slack's clock moves with the core's: a response_url it
	// gave expires after 30 minutes of it.
	s, ws := newFakesOpts(t, nil, slacktest.Options{Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	s.AddUserGroup(slacktest.UserGroup{ID: "S0OPS", Handle: "ops", Name: "Ops", Users: []string{boss}})
	userGroups := func(c *Config) { c.UserGroups = true }
	e := startE2E(t, e2eOptions{slack: s, ws: ws, cfg: userGroups, core: approvalCore(&offset)})
	ctx := waitCtx(t)

	ask := func(host string) (slacktest.Delivery, slacktest.Message) {
		t.Helper()
		d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "approved host=" + host, UserID: e2eUser, ChannelID: e2eChannel}))
		p := e.response(ctx, d.ResponseURL, "asks to run")
		m, ok := e.slack.Message(e2eChannel, p.MessageTS)
		if !ok {
			t.Fatalf("request %s not found", p.MessageTS)
		}
		if m.Ephemeral || !strings.Contains(string(m.Blocks)+m.Text, host) || !strings.Contains(string(m.Blocks)+m.Text, "group:S0OPS") {
			t.Errorf("request = {ephemeral %v, %s}, want it for everyone, naming %s and who may approve", m.Ephemeral, m.Blocks, host)
		}
		if strings.Contains(string(m.Blocks)+m.Text, "<!subteam") || strings.Contains(string(m.Blocks)+m.Text, "<@") {
			t.Errorf("request = %s, mentions someone", m.Blocks)
		}
		return d, m
	}
	button := func(m slacktest.Message, action string) slacktest.Button {
		for _, b := range m.Buttons() {
			if b.ActionID == action {
				return b
			}
		}
		t.Fatalf("request has no %s button: %+v", action, m.Buttons())
		return slacktest.Button{}
	}
	press := func(e *e2e, m slacktest.Message, b slacktest.Button, user, want string) {
		t.Helper()
		d := e.sent(e.slack.SendBlockAction(ctx, slacktest.BlockAction{
			UserID: user, ChannelID: e2eChannel, MessageTS: m.TS,
			ActionID: b.ActionID, BlockID: b.BlockID, Value: b.Value, Label: b.Label,
		}))
		e.ack(ctx, d)
		e.response(ctx, d.ResponseURL, want)
	}
	// approve has an approver press Approve; the run is posted in the channel.
	approve := func(e *e2e, m slacktest.Message, user, want string) {
		t.Helper()
		b := button(m, bridge.ActionConfirm)
		e.ack(ctx, e.sent(e.slack.SendBlockAction(ctx, slacktest.BlockAction{
			UserID: user, ChannelID: e2eChannel, MessageTS: m.TS,
			ActionID: b.ActionID, BlockID: b.BlockID, Value: b.Value, Label: b.Label,
		})))
		e.reply(ctx, e2eChannel, want)
	}
	runs := func() int {
		n := 0
		for _, r := range e.ws.Requests() {
			if strings.HasSuffix(r.Path, "/run/sync") {
				n++
			}
		}
		return n
	}

	req, m := ask("web1")
	press(e, m, button(m, bridge.ActionConfirm), e2eUser, "someone else must approve")
	press(e, m, button(m, bridge.ActionConfirm), "U0STRANGER", "Only these may approve")
	if n := runs(); n != 0 {
		t.Fatalf("%d runs before an approver pressed, want 0", n)
	}

	e = e.restartWith(userGroups, approvalCore(&offset))
	approve(e, m, boss, "Checked web1")
	// The request is answered in its place: no live buttons are left.
	if now, ok := e.slack.Message(e2eChannel, m.TS); !ok || len(now.Buttons()) != 0 {
		t.Errorf("request after its approval = %+v (found %v), want it replaced, without buttons", now.Buttons(), ok)
	}
	if n := runs(); n != 1 {
		t.Errorf("%d runs after the approval, want 1", n)
	}
	e.response(ctx, req.ResponseURL, "was approved by")
	entries, err := e.core.store.Audit(ctx, store.AuditFilter{Outcome: bridge.OutcomeOK})
	if err != nil || len(entries) != 1 || entries[0].User != e2eUser || entries[0].Approver != boss {
		t.Errorf("audit ok = %+v, %v, want the run of %s approved by %s", entries, err, e2eUser, boss)
	}

	// Left open past its time: the sweep tells the requester, once.
	req, _ = ask("web2")
	offset.Add(int64(bridge.DefaultApprovalTimeout + time.Minute))
	if n, err := e.core.ExpireApprovals(ctx); n != 1 || err != nil {
		t.Fatalf("ExpireApprovals = %d, %v, want 1", n, err)
	}
	// A day later the command's response_url has expired: the requester is
	// told through chat.postEphemeral instead.
	c, err := e.slack.WaitCall(ctx, func(c slacktest.Call) bool {
		return c.Method == "chat.postEphemeral" && strings.Contains(c.Params.Get("blocks")+c.Params.Get("text"), "Nobody approved your request")
	})
	if err != nil {
		t.Fatalf("expiry notice not posted: %v\nresponse posts: %+v", err, e.slack.ResponseURLPosts())
	}
	if c.Params.Get("user") != e2eUser || c.Params.Get("channel") != e2eChannel {
		t.Errorf("expiry notice to %s in %s, want %s in %s", c.Params.Get("user"), c.Params.Get("channel"), e2eUser, e2eChannel)
	}
	if n := runs(); n != 1 {
		t.Errorf("%d runs after the expiry, want still 1", n)
	}
}

// restartWith is restart with the core's configuration changed by core.
func (e *e2e) restartWith(cfg func(*Config), core func(*bridge.Config)) *e2e {
	e.t.Helper()
	e.stop()
	next := startE2E(e.t, e2eOptions{cfg: cfg, slack: e.slack, ws: e.ws, path: e.path, core: core})
	next.soleSocket()
	return next
}
