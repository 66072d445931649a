package discord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Discord's limits for chat-input commands (application-commands docs).
const (
	maxSubcommands   = 25
	maxOptions       = 25
	maxChoices       = 25
	maxDescription   = 100
	maxChoiceLength  = 100
	maxCommandLength = 4000 // half of Discord's 8,000 total, since names and values are counted differently across docs versions
)

// commandName is Discord's rule for chat-input command and option names; they
// must also be lower case where a lower-case form exists.
var commandName = regexp.MustCompile(`^[-_\p{L}\p{N}]{1,32}$`)

// Agent subcommands of /agent.
const (
	agentStatus = "status"
	agentReset  = "reset"
	agentUse    = "use"
	agentShare  = "share"
	agentHelp   = "help"
)

// Commands returns the application commands flowbridge registers for these
// flows and agents: /flow with a subcommand per flow (left out without
// flows) and /agent. It never fails; ValidateCommands reports what Discord
// would refuse.
func Commands(flows []bridge.Flow, agents []bridge.Agent) []*discordgo.ApplicationCommand {
	var cmds []*discordgo.ApplicationCommand
	if len(flows) > 0 {
		flow := &discordgo.ApplicationCommand{
			Type:        discordgo.ChatApplicationCommand,
			Name:        bridge.CommandFlow,
			Description: "Run an AI flow",
		}
		for _, f := range flows[:min(len(flows), maxSubcommands)] {
			flow.Options = append(flow.Options, flowSubcommand(f))
		}
		cmds = append(cmds, flow)
	}
	agentName := &discordgo.ApplicationCommandOption{
		Type:        discordgo.ApplicationCommandOptionString,
		Name:        "name",
		Description: "The agent to talk to in this conversation",
		Required:    true,
	}
	if len(agents) > 0 && len(agents) <= maxChoices {
		for _, ag := range agents {
			agentName.Choices = append(agentName.Choices, choice(ag.Name))
		}
	} else if len(agents) > maxChoices {
		agentName.Autocomplete = true
	}
	sub := func(name, desc string, opts ...*discordgo.ApplicationCommandOption) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: name, Description: desc, Options: opts}
	}
	cmds = append(cmds, &discordgo.ApplicationCommand{
		Type:        discordgo.ChatApplicationCommand,
		Name:        bridge.CommandAgent,
		Description: "Talk to the AI agent of this conversation",
		Options: []*discordgo.ApplicationCommandOption{
			sub(agentStatus, "Show this conversation's agent and session"),
			sub(agentReset, "Forget this conversation's session; the next message starts a new one"),
			sub(agentUse, "Switch this conversation to another agent", agentName),
			sub(agentShare, "Post the agent's latest reply of this conversation to the channel"),
			sub(agentHelp, "Explain how to use the bridge"),
		},
	})
	return cmds
}

func flowSubcommand(f bridge.Flow) *discordgo.ApplicationCommandOption {
	desc := f.Description
	if desc == "" {
		desc = "Run the " + f.Name + " flow"
	}
	sub := &discordgo.ApplicationCommandOption{
		Type:        discordgo.ApplicationCommandOptionSubCommand,
		Name:        f.Name,
		Description: truncate.Bytes(desc, maxDescription),
	}
	// Discord requires the required options first; the order is otherwise the config's.
	params := slices.Clone(f.Params)
	slices.SortStableFunc(params, func(a, b bridge.Param) int {
		if a.Required == b.Required {
			return 0
		}
		if a.Required {
			return -1
		}
		return 1
	})
	for _, p := range params[:min(len(params), maxOptions)] {
		pdesc := p.Description
		if pdesc == "" {
			pdesc = p.Name
		}
		opt := &discordgo.ApplicationCommandOption{
			Type:        discordgo.ApplicationCommandOptionString,
			Name:        p.Name,
			Description: truncate.Bytes(pdesc, maxDescription),
			Required:    p.Required,
		}
		switch {
		case len(p.Choices) > 0 && len(p.Choices) <= maxChoices:
			for _, c := range p.Choices {
				opt.Choices = append(opt.Choices, choice(c))
			}
		case len(p.Choices) > maxChoices || len(p.Suggestions) > 0:
			opt.Autocomplete = true
		}
		sub.Options = append(sub.Options, opt)
	}
	return sub
}

func choice(v string) *discordgo.ApplicationCommandOptionChoice {
	return &discordgo.ApplicationCommandOptionChoice{Name: truncate.Bytes(v, maxChoiceLength), Value: v}
}

// ValidateCommands reports every flow name, parameter, description and
// choice Discord would refuse in the /flow command, so check-config catches
// them before start-up.
func ValidateCommands(flows []bridge.Flow) error {
	var errs []error
	if len(flows) > maxSubcommands {
		errs = append(errs, fmt.Errorf("flows: %d flows, Discord allows at most %d subcommands of /flow", len(flows), maxSubcommands))
	}
	names := make(map[string]bool)
	for _, f := range flows {
		key := "flows." + f.Name
		if err := checkName(f.Name); err != nil {
			errs = append(errs, fmt.Errorf("%s: name: %w", key, err))
		}
		if names[f.Name] {
			errs = append(errs, fmt.Errorf("%s: name: defined twice", key))
		}
		names[f.Name] = true
		if n := utf8.RuneCountInString(f.Description); n > maxDescription {
			errs = append(errs, fmt.Errorf("%s: description: %d characters, Discord allows %d", key, n, maxDescription))
		}
		if len(f.Params) > maxOptions {
			errs = append(errs, fmt.Errorf("%s: %d params, Discord allows at most %d options", key, len(f.Params), maxOptions))
		}
		params := make(map[string]bool)
		for _, p := range f.Params {
			pkey := key + ".params." + p.Name
			if err := checkName(p.Name); err != nil {
				errs = append(errs, fmt.Errorf("%s: name: %w", pkey, err))
			}
			if params[p.Name] {
				errs = append(errs, fmt.Errorf("%s: name: defined twice", pkey))
			}
			params[p.Name] = true
			if n := utf8.RuneCountInString(p.Description); n > maxDescription {
				errs = append(errs, fmt.Errorf("%s: description: %d characters, Discord allows %d", pkey, n, maxDescription))
			}
			for _, list := range []struct {
				name   string
				values []string
			}{{"choices", p.Choices}, {"suggestions", p.Suggestions}} {
				for i, v := range list.values {
					if n := utf8.RuneCountInString(v); n == 0 || n > maxChoiceLength {
						errs = append(errs, fmt.Errorf("%s: %s[%d]: %d characters, Discord allows 1 to %d", pkey, list.name, i, n, maxChoiceLength))
					}
				}
			}
		}
	}
	if len(errs) == 0 {
		if n := commandLength(Commands(flows, nil)[0]); n > maxCommandLength {
			errs = append(errs, fmt.Errorf("flows: the /flow command totals %d characters of names, descriptions and choices, keep it within %d", n, maxCommandLength))
		}
	}
	return errors.Join(errs...)
}

func checkName(name string) error {
	switch {
	case !commandName.MatchString(name):
		return fmt.Errorf("%q must be 1 to 32 letters, digits, '-' or '_'", name)
	case strings.ToLower(name) != name:
		return fmt.Errorf("%q must be lower case", name)
	}
	return nil
}

// commandLength counts what Discord sums against its per-command limit.
func commandLength(c *discordgo.ApplicationCommand) int {
	n := utf8.RuneCountInString(c.Name) + utf8.RuneCountInString(c.Description)
	var walk func(opts []*discordgo.ApplicationCommandOption)
	walk = func(opts []*discordgo.ApplicationCommandOption) {
		for _, o := range opts {
			n += utf8.RuneCountInString(o.Name) + utf8.RuneCountInString(o.Description)
			for _, ch := range o.Choices {
				n += utf8.RuneCountInString(ch.Name) + utf8.RuneCountInString(fmt.Sprint(ch.Value))
			}
			walk(o.Options)
		}
	}
	walk(c.Options)
	return n
}

// commandShape is the part of a command flowbridge sets, in a comparable
// form, so a registered command list equals the wanted one whatever IDs,
// versions and defaults Discord added.
type commandShape struct {
	Type        discordgo.ApplicationCommandType
	Name        string
	Description string
	Options     []optionShape
	// Installs and Contexts are where the command may be installed and used
	// (see installShape).
	Installs, Contexts string
}

type optionShape struct {
	Type         discordgo.ApplicationCommandOptionType
	Name         string
	Description  string
	Required     bool
	Autocomplete bool
	Choices      []string // name "\x00" value
	Options      []optionShape
}

func shapes(cmds []*discordgo.ApplicationCommand) []commandShape {
	out := make([]commandShape, 0, len(cmds))
	for _, c := range cmds {
		t := c.Type
		if t == 0 {
			t = discordgo.ChatApplicationCommand
		}
		installs, contexts := installShape(c)
		out = append(out, commandShape{Type: t, Name: c.Name, Description: c.Description, Options: optionShapes(c.Options), Installs: installs, Contexts: contexts})
	}
	slices.SortFunc(out, func(a, b commandShape) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func optionShapes(opts []*discordgo.ApplicationCommandOption) []optionShape {
	var out []optionShape
	for _, o := range opts {
		s := optionShape{Type: o.Type, Name: o.Name, Description: o.Description, Required: o.Required, Autocomplete: o.Autocomplete, Options: optionShapes(o.Options)}
		for _, ch := range o.Choices {
			s.Choices = append(s.Choices, ch.Name+"\x00"+fmt.Sprint(ch.Value))
		}
		out = append(out, s)
	}
	// Discord may list options in its own order; order does not make a difference worth re-registering.
	slices.SortFunc(out, func(a, b optionShape) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// sameCommands reports whether the registered commands already are the wanted ones.
func sameCommands(registered, wanted []*discordgo.ApplicationCommand) bool {
	a, b := shapes(registered), shapes(wanted)
	return slices.EqualFunc(a, b, func(x, y commandShape) bool {
		return x.Type == y.Type && x.Name == y.Name && x.Description == y.Description && sameOptions(x.Options, y.Options) &&
			x.Installs == y.Installs && x.Contexts == y.Contexts
	})
}

func sameOptions(a, b []optionShape) bool {
	return slices.EqualFunc(a, b, func(x, y optionShape) bool {
		return x.Type == y.Type && x.Name == y.Name && x.Description == y.Description &&
			x.Required == y.Required && x.Autocomplete == y.Autocomplete &&
			slices.Equal(x.Choices, y.Choices) && sameOptions(x.Options, y.Options)
	})
}

// SyncCommands registers the commands of the core's current flows and agents,
// globally or in each configured guild, with one bulk overwrite per scope and
// only where the registered commands differ. Reload calls it after the
// catalog changed.
//
// Only the process that holds shard 0 registers; elsewhere SyncCommands does
// nothing. Replicas share one catalog, so one writer is enough: it spares
// every other replica its lookups (one per scope, at each start and reload)
// and keeps two versions from overwriting each other while replicas are
// upgraded one by one. Shard 0 must run somewhere anyway, for the DMs.
func (a *Adapter) SyncCommands(ctx context.Context) error {
	if !a.holdsShard(0) {
		a.log.Debug("slash commands left to the process holding shard 0")
		return nil
	}
	wanted := Commands(a.core.Flows(), a.core.Agents())
	if wanted == nil {
		wanted = []*discordgo.ApplicationCommand{} // nil would send JSON null
	}
	scopes := a.cfg.GuildIDs
	if len(scopes) == 0 {
		scopes = []string{""}
		if a.cfg.UserInstall {
			userInstallable(wanted)
		}
	}
	var errs []error
	for _, guildID := range scopes {
		where := "global"
		if guildID != "" {
			where = "guild " + guildID
		}
		current, err := a.session.ApplicationCommands(a.cfg.ApplicationID, guildID, discordgo.WithContext(ctx))
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s commands: %w", where, err))
			continue
		}
		if sameCommands(current, wanted) {
			a.log.Debug("commands unchanged", zap.String("scope", where))
			continue
		}
		if _, err := a.session.ApplicationCommandBulkOverwrite(a.cfg.ApplicationID, guildID, wanted, discordgo.WithContext(ctx)); err != nil {
			errs = append(errs, fmt.Errorf("register %s commands: %w", where, err))
			continue
		}
		a.log.Info("commands registered", zap.String("scope", where))
	}
	return errors.Join(errs...)
}
