package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// TestE2EButtonsSurviveRestart: a Share button and a pending Run, pressed
// after flowbridge restarted on its bbolt store, work as they did before:
// the button's state is a token in the store, not in the memory of the
// process that drew the button (on 32a4bef both answered "expired" after a
// restart on bbolt, and worked only on PostgreSQL).
func TestE2EButtonsSurviveRestart(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)

	// A private result with its Share button, and a question with Run.
	d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=web1 service=nginx", UserID: e2eUser, ChannelID: e2eChannel}))
	result := e.response(ctx, d.ResponseURL, "Checked web1 nginx")
	share := buttonValue(t, e, result.MessageTS, bridge.ActionShare)
	d = e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "guarded host=web2", UserID: e2eUser, ChannelID: e2eChannel}))
	question := e.response(ctx, d.ResponseURL, "Run guarded")
	run := buttonValue(t, e, question.MessageTS, bridge.ActionConfirm)

	e = e.restart(nil)
	ctx = waitCtx(t)

	press := e.sent(e.slack.SendBlockAction(ctx, slacktest.BlockAction{
		UserID: e2eUser, ChannelID: e2eChannel, MessageTS: question.MessageTS, IsEphemeral: true,
		ActionID: bridge.ActionConfirm, BlockID: actionsBlockID, Value: run, Label: "Run",
	}))
	e.ack(ctx, press)
	e.response(ctx, press.ResponseURL, "Checked web2")

	press = e.sent(e.slack.SendBlockAction(ctx, slacktest.BlockAction{
		UserID: e2eUser, ChannelID: e2eChannel, MessageTS: result.MessageTS, IsEphemeral: true,
		ActionID: bridge.ActionShare, BlockID: actionsBlockID, Value: share, Label: "Share with channel",
	}))
	e.ack(ctx, press)
	if shared := e.reply(ctx, e2eChannel, "Checked web1 nginx"); shared.Ephemeral {
		t.Errorf("shared result is ephemeral, want it posted to the channel")
	}
}

// buttonValue returns the value of the button actionID on the message ts.
func buttonValue(t *testing.T, e *e2e, ts, actionID string) string {
	t.Helper()
	for _, m := range e.slack.Messages() {
		if m.TS != ts {
			continue
		}
		var blocks []struct {
			Elements []struct {
				Type     string `json:"type"`
				ActionID string `json:"action_id"`
				Value    string `json:"value"`
			} `json:"elements"`
		}
		_ = json.Unmarshal(m.Blocks, &blocks)
		for _, b := range blocks {
			for _, el := range b.Elements {
				if el.Type == "button" && el.ActionID == actionID && strings.TrimSpace(el.Value) != "" {
					return el.Value
				}
			}
		}
		t.Fatalf("message %s has no %s button: %s", ts, actionID, m.Blocks)
	}
	t.Fatalf("message %s not found", ts)
	return ""
}
