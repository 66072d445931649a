package discordtest_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// userInstallable is flowCommand registered for user installs in every context.
func userInstallable() *discordgo.ApplicationCommand {
	c := *flowCommand
	c.IntegrationTypes = &[]discordgo.ApplicationIntegrationType{0, 1}
	c.Contexts = &[]discordgo.InteractionContextType{0, 1, 2}
	return &c
}

func TestUserInstallInteractions(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{})
	s := newSession(t, fake, bridgeIntents)
	open(t, s)
	created := events[*discordgo.InteractionCreate](s)

	// Registered for guild installs only, the command cannot be used through a user install.
	if _, err := s.ApplicationCommandBulkOverwrite(fake.ApplicationID(), "", []*discordgo.ApplicationCommand{flowCommand}); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.SendInteraction(ctx(t), discordtest.Interaction{GuildID: "5", ChannelID: "5000", User: alice, UserInstall: true, Data: healthcheck("web1", "")}); err == nil ||
		!strings.Contains(err.Error(), "integration_types lacks 1") {
		t.Errorf("user-install interaction with a guild-only command = %v, want it refused", err)
	}
	if _, err := s.ApplicationCommandBulkOverwrite(fake.ApplicationID(), "", []*discordgo.ApplicationCommand{userInstallable()}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		in      discordtest.Interaction
		context discordgo.InteractionContextType
		owners  map[discordgo.ApplicationIntegrationType]string
		perms   int64
	}{
		{"a server without the bot", discordtest.Interaction{GuildID: "5", ChannelID: "5000", User: alice, UserInstall: true}, 0,
			map[discordgo.ApplicationIntegrationType]string{1: alice.ID}, discordgo.PermissionAttachFiles | discordgo.PermissionEmbedLinks | discordgo.PermissionMentionEveryone},
		{"a group DM", discordtest.Interaction{ChannelID: "6000", User: alice, UserInstall: true, PrivateChannel: true}, 2,
			map[discordgo.ApplicationIntegrationType]string{1: alice.ID}, discordgo.PermissionAttachFiles | discordgo.PermissionEmbedLinks | discordgo.PermissionMentionEveryone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Data = healthcheck("web1", "")
			sent, err := fake.SendInteraction(ctx(t), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			ic := receive(t, created, "INTERACTION_CREATE")
			if ic.ID != sent.ID || ic.Context != tc.context || len(ic.AuthorizingIntegrationOwners) != len(tc.owners) || ic.AuthorizingIntegrationOwners[1] != alice.ID || ic.AppPermissions != tc.perms {
				t.Errorf("interaction context %d, owners %v, app_permissions %d; want %d, %v, %d", ic.Context, ic.AuthorizingIntegrationOwners, ic.AppPermissions, tc.context, tc.owners, tc.perms)
			}
			// The bot is no member there: a channel post is refused, the webhook works.
			_, err = s.ChannelMessageSendComplex(tc.in.ChannelID, &discordgo.MessageSend{Content: "hello", AllowedMentions: noMentions}, discordgo.WithRestRetries(0))
			if restStatus(err) != http.StatusForbidden || restCode(err) != discordtest.CodeMissingAccess {
				t.Errorf("channel post = %v, want 403 Missing Access (50001)", err)
			}
			if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{Content: new("done"), AllowedMentions: noMentions}); err != nil {
				t.Errorf("edit of the original response = %v", err)
			}
			for i := range discordtest.MaxUserInstallFollowups {
				if _, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "part " + strconv.Itoa(i), AllowedMentions: noMentions}); err != nil {
					t.Fatalf("follow-up %d = %v", i+1, err)
				}
			}
			if _, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "one too many", AllowedMentions: noMentions}, discordgo.WithRestRetries(0)); restStatus(err) != http.StatusBadRequest {
				t.Errorf("follow-up %d = %v, want it refused", discordtest.MaxUserInstallFollowups+1, err)
			}
		})
	}
}
