package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"

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

	// The capabilities the adapters find on their core by type assertion:
	// claimed here, so that a method renamed on either side fails the
	// build instead of quietly turning Discord's RESUME and catch-up or
	// Slack's flow forms off.
	_ discord.ResumeCore  = (*bridge.Bridge)(nil)
	_ discord.CatchUpCore = (*bridge.Bridge)(nil)
	_ slack.FormCore      = (*bridge.Bridge)(nil)
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
		a, err := slack.New(cfg.Slack, b, log)
		if err != nil {
			return nil, fmt.Errorf("slack: %w", err)
		}
		out = append(out, namedAdapter{"slack", a})
	}
	if cfg.Discord.Enabled {
		// Validate keeps catch_up_age within dedupe_ttl: catch-up must
		// not read back past what the inbox remembers as answered.
		a, err := discord.New(cfg.Discord, b, log)
		if err != nil {
			return nil, fmt.Errorf("discord: %w", err)
		}
		out = append(out, namedAdapter{"discord", a})
	}
	return out, nil
}

// checkPlatforms validates the enabled platforms' sections as their New
// does, and on Discord the commands the flows will become, so check-config
// catches what Discord would refuse at start-up. Flows and parameters whose
// names validateFlows already refused are left out of the Discord check, so
// one mistake is reported once.
func checkPlatforms(cfg *Config) error {
	var errs []error
	if cfg.Slack.Enabled {
		errs = append(errs, cfg.Slack.Validate())
	}
	if cfg.Discord.Enabled {
		errs = append(errs, cfg.Discord.Validate())
		if err := discord.ValidateCommands(namedFlows(cfg)); err != nil {
			errs = append(errs, fmt.Errorf("on Discord, %w", err))
		}
	}
	return errors.Join(errs...)
}

// namedFlows is the catalog's flows less those, and those parameters, whose
// names are missing, malformed or taken.
func namedFlows(cfg *Config) []bridge.Flow {
	all, _ := cfg.catalog()
	var out []bridge.Flow
	seen := map[string]bool{}
	for _, f := range all {
		if f.Name == "" || bridge.NameProblem(f.Name) != "" || f.Name == "help" || seen[f.Name] {
			seen[f.Name] = true
			continue
		}
		seen[f.Name] = true
		params := f.Params[:0:0]
		seenParam := map[string]bool{}
		for _, p := range f.Params {
			if p.Name != "" && bridge.ParamProblem(p.Name) == "" && !seenParam[p.Name] {
				params = append(params, p)
			}
			seenParam[p.Name] = true
		}
		f.Params = params
		out = append(out, f)
	}
	return out
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
	return out
}

func cmdSlackManifest(env *environment, args []string) error {
	fs := newFlagSet(env, "slack-manifest", "slack-manifest -config FILE [-format yaml|json] [-name NAME] [-o FILE]")
	path := configFlag(fs, env)
	format := fs.String("format", "yaml", "yaml or json")
	name := fs.String("name", "flowbridge", "the app's display name")
	out := fs.String("o", "", "write the manifest to this file, only if it is made (default: standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// The manifest comes from the [slack] settings, the flows' names and
	// the default agent's suggested prompts;
	// no token is needed, since the app that issues them does not exist yet.
	cfg, err := loadSections(*path, env.getenv, func(c *Config) error {
		var ps problems
		checkBounds(&ps, reflect.ValueOf(c.Flows), "flows")
		return errors.Join(c.validateFlows(), c.Slack.ValidateManifest(), errors.Join(ps...))
	}, "slack", "flows", "agents", "console")
	if err != nil {
		return err
	}
	flows, agents := cfg.catalog()
	m, err := slack.Manifest(cfg.Slack, flows, agents, *name, *format)
	if err != nil {
		return err
	}
	return writeOutput(env, *out, m)
}

func cmdDiscordInvite(env *environment, args []string) error {
	fs := newFlagSet(env, "discord-invite", "discord-invite -config FILE [-guild ID] [-o FILE]")
	path := configFlag(fs, env)
	guild := fs.String("guild", "", "preselect this server in the invite dialog")
	out := fs.String("o", "", "write the URL to this file, only if it is made (default: standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// The invite needs the application ID and start_threads, nothing secret.
	cfg, err := loadSections(*path, env.getenv, func(c *Config) error { return c.Discord.ValidateInvite() }, "discord")
	if err != nil {
		return err
	}
	u, err := discord.InviteURL(cfg.Discord, *guild)
	if err != nil {
		return err
	}
	if cfg.Discord.UserInstall {
		// The second link adds the app to a user's account.
		user, err := discord.UserInstallURL(cfg.Discord)
		if err != nil {
			return err
		}
		u += "\n" + user
	}
	return writeOutput(env, *out, []byte(u+"\n"))
}

// writeOutput writes data to standard output, or to the file path whole or
// not at all, so a failed command never leaves an empty or partial file.
func writeOutput(env *environment, path string, data []byte) error {
	if path == "" || path == "-" {
		_, err := env.stdout.Write(data)
		return err
	}
	if err := writeFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
