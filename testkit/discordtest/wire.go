package discordtest

import (
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"
)

// The fake renders Discord's objects itself rather than marshalling discordgo's structs:
// those encode absent arrays as null (recipients, permission_overwrites, resolved…), which
// discordgo tolerates and other clients (discord.js) do not. Each renderer sends the fields
// Discord documents and always sends, with arrays as [] and nullable fields as null.

// everyonePermissions is what the @everyone role and members of the fake's guilds may do:
// view, send, read history, embed, attach, react, use application commands.
const everyonePermissions = "2248473465835073"

// attachmentSizeLimit is what interactions report: 10 MiB, a guild without boosts.
const attachmentSizeLimit = 10 << 20

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// wireUser renders a user object (resources/user#user-object).
func wireUser(u discordgo.User) map[string]any {
	disc := u.Discriminator
	if disc == "" {
		disc = "0"
	}
	out := map[string]any{
		"id": u.ID, "username": u.Username, "discriminator": disc,
		"global_name": nullable(u.GlobalName), "avatar": nullable(u.Avatar),
		"public_flags": int(u.PublicFlags),
	}
	if u.Bot {
		out["bot"] = true
	}
	if u.System {
		out["system"] = true
	}
	return out
}

// wireSelf renders the bot's own user, as READY and GET /users/@me carry it.
func (s *Server) wireSelf() map[string]any {
	out := wireUser(s.bot)
	out["verified"], out["mfa_enabled"], out["email"], out["flags"] = true, false, nil, 0
	return out
}

func wireUsers(us []discordgo.User) []any {
	out := make([]any, 0, len(us))
	for _, u := range us {
		out = append(out, wireUser(u))
	}
	return out
}

// wireMember renders a guild member; user is nil where Discord leaves it out (the member of
// MESSAGE_CREATE).
func wireMember(m *discordgo.Member, user *discordgo.User) map[string]any {
	roles := append([]string{}, m.Roles...)
	var joined any
	if !m.JoinedAt.IsZero() {
		joined = timestamp(m.JoinedAt)
	}
	out := map[string]any{
		"roles": roles, "joined_at": joined, "deaf": m.Deaf, "mute": m.Mute, "flags": int(m.Flags),
		"pending": m.Pending, "nick": nullable(m.Nick), "avatar": nullable(m.Avatar), "banner": nullable(m.Banner),
		"premium_since": nil, "communication_disabled_until": nil,
	}
	if user != nil {
		out["user"] = wireUser(*user)
	}
	return out
}

// botMemberLocked is the bot's membership of a guild.
func (s *Server) botMemberLocked(withUser bool) map[string]any {
	var u *discordgo.User
	if withUser {
		u = &s.bot
	}
	return wireMember(&discordgo.Member{JoinedAt: s.now()}, u)
}

// wireChannelLocked renders a channel as Discord does for its type (resources/channel, the
// example channels).
func (s *Server) wireChannelLocked(ch *discordgo.Channel) map[string]any {
	out := map[string]any{
		"id": ch.ID, "type": ch.Type, "flags": int(ch.Flags), "last_message_id": nullable(ch.LastMessageID),
	}
	switch {
	case ch.Type == discordgo.ChannelTypeDM || ch.Type == discordgo.ChannelTypeGroupDM:
		recipients := make([]any, 0, len(ch.Recipients))
		for _, u := range ch.Recipients {
			known := *u
			if known.Username == "" {
				known = s.userLocked(u.ID)
			}
			recipients = append(recipients, wireUser(known))
		}
		out["recipients"] = recipients
		if ch.Type == discordgo.ChannelTypeGroupDM {
			out["name"], out["icon"], out["owner_id"] = nullable(ch.Name), nullable(ch.Icon), ch.OwnerID
		}
	case ch.IsThread():
		out["guild_id"], out["parent_id"], out["owner_id"], out["name"] = ch.GuildID, ch.ParentID, ch.OwnerID, ch.Name
		out["message_count"], out["total_message_sent"], out["member_count"] = ch.MessageCount, ch.MessageCount, ch.MemberCount
		out["rate_limit_per_user"] = ch.RateLimitPerUser
		meta := map[string]any{"archived": false, "auto_archive_duration": 1440, "archive_timestamp": timestamp(s.now()), "locked": false, "create_timestamp": nil}
		if md := ch.ThreadMetadata; md != nil {
			meta["archived"], meta["auto_archive_duration"], meta["locked"] = md.Archived, md.AutoArchiveDuration, md.Locked
			meta["archive_timestamp"] = timestamp(md.ArchiveTimestamp)
			if ch.Type == discordgo.ChannelTypeGuildPrivateThread {
				meta["invitable"] = md.Invitable
			}
		}
		out["thread_metadata"] = meta
		out["applied_tags"] = append([]string{}, ch.AppliedTags...)
	default:
		overwrites := make([]any, 0, len(ch.PermissionOverwrites))
		for _, o := range ch.PermissionOverwrites {
			overwrites = append(overwrites, map[string]any{
				"id": o.ID, "type": o.Type, "allow": strconv.FormatInt(o.Allow, 10), "deny": strconv.FormatInt(o.Deny, 10),
			})
		}
		out["guild_id"], out["name"], out["position"], out["permission_overwrites"] = ch.GuildID, ch.Name, ch.Position, overwrites
		out["nsfw"], out["topic"], out["parent_id"], out["rate_limit_per_user"] = ch.NSFW, nullable(ch.Topic), nullable(ch.ParentID), ch.RateLimitPerUser
	}
	return out
}

// everyoneRole is the role every guild has, with the guild's id.
func everyoneRole(guildID string) map[string]any {
	return map[string]any{
		"id": guildID, "name": "@everyone", "color": 0,
		"colors": map[string]any{"primary_color": 0, "secondary_color": nil, "tertiary_color": nil},
		"hoist":  false, "icon": nil, "unicode_emoji": nil, "position": 0, "permissions": everyonePermissions,
		"managed": false, "mentionable": false, "flags": 0,
	}
}

// guildCreateLocked renders GUILD_CREATE of an available guild: the guild object and the
// extra fields (events/gateway-events#guild-create). Without GUILD_PRESENCES members hold
// only the bot.
func (s *Server) guildCreateLocked(id string) map[string]any {
	channels, threads := []any{}, []any{}
	for _, cid := range s.channelOrder {
		ch := s.channels[cid]
		if ch.GuildID != id {
			continue
		}
		if ch.IsThread() {
			threads = append(threads, s.wireChannelLocked(ch))
		} else {
			channels = append(channels, s.wireChannelLocked(ch))
		}
	}
	return map[string]any{
		"id": id, "name": "guild " + id, "icon": nil, "icon_hash": nil, "splash": nil, "discovery_splash": nil,
		"owner_id": "1", "afk_channel_id": nil, "afk_timeout": 300, "widget_enabled": false, "widget_channel_id": nil,
		"verification_level": 0, "default_message_notifications": 0, "explicit_content_filter": 0,
		"roles": []any{everyoneRole(id)}, "emojis": []any{}, "features": []string{}, "mfa_level": 0,
		"application_id": nil, "system_channel_id": nil, "system_channel_flags": 0, "rules_channel_id": nil,
		"max_presences": nil, "max_members": 500000, "vanity_url_code": nil, "description": nil, "banner": nil,
		"premium_tier": 0, "premium_subscription_count": 0, "preferred_locale": "en-US", "public_updates_channel_id": nil,
		"max_video_channel_users": 25, "max_stage_video_channel_users": 50, "nsfw_level": 0, "stickers": []any{},
		"premium_progress_bar_enabled": false, "safety_alerts_channel_id": nil, "incidents_data": nil,

		"joined_at": timestamp(s.joined[id]), "large": false, "unavailable": false, "member_count": 2,
		"voice_states": []any{}, "members": []any{s.botMemberLocked(true)}, "channels": channels, "threads": threads,
		"presences": []any{}, "stage_instances": []any{}, "guild_scheduled_events": []any{}, "soundboard_sounds": []any{},
	}
}

// wireCommand renders an application command as Discord answers it
// (interactions/application-commands#application-command-object).
func wireCommand(c *discordgo.ApplicationCommand) map[string]any {
	out := map[string]any{
		"id": c.ID, "application_id": c.ApplicationID, "version": c.Version, "type": c.Type, "name": c.Name,
		"description": c.Description, "default_member_permissions": nil, "nsfw": c.NSFW != nil && *c.NSFW,
		"integration_types": []discordgo.ApplicationIntegrationType{discordgo.ApplicationIntegrationGuildInstall},
		"contexts":          nil,
	}
	if c.GuildID != "" {
		out["guild_id"] = c.GuildID
	}
	if c.DefaultMemberPermissions != nil {
		out["default_member_permissions"] = strconv.FormatInt(*c.DefaultMemberPermissions, 10)
	}
	if c.IntegrationTypes != nil {
		out["integration_types"] = append([]discordgo.ApplicationIntegrationType{}, *c.IntegrationTypes...)
	}
	if c.Contexts != nil {
		out["contexts"] = append([]discordgo.InteractionContextType{}, *c.Contexts...)
	}
	if c.NameLocalizations != nil {
		out["name_localizations"] = *c.NameLocalizations
	}
	if c.DescriptionLocalizations != nil {
		out["description_localizations"] = *c.DescriptionLocalizations
	}
	if len(c.Options) > 0 {
		out["options"] = wireOptions(c.Options)
	}
	return out
}

func wireOptions(opts []*discordgo.ApplicationCommandOption) []any {
	out := make([]any, 0, len(opts))
	for _, o := range opts {
		w := map[string]any{"type": o.Type, "name": o.Name, "description": o.Description}
		if o.Required {
			w["required"] = true
		}
		if o.Autocomplete {
			w["autocomplete"] = true
		}
		if len(o.Choices) > 0 {
			choices := make([]any, 0, len(o.Choices))
			for _, c := range o.Choices {
				ch := map[string]any{"name": c.Name, "value": c.Value}
				if c.NameLocalizations != nil {
					ch["name_localizations"] = c.NameLocalizations
				}
				choices = append(choices, ch)
			}
			w["choices"] = choices
		}
		if len(o.Options) > 0 {
			w["options"] = wireOptions(o.Options)
		}
		if len(o.ChannelTypes) > 0 {
			w["channel_types"] = append([]discordgo.ChannelType{}, o.ChannelTypes...)
		}
		if o.MinValue != nil {
			w["min_value"] = *o.MinValue
		}
		if o.MaxValue != 0 {
			w["max_value"] = o.MaxValue
		}
		if o.MinLength != nil {
			w["min_length"] = *o.MinLength
		}
		if o.MaxLength != 0 {
			w["max_length"] = o.MaxLength
		}
		if o.NameLocalizations != nil {
			w["name_localizations"] = o.NameLocalizations
		}
		if o.DescriptionLocalizations != nil {
			w["description_localizations"] = o.DescriptionLocalizations
		}
		out = append(out, w)
	}
	return out
}

func wireCommands(cmds []*discordgo.ApplicationCommand) []any {
	out := make([]any, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, wireCommand(c))
	}
	return out
}
