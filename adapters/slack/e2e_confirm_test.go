package slack

import (
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// TestE2EConfirmation: a flow with confirm = true shows what will run with
// Run / Cancel buttons; only the person who asked can press them; Run runs it
// once, Cancel runs nothing.
func TestE2EConfirmation(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)
	ask := func(host string) (slacktest.Message, map[string]slacktest.Button) {
		t.Helper()
		d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "guarded host=" + host, UserID: e2eUser, ChannelID: e2eChannel}))
		p := e.response(ctx, d.ResponseURL, "Run guarded")
		m, ok := e.slack.Message(e2eChannel, p.MessageTS)
		if !ok {
			t.Fatalf("confirmation message %s not found", p.MessageTS)
		}
		buttons := map[string]slacktest.Button{}
		for _, b := range m.Buttons() {
			buttons[b.ActionID] = b
		}
		if _, ok := buttons[bridge.ActionConfirm]; !ok || buttons[bridge.ActionCancel].Value == "" {
			t.Fatalf("confirmation buttons = %+v, want Run and Cancel", m.Buttons())
		}
		if !m.Ephemeral || !strings.Contains(m.Text+string(m.Blocks), host) {
			t.Errorf("confirmation = {ephemeral %v, %s}, want private and naming %s", m.Ephemeral, m.Blocks, host)
		}
		return m, buttons
	}
	press := func(m slacktest.Message, b slacktest.Button, user, want string) {
		t.Helper()
		d := e.sent(e.slack.SendBlockAction(ctx, slacktest.BlockAction{
			UserID: user, ChannelID: e2eChannel, MessageTS: m.TS, IsEphemeral: true,
			ActionID: b.ActionID, BlockID: b.BlockID, Value: b.Value, Label: b.Label,
		}))
		e.ack(ctx, d)
		e.response(ctx, d.ResponseURL, want)
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

	m, b := ask("web1")
	press(m, b[bridge.ActionConfirm], "U0OTHER", "Only the person who asked")
	if n := runs(); n != 0 {
		t.Fatalf("%d runs after another user pressed Run, want 0", n)
	}
	press(m, b[bridge.ActionConfirm], e2eUser, "Checked web1")
	if n := runs(); n != 1 {
		t.Errorf("%d runs after Run, want 1", n)
	}
	// The question is replaced by its outcome: no live buttons are left.
	answered := func(m slacktest.Message, want string) {
		t.Helper()
		after, ok := e.slack.Message(e2eChannel, m.TS)
		if !ok || !strings.Contains(after.Text+string(after.Blocks), want) {
			t.Errorf("confirmation after the press = %+v, want %q", after, want)
		}
		for _, b := range after.Buttons() {
			if b.ActionID == bridge.ActionConfirm || b.ActionID == bridge.ActionCancel {
				t.Errorf("confirmation after the press still has a live %s button", b.ActionID)
			}
		}
	}
	answered(m, "Checked web1")

	m, b = ask("web2")
	press(m, b[bridge.ActionCancel], e2eUser, "Cancelled")
	if n := runs(); n != 1 {
		t.Errorf("%d runs after Cancel, want still 1", n)
	}
	answered(m, "Cancelled by")
}
