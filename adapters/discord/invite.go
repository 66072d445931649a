package discord

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/bwmarrin/discordgo"
)

// BasePermissions is what the bot needs in any guild, 274877991936:
// View Channels (1<<10) to see channels and their messages, Send Messages
// (1<<11) to reply, Embed Links (1<<14) so links in replies preview, Read
// Message History (1<<16) to reply to (reference) a message, and Send
// Messages in Threads (1<<38) to answer in threads. Slash commands need no
// permission of the bot's; the applications.commands scope covers them.
const BasePermissions int64 = discordgo.PermissionViewChannel |
	discordgo.PermissionSendMessages |
	discordgo.PermissionEmbedLinks |
	discordgo.PermissionReadMessageHistory |
	discordgo.PermissionSendMessagesInThreads

// Permissions is what the bot needs with cfg: BasePermissions, Create
// Public Threads (1<<35) only with start_threads (309237730304 then), and
// Attach Files (1<<15) only with files.
func Permissions(cfg Config) int64 {
	p := BasePermissions
	if cfg.StartThreads {
		p |= discordgo.PermissionCreatePublicThreads
	}
	if cfg.Files {
		p |= discordgo.PermissionAttachFiles
	}
	return p
}

// InviteURL returns the OAuth2 URL that adds the bot to a guild with the
// scopes "bot" and "applications.commands" and the Permissions cfg needs.
// It needs cfg's application ID and nothing secret. With guildID set,
// Discord preselects that guild.
func InviteURL(cfg Config, guildID string) (string, error) {
	err := cfg.ValidateInvite()
	if guildID != "" && !isSnowflake(guildID) {
		err = errors.Join(err, fmt.Errorf("guild %q is not a Discord ID", guildID))
	}
	if err != nil {
		return "", err
	}
	q := url.Values{}
	q.Set("client_id", cfg.ApplicationID)
	q.Set("scope", "bot applications.commands")
	q.Set("permissions", strconv.FormatInt(Permissions(cfg), 10))
	if guildID != "" {
		q.Set("guild_id", guildID)
		q.Set("disable_guild_select", "true")
	}
	return "https://discord.com/oauth2/authorize?" + q.Encode(), nil
}
