// Package slacktest provides a fake Slack (Web API, Socket Mode, response URLs and request signing) that the real slack-go client talks to over loopback.
//
// Agent sessions follow Slack's word: agents.sessions.setStatus takes only
// active, processing, suspended and closed, answers not_authorized unless
// Options.Agent declares the app an agent, and warns
// missing_agent_session_stopped_event_subscription when Options.BotEvents
// lacks agent_session_stopped; SessionStatuses and Session read what the app
// set. PressStop sends agent_session_stopped only while a session is
// processing (Slack shows no Stop button otherwise), RenameSession sends
// agent_session_title_changed, and their Body forms are the HTTP-mode POSTs.
package slacktest
