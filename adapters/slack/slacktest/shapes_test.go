package slacktest_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// A shape lists the fields Slack documents for a payload and always sends. Each field is
// "name:type"; a name ending in "?" may be absent (but, when present, is checked), and type
// is one of
//
//	string, int, number, bool, object, any   a JSON value of that kind (any: not null)
//	?T                                       present, null or T
//	[]T                                      an array, never null, of T
//	NAME                                     an object checked against the shape NAME
//
// variant adds shapes that apply to the same object, chosen by its content (an event by
// its type, a conversation by its kind).
type shape struct {
	doc     string
	fields  []string
	variant func(obj map[string]any) []string
}

const slackDocs = "https://docs.slack.dev/"

// slackShapes is what Slack's documentation says each payload carries, from the examples on
// each page (the pages list few fields as optional). Fields Slack sends on every event
// callback today (context_team_id, context_enterprise_id) are required too.
var slackShapes = map[string]shape{
	// Socket Mode frames: apis/events-api/using-socket-mode.
	"hello": {doc: slackDocs + "apis/events-api/using-socket-mode#connect",
		fields: []string{"type:string", "num_connections:int", "debug_info:hello_debug_info", "connection_info:connection_info"}},
	"hello_debug_info": {doc: slackDocs + "apis/events-api/using-socket-mode#connect",
		fields: []string{"host:string", "build_number:int", "approximate_connection_time:int"}},
	"connection_info": {doc: slackDocs + "apis/events-api/using-socket-mode#connect", fields: []string{"app_id:string"}},
	"envelope": {doc: slackDocs + "apis/events-api/using-socket-mode#events",
		fields: []string{"envelope_id:string", "type:string", "payload:object", "accepts_response_payload:bool"},
		variant: func(obj map[string]any) []string {
			if obj["type"] == "events_api" {
				return []string{"events_api_envelope"}
			}
			return nil
		}},
	"events_api_envelope": {doc: slackDocs + "apis/events-api/using-socket-mode#events",
		fields: []string{"retry_attempt:int", "retry_reason:string"}},
	"disconnect": {doc: slackDocs + "apis/events-api/using-socket-mode#disconnect",
		fields: []string{"type:string", "reason:string", "debug_info:disconnect_debug_info"}},
	"disconnect_debug_info": {doc: slackDocs + "apis/events-api/using-socket-mode#disconnect", fields: []string{"host:string"}},

	// The Events API wrapper: reference/objects/event-object, apis/events-api#callback-field.
	"event_callback": {doc: slackDocs + "reference/objects/event-object",
		fields: []string{"token:string", "team_id:string", "api_app_id:string", "event:event", "type:string",
			"event_id:string", "event_time:int", "authorizations:[]authorization", "event_context:string",
			"is_ext_shared_channel:bool", "context_team_id:string", "context_enterprise_id:?string"}},
	"authorization": {doc: slackDocs + "reference/objects/event-object",
		fields: []string{"enterprise_id:?string", "team_id:string", "user_id:string", "is_bot:bool", "is_enterprise_install:bool"}},
	"event": {doc: slackDocs + "reference/objects/event-object",
		fields: []string{"type:string", "event_ts:string"},
		variant: func(obj map[string]any) []string {
			switch obj["type"] {
			case "message":
				return []string{"message_event"}
			case "app_mention":
				return []string{"app_mention_event"}
			}
			return nil
		}},
	"message_event": {doc: slackDocs + "reference/events/message",
		fields: []string{"channel:string", "channel_type:string", "ts:string"},
		variant: func(obj map[string]any) []string {
			switch obj["subtype"] {
			case "message_changed":
				return []string{"message_changed"}
			case "message_deleted":
				return []string{"message_deleted"}
			case nil:
				return []string{"user_message"}
			}
			return []string{"subtype_message"}
		}},
	"user_message": {doc: slackDocs + "reference/events/message",
		fields: []string{"user:string", "text:string"}},
	"subtype_message": {doc: slackDocs + "reference/events/message#subtypes",
		fields: []string{"subtype:string", "text:string"}},
	"message_changed": {doc: slackDocs + "reference/events/message/message_changed",
		fields: []string{"hidden:bool", "message:changed_message", "previous_message:object"}},
	"changed_message": {doc: slackDocs + "reference/events/message/message_changed",
		fields: []string{"type:string", "text:string", "ts:string", "edited:object"}},
	"message_deleted": {doc: slackDocs + "reference/events/message/message_deleted",
		fields: []string{"hidden:bool", "deleted_ts:string", "previous_message:object"}},
	"app_mention_event": {doc: slackDocs + "reference/events/app_mention",
		fields: []string{"user:string", "text:string", "ts:string", "channel:string"}},

	// interactivity/implementing-slash-commands#app_command_handling
	"slash_command": {doc: slackDocs + "interactivity/implementing-slash-commands#app_command_handling",
		fields: []string{"token:string", "team_id:string", "team_domain:string", "channel_id:string", "channel_name:string",
			"user_id:string", "user_name:string", "command:string", "text:string", "api_app_id:string",
			"is_enterprise_install:string", "response_url:string", "trigger_id:string"}},
	"block_actions": {doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		fields: []string{"type:string", "user:action_user", "api_app_id:string", "token:string", "container:container",
			"trigger_id:string", "team:action_team", "enterprise:?object", "is_enterprise_install:bool",
			"channel:action_channel", "state:object", "response_url:string", "actions:[]action", "message?:api_message"}},
	"action_user": {doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		fields: []string{"id:string", "username:string", "team_id:string"}},
	"container": {doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		fields: []string{"type:string", "message_ts:string", "channel_id:string", "is_ephemeral:bool"}},
	"action_team":    {doc: slackDocs + "reference/interaction-payloads/block_actions-payload", fields: []string{"id:string", "domain:string"}},
	"action_channel": {doc: slackDocs + "reference/interaction-payloads/block_actions-payload", fields: []string{"id:string", "name:string"}},
	"action": {doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		fields: []string{"action_id:string", "block_id:string", "text:object", "value:string", "type:string", "action_ts:string"}},
	"url_verification": {doc: slackDocs + "reference/events/url_verification",
		fields: []string{"token:string", "challenge:string", "type:string"}},

	// Web API answers: every one has ok, a refusal error (apis/web-api#evaluating-responses).
	"api": {doc: slackDocs + "apis/web-api/#evaluating-responses", fields: []string{"ok:bool"},
		variant: func(obj map[string]any) []string {
			if obj["ok"] == false {
				return []string{"api_error"}
			}
			return nil
		}},
	"api_error":             {doc: slackDocs + "apis/web-api/#evaluating-responses", fields: []string{"error:string", "response_metadata?:object"}},
	"apps.connections.open": {doc: slackDocs + "reference/methods/apps.connections.open", fields: []string{"url:string"}},
	"auth.test": {doc: slackDocs + "reference/methods/auth.test",
		fields: []string{"url:string", "team:string", "user:string", "team_id:string", "user_id:string", "bot_id:string", "is_enterprise_install:bool"}},
	"chat.postMessage":   {doc: slackDocs + "reference/methods/chat.postMessage", fields: []string{"channel:string", "ts:string", "message:api_message"}},
	"chat.update":        {doc: slackDocs + "reference/methods/chat.update", fields: []string{"channel:string", "ts:string", "text:string", "message:api_message"}},
	"chat.delete":        {doc: slackDocs + "reference/methods/chat.delete", fields: []string{"channel:string", "ts:string"}},
	"chat.postEphemeral": {doc: slackDocs + "reference/methods/chat.postEphemeral", fields: []string{"message_ts:string"}},
	"api_message": {doc: slackDocs + "reference/methods/chat.postMessage",
		fields: []string{"type:string", "text:string", "ts:string"},
		variant: func(obj map[string]any) []string {
			if th, ok := obj["thread_ts"]; ok && th != obj["ts"] {
				return []string{"thread_reply"}
			}
			return nil
		}},
	"thread_reply": {doc: slackDocs + "reference/methods/conversations.replies", fields: []string{"thread_ts:string", "parent_user_id:string"}},
	"conversations.replies": {doc: slackDocs + "reference/methods/conversations.replies",
		fields: []string{"messages:[]api_message", "has_more:bool", "response_metadata:response_metadata"}},
	"response_metadata":  {doc: slackDocs + "apis/web-api/pagination", fields: []string{"next_cursor:string"}},
	"conversations.info": {doc: slackDocs + "reference/methods/conversations.info", fields: []string{"channel:conversation"}},
	"conversation": {doc: slackDocs + "reference/objects/conversation-object",
		fields: []string{"id:string", "created:int", "is_archived:bool", "is_im:bool", "is_org_shared:bool", "context_team_id:string", "updated:int"},
		variant: func(obj map[string]any) []string {
			if obj["is_im"] == true {
				return []string{"im_conversation"}
			}
			return []string{"channel_conversation"}
		}},
	"im_conversation": {doc: slackDocs + "reference/objects/conversation-object",
		fields: []string{"user:string", "is_user_deleted:bool"}},
	"channel_conversation": {doc: slackDocs + "reference/objects/conversation-object",
		fields: []string{"name:string", "is_channel:bool", "is_group:bool", "is_mpim:bool", "is_private:bool",
			"is_general:bool", "unlinked:int", "name_normalized:string", "is_shared:bool", "is_ext_shared:bool",
			"is_pending_ext_shared:bool", "pending_shared:[]string", "creator:string", "is_member:bool",
			"topic:topic", "purpose:topic", "previous_names:[]string"}},
	"topic":      {doc: slackDocs + "reference/objects/conversation-object", fields: []string{"value:string", "creator:string", "last_set:int"}},
	"users.info": {doc: slackDocs + "reference/methods/users.info", fields: []string{"user:user"}},
	"user": {doc: slackDocs + "reference/objects/user-object",
		fields: []string{"id:string", "team_id:string", "name:string", "deleted:bool", "real_name:string", "tz:string",
			"tz_label:string", "tz_offset:int", "profile:profile", "is_admin:bool", "is_owner:bool", "is_primary_owner:bool",
			"is_restricted:bool", "is_ultra_restricted:bool", "is_bot:bool", "is_app_user:bool", "updated:int"}},
	"profile": {doc: slackDocs + "reference/objects/user-object#profile",
		fields: []string{"real_name:string", "display_name:string", "real_name_normalized:string", "display_name_normalized:string"}},
	"usergroups.list": {doc: slackDocs + "reference/methods/usergroups.list", fields: []string{"usergroups:[]usergroup"}},
	"usergroup": {doc: slackDocs + "reference/methods/usergroups.list",
		fields: []string{"id:string", "team_id:string", "is_usergroup:bool", "name:string", "description:string", "handle:string",
			"is_external:bool", "date_create:int", "date_update:int", "date_delete:int", "auto_type:?string",
			"created_by:string", "updated_by:string", "deleted_by:?string", "prefs:usergroup_prefs", "user_count:any", "users?:[]string"}},
	"usergroup_prefs":       {doc: slackDocs + "reference/methods/usergroups.list", fields: []string{"channels:[]string", "groups:[]string"}},
	"usergroups.users.list": {doc: slackDocs + "reference/methods/usergroups.users.list", fields: []string{"users:[]string"}},
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
