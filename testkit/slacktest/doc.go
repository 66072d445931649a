// Package slacktest provides a fake Slack (Web API, Socket Mode, response URLs and request signing) that the real slack-go client talks to over loopback.
package slacktest
