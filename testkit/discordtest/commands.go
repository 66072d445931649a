package discordtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// Application command limits (application-commands.mdx).
const (
	MaxCommandName        = 32
	MaxCommandDescription = 100
	MaxOptions            = 25
	MaxChoices            = 25
	MaxChoiceName         = 100
	MaxChoiceValue        = 100
	MaxCommandChars       = 8000
	MaxChatInputCommands  = 100
)

// commandName is Discord's pattern for CHAT_INPUT command and option names; they must also
// be lower case where a letter has a lower-case form.
var commandName = regexp.MustCompile(`^[-_'\p{L}\p{N}\p{Devanagari}\p{Thai}]{1,32}$`)

func (s *Server) handlePutCommands(c *call) (reply, *apiError) {
	guild := c.path("guild")
	if aerr := s.checkApplication(c.path("app"), guild); aerr != nil {
		return reply{}, aerr
	}
	var cmds []*discordgo.ApplicationCommand
	if err := json.Unmarshal(c.body, &cmds); err != nil {
		return reply{}, errBadJSON(err)
	}
	if cmds == nil {
		var fe formErrors
		fe.add("_root", "BASE_TYPE_REQUIRED", "a list is required (discordgo sends null for a nil slice; send [] to clear)")
		return reply{}, fe.err()
	}
	if aerr := validateCommands(cmds); aerr != nil {
		return reply{}, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := make([]*discordgo.ApplicationCommand, len(cmds))
	for i, cmd := range cmds {
		cp := cloneCommand(cmd)
		if cp.Type == 0 {
			cp.Type = discordgo.ChatApplicationCommand
		}
		key := fmt.Sprintf("%s/%d/%s", guild, cp.Type, cp.Name)
		id, ok := s.commandIDs[key]
		if !ok {
			id = s.newIDLocked()
			s.commandIDs[key] = id
		}
		cp.ID, cp.ApplicationID, cp.GuildID, cp.Version = id, s.opts.ApplicationID, guild, s.newIDLocked()
		stored[i] = cp
	}
	s.commands[guild] = stored
	rec := make([]*discordgo.ApplicationCommand, len(stored))
	for i, cmd := range stored {
		rec[i] = cloneCommand(cmd)
	}
	s.overwrites = append(s.overwrites, CommandOverwrite{GuildID: guild, Commands: rec, At: s.now()})
	s.notifyLocked()
	return reply{body: wireCommands(stored)}, nil
}

func (s *Server) handleListCommands(c *call) (reply, *apiError) {
	guild := c.path("guild")
	if aerr := s.checkApplication(c.path("app"), guild); aerr != nil {
		return reply{}, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return reply{body: wireCommands(s.commands[guild])}, nil
}

// checkApplication refuses another application's commands, or a guild the bot is not in.
func (s *Server) checkApplication(app, guild string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if app != s.opts.ApplicationID || guild != "" && !slices.Contains(s.guilds, guild) {
		e := newAPIError(http.StatusForbidden, 50001, "Missing Access")
		e.fields = []fieldError{{path: "discordtest", code: "MISSING_ACCESS",
			message: fmt.Sprintf("application %q (want %q), guild %q (known %v; AddGuild to add)", app, s.opts.ApplicationID, guild, s.guilds)}}
		return e
	}
	return nil
}

func cloneCommand(c *discordgo.ApplicationCommand) *discordgo.ApplicationCommand {
	b, err := json.Marshal(c)
	if err != nil {
		return c
	}
	var out discordgo.ApplicationCommand
	if json.Unmarshal(b, &out) != nil {
		return c
	}
	return &out
}

// Commands returns the commands registered for a guild ("" for global).
func (s *Server) Commands(guildID string) []*discordgo.ApplicationCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*discordgo.ApplicationCommand, len(s.commands[guildID]))
	for i, c := range s.commands[guildID] {
		out[i] = cloneCommand(c)
	}
	return out
}

// CommandOverwrites returns every accepted bulk overwrite in order, so a test can show that
// a restart with unchanged commands registers nothing.
func (s *Server) CommandOverwrites() []CommandOverwrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CommandOverwrite(nil), s.overwrites...)
}

// findCommandLocked finds a chat command by name, guild commands first.
func (s *Server) findCommandLocked(guild, name string) *discordgo.ApplicationCommand {
	scopes := []string{""}
	if guild != "" {
		scopes = []string{guild, ""}
	}
	for _, scope := range scopes {
		for _, c := range s.commands[scope] {
			if c.Name == name && c.Type == discordgo.ChatApplicationCommand {
				return c
			}
		}
	}
	return nil
}

// validateCommands applies Discord's rules to a bulk overwrite.
func validateCommands(cmds []*discordgo.ApplicationCommand) *apiError {
	var fe formErrors
	seen := map[string]bool{}
	chat := 0
	for i, c := range cmds {
		p := fmt.Sprintf("%d", i)
		if c == nil {
			fe.add(p, "BASE_TYPE_REQUIRED", "This field is required")
			continue
		}
		typ := c.Type
		if typ == 0 {
			typ = discordgo.ChatApplicationCommand
		}
		key := fmt.Sprintf("%d/%s", typ, c.Name)
		if seen[key] {
			fe.add(p+".name", "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique (%q)", c.Name)
		}
		seen[key] = true
		switch typ {
		case discordgo.ChatApplicationCommand:
			chat++
			checkName(&fe, p+".name", c.Name)
			checkDescription(&fe, p+".description", c.Description)
			validateOptions(&fe, p+".options", c.Options, levelCommand)
		case discordgo.UserApplicationCommand, discordgo.MessageApplicationCommand:
			if n := utf8.RuneCountInString(c.Name); n < 1 || n > MaxCommandName {
				fe.add(p+".name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and %d in length.", MaxCommandName)
			}
			if c.Description != "" || len(c.Options) > 0 {
				fe.add(p, "APPLICATION_COMMAND_INVALID", "user and message commands take no description or options")
			}
		default:
			fe.add(p+".type", "BASE_TYPE_CHOICES", "unknown command type %d", typ)
		}
		if n := commandChars(c); n > MaxCommandChars {
			fe.add(p, "APPLICATION_COMMAND_TOO_LARGE", "Command exceeds maximum size (%d > %d)", n, MaxCommandChars)
		}
	}
	if chat > MaxChatInputCommands {
		fe.add("_root", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxChatInputCommands)
	}
	return fe.err()
}

func checkName(fe *formErrors, path, name string) {
	if !commandName.MatchString(name) {
		fe.add(path, "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid (%q must match %s)", name, commandName)
	} else if strings.ToLower(name) != name {
		fe.add(path, "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid (%q must be lower case)", name)
	}
}

func checkDescription(fe *formErrors, path, d string) {
	if n := utf8.RuneCountInString(d); n < 1 || n > MaxCommandDescription {
		fe.add(path, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and %d in length. (got %d)", MaxCommandDescription, n)
	}
}

// Option levels: the options of a command, of a subcommand group, of a subcommand.
const (
	levelCommand = iota
	levelGroup
	levelSubcommand
)

// validateOptions checks the options at one level of a command.
func validateOptions(fe *formErrors, path string, opts []*discordgo.ApplicationCommandOption, level int) {
	if len(opts) > MaxOptions {
		fe.add(path, "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxOptions)
	}
	names := map[string]bool{}
	subs, others, optionalSeen := 0, 0, false
	for i, o := range opts {
		p := fmt.Sprintf("%s.%d", path, i)
		if o == nil {
			fe.add(p, "BASE_TYPE_REQUIRED", "This field is required")
			continue
		}
		checkName(fe, p+".name", o.Name)
		checkDescription(fe, p+".description", o.Description)
		if names[o.Name] {
			fe.add(p+".name", "APPLICATION_COMMAND_OPTIONS_NAME_ALREADY_EXISTS", "Option names must be unique (%q)", o.Name)
		}
		names[o.Name] = true
		switch o.Type {
		case discordgo.ApplicationCommandOptionSubCommandGroup:
			subs++
			if level != levelCommand {
				fe.add(p+".type", "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "a subcommand group may only be at the top level")
			}
			validateOptions(fe, p+".options", o.Options, levelGroup)
		case discordgo.ApplicationCommandOptionSubCommand:
			subs++
			if level == levelSubcommand {
				fe.add(p+".type", "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "a subcommand holds no subcommands")
			}
			validateOptions(fe, p+".options", o.Options, levelSubcommand)
		default:
			others++
			if level == levelGroup {
				fe.add(p+".type", "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "a subcommand group holds only subcommands")
			}
			if o.Required && optionalSeen {
				fe.add(p+".required", "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID", "Required options must be placed before non-required options")
			}
			if !o.Required {
				optionalSeen = true
			}
			validateLeaf(fe, p, o)
		}
	}
	if subs > 0 && others > 0 {
		fe.add(path, "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-command and sub-command group option types are mutually exclusive to all other types")
	}
}

func validateLeaf(fe *formErrors, p string, o *discordgo.ApplicationCommandOption) {
	if o.Type < discordgo.ApplicationCommandOptionString || o.Type > discordgo.ApplicationCommandOptionAttachment {
		fe.add(p+".type", "BASE_TYPE_CHOICES", "unknown option type %d", o.Type)
	}
	if len(o.Options) > 0 {
		fe.add(p+".options", "APPLICATION_COMMAND_OPTION_TYPE_INVALID", "only subcommands and groups have options")
	}
	canChoose := o.Type == discordgo.ApplicationCommandOptionString || o.Type == discordgo.ApplicationCommandOptionInteger || o.Type == discordgo.ApplicationCommandOptionNumber
	if len(o.Choices) > 0 && !canChoose {
		fe.add(p+".choices", "APPLICATION_COMMAND_OPTION_CHOICES_INVALID", "choices are for string, integer and number options")
	}
	if o.Autocomplete && !canChoose {
		fe.add(p+".autocomplete", "APPLICATION_COMMAND_AUTOCOMPLETE_INVALID", "autocomplete is for string, integer and number options")
	}
	if o.Autocomplete && len(o.Choices) > 0 {
		fe.add(p+".autocomplete", "APPLICATION_COMMAND_AUTOCOMPLETE_CHOICES_EXCLUSIVE", "Autocomplete and choices are mutually exclusive")
	}
	if len(o.Choices) > MaxChoices {
		fe.add(p+".choices", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxChoices)
	}
	for j, ch := range o.Choices {
		validateChoice(fe, fmt.Sprintf("%s.choices.%d", p, j), ch, o.Type)
	}
}

func validateChoice(fe *formErrors, p string, ch *discordgo.ApplicationCommandOptionChoice, typ discordgo.ApplicationCommandOptionType) {
	if ch == nil {
		fe.add(p, "BASE_TYPE_REQUIRED", "This field is required")
		return
	}
	if n := utf8.RuneCountInString(ch.Name); n < 1 || n > MaxChoiceName {
		fe.add(p+".name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and %d in length.", MaxChoiceName)
	}
	switch v := ch.Value.(type) {
	case string:
		if typ != discordgo.ApplicationCommandOptionString {
			fe.add(p+".value", "BASE_TYPE_NUMBER", "Value must be a number for option type %d.", typ)
		} else if utf8.RuneCountInString(v) > MaxChoiceValue {
			fe.add(p+".value", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxChoiceValue)
		}
	case float64, int, int64:
		if typ == discordgo.ApplicationCommandOptionString {
			fe.add(p+".value", "BASE_TYPE_STRING", "Value must be a string.")
		}
	default:
		fe.add(p+".value", "BASE_TYPE_REQUIRED", "value must be a string or number, got %T", ch.Value)
	}
}

// commandChars counts what Discord's 8,000-character limit counts: names, descriptions and
// choice names and values, over all options.
func commandChars(c *discordgo.ApplicationCommand) int {
	n := utf8.RuneCountInString(c.Name) + utf8.RuneCountInString(c.Description)
	var walk func([]*discordgo.ApplicationCommandOption)
	walk = func(opts []*discordgo.ApplicationCommandOption) {
		for _, o := range opts {
			if o == nil {
				continue
			}
			n += utf8.RuneCountInString(o.Name) + utf8.RuneCountInString(o.Description)
			for _, ch := range o.Choices {
				if ch == nil {
					continue
				}
				n += utf8.RuneCountInString(ch.Name)
				if s, ok := ch.Value.(string); ok {
					n += utf8.RuneCountInString(s)
				}
			}
			walk(o.Options)
		}
	}
	walk(c.Options)
	return n
}
