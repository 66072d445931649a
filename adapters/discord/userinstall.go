package discord

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// userInstallable lets users install the commands to their account and run
// them in servers without the bot, in DMs with the bot and in group DMs, as
// well as in the servers the bot is in.
func userInstallable(cmds []*discordgo.ApplicationCommand) {
	for _, c := range cmds {
		c.IntegrationTypes = &[]discordgo.ApplicationIntegrationType{discordgo.ApplicationIntegrationGuildInstall, discordgo.ApplicationIntegrationUserInstall}
		c.Contexts = &[]discordgo.InteractionContextType{discordgo.InteractionContextGuild, discordgo.InteractionContextBotDM, discordgo.InteractionContextPrivateChannel}
	}
}

// installShape writes a command's install types and contexts for
// comparison. Discord lists a command registered without integration_types
// as guild-install only, and one without contexts with null.
func installShape(c *discordgo.ApplicationCommand) (installs, contexts string) {
	types := []discordgo.ApplicationIntegrationType{discordgo.ApplicationIntegrationGuildInstall}
	if c.IntegrationTypes != nil {
		types = slices.Sorted(slices.Values(*c.IntegrationTypes))
	}
	installs = fmt.Sprint(types)
	if c.Contexts != nil {
		contexts = fmt.Sprint(slices.Sorted(slices.Values(*c.Contexts)))
	}
	return installs, contexts
}

// UserInstallURL returns the OAuth2 URL that adds the app to a user's
// account (integration_type 1, scope applications.commands only: a user
// install has no bot and no permissions).
func UserInstallURL(cfg Config) (string, error) {
	if err := cfg.ValidateInvite(); err != nil {
		return "", err
	}
	q := url.Values{}
	q.Set("client_id", cfg.ApplicationID)
	q.Set("integration_type", "1")
	q.Set("scope", "applications.commands")
	return "https://discord.com/oauth2/authorize?" + q.Encode(), nil
}

// botAbsent reports whether an interaction comes from where the bot is not a
// member, so that only its webhook may answer it (followups, edits of the
// original response): a group DM (context 2), or a place reached through the
// user's install alone, with no guild install authorizing it. A channel
// post there fails with 50001 Missing Access.
func botAbsent(i *discordgo.Interaction) bool {
	if i.Context == discordgo.InteractionContextPrivateChannel {
		return true
	}
	if len(i.AuthorizingIntegrationOwners) == 0 {
		return false // a gateway payload from before user installs
	}
	_, guildInstall := i.AuthorizingIntegrationOwners[discordgo.ApplicationIntegrationGuildInstall]
	return !guildInstall
}

// maxFollowups is how many follow-ups Discord lets an app that is not in the
// server (a user install) send per interaction.
const maxFollowups = 5

// errNoChannel: an interaction's token expired where the bot is not a
// member, so the reply has no way left to go.
var errNoChannel = errors.New("interaction token expired where the bot is not a member: the reply cannot be delivered")

// withinFollowups keeps a reply within the follow-ups a user install may
// send: text that would need more messages is attached as a file (an
// interaction's webhook needs no permission for that) with its start shown.
func (r *interactionResponder) withinFollowups(reply bridge.Reply) bridge.Reply {
	if reply.File != nil || len(render(reply)) <= maxFollowups && !cut(reply) {
		return reply
	}
	out := reply
	out.File = &bridge.File{Name: "reply.md", Content: []byte(reply.Text)}
	start := truncate.Bytes(reply.Text, 1500)
	if strings.Count(start, "```")%2 == 1 {
		start += "\n```"
	}
	out.Text = start + "\n…\n\n_The whole text is attached as reply.md._"
	return out
}
