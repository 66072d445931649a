package slack

import "strings"

// baseScopes are the bot scopes every configuration needs.
var baseScopes = []string{
	"app_mentions:read", "channels:history", "chat:write", "commands",
	"groups:history", "im:history", "mpim:history", "users:read",
}

// AgentSessionEvents are the bot events of Slack's agent sessions an
// agent_view app subscribes to: a user pressed a session's Stop button, or
// renamed the session. Agent sessions need no scope beyond chat:write and the
// assistant:write that declaring the app an agent (features.agent_view) adds.
var AgentSessionEvents = []string{"agent_session_stopped", "agent_session_title_changed"}

// Scopes returns the bot scopes the configuration needs, those of the
// features it turns on included, in the order the manifest lists them.
func Scopes(cfg Config) []string {
	scopes := append([]string(nil), baseScopes...)
	if cfg.WorkingIndicator == IndicatorReaction {
		scopes = append(scopes, "reactions:write")
	}
	if cfg.UserGroups {
		scopes = append(scopes, "usergroups:read")
	}
	if cfg.Files {
		scopes = append(scopes, FileScopes...)
	}
	if cfg.Assistant || cfg.AgentView {
		scopes = append(scopes, AssistantScope)
	}
	return scopes
}

// Requirements says, for each feature the configuration turns on beyond
// the basics, what the Slack app must have for it: the scopes, features and
// events to add before reinstalling the app. check-config prints them
// (slack.files' own note is check-config's). Flow forms, on by default,
// are among the basics: they need no scope, and the manifest made for the
// configuration carries their shortcut.
func Requirements(cfg Config) []string {
	var out []string
	if cfg.WorkingIndicator == IndicatorReaction {
		out = append(out, "slack.working_indicator = \"reaction\" needs the reactions:write scope")
	}
	if cfg.UserGroups {
		out = append(out, "slack.user_groups needs the usergroups:read scope")
	}
	if cfg.Assistant {
		out = append(out, "slack.assistant needs the "+AssistantScope+" scope, the Agents & AI Apps feature (assistant_view) "+
			"and the assistant_thread_started and assistant_thread_context_changed bot events")
	}
	if cfg.AgentView {
		out = append(out, "slack.agent_view needs the "+AssistantScope+" scope, the Agent messaging experience (features.agent_view, "+
			"which declares the app an agent, and App Home's Messages tab) and the app_home_opened, app_context_changed and message.im bot events, "+
			"and, for agent sessions, the "+strings.Join(AgentSessionEvents, " and ")+" bot events (without agent_session_stopped, users see a spinner they cannot stop)")
	}
	if cfg.Files {
		out = append(out, "slack.files needs the "+strings.Join(FileScopes, ", ")+" scopes")
	}
	return out
}
