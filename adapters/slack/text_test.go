package slack

import (
	"strings"
	"testing"
)

func TestInboundText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<@UBOT> hello", "hello"},
		{"<@UBOT>   hello", "hello"},
		{"hey <@UBOT> what is up", "hey what is up"},
		{"hi <@UOTHER> and <@UOTHER|alice>", "hi @UOTHER and @alice"},
		{"see <#C123|general> and <#C9>", "see #general and #C9"},
		{"<!here> <!channel> <!subteam^S1|@ops> <!subteam^S2>", "@here @channel @ops @S2"},
		{"<http://x.com|http://x.com> <http://y.com> <http://z.com|Zed>", "http://x.com http://y.com Zed (http://z.com)"},
		{"<mailto:a@b.c|a@b.c>", "a@b.c"},
		{"a &amp; b &lt;c&gt;", "a & b <c>"},
		{"&amp;lt; stays", "&lt; stays"},
		{"x < y", "x < y"},
		{"unclosed <@UBOT", "unclosed <@UBOT"},
		{"```\n  indented\n```", "```\n  indented\n```"},
		{"flow healthcheck host=web1 service=\"nginx proxy\"", "flow healthcheck host=web1 service=\"nginx proxy\""},
		{"<!date^1392734382^{date}|Feb 18>", "Feb 18"},
	}
	for _, tt := range tests {
		if got := inboundText(tt.in, "UBOT"); got != tt.want {
			t.Errorf("inboundText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestConversationKey(t *testing.T) {
	tests := []struct{ team, channel, thread, want string }{
		{"T1", "C1", "", "slack/T1/C1"},
		{"T1", "C1", "1700000000.000100", "slack/T1/C1/1700000000.000100"},
		{"T1", "D1", "", "slack/T1/D1"},
	}
	for _, tt := range tests {
		if got := conversationKey(tt.team, tt.channel, tt.thread); got != tt.want {
			t.Errorf("conversationKey(%q, %q, %q) = %q, want %q", tt.team, tt.channel, tt.thread, got, tt.want)
		}
	}
}

func FuzzInboundText(f *testing.F) {
	for _, s := range []string{"<@UBOT> hi", "<http://a|b>", "&amp;&lt;", "<<>>", "<!subteam^>", "<|>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := inboundText(s, "UBOT")
		if strings.Contains(got, "<@UBOT>") && !strings.Contains(s, "<@UBOT") {
			t.Errorf("inboundText(%q) = %q invented the bot mention", s, got)
		}
	})
}
