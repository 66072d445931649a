package discordtest_test

import (
	"github.com/flowbridge/flowbridge/testkit/docshape"
)

// shape is a documented payload: see docshape for how its fields are written.
type shape = docshape.Shape

const discordDocs = "https://discord.com/developers/docs/"

// discordShapes is what Discord's documentation (discord-api-docs c98d64b) says each payload
// carries. Fields marked optional there but sent by Discord every time are required here
// (channel_type on MESSAGE_CREATE, flags and components on messages), since clients rely on
// them: discord.js drops DMs without channel_type.
var discordShapes = map[string]shape{
	// events/gateway-events#payload-structure: every frame has op, d, s and t (s and t null
	// unless op is 0).
	"frame": {Doc: discordDocs + "events/gateway-events#payload-structure",
		Fields: []string{"op:int", "d:?any", "s:?int", "t:?string"}},
	"hello": {Doc: discordDocs + "events/gateway-events#hello",
		Fields: []string{"heartbeat_interval:int"}},
	"ready": {Doc: discordDocs + "events/gateway-events#ready",
		Fields: []string{"v:int", "user:user", "guilds:[]unavailable_guild", "session_id:string",
			"resume_gateway_url:string", "shard?:[]int", "application:ready_application"}},
	"unavailable_guild": {Doc: discordDocs + "resources/guild#unavailable-guild-object",
		Fields: []string{"id:string", "unavailable:bool"}},
	"ready_application": {Doc: discordDocs + "events/gateway-events#ready",
		Fields: []string{"id:string", "flags:int"}},

	"user": {Doc: discordDocs + "resources/user#user-object",
		Fields: []string{"id:string", "username:string", "discriminator:string", "global_name:?string", "avatar:?string"}},

	"guild": {Doc: discordDocs + "resources/guild#guild-object",
		Fields: []string{"id:string", "name:string", "icon:?string", "splash:?string", "discovery_splash:?string",
			"owner_id:string", "afk_channel_id:?string", "afk_timeout:int", "verification_level:int",
			"default_message_notifications:int", "explicit_content_filter:int", "roles:[]role", "emojis:[]object",
			"features:[]string", "mfa_level:int", "application_id:?string", "system_channel_id:?string",
			"system_channel_flags:int", "rules_channel_id:?string", "vanity_url_code:?string", "description:?string",
			"banner:?string", "premium_tier:int", "preferred_locale:string", "public_updates_channel_id:?string",
			"nsfw_level:int", "premium_progress_bar_enabled:bool", "safety_alerts_channel_id:?string",
			"incidents_data:?object"}},
	// events/gateway-events#guild-create-guild-create-extra-fields
	"guild_create": {Doc: discordDocs + "events/gateway-events#guild-create-guild-create-extra-fields",
		Fields: []string{"joined_at:string", "large:bool", "member_count:int", "voice_states:[]object",
			"members:[]member", "channels:[]channel", "threads:[]channel", "presences:[]object",
			"stage_instances:[]object", "guild_scheduled_events:[]object", "soundboard_sounds:[]object"}},
	"role": {Doc: discordDocs + "topics/permissions#role-object",
		Fields: []string{"id:string", "name:string", "color:int", "colors:object", "hoist:bool", "position:int",
			"permissions:string", "managed:bool", "mentionable:bool", "flags:int"}},
	"member": {Doc: discordDocs + "resources/guild#guild-member-object",
		Fields: []string{"user:user", "roles:[]string", "joined_at:?string", "deaf:bool", "mute:bool", "flags:int"}},
	// A message's member leaves out user (resources/guild#guild-member-object).
	"message_member": {Doc: discordDocs + "events/gateway-events#message-create-message-create-extra-fields",
		Fields: []string{"roles:[]string", "joined_at:?string", "deaf:bool", "mute:bool", "flags:int"}},

	"channel": {Doc: discordDocs + "resources/channel#channel-object",
		Fields: []string{"id:string", "type:int", "flags:int"},
		Variant: func(obj map[string]any) []string {
			switch t, _ := obj["type"].(float64); t {
			case 0, 5, 15, 16:
				return []string{"guild_channel"}
			case 1:
				return []string{"dm_channel"}
			case 10, 11, 12:
				return []string{"thread_channel"}
			}
			return []string{"unknown channel type"}
		}},
	// resources/channel#channel-object-example-guild-text-channel
	"guild_channel": {Doc: discordDocs + "resources/channel#channel-object-example-guild-text-channel",
		Fields: []string{"guild_id:string", "name:string", "position:int", "permission_overwrites:[]object",
			"nsfw:bool", "topic:?string", "last_message_id:?string", "parent_id:?string", "rate_limit_per_user:int"}},
	"dm_channel": {Doc: discordDocs + "resources/channel#channel-object-example-dm-channel",
		Fields: []string{"last_message_id:?string", "recipients:[]user"}},
	"thread_channel": {Doc: discordDocs + "resources/channel#channel-object-example-thread-channel",
		Fields: []string{"guild_id:string", "parent_id:string", "owner_id:string", "name:string",
			"last_message_id:?string", "message_count:int", "member_count:int", "rate_limit_per_user:int",
			"thread_metadata:thread_metadata", "total_message_sent:int"}},
	"thread_metadata": {Doc: discordDocs + "resources/channel#thread-metadata-object",
		Fields: []string{"archived:bool", "auto_archive_duration:int", "archive_timestamp:string", "locked:bool"}},
	"thread_create": {Doc: discordDocs + "events/gateway-events#thread-create",
		Fields: []string{"newly_created:bool"}},

	"message": {Doc: discordDocs + "resources/message#message-object",
		Fields: []string{"id:string", "channel_id:string", "author:user", "content:string", "timestamp:string",
			"edited_timestamp:?string", "tts:bool", "mention_everyone:bool", "mentions:[]user",
			"mention_roles:[]string", "attachments:[]object", "embeds:[]object", "pinned:bool", "type:int",
			"flags:int", "components:[]object", "message_reference?:message_reference",
			"referenced_message?:?message", "interaction_metadata?:interaction_metadata", "thread?:channel"}},
	"message_reference": {Doc: discordDocs + "resources/message#message-reference-structure",
		Fields: []string{"message_id:string", "channel_id:string"}},
	"interaction_metadata": {Doc: discordDocs + "resources/message#message-interaction-metadata-object",
		Fields: []string{"id:string", "type:int", "user:user", "authorizing_integration_owners:object"}},
	// MESSAGE_CREATE and MESSAGE_UPDATE add these to the message.
	"message_event": {Doc: discordDocs + "events/gateway-events#message-create-message-create-extra-fields",
		Fields: []string{"channel_type:int", "mentions:[]user"}},
	"message_event_guild": {Doc: discordDocs + "events/gateway-events#message-create-message-create-extra-fields",
		Fields: []string{"guild_id:string", "member:message_member"}},
	"message_delete": {Doc: discordDocs + "events/gateway-events#message-delete",
		Fields: []string{"id:string", "channel_id:string", "guild_id?:string"}},

	"interaction": {Doc: discordDocs + "interactions/receiving-and-responding#interaction-object",
		Fields: []string{"id:string", "application_id:string", "type:int", "token:string", "version:int",
			"app_permissions:string", "locale:string", "entitlements:[]object",
			"authorizing_integration_owners:object", "context:int", "attachment_size_limit:int",
			"channel:channel", "channel_id:string", "data:object"},
		Variant: func(obj map[string]any) []string {
			var out []string
			if _, ok := obj["guild_id"]; ok {
				out = append(out, "interaction_guild")
			} else {
				out = append(out, "interaction_dm")
			}
			switch t, _ := obj["type"].(float64); t {
			case 2, 4:
				out = append(out, "interaction_command")
			case 3:
				out = append(out, "interaction_component")
			}
			return out
		}},
	"interaction_guild": {Doc: discordDocs + "interactions/receiving-and-responding#interaction-object",
		Fields: []string{"guild_id:string", "guild:interaction_guild_object", "guild_locale:string", "member:interaction_member"}},
	"interaction_guild_object": {Doc: discordDocs + "interactions/receiving-and-responding#interaction-object",
		Fields: []string{"id:string", "locale:string", "features:[]string"}},
	"interaction_member": {Doc: discordDocs + "resources/guild#guild-member-object",
		Fields: []string{"user:user", "roles:[]string", "joined_at:?string", "deaf:bool", "mute:bool", "flags:int", "permissions:string"}},
	"interaction_dm":      {Doc: discordDocs + "interactions/receiving-and-responding#interaction-object", Fields: []string{"user:user"}},
	"interaction_command": {Doc: discordDocs + "interactions/receiving-and-responding#interaction-object-application-command-data-structure", Fields: []string{"data:command_data"}},
	"command_data": {Doc: discordDocs + "interactions/receiving-and-responding#interaction-object-application-command-data-structure",
		Fields: []string{"id:string", "name:string", "type:int", "options?:[]command_data_option", "resolved?:object"}},
	"command_data_option": {Doc: discordDocs + "interactions/receiving-and-responding#interaction-object-application-command-interaction-data-option-structure",
		Fields: []string{"name:string", "type:int", "options?:[]command_data_option"}},
	"interaction_component": {Doc: discordDocs + "interactions/receiving-and-responding#interaction-object-message-component-data-structure",
		Fields: []string{"data:component_data", "message:message"}},
	"component_data": {Doc: discordDocs + "interactions/receiving-and-responding#interaction-object-message-component-data-structure",
		Fields: []string{"custom_id:string", "component_type:int", "resolved?:object", "values?:[]string"}},

	"command": {Doc: discordDocs + "interactions/application-commands#application-command-object",
		Fields: []string{"id:string", "application_id:string", "version:string", "type:int", "name:string",
			"description:string", "default_member_permissions:?string", "options?:[]command_option",
			"contexts?:?[]int", "integration_types?:[]int"}},
	"command_option": {Doc: discordDocs + "interactions/application-commands#application-command-object-application-command-option-structure",
		Fields: []string{"type:int", "name:string", "description:string", "options?:[]command_option",
			"choices?:[]command_choice", "channel_types?:[]int"}},
	"command_choice": {Doc: discordDocs + "interactions/application-commands#application-command-object-application-command-option-choice-structure",
		Fields: []string{"name:string", "value:any"}},

	"gateway": {Doc: discordDocs + "events/gateway#get-gateway", Fields: []string{"url:string"}},
	"gateway_bot": {Doc: discordDocs + "events/gateway#get-gateway-bot",
		Fields: []string{"url:string", "shards:int", "session_start_limit:session_start_limit"}},
	"session_start_limit": {Doc: discordDocs + "events/gateway#session-start-limit-object",
		Fields: []string{"total:int", "remaining:int", "reset_after:int", "max_concurrency:int"}},
	"error": {Doc: discordDocs + "reference#error-messages",
		Fields: []string{"code:int", "message:string", "errors?:object"}},
	"rate_limited": {Doc: discordDocs + "topics/rate-limits#exceeding-a-rate-limit-rate-limit-response-structure",
		Fields: []string{"message:string", "retry_after:number", "global:bool"}},
}
