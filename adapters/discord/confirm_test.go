package discord

import (
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestConfirmation: a flow with confirm = true answers with Run / Cancel
// buttons; only the person who asked can press them; Run runs the flow once,
// Cancel runs nothing; every press is acknowledged once.
func TestConfirmation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) {
		e.flows = append(e.flows, bridge.Flow{Name: "guarded", UUID: "flow-hc", Confirm: true, Allow: []string{"everyone"},
			Params: []bridge.Param{{Name: "host", Required: true}}})
	})
	e.start(t)
	ctx := testCtx(t)
	bob := discordgo.User{ID: "43", Username: "bob"}
	ask := func(host string) (discordtest.Message, map[string]discordgo.Button) {
		t.Helper()
		sent := e.interact(t, flowCommand("guarded", [2]string{"host", host}))
		m := e.waitOriginal(t, sent.ID, "Run *guarded*")
		if !m.Ephemeral() || !strings.Contains(m.Content, host) {
			t.Errorf("confirmation %q (ephemeral %v), want private and naming %s", m.Content, m.Ephemeral(), host)
		}
		buttons := map[string]discordgo.Button{}
		for _, b := range m.Buttons() {
			buttons[parseCustomID(b.CustomID).ID] = b
		}
		if len(buttons) != 2 || buttons[bridge.ActionConfirm].CustomID == "" || buttons[bridge.ActionCancel].CustomID == "" {
			t.Fatalf("confirmation buttons = %+v, want Run and Cancel", m.Buttons())
		}
		return m, buttons
	}
	press := func(m discordtest.Message, b discordgo.Button, user discordgo.User, want string) {
		t.Helper()
		p, err := e.fake.SendInteraction(ctx, discordtest.Interaction{
			GuildID: guildID, ChannelID: channelID, User: user, MessageID: m.ID,
			Data: discordgo.MessageComponentInteractionData{CustomID: b.CustomID, ComponentType: discordgo.ButtonComponent},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fake.WaitMessage(ctx, func(m discordtest.Message) bool { return strings.Contains(m.Content, want) }); err != nil {
			t.Fatalf("after pressing %s as %s: no message containing %q: %v", b.Label, user.Username, want, err)
		}
		if resps := e.fake.InteractionResponses(p.ID); len(resps) != 1 || resps[0].Code != 0 {
			t.Errorf("press callbacks = %+v, want exactly one accepted", resps)
		}
	}
	runs := func() int {
		n := 0
		for _, r := range e.ws.Requests() {
			if strings.Contains(r.Path, "/prompts/flow-hc/") {
				n++
			}
		}
		return n
	}

	m, b := ask("web1")
	press(m, b[bridge.ActionConfirm], bob, "Only the person who asked")
	if n := runs(); n != 0 {
		t.Fatalf("%d runs after another user pressed Run, want 0", n)
	}
	press(m, b[bridge.ActionConfirm], alice, "Checked web1")
	if n := runs(); n != 1 {
		t.Errorf("%d runs after Run, want 1", n)
	}
	// A pressed question is replaced by its outcome: no live Run / Cancel.
	answered := func(m discordtest.Message) {
		t.Helper()
		after, ok := e.fake.Message(m.ID)
		if !ok {
			t.Fatalf("confirmation %s gone", m.ID)
		}
		for _, b := range after.Buttons() {
			if id := parseCustomID(b.CustomID).ID; id == bridge.ActionConfirm || id == bridge.ActionCancel {
				t.Errorf("confirmation after the press = %q with a live %s button", after.Content, id)
			}
		}
	}
	answered(m)
	m, b = ask("web2")
	press(m, b[bridge.ActionCancel], alice, "was not run")
	if n := runs(); n != 1 {
		t.Errorf("%d runs after Cancel, want still 1", n)
	}
	answered(m)
}
