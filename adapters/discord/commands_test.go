package discord

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file:\n got: %s\nwant: %s", name, got, want)
	}
}

func testFlows() []bridge.Flow {
	many := make([]string, 30)
	for i := range many {
		many[i] = fmt.Sprintf("region-%02d", i)
	}
	return []bridge.Flow{
		{Name: "healthcheck", Description: "Check a service on a host", Params: []bridge.Param{
			{Name: "service", Description: "Service name", Choices: []string{"nginx", "postgres"}},
			{Name: "host", Description: "Host to check", Required: true, Suggestions: []string{"web1", "web2", "db1"}},
		}},
		{Name: "deploy", Public: true, Params: []bridge.Param{{Name: "region", Required: true, Choices: many}, {Name: "note"}}},
		{Name: "ping"},
	}
}

func testAgents() []bridge.Agent {
	return []bridge.Agent{{Name: "helper", Default: true}, {Name: "ops"}}
}

func TestCommands(t *testing.T) {
	cmds := Commands(testFlows(), testAgents())
	b, err := json.MarshalIndent(cmds, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "commands.golden.json", append(b, '\n'))

	if len(cmds) != 2 || cmds[0].Name != "flow" || cmds[1].Name != "agent" {
		t.Fatalf("Commands() names = %v, want [flow agent]", names(cmds))
	}
	hc := cmds[0].Options[0]
	if hc.Name != "healthcheck" || hc.Type != discordgo.ApplicationCommandOptionSubCommand {
		t.Fatalf("first subcommand = %s (type %d), want healthcheck subcommand", hc.Name, hc.Type)
	}
	if hc.Options[0].Name != "host" || !hc.Options[0].Required || !hc.Options[0].Autocomplete {
		t.Errorf("healthcheck first option = %+v, want host, required, autocomplete (required options first)", *hc.Options[0])
	}
	if svc := hc.Options[1]; svc.Name != "service" || svc.Required || len(svc.Choices) != 2 || svc.Autocomplete {
		t.Errorf("service option = %+v, want 2 choices, optional, no autocomplete", *svc)
	}
	region := cmds[0].Options[1].Options[0]
	if !region.Autocomplete || len(region.Choices) != 0 {
		t.Errorf("region (30 choices) = autocomplete %v with %d choices, want autocomplete and none", region.Autocomplete, len(region.Choices))
	}
	if d := cmds[0].Options[2].Description; d != "Run the ping flow" {
		t.Errorf("ping description = %q, want the default", d)
	}
	var subs []string
	for _, o := range cmds[1].Options {
		subs = append(subs, o.Name)
	}
	if got := strings.Join(subs, " "); got != "status reset use share help" {
		t.Errorf("/agent subcommands = %s", got)
	}
	use := cmds[1].Options[2].Options[0]
	if len(use.Choices) != 2 || use.Choices[1].Value != "ops" {
		t.Errorf("/agent use name choices = %v, want helper and ops", use.Choices)
	}
}

func TestCommandsEdges(t *testing.T) {
	if cmds := Commands(nil, nil); len(cmds) != 1 || cmds[0].Name != "agent" {
		t.Errorf("Commands(nil, nil) = %v, want only /agent", names(cmds))
	}
	flows := make([]bridge.Flow, 30)
	for i := range flows {
		flows[i] = bridge.Flow{Name: fmt.Sprintf("f%d", i)}
	}
	if n := len(Commands(flows, nil)[0].Options); n != maxSubcommands {
		t.Errorf("Commands(30 flows) has %d subcommands, want %d", n, maxSubcommands)
	}
	agents := make([]bridge.Agent, 26)
	for i := range agents {
		agents[i] = bridge.Agent{Name: fmt.Sprintf("a%d", i)}
	}
	use := Commands(nil, agents)[0].Options[2].Options[0]
	if !use.Autocomplete || use.Choices != nil {
		t.Errorf("/agent use with 26 agents: autocomplete %v, %d choices; want autocomplete", use.Autocomplete, len(use.Choices))
	}
	long := Commands([]bridge.Flow{{Name: "x", Description: strings.Repeat("d", 150)}}, nil)[0].Options[0].Description
	if n := len(long); n > maxDescription || n < maxDescription-3 || !strings.HasSuffix(long, "…") {
		t.Errorf("long description cut to %d bytes, want %d at most, ending in …", n, maxDescription)
	}
}

func names(cmds []*discordgo.ApplicationCommand) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.Name)
	}
	return out
}

func TestValidateCommands(t *testing.T) {
	tooMany := make([]bridge.Flow, 26)
	for i := range tooMany {
		tooMany[i] = bridge.Flow{Name: fmt.Sprintf("f%d", i)}
	}
	manyParams := make([]bridge.Param, 26)
	for i := range manyParams {
		manyParams[i] = bridge.Param{Name: fmt.Sprintf("p%d", i)}
	}
	tests := []struct {
		name  string
		flows []bridge.Flow
		want  []string
	}{
		{"valid", testFlows(), nil},
		{"unicode names", []bridge.Flow{{Name: "prüfung", Params: []bridge.Param{{Name: "größe"}, {Name: "a-b_c"}}}}, nil},
		{"upper case", []bridge.Flow{{Name: "Deploy"}}, []string{`flows.Deploy: name: "Deploy" must be lower case`}},
		{"space", []bridge.Flow{{Name: "do it"}}, []string{"flows.do it: name:"}},
		{"too long", []bridge.Flow{{Name: strings.Repeat("a", 33)}}, []string{"must be 1 to 32"}},
		{"empty", []bridge.Flow{{Name: ""}}, []string{"flows.: name:"}},
		{"twice", []bridge.Flow{{Name: "a"}, {Name: "a"}}, []string{"flows.a: name: defined twice"}},
		{"too many flows", tooMany, []string{"26 flows"}},
		{"too many params", []bridge.Flow{{Name: "a", Params: manyParams}}, []string{"flows.a: 26 params"}},
		{"long descriptions", []bridge.Flow{{Name: "a", Description: strings.Repeat("x", 101), Params: []bridge.Param{{Name: "p", Description: strings.Repeat("y", 101)}}}},
			[]string{"flows.a: description: 101", "flows.a.params.p: description: 101"}},
		{"bad param", []bridge.Flow{{Name: "a", Params: []bridge.Param{{Name: "Host"}, {Name: "x y"}, {Name: "x y"}}}},
			[]string{"flows.a.params.Host: name:", "flows.a.params.x y: name:", "flows.a.params.x y: name: defined twice"}},
		{"long choice", []bridge.Flow{{Name: "a", Params: []bridge.Param{{Name: "p", Choices: []string{strings.Repeat("c", 101)}, Suggestions: []string{""}}}}},
			[]string{"flows.a.params.p: choices[0]: 101", "flows.a.params.p: suggestions[0]: 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateCommands(tt.flows)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("ValidateCommands() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateCommands() = nil, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ValidateCommands() = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestSameCommands(t *testing.T) {
	wanted := Commands(testFlows(), testAgents())
	// What Discord returns: IDs, versions, a type on every command, and the
	// JSON round trip (choice values come back as interface{} strings).
	b, err := json.Marshal(wanted)
	if err != nil {
		t.Fatal(err)
	}
	var registered []*discordgo.ApplicationCommand
	if err := json.Unmarshal(b, &registered); err != nil {
		t.Fatal(err)
	}
	for i, c := range registered {
		c.ID, c.ApplicationID, c.Version = fmt.Sprint(100+i), "1", "7"
	}
	registered[0], registered[1] = registered[1], registered[0]
	if !sameCommands(registered, wanted) {
		t.Errorf("sameCommands(registered copy, wanted) = false, want true")
	}
	changed := Commands(testFlows(), testAgents())
	changed[0].Options[0].Options[0].Required = false
	if sameCommands(registered, changed) {
		t.Errorf("sameCommands with a required flag changed = true, want false")
	}
	if sameCommands(nil, wanted) {
		t.Errorf("sameCommands(nil, wanted) = true, want false")
	}
	if !sameCommands(nil, []*discordgo.ApplicationCommand{}) {
		t.Errorf("sameCommands(nil, empty) = false, want true")
	}
}
