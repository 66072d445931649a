package main

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/adapters/discord"
	"github.com/flowbridge/flowbridge/adapters/slack"
	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/schedule"
)

// ScheduleConfig is one [[schedules]] entry: a flow run with fixed
// parameters on a cron expression, its result posted to a channel.
type ScheduleConfig struct {
	Name     string            `toml:"name"`
	Flow     string            `toml:"flow"`
	Params   map[string]string `toml:"params"`
	Cron     string            `toml:"cron"`
	Timezone string            `toml:"timezone"`
	Platform string            `toml:"platform"`
	Channel  string            `toml:"channel"`
}

var (
	slackChannelID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
	// discordSnowflake is any Discord ID as Discord makes them (a
	// snowflake: 17 to 20 digits), of a channel or a server.
	discordSnowflake = regexp.MustCompile(`^[0-9]{17,20}$`)
)

// checkSchedules reports, per entry, a bad cron expression or time zone, an
// unknown flow, parameters the flow does not take or lacks, and a platform
// that is not enabled.
func (c *Config) checkSchedules(ps *problems) {
	flows := make(map[string]FlowConfig, len(c.Flows))
	twice := map[string]bool{} // reported on the flow: which one is meant is anyone's guess
	for _, f := range c.Flows {
		if _, ok := flows[f.Name]; ok {
			twice[f.Name] = true
		}
		flows[f.Name] = f
	}
	seen := make(map[string]bool, len(c.Schedules))
	for i, s := range c.Schedules {
		key := func(k string) string { return fmt.Sprintf("schedules[%d].%s", i, k) }
		if msg := bridge.NameProblem(s.Name); s.Name == "" {
			ps.add(key("name"), "required")
		} else if msg != "" {
			ps.add(key("name"), "%q %s", s.Name, msg)
		} else if seen[s.Name] {
			ps.add(key("name"), "%q is used by an earlier schedule", s.Name)
		}
		seen[s.Name] = true
		tz := s.Timezone
		if _, err := time.LoadLocation(tz); tz != "" && err != nil {
			ps.add(key("timezone"), "%q is not a time zone: give an IANA name such as \"Europe/Berlin\", or \"\" for the local time", tz)
			tz = "" // the expression is still checked
		}
		if _, err := schedule.Parse(s.Cron, tz); s.Cron == "" {
			ps.add(key("cron"), "required: a cron expression such as \"30 6 * * 1-5\" or \"@daily\"")
		} else if err != nil {
			ps.add(key("cron"), "%q is not a cron expression here: %v", s.Cron, err)
		}
		f, ok := flows[s.Flow]
		switch {
		case s.Flow == "":
			ps.add(key("flow"), "required")
		case !ok:
			ps.add(key("flow"), "%q is not a configured flow", s.Flow)
		case twice[s.Flow]:
		default:
			checkScheduleParams(ps, key("params"), f, s.Params)
		}
		switch s.Platform {
		case "slack":
			if !slackChannelID.MatchString(s.Channel) {
				ps.add(key("channel"), "%q is not a Slack channel ID (C0123ABC)", s.Channel)
			}
		case "discord":
			if !discordSnowflake.MatchString(s.Channel) {
				ps.add(key("channel"), "%q is not a Discord channel ID (digits)", s.Channel)
			}
		case "":
			ps.add(key("platform"), "required: slack or discord")
		default:
			ps.add(key("platform"), "%q: schedules post to slack or discord", s.Platform)
		}
	}
}

func checkScheduleParams(ps *problems, key string, f FlowConfig, params map[string]string) {
	known := make(map[string]ParamConfig, len(f.Params))
	for _, p := range f.Params {
		known[p.Name] = p
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		p, ok := known[k]
		if !ok {
			ps.add(key, "flow %s has no parameter %q", f.Name, k)
			continue
		}
		if len(p.Choices) > 0 && !slices.Contains(p.Choices, params[k]) {
			ps.add(key+"."+k, "%q is not one of %s", params[k], strings.Join(p.Choices, ", "))
		}
	}
	for _, p := range f.Params {
		if v, ok := params[p.Name]; p.Required && (!ok || v == "") {
			ps.add(key, "flow %s needs %s", f.Name, p.Name)
		}
	}
}

// scheduleWarnings names the schedules whose platform is not enabled: they
// do not run (like a section switched off, which needs nothing).
func (c *Config) scheduleWarnings() []string {
	var w []string
	for i, s := range c.Schedules {
		if s.Platform == "slack" && !c.Slack.Enabled || s.Platform == "discord" && !c.Discord.Enabled {
			w = append(w, fmt.Sprintf("schedules[%d] (%s): %s is not enabled, so this schedule does not run", i, s.Name, s.Platform))
		}
	}
	return w
}

// schedules converts the entries whose platform is enabled, for the core
// and the scheduler.
func (c *Config) schedules() []bridge.Scheduled {
	out := make([]bridge.Scheduled, 0, len(c.Schedules))
	for _, s := range c.Schedules {
		if s.Platform == "slack" && !c.Slack.Enabled || s.Platform == "discord" && !c.Discord.Enabled {
			continue
		}
		out = append(out, bridge.Scheduled{Name: s.Name, Flow: s.Flow, Params: s.Params, Cron: s.Cron, Timezone: s.Timezone, Platform: s.Platform, Channel: s.Channel})
	}
	return out
}

// printSchedules is check-config's list of schedules, with what each needs
// of its platform.
func printSchedules(w io.Writer, cfg *Config) {
	if len(cfg.Schedules) == 0 {
		return
	}
	fmt.Fprintf(w, "  schedules:\n")
	for _, s := range cfg.Schedules {
		tz := s.Timezone
		if tz == "" {
			tz = "local time"
		}
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(s.Params)) {
			ps = append(ps, k+"="+s.Params[k])
		}
		fmt.Fprintf(w, "    %s: flow %s %s at %q (%s) -> %s channel %s\n", s.Name, s.Flow, strings.Join(ps, " "), s.Cron, tz, s.Platform, s.Channel)
	}
	if slices.ContainsFunc(cfg.Schedules, func(s ScheduleConfig) bool { return s.Platform == "slack" }) {
		fmt.Fprintln(w, "  note: Slack schedules post with chat:write (in the manifest): invite the bot to each schedule's channel (/invite @bot)")
	}
	if slices.ContainsFunc(cfg.Schedules, func(s ScheduleConfig) bool { return s.Platform == "discord" }) {
		fmt.Fprintln(w, "  note: Discord schedules need View Channel and Send Messages in each schedule's channel (in the invite)")
	}
}

// newScheduler builds the scheduler of the configured schedules, with the
// adapters of their platforms as targets, and gives the core their list for
// /flow help; nil when there are none. It starts nothing.
func newScheduler(cfg *Config, b *bridge.Bridge, st store.Schedules, adapters []namedAdapter, log *zap.Logger) (*schedule.Scheduler, error) {
	list := cfg.schedules()
	b.SetSchedules(list)
	if len(list) == 0 {
		return nil, nil
	}
	targets := make(map[string]schedule.Target)
	for _, a := range adapters {
		if t, ok := a.adapter.(schedule.Target); ok {
			targets[a.name] = t
		}
	}
	return schedule.New(list, b, st, targets, log.Named("schedule"))
}

// The scheduler finds these by type assertion; a lost method must fail the
// build, not leave schedules without a target.
var (
	_ schedule.Target = (*slack.Adapter)(nil)
	_ schedule.Target = (*discord.Adapter)(nil)
	_ schedule.Core   = (*bridge.Bridge)(nil)
)
