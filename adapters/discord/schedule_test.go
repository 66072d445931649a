package discord

import (
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
)

// TestScheduledRunPostsInChannel: a schedule's run posts its result in the
// channel through the adapter's route of it, publicly and pinging no one,
// keyed by the channel's guild.
func TestScheduledRunPostsInChannel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.start(t)
	if _, _, err := r.a.ChannelRoute(testCtx(t), "general"); err == nil {
		t.Error("ChannelRoute(\"general\") = nil error, want a refusal of a non-ID")
	}
	conv, route, err := r.a.ChannelRoute(testCtx(t), channelID)
	if err != nil {
		t.Fatal(err)
	}
	if conv != channelKey(guildID, channelID) {
		t.Errorf("conversation = %q, want %q", conv, channelKey(guildID, channelID))
	}
	s := bridge.Scheduled{Name: "nightly", Flow: "healthcheck", Params: map[string]string{"host": "web3"}, Cron: "@daily", Platform: Platform, Channel: channelID}
	run := bridge.ScheduledRun{Scheduled: s, At: time.Now(), Conversation: conv, Route: route}
	if err := r.core.RunScheduled(testCtx(t), run); err != nil {
		t.Fatal(err)
	}
	m := e.waitBot(t, channelID, "Checked web3")
	if m.Ephemeral() || !strings.Contains(m.Content, "schedule nightly") || len(m.Buttons()) != 0 {
		t.Errorf("result = %+v, want a public message naming the schedule, without buttons", m)
	}
	checkNoPings(t, m)
}
