package bridge

import "testing"

// BenchmarkClassify measures routing an event: chat, text command or slash command.
func BenchmarkClassify(b *testing.B) {
	evs := []Event{
		{Kind: KindMessage, Text: "how is web1 doing?"},
		{Kind: KindMessage, Text: "!flow healthcheck host=web1"},
		{Kind: KindCommand, Command: CommandAgent, Text: "status"},
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if j := classify(evs[i%len(evs)]); j.kind == 0 {
			b.Fatal("unrouted")
		}
		i++
	}
}
