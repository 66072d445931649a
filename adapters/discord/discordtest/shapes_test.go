package discordtest_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// A shape lists the fields Discord documents for a payload and always sends. Each field is
// "name:type"; a name ending in "?" may be absent (but, when present, is checked), and type
// is one of
//
//	string, int, number, bool, object, any   a JSON value of that kind (any: not null)
//	?T                                       present, null or T (Discord's "?type")
//	[]T                                      an array, never null, of T
//	NAME                                     an object checked against the shape NAME
//
// variant adds shapes that apply to the same object, chosen by its content (a channel by
// its type, an interaction by where it happened).
type shape struct {
	doc     string
	fields  []string
	variant func(obj map[string]any) []string
}

const discordDocs = "https://discord.com/developers/docs/"

// discordShapes is what Discord's documentation (discord-api-docs c98d64b) says each payload
// carries. Fields marked optional there but sent by Discord every time are required here
// (channel_type on MESSAGE_CREATE, flags and components on messages), since clients rely on
// them: discord.js drops DMs without channel_type.
var discordShapes = map[string]shape{
	// events/gateway-events#payload-structure: every frame has op, d, s and t (s and t null
	// unless op is 0).
	"frame": {doc: discordDocs + "events/gateway-events#payload-structure",
		fields: []string{"op:int", "d:?any", "s:?int", "t:?string"}},
	"hello": {doc: discordDocs + "events/gateway-events#hello",
		fields: []string{"heartbeat_interval:int"}},
	"ready": {doc: discordDocs + "events/gateway-events#ready",
		fields: []string{"v:int", "user:user", "guilds:[]unavailable_guild", "session_id:string",
			"resume_gateway_url:string", "shard?:[]int", "application:ready_application"}},
	"unavailable_guild": {doc: discordDocs + "resources/guild#unavailable-guild-object",
		fields: []string{"id:string", "unavailable:bool"}},
	"ready_application": {doc: discordDocs + "events/gateway-events#ready",
		fields: []string{"id:string", "flags:int"}},

	"user": {doc: discordDocs + "resources/user#user-object",
		fields: []string{"id:string", "username:string", "discriminator:string", "global_name:?string", "avatar:?string"}},

	"guild": {doc: discordDocs + "resources/guild#guild-object",
		fields: []string{"id:string", "name:string", "icon:?string", "splash:?string", "discovery_splash:?string",
			"owner_id:string", "afk_channel_id:?string", "afk_timeout:int", "verification_level:int",
			"default_message_notifications:int", "explicit_content_filter:int", "roles:[]role", "emojis:[]object",
			"features:[]string", "mfa_level:int", "application_id:?string", "system_channel_id:?string",
			"system_channel_flags:int", "rules_channel_id:?string", "vanity_url_code:?string", "description:?string",
			"banner:?string", "premium_tier:int", "preferred_locale:string", "public_updates_channel_id:?string",
			"nsfw_level:int", "premium_progress_bar_enabled:bool", "safety_alerts_channel_id:?string",
			"incidents_data:?object"}},
	// events/gateway-events#guild-create-guild-create-extra-fields
	"guild_create": {doc: discordDocs + "events/gateway-events#guild-create-guild-create-extra-fields",
		fields: []string{"joined_at:string", "large:bool", "member_count:int", "voice_states:[]object",
			"members:[]member", "channels:[]channel", "threads:[]channel", "presences:[]object",
			"stage_instances:[]object", "guild_scheduled_events:[]object", "soundboard_sounds:[]object"}},
	"role": {doc: discordDocs + "topics/permissions#role-object",
		fields: []string{"id:string", "name:string", "color:int", "colors:object", "hoist:bool", "position:int",
			"permissions:string", "managed:bool", "mentionable:bool", "flags:int"}},
	"member": {doc: discordDocs + "resources/guild#guild-member-object",
		fields: []string{"user:user", "roles:[]string", "joined_at:?string", "deaf:bool", "mute:bool", "flags:int"}},
	// A message's member leaves out user (resources/guild#guild-member-object).
	"message_member": {doc: discordDocs + "events/gateway-events#message-create-message-create-extra-fields",
		fields: []string{"roles:[]string", "joined_at:?string", "deaf:bool", "mute:bool", "flags:int"}},

	"channel": {doc: discordDocs + "resources/channel#channel-object",
		fields: []string{"id:string", "type:int", "flags:int"},
		variant: func(obj map[string]any) []string {
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
	"guild_channel": {doc: discordDocs + "resources/channel#channel-object-example-guild-text-channel",
		fields: []string{"guild_id:string", "name:string", "position:int", "permission_overwrites:[]object",
			"nsfw:bool", "topic:?string", "last_message_id:?string", "parent_id:?string", "rate_limit_per_user:int"}},
	"dm_channel": {doc: discordDocs + "resources/channel#channel-object-example-dm-channel",
		fields: []string{"last_message_id:?string", "recipients:[]user"}},
	"thread_channel": {doc: discordDocs + "resources/channel#channel-object-example-thread-channel",
		fields: []string{"guild_id:string", "parent_id:string", "owner_id:string", "name:string",
			"last_message_id:?string", "message_count:int", "member_count:int", "rate_limit_per_user:int",
			"thread_metadata:thread_metadata", "total_message_sent:int"}},
	"thread_metadata": {doc: discordDocs + "resources/channel#thread-metadata-object",
		fields: []string{"archived:bool", "auto_archive_duration:int", "archive_timestamp:string", "locked:bool"}},
	"thread_create": {doc: discordDocs + "events/gateway-events#thread-create",
		fields: []string{"newly_created:bool"}},

	"message": {doc: discordDocs + "resources/message#message-object",
		fields: []string{"id:string", "channel_id:string", "author:user", "content:string", "timestamp:string",
			"edited_timestamp:?string", "tts:bool", "mention_everyone:bool", "mentions:[]user",
			"mention_roles:[]string", "attachments:[]object", "embeds:[]object", "pinned:bool", "type:int",
			"flags:int", "components:[]object", "message_reference?:message_reference",
			"referenced_message?:?message", "interaction_metadata?:interaction_metadata", "thread?:channel"}},
	"message_reference": {doc: discordDocs + "resources/message#message-reference-structure",
		fields: []string{"message_id:string", "channel_id:string"}},
	"interaction_metadata": {doc: discordDocs + "resources/message#message-interaction-metadata-object",
		fields: []string{"id:string", "type:int", "user:user", "authorizing_integration_owners:object"}},
	// MESSAGE_CREATE and MESSAGE_UPDATE add these to the message.
	"message_event": {doc: discordDocs + "events/gateway-events#message-create-message-create-extra-fields",
		fields: []string{"channel_type:int", "mentions:[]user"}},
	"message_event_guild": {doc: discordDocs + "events/gateway-events#message-create-message-create-extra-fields",
		fields: []string{"guild_id:string", "member:message_member"}},
	"message_delete": {doc: discordDocs + "events/gateway-events#message-delete",
		fields: []string{"id:string", "channel_id:string", "guild_id?:string"}},

	"interaction": {doc: discordDocs + "interactions/receiving-and-responding#interaction-object",
		fields: []string{"id:string", "application_id:string", "type:int", "token:string", "version:int",
			"app_permissions:string", "locale:string", "entitlements:[]object",
			"authorizing_integration_owners:object", "context:int", "attachment_size_limit:int",
			"channel:channel", "channel_id:string", "data:object"},
		variant: func(obj map[string]any) []string {
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
	"interaction_guild": {doc: discordDocs + "interactions/receiving-and-responding#interaction-object",
		fields: []string{"guild_id:string", "guild:interaction_guild_object", "guild_locale:string", "member:interaction_member"}},
	"interaction_guild_object": {doc: discordDocs + "interactions/receiving-and-responding#interaction-object",
		fields: []string{"id:string", "locale:string", "features:[]string"}},
	"interaction_member": {doc: discordDocs + "resources/guild#guild-member-object",
		fields: []string{"user:user", "roles:[]string", "joined_at:?string", "deaf:bool", "mute:bool", "flags:int", "permissions:string"}},
	"interaction_dm":      {doc: discordDocs + "interactions/receiving-and-responding#interaction-object", fields: []string{"user:user"}},
	"interaction_command": {doc: discordDocs + "interactions/receiving-and-responding#interaction-object-application-command-data-structure", fields: []string{"data:command_data"}},
	"command_data": {doc: discordDocs + "interactions/receiving-and-responding#interaction-object-application-command-data-structure",
		fields: []string{"id:string", "name:string", "type:int", "options?:[]command_data_option", "resolved?:object"}},
	"command_data_option": {doc: discordDocs + "interactions/receiving-and-responding#interaction-object-application-command-interaction-data-option-structure",
		fields: []string{"name:string", "type:int", "options?:[]command_data_option"}},
	"interaction_component": {doc: discordDocs + "interactions/receiving-and-responding#interaction-object-message-component-data-structure",
		fields: []string{"data:component_data", "message:message"}},
	"component_data": {doc: discordDocs + "interactions/receiving-and-responding#interaction-object-message-component-data-structure",
		fields: []string{"custom_id:string", "component_type:int", "resolved?:object", "values?:[]string"}},

	"command": {doc: discordDocs + "interactions/application-commands#application-command-object",
		fields: []string{"id:string", "application_id:string", "version:string", "type:int", "name:string",
			"description:string", "default_member_permissions:?string", "options?:[]command_option",
			"contexts?:?[]int", "integration_types?:[]int"}},
	"command_option": {doc: discordDocs + "interactions/application-commands#application-command-object-application-command-option-structure",
		fields: []string{"type:int", "name:string", "description:string", "options?:[]command_option",
			"choices?:[]command_choice", "channel_types?:[]int"}},
	"command_choice": {doc: discordDocs + "interactions/application-commands#application-command-object-application-command-option-choice-structure",
		fields: []string{"name:string", "value:any"}},

	"gateway": {doc: discordDocs + "events/gateway#get-gateway", fields: []string{"url:string"}},
	"gateway_bot": {doc: discordDocs + "events/gateway#get-gateway-bot",
		fields: []string{"url:string", "shards:int", "session_start_limit:session_start_limit"}},
	"session_start_limit": {doc: discordDocs + "events/gateway#session-start-limit-object",
		fields: []string{"total:int", "remaining:int", "reset_after:int", "max_concurrency:int"}},
	"error": {doc: discordDocs + "reference#error-messages",
		fields: []string{"code:int", "message:string", "errors?:object"}},
	"rate_limited": {doc: discordDocs + "topics/rate-limits#exceeding-a-rate-limit-rate-limit-response-structure",
		fields: []string{"message:string", "retry_after:number", "global:bool"}},
}

// shapeChecker checks payloads against a shape table and collects what is wrong.
type shapeChecker struct {
	shapes map[string]shape
	// never are the names of every field the table requires to be an array or an object:
	// no payload may carry them as null, wherever they appear.
	never map[string]bool
	errs  []string
	// seen counts the shapes checked, to report coverage.
	seen map[string]int
}

func newShapeChecker(shapes map[string]shape) *shapeChecker {
	c := &shapeChecker{shapes: shapes, never: map[string]bool{}, seen: map[string]int{}}
	for _, sh := range shapes {
		for _, f := range sh.fields {
			name, typ, _ := strings.Cut(f, ":")
			if strings.HasPrefix(typ, "?") {
				continue
			}
			switch typ {
			case "string", "int", "number", "bool", "any":
			default:
				c.never[strings.TrimSuffix(name, "?")] = true
			}
		}
	}
	return c
}

func (c *shapeChecker) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// check checks v, found at where, against each of the shapes, and scans it once for
// forbidden nulls.
func (c *shapeChecker) check(where string, v any, shapes ...string) {
	for _, name := range shapes {
		c.value(where, name, v)
	}
	c.nulls(where, v)
}

func (c *shapeChecker) value(where, typ string, v any) {
	if rest, ok := strings.CutPrefix(typ, "?"); ok {
		if v == nil {
			return
		}
		typ = rest
	}
	if v == nil {
		c.fail("%s is null, want %s", where, typ)
		return
	}
	ok := true
	switch {
	case strings.HasPrefix(typ, "[]"):
		arr, isArr := v.([]any)
		ok = isArr
		for i, e := range arr {
			c.value(fmt.Sprintf("%s[%d]", where, i), typ[2:], e)
		}
	case typ == "string":
		_, ok = v.(string)
	case typ == "int":
		f, isNum := v.(float64)
		ok = isNum && f == math.Trunc(f)
	case typ == "number":
		_, ok = v.(float64)
	case typ == "bool":
		_, ok = v.(bool)
	case typ == "object":
		_, ok = v.(map[string]any)
	case typ == "any":
	default:
		obj, isObj := v.(map[string]any)
		ok = isObj
		if isObj {
			c.object(where, typ, obj)
		}
	}
	if !ok {
		c.fail("%s = %v (%T), want %s", where, v, v, typ)
	}
}

func (c *shapeChecker) object(where, name string, obj map[string]any) {
	sh, ok := c.shapes[name]
	if !ok {
		c.fail("%s: no shape %q in the table", where, name)
		return
	}
	c.seen[name]++
	for _, f := range sh.fields {
		key, typ, _ := strings.Cut(f, ":")
		key, optional := strings.CutSuffix(key, "?")
		v, present := obj[key]
		if !present {
			if !optional {
				c.fail("%s.%s missing (%s: %s)", where, key, name, sh.doc)
			}
			continue
		}
		c.value(where+"."+key, typ, v)
	}
	if sh.variant != nil {
		for _, n := range sh.variant(obj) {
			c.object(where, n, obj)
		}
	}
}

// nulls reports every field named in never that is null, at any depth.
func (c *shapeChecker) nulls(where string, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if v[k] == nil && c.never[k] {
				c.fail("%s.%s is null, want an array or object", where, k)
			}
			c.nulls(where+"."+k, v[k])
		}
	case []any:
		for i, e := range v {
			c.nulls(fmt.Sprintf("%s[%d]", where, i), e)
		}
	}
}
