package main

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/adapters/discord"
	"github.com/flowbridge/flowbridge/adapters/slack"
	"github.com/flowbridge/flowbridge/bridge"
)

// Compile-time checks that the adapters fit what serve runs, and that reload
// finds the Discord adapter's command sync (it looks for it by interface).
var (
	_ adapter       = (*slack.Adapter)(nil)
	_ adapter       = (*discord.Adapter)(nil)
	_ commandSyncer = (*discord.Adapter)(nil)
)

// commandSyncer is an adapter whose platform registers commands from the
// catalog; reload calls it when flows change.
type commandSyncer interface {
	SyncCommands(ctx context.Context) error
}

// platformAdapters builds the Slack and Discord adapters the config enables.
func platformAdapters(cfg *Config, b *bridge.Bridge, log *zap.Logger) ([]namedAdapter, error) {
	var out []namedAdapter
	if cfg.Slack.Enabled {
		a, err := slack.New(cfg.Slack, b, log.Named("slack"))
		if err != nil {
			return nil, fmt.Errorf("slack: %w", err)
		}
		out = append(out, namedAdapter{"slack", a})
	}
	if cfg.Discord.Enabled {
		a, err := discord.New(cfg.Discord, b, log.Named("discord"))
		if err != nil {
			return nil, fmt.Errorf("discord: %w", err)
		}
		out = append(out, namedAdapter{"discord", a})
	}
	return out, nil
}

// checkPlatforms validates the enabled platforms' sections, and on Discord the
// commands the flows will become, so check-config catches what Discord would
// refuse at start-up.
func checkPlatforms(cfg *Config) error {
	var errs []error
	if cfg.Slack.Enabled {
		errs = append(errs, cfg.Slack.Validate())
	}
	if cfg.Discord.Enabled {
		errs = append(errs, cfg.Discord.Validate())
		flows, _ := cfg.catalog()
		if err := discord.ValidateCommands(flows); err != nil {
			errs = append(errs, fmt.Errorf("flows (as Discord commands): %w", err))
		}
	}
	return errors.Join(errs...)
}

func enabledAdapters(cfg *Config) []string {
	var out []string
	if cfg.Console.Enabled {
		out = append(out, "console")
	}
	if cfg.Slack.Enabled {
		mode := cfg.Slack.Mode
		if mode == "" {
			mode = "socket"
		}
		out = append(out, "slack ("+mode+" mode)")
	}
	if cfg.Discord.Enabled {
		out = append(out, "discord")
	}
	if len(out) == 0 {
		out = append(out, "none (enable [console], [slack] or [discord])")
	}
	return out
}

func cmdSlackManifest(env *environment, args []string) error {
	fs := newFlagSet(env, "slack-manifest", "slack-manifest -config FILE [-format yaml|json] [-name NAME]")
	path := configFlag(fs, env)
	format := fs.String("format", "yaml", "yaml or json")
	name := fs.String("name", "flowbridge", "the app's display name")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	flows, _ := cfg.catalog()
	m, err := slack.Manifest(cfg.Slack, flows, *name, *format)
	if err != nil {
		return err
	}
	_, err = env.stdout.Write(m)
	return err
}

func cmdDiscordInvite(env *environment, args []string) error {
	fs := newFlagSet(env, "discord-invite", "discord-invite -config FILE [-guild ID]")
	path := configFlag(fs, env)
	guild := fs.String("guild", "", "preselect this server in the invite dialog")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	if cfg.Discord.ApplicationID == "" {
		return errors.New("discord.application_id: required to build the invite URL")
	}
	fmt.Fprintln(env.stdout, discord.InviteURL(cfg.Discord.ApplicationID, *guild))
	return nil
}
