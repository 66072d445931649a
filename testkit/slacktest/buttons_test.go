package slacktest_test

import (
	"testing"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func TestMessageButtonsBesideContextBlock(t *testing.T) {
	m := slacktest.Message{Blocks: []byte(`[
		{"type":"section","text":{"type":"mrkdwn","text":"result"}},
		{"type":"context","elements":[{"type":"mrkdwn","text":"healthcheck · run by ann"}]},
		{"type":"actions","block_id":"b1","elements":[{"type":"button","action_id":"share","value":"v1","text":{"type":"plain_text","text":"Share with channel"}}]}
	]`)}
	got := m.Buttons()
	if len(got) != 1 || got[0].ActionID != "share" || got[0].Value != "v1" || got[0].Label != "Share with channel" || got[0].BlockID != "b1" {
		t.Errorf("Buttons() = %+v, want the one share button", got)
	}
}
