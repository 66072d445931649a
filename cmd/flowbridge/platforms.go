package main

import (
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// platformAdapters builds the Slack and Discord adapters the config enables.
func platformAdapters(cfg *Config, b *bridge.Bridge, log *zap.Logger) ([]namedAdapter, error) {
	return nil, nil
}

func checkPlatforms(cfg *Config) error { return nil }

func enabledAdapters(cfg *Config) []string {
	var out []string
	if cfg.Console.Enabled {
		out = append(out, "console")
	}
	if len(out) == 0 {
		out = append(out, "none")
	}
	return out
}

func cmdSlackManifest(env *environment, args []string) error {
	return &usageError{"slack-manifest: the Slack adapter is not wired yet"}
}

func cmdDiscordInvite(env *environment, args []string) error {
	return &usageError{"discord-invite: the Discord adapter is not wired yet"}
}
