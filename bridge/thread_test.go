package bridge

import (
	"fmt"
	"strings"
	"testing"
)

func TestFormatEarlier(t *testing.T) {
	t.Parallel()
	thirty := make([]Earlier, 30)
	for i := range thirty {
		thirty[i] = Earlier{Author: fmt.Sprintf("user%02d", i), Text: fmt.Sprintf("message %02d", i)}
	}
	tests := []struct {
		name string
		msgs []Earlier
		tc   ThreadContext
		want string
	}{
		{"none", nil, ThreadContext{Messages: 5}, ""},
		{"count keeps the newest", thirty, ThreadContext{Messages: 3, Chars: 1000},
			msgThreadLead + "- user27: message 27\n- user28: message 28\n- user29: message 29\n" + msgThreadEnd},
		{"chars keep the newest and say what was left out", thirty[:4], ThreadContext{Messages: 10, Chars: 42},
			msgThreadLead + "- (2 earlier messages left out)\n- user02: message 02\n- user03: message 03\n" + msgThreadEnd},
		{"self, files, lines and mentions", []Earlier{
			{Author: "alice", Text: "ping <@U0BOB> and @everyone\nsecond line", Files: []string{"report.csv", "@here.txt"}},
			{Author: "flowbridge", Self: true, Text: "an <!channel> answer"},
			{Text: "anonymous"},
		}, ThreadContext{Messages: 10, Chars: 1000},
			msgThreadLead +
				"- alice: ping <\u2060@U0BOB> and @\u2060everyone second line [files: report.csv, @\u2060here.txt]\n" +
				"- flowbridge (you, an earlier answer): an <\u2060!channel> answer\n" +
				"- someone: anonymous\n" + msgThreadEnd},
		{"one message over the budget is cut", []Earlier{{Author: "a", Text: strings.Repeat("x", 100)}}, ThreadContext{Messages: 1, Chars: 20},
			msgThreadLead + "- a: " + strings.Repeat("x", 12) + "…\n" + msgThreadEnd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := formatEarlier(tt.msgs, tt.tc); got != tt.want {
				t.Errorf("formatEarlier() =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
