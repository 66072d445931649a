package slacktest_test

import (
	"github.com/flowbridge/flowbridge/testkit/docshape"
)

// shape is a documented payload: see docshape for how its fields are written.
type shape = docshape.Shape

const slackDocs = "https://docs.slack.dev/"

// slackShapes is what Slack's documentation says each payload carries, from the examples on
// each page (the pages list few fields as optional). Fields Slack sends on every event
// callback today (context_team_id, context_enterprise_id) are required too.
var slackShapes = map[string]shape{
	// Socket Mode frames: apis/events-api/using-socket-mode.
	"hello": {Doc: slackDocs + "apis/events-api/using-socket-mode#connect",
		Fields: []string{"type:string", "num_connections:int", "debug_info:hello_debug_info", "connection_info:connection_info"}},
	"hello_debug_info": {Doc: slackDocs + "apis/events-api/using-socket-mode#connect",
		Fields: []string{"host:string", "build_number:int", "approximate_connection_time:int"}},
	"connection_info": {Doc: slackDocs + "apis/events-api/using-socket-mode#connect", Fields: []string{"app_id:string"}},
	"envelope": {Doc: slackDocs + "apis/events-api/using-socket-mode#events",
		Fields: []string{"envelope_id:string", "type:string", "payload:object", "accepts_response_payload:bool"},
		Variant: func(obj map[string]any) []string {
			if obj["type"] == "events_api" {
				return []string{"events_api_envelope"}
			}
			return nil
		}},
	"events_api_envelope": {Doc: slackDocs + "apis/events-api/using-socket-mode#events",
		Fields: []string{"retry_attempt:int", "retry_reason:string"}},
	"disconnect": {Doc: slackDocs + "apis/events-api/using-socket-mode#disconnect",
		Fields: []string{"type:string", "reason:string", "debug_info:disconnect_debug_info"}},
	"disconnect_debug_info": {Doc: slackDocs + "apis/events-api/using-socket-mode#disconnect", Fields: []string{"host:string"}},

	// The Events API wrapper: reference/objects/event-object, apis/events-api#callback-field.
	"event_callback": {Doc: slackDocs + "reference/objects/event-object",
		Fields: []string{"token:string", "team_id:string", "api_app_id:string", "event:event", "type:string",
			"event_id:string", "event_time:int", "authorizations:[]authorization", "event_context:string",
			"is_ext_shared_channel:bool", "context_team_id:string", "context_enterprise_id:?string"}},
	"authorization": {Doc: slackDocs + "reference/objects/event-object",
		Fields: []string{"enterprise_id:?string", "team_id:string", "user_id:string", "is_bot:bool", "is_enterprise_install:bool"}},
	"event": {Doc: slackDocs + "reference/objects/event-object",
		Fields: []string{"type:string", "event_ts:string"},
		Variant: func(obj map[string]any) []string {
			switch obj["type"] {
			case "message":
				return []string{"message_event"}
			case "app_mention":
				return []string{"app_mention_event"}
			case "assistant_thread_started", "assistant_thread_context_changed":
				return []string{"assistant_thread_event"}
			}
			return nil
		}},
	"message_event": {Doc: slackDocs + "reference/events/message",
		Fields: []string{"channel:string", "channel_type:string", "ts:string"},
		Variant: func(obj map[string]any) []string {
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
	"user_message": {Doc: slackDocs + "reference/events/message",
		Fields: []string{"user:string", "text:string"}},
	"subtype_message": {Doc: slackDocs + "reference/events/message#subtypes",
		Fields: []string{"subtype:string", "text:string"}},
	"message_changed": {Doc: slackDocs + "reference/events/message/message_changed",
		Fields: []string{"hidden:bool", "message:changed_message", "previous_message:object"}},
	"changed_message": {Doc: slackDocs + "reference/events/message/message_changed",
		Fields: []string{"type:string", "text:string", "ts:string", "edited:object"}},
	"message_deleted": {Doc: slackDocs + "reference/events/message/message_deleted",
		Fields: []string{"hidden:bool", "deleted_ts:string", "previous_message:object"}},
	"app_mention_event": {Doc: slackDocs + "reference/events/app_mention",
		Fields: []string{"user:string", "text:string", "ts:string", "channel:string"}},
	"assistant_thread_event": {Doc: slackDocs + "reference/events/assistant_thread_started",
		Fields: []string{"assistant_thread:assistant_thread"}},
	"assistant_thread": {Doc: slackDocs + "reference/events/assistant_thread_started",
		Fields: []string{"user_id:string", "context:assistant_context", "channel_id:string", "thread_ts:string"}},
	// An empty object when the user views no channel.
	"assistant_context": {Doc: slackDocs + "reference/events/assistant_thread_context_changed",
		Fields: []string{"channel_id?:string", "team_id?:string", "enterprise_id?:?string"}},

	// interactivity/implementing-slash-commands#app_command_handling
	"slash_command": {Doc: slackDocs + "interactivity/implementing-slash-commands#app_command_handling",
		Fields: []string{"token:string", "team_id:string", "team_domain:string", "channel_id:string", "channel_name:string",
			"user_id:string", "user_name:string", "command:string", "text:string", "api_app_id:string",
			"is_enterprise_install:string", "response_url:string", "trigger_id:string"}},
	"block_actions": {Doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		Fields: []string{"type:string", "user:action_user", "api_app_id:string", "token:string", "container:container",
			"trigger_id:string", "team:action_team", "enterprise:?object", "is_enterprise_install:bool",
			"channel:action_channel", "state:object", "response_url:string", "actions:[]action", "message?:api_message"}},
	"action_user": {Doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		Fields: []string{"id:string", "username:string", "team_id:string"}},
	"container": {Doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		Fields: []string{"type:string", "message_ts:string", "channel_id:string", "is_ephemeral:bool"}},
	"action_team":    {Doc: slackDocs + "reference/interaction-payloads/block_actions-payload", Fields: []string{"id:string", "domain:string"}},
	"action_channel": {Doc: slackDocs + "reference/interaction-payloads/block_actions-payload", Fields: []string{"id:string", "name:string"}},
	"action": {Doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		Fields: []string{"action_id:string", "block_id:string", "text:object", "value:string", "type:string", "action_ts:string"}},
	"view_block_actions": {Doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		Fields: []string{"type:string", "user:action_user", "api_app_id:string", "token:string", "container:view_container",
			"trigger_id:string", "team:action_team", "enterprise:?object", "is_enterprise_install:bool", "view:view", "actions:[]view_action"}},
	"view_container": {Doc: slackDocs + "reference/interaction-payloads/block_actions-payload", Fields: []string{"type:string", "view_id:string"}},
	"view_action": {Doc: slackDocs + "reference/interaction-payloads/block_actions-payload",
		Fields: []string{"type:string", "action_id:string", "block_id:string", "selected_option:?object", "action_ts:string"}},
	"view_submission": {Doc: slackDocs + "reference/interaction-payloads/view-interactions-payload#view_submission",
		Fields: []string{"type:string", "team:action_team", "user:action_user", "api_app_id:string", "token:string", "trigger_id:string",
			"view:view", "response_urls:[]object", "is_enterprise_install:bool", "enterprise:?object"}},
	"view": {Doc: slackDocs + "reference/interaction-payloads/view-interactions-payload#view_submission",
		Fields: []string{"id:string", "team_id:string", "type:string", "title:object", "blocks:[]object", "private_metadata:string",
			"callback_id:string", "state:object", "hash:string", "clear_on_close:bool", "notify_on_close:bool", "root_view_id:string",
			"previous_view_id:?string", "app_id:string", "external_id:string", "bot_id:string", "app_installed_team_id:string"}},
	"message_action": {Doc: slackDocs + "reference/interaction-payloads/shortcuts-interaction-payload#message_actions",
		Fields: []string{"type:string", "token:string", "action_ts:string", "team:action_team", "user:action_user", "channel:action_channel",
			"is_enterprise_install:bool", "enterprise:?object", "callback_id:string", "trigger_id:string", "response_url:string",
			"message_ts:string", "message:object"}},
	"url_verification": {Doc: slackDocs + "reference/events/url_verification",
		Fields: []string{"token:string", "challenge:string", "type:string"}},

	// Web API answers: every one has ok, a refusal error (apis/web-api#evaluating-responses).
	"api": {Doc: slackDocs + "apis/web-api/#evaluating-responses", Fields: []string{"ok:bool"},
		Variant: func(obj map[string]any) []string {
			if obj["ok"] == false {
				return []string{"api_error"}
			}
			return nil
		}},
	"api_error":             {Doc: slackDocs + "apis/web-api/#evaluating-responses", Fields: []string{"error:string", "response_metadata?:object"}},
	"apps.connections.open": {Doc: slackDocs + "reference/methods/apps.connections.open", Fields: []string{"url:string"}},
	"auth.test": {Doc: slackDocs + "reference/methods/auth.test",
		Fields: []string{"url:string", "team:string", "user:string", "team_id:string", "user_id:string", "bot_id:string", "is_enterprise_install:bool"}},
	"chat.postMessage":   {Doc: slackDocs + "reference/methods/chat.postMessage", Fields: []string{"channel:string", "ts:string", "message:api_message"}},
	"chat.update":        {Doc: slackDocs + "reference/methods/chat.update", Fields: []string{"channel:string", "ts:string", "text:string", "message:api_message"}},
	"chat.delete":        {Doc: slackDocs + "reference/methods/chat.delete", Fields: []string{"channel:string", "ts:string"}},
	"chat.postEphemeral": {Doc: slackDocs + "reference/methods/chat.postEphemeral", Fields: []string{"message_ts:string"}},
	"api_message": {Doc: slackDocs + "reference/methods/chat.postMessage",
		Fields: []string{"type:string", "text:string", "ts:string"},
		Variant: func(obj map[string]any) []string {
			if th, ok := obj["thread_ts"]; ok && th != obj["ts"] {
				return []string{"thread_reply"}
			}
			return nil
		}},
	"thread_reply": {Doc: slackDocs + "reference/methods/conversations.replies", Fields: []string{"thread_ts:string", "parent_user_id:string"}},
	"conversations.replies": {Doc: slackDocs + "reference/methods/conversations.replies",
		Fields: []string{"messages:[]api_message", "has_more:bool", "response_metadata:response_metadata"}},
	"response_metadata":  {Doc: slackDocs + "apis/web-api/pagination", Fields: []string{"next_cursor:string"}},
	"conversations.info": {Doc: slackDocs + "reference/methods/conversations.info", Fields: []string{"channel:conversation"}},
	"conversation": {Doc: slackDocs + "reference/objects/conversation-object",
		Fields: []string{"id:string", "created:int", "is_archived:bool", "is_im:bool", "is_org_shared:bool", "context_team_id:string", "updated:int"},
		Variant: func(obj map[string]any) []string {
			if obj["is_im"] == true {
				return []string{"im_conversation"}
			}
			return []string{"channel_conversation"}
		}},
	"im_conversation": {Doc: slackDocs + "reference/objects/conversation-object",
		Fields: []string{"user:string", "is_user_deleted:bool"}},
	"channel_conversation": {Doc: slackDocs + "reference/objects/conversation-object",
		Fields: []string{"name:string", "is_channel:bool", "is_group:bool", "is_mpim:bool", "is_private:bool",
			"is_general:bool", "unlinked:int", "name_normalized:string", "is_shared:bool", "is_ext_shared:bool",
			"is_pending_ext_shared:bool", "pending_shared:[]string", "creator:string", "is_member:bool",
			"topic:topic", "purpose:topic", "previous_names:[]string"}},
	"topic":      {Doc: slackDocs + "reference/objects/conversation-object", Fields: []string{"value:string", "creator:string", "last_set:int"}},
	"users.info": {Doc: slackDocs + "reference/methods/users.info", Fields: []string{"user:user"}},
	"user": {Doc: slackDocs + "reference/objects/user-object",
		Fields: []string{"id:string", "team_id:string", "name:string", "deleted:bool", "real_name:string", "tz:string",
			"tz_label:string", "tz_offset:int", "profile:profile", "is_admin:bool", "is_owner:bool", "is_primary_owner:bool",
			"is_restricted:bool", "is_ultra_restricted:bool", "is_bot:bool", "is_app_user:bool", "updated:int"}},
	"profile": {Doc: slackDocs + "reference/objects/user-object#profile",
		Fields: []string{"real_name:string", "display_name:string", "real_name_normalized:string", "display_name_normalized:string"}},
	"usergroups.list": {Doc: slackDocs + "reference/methods/usergroups.list", Fields: []string{"usergroups:[]usergroup"}},
	"usergroup": {Doc: slackDocs + "reference/methods/usergroups.list",
		Fields: []string{"id:string", "team_id:string", "is_usergroup:bool", "name:string", "description:string", "handle:string",
			"is_external:bool", "date_create:int", "date_update:int", "date_delete:int", "auto_type:?string",
			"created_by:string", "updated_by:string", "deleted_by:?string", "prefs:usergroup_prefs", "user_count:any", "users?:[]string"}},
	"usergroup_prefs":       {Doc: slackDocs + "reference/methods/usergroups.list", Fields: []string{"channels:[]string", "groups:[]string"}},
	"usergroups.users.list": {Doc: slackDocs + "reference/methods/usergroups.users.list", Fields: []string{"users:[]string"}},

	"views.open":   {Doc: slackDocs + "reference/methods/views.open", Fields: []string{"view:view"}},
	"views.update": {Doc: slackDocs + "reference/methods/views.update", Fields: []string{"view:view"}},
	// The assistant thread methods answer ok and nothing more.
	"assistant.threads.setStatus":           {Doc: slackDocs + "reference/methods/assistant.threads.setStatus"},
	"assistant.threads.setTitle":            {Doc: slackDocs + "reference/methods/assistant.threads.setTitle"},
	"assistant.threads.setSuggestedPrompts": {Doc: slackDocs + "reference/methods/assistant.threads.setSuggestedPrompts"},
}
