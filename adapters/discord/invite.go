package discord

import (
	"net/url"
	"strconv"

	"github.com/bwmarrin/discordgo"
)

// Permissions is what the bot needs in a guild, 309237730304:
// View Channels (1<<10) to see channels and their messages, Send Messages
// (1<<11) to reply, Embed Links (1<<14) so links in replies preview, Read
// Message History (1<<16) to reply to (reference) a message, Create Public
// Threads (1<<35) for start_threads, and Send Messages in Threads (1<<38).
// Slash commands need no permission of the bot's; the applications.commands
// scope covers them.
const Permissions int64 = discordgo.PermissionViewChannel |
	discordgo.PermissionSendMessages |
	discordgo.PermissionEmbedLinks |
	discordgo.PermissionReadMessageHistory |
	discordgo.PermissionCreatePublicThreads |
	discordgo.PermissionSendMessagesInThreads

// InviteURL returns the OAuth2 URL that adds the bot to a guild with the
// scopes "bot" and "applications.commands" and the Permissions it needs.
// With guildID set, Discord preselects that guild.
func InviteURL(applicationID, guildID string) string {
	q := url.Values{}
	q.Set("client_id", applicationID)
	q.Set("scope", "bot applications.commands")
	q.Set("permissions", strconv.FormatInt(Permissions, 10))
	if guildID != "" {
		q.Set("guild_id", guildID)
		q.Set("disable_guild_select", "true")
	}
	return "https://discord.com/oauth2/authorize?" + q.Encode()
}
