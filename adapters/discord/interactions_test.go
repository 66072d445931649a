package discord

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
)

// catalogCore serves a fixed catalog for unit tests that need no bridge.
type catalogCore struct {
	flows  []bridge.Flow
	agents []bridge.Agent
}

func (c catalogCore) Handle(bridge.Event) error { return nil }
func (c catalogCore) Flows() []bridge.Flow      { return c.flows }
func (c catalogCore) Agents() []bridge.Agent    { return c.agents }
func (c catalogCore) FirstDelivery(string) bool { return true }
func (c catalogCore) Flow(n string) (bridge.Flow, bool) {
	for _, f := range c.flows {
		if f.Name == n {
			return f, true
		}
	}
	return bridge.Flow{}, false
}

func testAdapter(t *testing.T) *Adapter {
	t.Helper()
	a, err := New(validConfig(), catalogCore{flows: testFlows(), agents: testAgents()}, nil)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	return a
}

func sub(name string, opts ...*discordgo.ApplicationCommandInteractionDataOption) *discordgo.ApplicationCommandInteractionDataOption {
	return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionSubCommand, Options: opts}
}

func opt(name string, v any) *discordgo.ApplicationCommandInteractionDataOption {
	return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionString, Value: v}
}

func TestCommandText(t *testing.T) {
	a := testAdapter(t)
	tests := []struct {
		name      string
		data      discordgo.ApplicationCommandInteractionData
		text      string
		ephemeral bool
		known     bool
	}{
		{"flow", discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("healthcheck", opt("host", "web1"), opt("service", "nginx"))}},
			"healthcheck host=web1 service=nginx", true, true},
		{"quoted", discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("deploy", opt("region", "eu west"), opt("note", `say "hi" \o/`))}},
			`deploy region="eu west" note="say \"hi\" \\o/"`, false, true},
		{"number", discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("ping", opt("n", 3.0))}},
			"ping n=3", true, true},
		{"unknown flow stays ephemeral", discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("nope")}},
			"nope", true, true},
		{"flow without subcommand", discordgo.ApplicationCommandInteractionData{Name: "flow"}, "help", true, true},
		{"agent use", discordgo.ApplicationCommandInteractionData{Name: "agent", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("use", opt("name", "ops team"))}},
			`use "ops team"`, true, true},
		{"agent share is public", discordgo.ApplicationCommandInteractionData{Name: "agent", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("share")}},
			"share", false, true},
		{"other command", discordgo.ApplicationCommandInteractionData{Name: "old"}, "", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, eph, known := a.commandText(tt.data)
			if text != tt.text || eph != tt.ephemeral || known != tt.known {
				t.Errorf("commandText() = %q, %v, %v; want %q, %v, %v", text, eph, known, tt.text, tt.ephemeral, tt.known)
			}
		})
	}
}

// TestFlowLineRoundTrip checks that the core's parser reads back exactly
// the values typed into the options.
func TestFlowLineRoundTrip(t *testing.T) {
	for _, v := range []string{"web1", "two words", `a"b`, `back\slash`, "", "  padded  ", "key=value", "'single'", "“curly”", "line\nbreak", "tab\there", `\`, `"`} {
		checkRoundTrip(t, map[string]string{"p": v, "q": "x"})
	}
}

func checkRoundTrip(t *testing.T, params map[string]string) {
	t.Helper()
	s := sub("flowname")
	for _, k := range slices.Sorted(maps.Keys(params)) {
		s.Options = append(s.Options, opt(k, params[k]))
	}
	line := flowLine(s)
	name, got, err := bridge.ParseFlowArgs(line)
	if err != nil || name != "flowname" || !maps.Equal(got, params) {
		t.Errorf("ParseFlowArgs(%q) = %q, %q, %v; want flowname, %q", line, name, got, err, params)
	}
}

func FuzzFlowLineRoundTrip(f *testing.F) {
	for _, v := range []string{"web1", "two words", `a"b\`, "", "x=y", "‘q’"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !utf8.ValidString(v) {
			return // Discord delivers option values as JSON strings: valid UTF-8
		}
		checkRoundTrip(t, map[string]string{"p": v})
	})
}

func TestFilterPrefix(t *testing.T) {
	values := []string{"web1", "web2", "db-web", "cache", "web1"}
	tests := []struct {
		typed string
		n     int
		want  []string
	}{
		{"", 25, []string{"web1", "web2", "db-web", "cache"}},
		{"WE", 25, []string{"web1", "web2", "db-web"}},
		{"web", 2, []string{"web1", "web2"}},
		{"zzz", 25, nil},
	}
	for _, tt := range tests {
		if got := filterPrefix(values, tt.typed, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("filterPrefix(%q, %d) = %q, want %q", tt.typed, tt.n, got, tt.want)
		}
	}
}

func TestAutocompleteValues(t *testing.T) {
	a := testAdapter(t)
	focused := opt("host", "we")
	focused.Focused = true
	typed, values := a.autocompleteValues(discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("healthcheck", focused)}})
	if typed != "we" || !slices.Equal(values, []string{"web1", "web2", "db1"}) {
		t.Errorf("autocompleteValues(host) = %q, %q; want we, the host suggestions", typed, values)
	}
	name := opt("name", "")
	name.Focused = true
	if _, values := a.autocompleteValues(discordgo.ApplicationCommandInteractionData{Name: "agent", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("use", name)}}); !slices.Equal(values, []string{"helper", "ops"}) {
		t.Errorf("autocompleteValues(agent use) = %q, want the agents", values)
	}
}

// FuzzInteractionPayload feeds arbitrary INTERACTION_CREATE payloads through
// discordgo's decoding and the adapter's reading of them: nothing may panic.
func FuzzInteractionPayload(f *testing.F) {
	f.Add([]byte(`{"id":"1","type":2,"token":"t","data":{"name":"flow","options":[{"name":"healthcheck","type":1,"options":[{"name":"host","type":3,"value":"web1"}]}]}}`))
	f.Add([]byte(`{"id":"1","type":4,"token":"t","data":{"name":"flow","options":[{"name":"healthcheck","type":1,"options":[{"name":"host","type":3,"value":"w","focused":true}]}]}}`))
	f.Add([]byte(`{"id":"1","type":4,"token":"t","data":{"name":"agent","options":[{"name":"use","type":1,"options":[{"name":"name","type":3,"value":5,"focused":true}]}]}}`))
	f.Add([]byte(`{"id":"1","type":3,"token":"t","data":{"custom_id":"share:abc","component_type":2},"message":{"flags":64}}`))
	f.Add([]byte(`{"id":"1","type":2,"data":{"name":"flow","options":[null]}}`))
	a, err := New(validConfig(), catalogCore{flows: testFlows(), agents: testAgents()}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var i discordgo.Interaction
		if json.Unmarshal(payload, &i) != nil {
			return
		}
		switch data := i.Data.(type) {
		case discordgo.ApplicationCommandInteractionData:
			a.commandText(data)
			a.autocompleteValues(data)
		case discordgo.MessageComponentInteractionData:
			parseCustomID(data.CustomID)
		}
		userOf(i.User, i.Member)
	})
}

// FuzzMessagePayload does the same for MESSAGE_CREATE payloads.
func FuzzMessagePayload(f *testing.F) {
	f.Add([]byte(`{"id":"2","channel_id":"3","guild_id":"1","content":"<@900> hi <@!900> <@42>","author":{"id":"42"},"mentions":[{"id":"900"}]}`))
	f.Add([]byte(`{"id":"2","content":"!flow x","author":null,"member":{"roles":["1"]}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		var m discordgo.Message
		if json.Unmarshal(payload, &m) != nil {
			return
		}
		mentions(&m, "900")
		isTextCommand(stripMention(m.Content, "900"))
		userOf(m.Author, m.Member)
		threadName(m.Content)
	})
}
