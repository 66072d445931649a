// Package slack connects flowbridge to Slack over Socket Mode or the HTTP Events API.
package slack
