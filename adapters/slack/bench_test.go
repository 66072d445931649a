package slack

import (
	"strings"
	"testing"

	"github.com/slack-go/slack/slackevents"

	"github.com/flowbridge/flowbridge/bridge"
)

// benchReply is a typical agent answer: paragraphs, a list, code and a link.
var benchReply = strings.Repeat("Here is **what I found** about `web1`:\n\n- nginx is up\n- [dashboard](https://example.com/d)\n\n```sh\nsystemctl status nginx\n```\n\n", 12)

// BenchmarkRender renders an agent reply to Slack blocks and fallback text.
func BenchmarkRender(b *testing.B) {
	r := bridge.Reply{Kind: bridge.ReplyAgent, Text: benchReply, Footer: "helper"}
	b.ReportAllocs()
	for b.Loop() {
		if len(render(r, true)) == 0 {
			b.Fatal("nothing rendered")
		}
	}
}

// BenchmarkDecodeEvent decodes an HTTP-mode event callback and turns it into a
// bridge event, the per-message inbound path.
func BenchmarkDecodeEvent(b *testing.B) {
	body := []byte(`{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":{"type":"app_mention","user":"U1","text":"<@UBOT> how is web1 doing?","ts":"1716212345.000100","channel":"C1","event_ts":"1716212345.000100"}}`)
	a := &Adapter{cfg: DefaultConfig()}
	a.self.Store(&identity{userID: "UBOT", botID: "BBOT"})
	b.ReportAllocs()
	for b.Loop() {
		req, err := decodeRequest("application/json", body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.fromMention("T1", req.event.InnerEvent.Data.(*slackevents.AppMentionEvent)); err != nil {
			b.Fatal(err)
		}
	}
}
