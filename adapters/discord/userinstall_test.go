package discord

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// startGlobal runs a bridge whose commands are global (no guild_ids) and
// waits until they are registered.
func (e *env) startGlobal(t *testing.T) *bridgeRun {
	t.Helper()
	ctx := testCtx(t)
	r := e.build(t)
	r.run(t)
	if _, err := e.fake.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.WaitRequest(ctx, func(r discordtest.Request) bool {
		return r.Route == discordtest.RouteGlobalCommands && r.Status == http.StatusOK
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestUserInstallRegistersAndAnswersThroughTheWebhook(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Line of a long result.\n", 600) // 13,800 characters: 7 messages as text
	e := newEnv(t, func(e *env) {
		e.cfg.GuildIDs, e.cfg.UserInstall = nil, true
		e.ws.AddFlow(workspacetest.Flow{UUID: "flow-wait", Template: long})
	})
	e.startGlobal(t)
	ctx := testCtx(t)
	for _, c := range e.fake.Commands("") {
		if c.IntegrationTypes == nil || !slices.Equal(*c.IntegrationTypes, []discordgo.ApplicationIntegrationType{0, 1}) ||
			c.Contexts == nil || !slices.Equal(*c.Contexts, []discordgo.InteractionContextType{0, 1, 2}) {
			t.Errorf("/%s integration_types %v, contexts %v; want [0 1] and [0 1 2]", c.Name, c.IntegrationTypes, c.Contexts)
		}
	}

	// A server the bot is not in: the result edits the deferred response, and
	// its share button posts through a follow-up, never to the channel.
	run, err := e.fake.SendInteraction(ctx, discordtest.Interaction{GuildID: "5", ChannelID: "5000", User: alice, UserInstall: true,
		Data: flowCommand("healthcheck", [2]string{"host", "web1"})})
	if err != nil {
		t.Fatal(err)
	}
	result := e.waitOriginal(t, run.ID, "Checked web1")
	buttons := result.Buttons()
	if len(buttons) != 1 {
		t.Fatalf("result buttons = %+v, want the share button", buttons)
	}
	if _, err := e.fake.SendInteraction(ctx, discordtest.Interaction{GuildID: "5", ChannelID: "5000", User: alice, UserInstall: true, MessageID: result.ID,
		Data: discordgo.MessageComponentInteractionData{CustomID: buttons[0].CustomID, ComponentType: discordgo.ButtonComponent}}); err != nil {
		t.Fatal(err)
	}
	shared, err := e.fake.WaitMessage(ctx, func(m discordtest.Message) bool {
		return m.Source == discordtest.SourceFollowup && strings.Contains(m.Content, "shared by Alice")
	})
	if err != nil {
		t.Fatalf("shared result not posted: %v", err)
	}
	if shared.Ephemeral() {
		t.Error("the shared result is ephemeral, want it public")
	}
	checkNoPings(t, shared)

	// A group DM: a result that would take more follow-ups than Discord allows
	// a user install arrives as one message with the text attached.
	wait, err := e.fake.SendInteraction(ctx, discordtest.Interaction{ChannelID: "6000", User: alice, UserInstall: true, PrivateChannel: true,
		Data: flowCommand("wait", [2]string{"n", "1"})})
	if err != nil {
		t.Fatal(err)
	}
	m := e.waitOriginal(t, wait.ID, "attached as reply.md")
	if len(m.Attachments) != 1 || string(m.Attachments[0].Content) != long {
		t.Errorf("attachments = %d, want reply.md with the whole result", len(m.Attachments))
	}
	for _, r := range e.fake.Requests() {
		if r.Status == http.StatusForbidden || strings.Contains(r.Path, "/channels/5000") || strings.Contains(r.Path, "/channels/6000") {
			t.Errorf("%s %s answered %d: nothing may use the channel's REST routes where the bot is not a member", r.Method, r.Path, r.Status)
		}
	}
}

func TestUserInstallNeedsGlobalCommands(t *testing.T) {
	cfg := Config{Enabled: true, Token: "a.b.c", ApplicationID: "900000000000000001", GuildIDs: []string{"1"}, UserInstall: true}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "discord.user_install: needs the commands registered globally") {
		t.Errorf("Validate(user_install with guild_ids) = %v, want it refused", err)
	}
}

func TestUserInstallURL(t *testing.T) {
	got, err := UserInstallURL(Config{ApplicationID: "42"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://discord.com/oauth2/authorize?client_id=42&integration_type=1&scope=applications.commands"; got != want {
		t.Errorf("UserInstallURL = %q, want %q", got, want)
	}
}

func TestInstallSettingsCountAsAChange(t *testing.T) {
	plain := func() []*discordgo.ApplicationCommand { return Commands(nil, nil) }
	asDiscordLists := plain()
	for _, c := range asDiscordLists {
		c.IntegrationTypes = &[]discordgo.ApplicationIntegrationType{0} // Discord's default, listed
	}
	if !sameCommands(asDiscordLists, plain()) {
		t.Error("commands Discord lists with its default integration_types differ from the same commands registered without: every start would re-register them")
	}
	installable := plain()
	userInstallable(installable)
	if sameCommands(plain(), installable) || sameCommands(installable, plain()) {
		t.Error("turning user_install on or off is not seen as a change: the commands would not be re-registered")
	}
}
