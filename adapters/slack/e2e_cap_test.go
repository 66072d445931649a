package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// TestE2EHugeAnswerIsCut: with files off, a long answer (430 KB) reaches
// the thread as a handful of messages, the last saying that the rest was
// cut, not as the 36 messages it would fill.
func TestE2EHugeAnswerIsCut(t *testing.T) {
	t.Parallel()
	// 430 KB: 4 MB is TestRenderCapsAnAnswer's; end to end, the core and
	// the fakes take their time over it under -race.
	huge := strings.Repeat("A line of a very long answer, one of many.\n", 10_000)
	e := startE2E(t, e2eOptions{reply: func(int, string) string { return huge }, postBurst: -1})
	ctx := waitCtx(t)
	d := e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "<@" + e.slack.BotUserID() + "> everything, please"}))
	if _, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.Channel == e2eChannel && strings.Contains(string(m.Blocks), "too long for chat")
	}); err != nil {
		t.Fatalf("no message says the answer was cut: %v", err)
	}
	var parts int
	for _, m := range e.slack.Messages() {
		if m.Channel == e2eChannel && m.BotID != "" && m.ThreadTS == d.TS {
			parts++
		}
	}
	if parts > 5 {
		t.Errorf("a 430 KB answer came as %d messages, want at most 5", parts)
	}
}

func TestRenderCapsAnAnswer(t *testing.T) {
	table := "| host | status | note |\n|---|---|---|\n" + strings.Repeat("| web1 | ok | fine |\n", 100_000)
	for name, huge := range map[string]string{
		"4 MB of lines":       strings.Repeat("A line of a very long answer, one of many.\n", 100_000),
		"a 100,000-row table": table,
	} {
		for _, markdownBlock := range []bool{true, false} {
			msgs := render(bridge.Reply{Text: huge, Footer: "helper · 3 s"}, markdownBlock)
			if len(msgs) > 5 {
				t.Errorf("render(%s, markdown block %v) = %d messages, want at most 5", name, markdownBlock, len(msgs))
			}
			last, _ := json.Marshal(msgs[len(msgs)-1].Blocks)
			if !strings.Contains(string(last), "too long for chat") || !strings.Contains(string(last), "helper · 3 s") {
				t.Errorf("render(%s, markdown block %v): last message %.300s…, want the cut line and the footer", name, markdownBlock, last)
			}
		}
	}
}
