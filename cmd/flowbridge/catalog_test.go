package main

import (
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// TestCatalogRulesAreTheCores: check-config refuses a catalog of flows and
// agents exactly when the core would, with one set of rules (bridge's
// CheckFlows and CheckAgents): what passes the check starts, and what the
// core refuses, the check reports with its key first.
func TestCatalogRulesAreTheCores(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, flow, rest string
		bad              bool
	}{
		{name: "valid"},
		{name: "no agent", bad: true},
		{name: "upper-case agent", rest: "[[agents]]\nname = \"Other\"\nuuid = \"a2\"\n", bad: true},
		{name: "two agents, no default", rest: "[[agents]]\nname = \"other\"\nuuid = \"a2\"\n", bad: true},
		{name: "two agents, one default", rest: "[[agents]]\nname = \"other\"\nuuid = \"a2\"\ndefault = true\n"},
		{name: "flow named help", rest: "[[flows]]\nname = \"help\"\nuuid = \"f2\"\nallow = [\"everyone\"]\n", bad: true},
		{name: "flow twice", rest: "[[flows]]\nname = \"healthcheck\"\nuuid = \"f2\"\nallow = [\"everyone\"]\n", bad: true},
		{name: "parameter with a space", flow: "[[flows.params]]\nname = \"x y\"\n", bad: true},
		{name: "parameter twice", flow: "[[flows.params]]\nname = \"host\"\n[[flows.params]]\nname = \"host\"\n", bad: true},
		{name: "default channel not the agent's", rest: "[[agents]]\nname = \"other\"\nuuid = \"a2\"\ndefault = true\nchannels = [\"C1\"]\ndefault_channels = [\"C2\"]\n", bad: true},
		{name: "empty channel", rest: "[[agents]]\nname = \"other\"\nuuid = \"a2\"\ndefault = true\nchannels = [\"\"]\n", bad: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := testConfig(tt.flow, "")
			if tt.rest != "" {
				// Catalog entries after the first agent and flow.
				data = strings.Replace(data, "[console]", tt.rest+"[console]", 1)
			}
			if tt.name == "no agent" {
				data = strings.Replace(data, "[[agents]]\nname = \"helper\"\nuuid = \"agent-1\"\n", "", 1)
			}
			// The file decoded, unchecked; then checked as check-config does.
			cfg, err := parse([]byte(data), func(string) string { return "" }, scope{check: func(*Config) error { return nil }})
			if err != nil {
				t.Fatalf("decode: %v\n%s", err, data)
			}
			checkErr := cfg.Validate()
			core, coreErr := bridge.New(cfg.bridgeConfig(), struct{ bridge.Workspace }{}, struct{ bridge.Store }{}, zap.NewNop())
			if coreErr == nil {
				if err := core.Shutdown(t.Context()); err != nil {
					t.Fatal(err)
				}
				core.Close()
			}
			if (checkErr != nil) != tt.bad || (coreErr != nil) != tt.bad {
				t.Fatalf("check-config = %v; core = %v; want refused = %v by both", checkErr, coreErr, tt.bad)
			}
			if tt.bad {
				// The core's first problem is among the check's, key and all.
				first := strings.TrimPrefix(strings.SplitN(coreErr.Error(), "\n", 2)[0], "catalog: ")
				if !strings.Contains(checkErr.Error(), first) {
					t.Errorf("check-config = %v; lacks the core's %q", checkErr, first)
				}
			}
		})
	}
}
