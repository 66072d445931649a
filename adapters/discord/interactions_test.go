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

func (c catalogCore) Receive(bridge.Event) *bridge.Receipt { return nil }
func (c catalogCore) Refused(string)                       {}
func (c catalogCore) Ephemeral(bridge.Event) bool          { return true }
func (c catalogCore) Flows() []bridge.Flow                 { return c.flows }
func (c catalogCore) Agents() []bridge.Agent               { return c.agents }
func (c catalogCore) Attach(string, bridge.Platform) (int, int, error) {
	return 0, 0, nil
}
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

func TestCommandEvent(t *testing.T) {
	data := func(name string, opts ...*discordgo.ApplicationCommandInteractionDataOption) discordgo.ApplicationCommandInteractionData {
		return discordgo.ApplicationCommandInteractionData{Name: name, Options: opts}
	}
	tests := []struct {
		name  string
		data  discordgo.ApplicationCommandInteractionData
		want  bridge.Event
		known bool
	}{
		{"flow", data("flow", sub("healthcheck", opt("host", "web1"), opt("service", "nginx"))),
			bridge.Event{Command: "flow", Flow: "healthcheck", Params: map[string]string{"host": "web1", "service": "nginx"}}, true},
		{"values as typed", data("flow", sub("deploy", opt("region", "eu west"), opt("note", `say "hi" \o/`))),
			bridge.Event{Command: "flow", Flow: "deploy", Params: map[string]string{"region": "eu west", "note": `say "hi" \o/`}}, true},
		{"number", data("flow", sub("ping", opt("n", 3.0))), bridge.Event{}, false},
		{"no options", data("flow", sub("nope")), bridge.Event{Command: "flow", Flow: "nope", Params: map[string]string{}}, true},
		{"flow without subcommand", data("flow"), bridge.Event{Command: "flow", Text: "help"}, true},
		{"agent use", data("agent", sub("use", opt("name", "ops team"))), bridge.Event{Command: "agent", Text: `use "ops team"`}, true},
		{"agent share", data("agent", sub("share")), bridge.Event{Command: "agent", Text: "share"}, true},
		{"agent without subcommand", data("agent"), bridge.Event{Command: "agent", Text: "help"}, true},
		{"other command", data("old"), bridge.Event{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := commandEvent(tt.data)
			if known := err == nil; known != tt.known {
				t.Fatalf("commandEvent() known = %v, want %v", known, tt.known)
			}
			if err != nil {
				return
			}
			if ev.Kind != bridge.KindCommand || ev.Command != tt.want.Command || ev.Text != tt.want.Text || ev.Flow != tt.want.Flow || !maps.Equal(ev.Params, tt.want.Params) {
				t.Errorf("commandEvent() = kind %v command %q text %q flow %q params %q; want command %q text %q flow %q params %q",
					ev.Kind, ev.Command, ev.Text, ev.Flow, ev.Params, tt.want.Command, tt.want.Text, tt.want.Flow, tt.want.Params)
			}
		})
	}
}

// TestAgentArgsRoundTrip checks that the core's parser reads back exactly
// the value typed into /agent use: its words are quoted for the core.
func TestAgentArgsRoundTrip(t *testing.T) {
	for _, v := range []string{"web1", "two words", `a"b`, `back\slash`, "", "  padded  ", "key=value", "'single'", "“curly”", "line\nbreak", "tab\there", `\`, `"`} {
		checkAgentRoundTrip(t, v)
	}
}

func checkAgentRoundTrip(t *testing.T, v string) {
	t.Helper()
	ev, _ := commandEvent(discordgo.ApplicationCommandInteractionData{Name: "agent", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("use", opt("name", v))}})
	words, err := bridge.SplitArgs(ev.Text)
	if err != nil || len(words) != 2 || words[0] != "use" || words[1] != v {
		t.Errorf("SplitArgs(%q) = %q, %v; want [use %q]", ev.Text, words, err, v)
	}
}

func FuzzAgentArgsRoundTrip(f *testing.F) {
	for _, v := range []string{"web1", "two words", `a"b\`, "", "x=y", "‘q’"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !utf8.ValidString(v) {
			return // Discord delivers option values as JSON strings: valid UTF-8
		}
		checkAgentRoundTrip(t, v)
	})
}

// FuzzFlowParams: a typed flow option reaches the core exactly as typed.
func FuzzFlowParams(f *testing.F) {
	for _, v := range []string{"web1", "two words", `a"b\`, "", "x=y", "‘q’"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ev, _ := commandEvent(discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub("f", opt("p", v))}})
		if ev.Flow != "f" || len(ev.Params) != 1 || ev.Params["p"] != v {
			t.Errorf("commandEvent(/flow f p=%q) = flow %q params %q", v, ev.Flow, ev.Params)
		}
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
			commandEvent(data)
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
		bridge.TextCommand(stripMention(m.Content, "900"))
		userOf(m.Author, m.Member)
		threadName(m.Content)
	})
}
