package discord

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
)

var benchReply = strings.Repeat("Here is **what I found** about `web1`:\n\n- nginx is up\n- [dashboard](https://example.com/d)\n\n```sh\nsystemctl status nginx\n```\n\n", 12)

// BenchmarkRender renders an agent reply into Discord messages of at most 2,000 characters.
func BenchmarkRender(b *testing.B) {
	r := bridge.Reply{Kind: bridge.ReplyAgent, Text: benchReply, Footer: "helper"}
	b.ReportAllocs()
	for b.Loop() {
		if len(render(r)) == 0 {
			b.Fatal("nothing rendered")
		}
	}
}

// BenchmarkDecodeMessage decodes a MESSAGE_CREATE payload and reads what the
// adapter needs of it.
func BenchmarkDecodeMessage(b *testing.B) {
	payload := []byte(`{"id":"2","channel_id":"3","guild_id":"1","content":"<@900> how is web1 doing?","author":{"id":"42","username":"ann"},"mentions":[{"id":"900"}],"member":{"roles":["7"]}}`)
	b.ReportAllocs()
	for b.Loop() {
		var m discordgo.Message
		if err := json.Unmarshal(payload, &m); err != nil {
			b.Fatal(err)
		}
		mentions(&m, "900")
		stripMention(m.Content, "900")
		userOf(m.Author, m.Member)
	}
}
