package discordtest_test

import (
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

func TestBulkOverwriteRecorded(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{})
	if err := fake.AddGuild(t.Context(), "1"); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, fake, bridgeIntents) // REST only: no Open needed
	app := fake.ApplicationID()

	got, err := s.ApplicationCommandBulkOverwrite(app, "1", []*discordgo.ApplicationCommand{flowCommand})
	if err != nil {
		t.Fatalf("ApplicationCommandBulkOverwrite: %v", err)
	}
	if len(got) != 1 || got[0].ID == "" || got[0].ApplicationID != app || got[0].GuildID != "1" || got[0].Version == "" {
		t.Fatalf("overwrite returned %+v, want the command with id, application, guild and version", got)
	}
	// A second overwrite keeps the id of a command of the same name, as Discord does.
	again, err := s.ApplicationCommandBulkOverwrite(app, "1", []*discordgo.ApplicationCommand{flowCommand})
	if err != nil || again[0].ID != got[0].ID {
		t.Errorf("second overwrite = %+v, %v; want the same id %s", again, err, got[0].ID)
	}
	listed, err := s.ApplicationCommands(app, "1")
	if err != nil || len(listed) != 1 || listed[0].Name != "flow" || len(listed[0].Options[0].Options) != 2 {
		t.Errorf("ApplicationCommands = %+v, %v; want /flow with its options", listed, err)
	}
	if global, err := s.ApplicationCommands(app, ""); err != nil || len(global) != 0 {
		t.Errorf("global commands = %+v, %v; want none", global, err)
	}
	ow := fake.CommandOverwrites()
	if len(ow) != 2 || ow[0].GuildID != "1" || ow[0].Commands[0].Name != "flow" {
		t.Errorf("CommandOverwrites() = %+v, want two for guild 1", ow)
	}
	if _, err := s.ApplicationCommandBulkOverwrite(app, "2", []*discordgo.ApplicationCommand{flowCommand}); restCode(err) != 50001 {
		t.Errorf("overwrite in a guild the bot is not in = %v, want code 50001", err)
	}
	if _, err := s.ApplicationCommandBulkOverwrite(app, "1", nil); restCode(err) != discordtest.CodeInvalidFormBody {
		t.Errorf("overwrite with null = %v, want code 50035", err)
	}
	if _, err := s.ApplicationCommandBulkOverwrite(app, "1", []*discordgo.ApplicationCommand{}); err != nil || len(fake.Commands("1")) != 0 {
		t.Errorf("overwrite with [] = %v, commands %v; want all removed", err, fake.Commands("1"))
	}
}

func TestCommandValidation(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{})
	s := newSession(t, fake, bridgeIntents)
	str := func(name string) *discordgo.ApplicationCommandOption {
		return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: name, Description: "d"}
	}
	many := func(n int, mk func(i int) *discordgo.ApplicationCommandOption) []*discordgo.ApplicationCommandOption {
		out := make([]*discordgo.ApplicationCommandOption, n)
		for i := range out {
			out[i] = mk(i)
		}
		return out
	}
	choices := func(n int) []*discordgo.ApplicationCommandOptionChoice {
		out := make([]*discordgo.ApplicationCommandOptionChoice, n)
		for i := range out {
			out[i] = &discordgo.ApplicationCommandOptionChoice{Name: "c", Value: strings.Repeat("v", i+1)}
		}
		return out
	}
	tests := []struct {
		name string
		cmd  *discordgo.ApplicationCommand
		ok   bool
	}{
		{"valid", &discordgo.ApplicationCommand{Name: "flow", Description: "Run"}, true},
		{"unicode and dash", &discordgo.ApplicationCommand{Name: "fluß-1_x", Description: "Run"}, true},
		{"upper case", &discordgo.ApplicationCommand{Name: "Flow", Description: "Run"}, false},
		{"space", &discordgo.ApplicationCommand{Name: "run flow", Description: "Run"}, false},
		{"33 characters", &discordgo.ApplicationCommand{Name: strings.Repeat("a", 33), Description: "Run"}, false},
		{"no description", &discordgo.ApplicationCommand{Name: "flow"}, false},
		{"101 character description", &discordgo.ApplicationCommand{Name: "flow", Description: strings.Repeat("d", 101)}, false},
		{"25 options", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: many(25, func(i int) *discordgo.ApplicationCommandOption { return str(string(rune('a' + i))) })}, true},
		{"26 options", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: many(26, func(i int) *discordgo.ApplicationCommandOption { return str(string(rune('a' + i))) })}, false},
		{"duplicate option", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: []*discordgo.ApplicationCommandOption{str("a"), str("a")}}, false},
		{"option upper case", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: []*discordgo.ApplicationCommandOption{str("Host")}}, false},
		{"required after optional", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: []*discordgo.ApplicationCommandOption{str("a"), {Type: discordgo.ApplicationCommandOptionString, Name: "b", Description: "d", Required: true}}}, false},
		{"26 choices", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "a", Description: "d", Choices: choices(26)}}}, false},
		{"choices and autocomplete", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "a", Description: "d", Choices: choices(1), Autocomplete: true}}}, false},
		{"choice value 101", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionString, Name: "a", Description: "d", Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "x", Value: strings.Repeat("v", 101)}}}}}, false},
		{"26 subcommands", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: many(26, func(i int) *discordgo.ApplicationCommandOption {
			return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: string(rune('a' + i)), Description: "d"}
		})}, false},
		{"subcommand mixed with option", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "a", Description: "d"}, str("b"),
		}}, false},
		{"subcommand in subcommand", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "a", Description: "d", Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "b", Description: "d"}}},
		}}, false},
		{"group of subcommands", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommandGroup, Name: "a", Description: "d", Options: []*discordgo.ApplicationCommandOption{{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "b", Description: "d", Options: []*discordgo.ApplicationCommandOption{str("c")}}}},
		}}, true},
		{"over 8000 characters", &discordgo.ApplicationCommand{Name: "flow", Description: "d", Options: many(25, func(i int) *discordgo.ApplicationCommandOption {
			o := str(string(rune('a' + i)))
			o.Description = strings.Repeat("d", 100)
			o.Choices = choices(25)
			for _, c := range o.Choices {
				c.Name = strings.Repeat("n", 100)
			}
			return o
		})}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.ApplicationCommandBulkOverwrite(fake.ApplicationID(), "", []*discordgo.ApplicationCommand{tt.cmd})
			if tt.ok && err != nil {
				t.Errorf("overwrite(%s) = %v, want accepted", tt.cmd.Name, err)
			}
			if !tt.ok && restCode(err) != discordtest.CodeInvalidFormBody {
				t.Errorf("overwrite(%s) = %v, want code 50035", tt.cmd.Name, err)
			}
		})
	}
}
