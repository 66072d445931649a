package main

import (
	"github.com/flowbridge/flowbridge/adapters/slack"
	"github.com/flowbridge/flowbridge/bridge"
)

// The allowed ranges of the file keys. A message brings at most max_files
// files of max_file_bytes each to the agent; a reply longer than
// file_reply_over characters is posted as a file where the platform's files
// setting is on.
var (
	maxFilesRange      = intRange{min: 1, max: 20}
	maxFileBytesRange  = intRange{min: 1, max: 10000000}
	fileReplyOverRange = intRange{min: 500, max: 1000000}
)

func (c *Config) checkFiles(ps *problems) {
	b := c.Bridge
	ps.int("bridge.max_files", b.MaxFiles, maxFilesRange)
	ps.int("bridge.max_file_bytes", b.MaxFileBytes, maxFileBytesRange)
	if b.FileReplyOver != 0 {
		if r := fileReplyOverRange; b.FileReplyOver < r.min || b.FileReplyOver > r.max {
			ps.add("bridge.file_reply_over", "%d is out of range: allowed 0 (never) or %s", b.FileReplyOver, r)
		}
	}
}

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
