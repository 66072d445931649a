package discord

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestMessagesInOrder: twelve messages sent back to back into a channel and
// twelve into a DM reach the agent in the order they were sent, through
// discordgo's gateway client. A goroutine per event (discordgo's default,
// or the adapter's own) loses that order.
func TestMessagesInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t)
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	const n = 12
	const dm = "77"
	var want [2][]string
	for i := range n {
		want[0] = append(want[0], fmt.Sprintf("ch-%02d", i))
		want[1] = append(want[1], fmt.Sprintf("dm-%02d", i))
	}
	for _, text := range want[0] {
		if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(bot, text)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, text := range want[1] {
		if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: dm, Author: alice, Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		e.waitBot(t, channelID, "You said: "+want[0][i])
		e.waitBot(t, dm, "You said: "+want[1][i])
	}
	sessions := e.ws.Sessions("agent-1")
	if len(sessions) != 2 {
		t.Fatalf("agent has %d sessions, want 2 (the channel's and the DM's)", len(sessions))
	}
	for _, s := range sessions {
		got := e.ws.Messages(s)
		if !slices.Equal(got, want[0]) && !slices.Equal(got, want[1]) {
			t.Errorf("session %s received %q, want the messages of one conversation in the order sent", s, got)
		}
	}
}

// marker sends a DM and waits for its answer: the adapter handles gateway
// events one after the other, so every event dispatched before it has been
// handed to the core.
func (e *env) marker(t *testing.T, dm string) {
	t.Helper()
	if _, err := e.fake.SendMessage(testCtx(t), discordtest.MessageCreate{ChannelID: dm, Author: alice, Content: "marker"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, dm, "You said: marker")
}

// counter reads a counter of the bridge's metrics.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// flowRuns counts the runs of a flow the workspace was asked for.
func (e *env) flowRuns(uuid string) int {
	n := 0
	for _, r := range e.ws.Requests() {
		if strings.Contains(r.Path, "/prompts/"+uuid+"/") {
			n++
		}
	}
	return n
}

// TestInteractionReplayedAfterResume: Discord delivers a slash command again
// after a RESUME; it is recognised, neither acknowledged nor run a second time.
func TestInteractionReplayedAfterResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.tap = newTap(t, e.fake)
	r := e.start(t)
	ctx := testCtx(t)
	sent := e.interact(t, flowCommand("healthcheck", [2]string{"host", "web1"}, [2]string{"service", "nginx"}))
	e.waitOriginal(t, sent.ID, "Checked web1 nginx")

	e.tap.replay("INTERACTION_CREATE", sent.ID)
	if err := e.fake.DropConnection(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.WaitHandshake(ctx, func(h discordtest.Handshake) bool { return h.Resumed }); err != nil {
		t.Fatal(err)
	}
	e.tap.waitReplayed(ctx, "INTERACTION_CREATE", sent.ID)
	e.marker(t, "90") // the gateway loop has handed the replay over
	r.stop(t)         // the core has settled every event it was given

	if got := counter(t, r.metrics, "flowbridge_deduplicated_events_total", map[string]string{"platform": Platform}); got != 1 {
		t.Errorf("%v events recognised as delivered before, want 1 (the replay)", got)
	}
	if resps := e.fake.InteractionResponses(sent.ID); len(resps) != 1 || resps[0].Code != 0 {
		t.Errorf("callbacks = %+v, want one accepted", resps)
	}
	if n := e.flowRuns("flow-hc"); n != 1 {
		t.Errorf("flow ran %d times, want 1", n)
	}
}

// TestReplayAfterRestart: after a restart on the same store, a message and a
// command answered before the restart and delivered again are not answered
// again.
func TestReplayAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.tap = newTap(t, e.fake)
	r := e.start(t)
	ctx := testCtx(t)
	um, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "80", Author: alice, Content: "only once"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, "80", "You said: only once")
	sent := e.interact(t, flowCommand("healthcheck", [2]string{"host", "web2"}))
	e.waitOriginal(t, sent.ID, "Checked web2")
	e.marker(t, "91")
	r.stop(t)
	e.fake.ExpireSessions() // the next start identifies, and catches up from history

	e.tap.replay("MESSAGE_CREATE", um.ID)
	e.tap.replay("INTERACTION_CREATE", sent.ID)
	r = e.start(t)
	e.tap.waitReplayed(ctx, "INTERACTION_CREATE", sent.ID)
	// The new session holds the messages of DMs 80 and 91 (both served)
	// while it reads their history; a message to 91 sent once both are
	// read comes after the replay, held with it or after it.
	for _, dm := range []string{"80", "91"} {
		if _, err := e.fake.WaitRequest(ctx, func(q discordtest.Request) bool {
			return q.Route == discordtest.RouteListMessages && q.Path == "/api/v9/channels/"+dm+"/messages" && q.Status == http.StatusOK
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "91", Author: alice, Content: "marker after the restart"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, "91", "You said: marker after the restart")
	r.stop(t)

	// The message may come twice, by the replay and by the catch-up's
	// read of DM 80's history, whichever of the two runs first: 2 or 3.
	if got := counter(t, r.metrics, "flowbridge_deduplicated_events_total", map[string]string{"platform": Platform}); got != 2 && got != 3 {
		t.Errorf("after the restart, %v events recognised as delivered before, want 2 (3 when the history's read comes after the replay)", got)
	}
	var replies int
	for _, m := range e.fake.Messages() {
		if m.ChannelID == "80" && strings.Contains(m.Content, "You said: only once") {
			replies++
		}
	}
	if replies != 1 {
		t.Errorf("%d replies to the message, want 1", replies)
	}
	if resps := e.fake.InteractionResponses(sent.ID); len(resps) != 1 {
		t.Errorf("callbacks = %+v, want one", resps)
	}
	if n := e.flowRuns("flow-hc"); n != 1 {
		t.Errorf("flow ran %d times, want 1", n)
	}
	for _, s := range e.ws.Sessions("agent-1") {
		if got := e.ws.Messages(s); slices.Contains(got, "only once") && !slices.Equal(got, []string{"only once"}) {
			t.Errorf("session %s received %q, want the message once", s, got)
		}
	}
}

// TestReceivedAnsweredAfterRestart: events recorded but not yet started when
// flowbridge stopped (queued behind a message the agent was answering) are
// answered after the restart, in their order, through the responders Restore
// rebuilds: the message's reply references it, the command's deferral and
// answer go to its interaction.
func TestReceivedAnsweredAfterRestart(t *testing.T) {
	t.Parallel()
	chat := newGate(func(r *http.Request, body []byte) bool {
		return strings.HasSuffix(r.URL.Path, "/chat") && strings.Contains(string(body), "first")
	}, 1)
	// The fake's clock stands still: the command is acknowledged after the
	// restart, well within its 3 seconds by that clock.
	clock := discordtest.NewClock(time.Now())
	e := newEnvWith(t, discordtest.Options{Now: clock.Now}, func(e *env) { e.wsRT = chat.wrap(e.wsRT) })
	r := e.start(t)
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(bot, "first")}); err != nil {
		t.Fatal(err)
	}
	receive(t, ctx, chat.arrived)
	second, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(bot, "second")})
	if err != nil {
		t.Fatal(err)
	}
	status := e.interact(t, discordgo.ApplicationCommandInteractionData{Name: "agent", Options: []*discordgo.ApplicationCommandInteractionDataOption{
		{Name: "status", Type: discordgo.ApplicationCommandOptionSubCommand},
	}})
	e.marker(t, "81")
	// The grace ends while "first" is with the agent: it is cut off (and
	// its user told), the two behind it are left for the next start.
	if err := r.stopWithin(t, 50*time.Millisecond); err == nil {
		t.Fatalf("Shutdown() = nil, want the grace to end with work in flight")
	}
	e.waitBot(t, channelID, "cut off")

	e.start(t)
	reply := e.waitBot(t, channelID, "You said: second")
	if reply.Reference == nil || reply.Reference.MessageID != second.ID {
		t.Errorf("reply after the restart references %+v, want message %s", reply.Reference, second.ID)
	}
	answer := e.waitOriginal(t, status.ID, "helper")
	if !answer.Ephemeral() {
		t.Errorf("/agent status answered publicly after the restart, want ephemeral")
	}
	// The core acknowledges an event once it is recorded, so the command
	// was deferred before the restart; Restore's acknowledgement, for an
	// event recorded but not acknowledged when the process died, is then
	// refused as a second one.
	var accepted int
	for _, resp := range e.fake.InteractionResponses(status.ID) {
		if resp.Code == 0 {
			accepted++
			if resp.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource {
				t.Errorf("callback type %d, want a deferral", resp.Type)
			}
		}
	}
	if accepted != 1 {
		t.Errorf("%d accepted callbacks, want 1", accepted)
	}
	if !answer.Timestamp.After(reply.Timestamp) && answer.Edited.Before(reply.Timestamp) {
		t.Errorf("the command was answered before the message queued ahead of it")
	}
}

// TestSentToldAfterRestart: a flow run and a chat message whose requests
// had gone to the workspace when flowbridge died are not sent again after
// the restart; their users get the core's notice, through the command's
// interaction and in the channel.
func TestSentToldAfterRestart(t *testing.T) {
	t.Parallel()
	flows := newGate(func(r *http.Request, _ []byte) bool { return strings.Contains(r.URL.Path, "/prompts/flow-wait/") }, 0)
	chat := newGate(func(r *http.Request, _ []byte) bool { return strings.HasSuffix(r.URL.Path, "/chat") }, 1)
	clock := discordtest.NewClock(time.Now())
	e := newEnvWith(t, discordtest.Options{Now: clock.Now}, func(e *env) { e.wsRT = chat.wrap(flows.wrap(e.wsRT)) })
	dead := e.start(t)
	ctx := testCtx(t)
	sent := e.interact(t, flowCommand("wait", [2]string{"n", "1"}))
	receive(t, ctx, flows.arrived)
	e.waitOriginal(t, sent.ID, "Running")
	asked, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "82", Author: alice, Content: "are you there"})
	if err != nil {
		t.Fatal(err)
	}
	receive(t, ctx, chat.arrived)

	// The process dies: its gateway goes, its store is left as it is.
	dead.crash(t)
	t.Cleanup(func() {
		// Let the dead process's core wind down before the test ends.
		close(flows.release)
		close(chat.release)
		dead.core.Shutdown(t.Context())
		dead.core.Close()
	})

	e.start(t)
	notice := e.waitOriginal(t, sent.ID, "restarted while *wait* was running")
	if !notice.Ephemeral() {
		t.Errorf("flow notice is public, want it to the user only, as the flow's result")
	}
	told := e.waitBot(t, "82", "restarted while it was answering your message")
	if told.Reference == nil || told.Reference.MessageID != asked.ID {
		t.Errorf("notice references %+v, want the user's message %s", told.Reference, asked.ID)
	}
	if n := flows.count(); n != 1 {
		t.Errorf("flow sent %d times, want 1", n)
	}
	if n := chat.count(); n != 1 {
		t.Errorf("chat message sent %d times, want 1", n)
	}
}
