package main

import (
	"github.com/flowbridge/flowbridge/adapters/slack"
	"github.com/flowbridge/flowbridge/bridge"
)

func (c *Config) fileLimits() bridge.FileLimits {
	return bridge.FileLimits{MaxFiles: c.Bridge.MaxFiles, MaxFileBytes: int64(c.Bridge.MaxFileBytes), ReplyOver: c.Bridge.FileReplyOver}
}

// needs lists, for check-config, what the features turned on need of each
// platform beyond the basics: the Slack scopes to add to the app (and
// reinstall it) and the Discord permissions and install links.
func (c *Config) needs() []string {
	var out []string
	if c.Slack.Enabled {
		for _, r := range slack.Requirements(c.Slack) {
			out = append(out, r+"; regenerate the manifest (flowbridge slack-manifest) and update the app")
		}
	}
	if c.Discord.Enabled && c.Discord.UserInstall {
		out = append(out, "discord.user_install: turn on User Install in the Developer Portal (Installation → Installation Contexts) and share the second link discord-invite prints; a user install adds no bot and needs no permission")
	}
	if c.Discord.Enabled && c.Discord.Files {
		out = append(out, "discord.files: the bot needs the Attach Files permission where it posts in channels (discord-invite asks for it; an existing install: grant it to the bot's role)")
	}
	return out
}
