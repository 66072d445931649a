package bridge_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
)

func TestFormFlowsFollowAccessRules(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Flows = append(cfg.Flows,
		bridge.Flow{Name: "deploy", UUID: flowUUID, Allow: []string{"group:S-ops"}},
		bridge.Flow{Name: "locked", UUID: flowUUID},
	)
	h := newHarness(t, cfg, nil)
	names := func(u bridge.User) string {
		var out []string
		for _, f := range h.b.FormFlows(bridge.Event{Platform: "test", Channel: "C1", User: u}) {
			out = append(out, f.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(bridge.User{ID: "U1"}); got != "healthcheck" {
		t.Errorf("FormFlows(U1) = %s, want healthcheck", got)
	}
	if got := names(bridge.User{ID: "U2", Groups: []string{"S-ops"}}); got != "deploy,healthcheck" {
		t.Errorf("FormFlows(ops member) = %s, want deploy,healthcheck", got)
	}
	if fs := h.b.FormFlows(bridge.Event{User: bridge.User{ID: "U1"}}); len(fs) != 1 || len(fs[0].Params) != 2 || !fs[0].Params[0].Required {
		t.Errorf("FormFlows() = %+v, want healthcheck with its parameter specs", fs)
	}
}

func TestCheckFlowForm(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Flows[0].Params = append(cfg.Flows[0].Params, bridge.Param{Name: "env", Choices: []string{"prod", "staging"}})
	cfg.Flows = append(cfg.Flows, bridge.Flow{Name: "locked", UUID: flowUUID})
	cfg.Limits.MaxValueBytes = 10
	h := newHarness(t, cfg, nil)
	ev := bridge.Event{Platform: "test", Channel: "C1", User: bridge.User{ID: "U1"}}
	tests := []struct {
		name   string
		flow   string
		params map[string]string
		want   map[string]string // substrings by key
	}{
		{"valid", "healthcheck", map[string]string{"host": "web1", "env": "prod"}, nil},
		{"optional left empty", "healthcheck", map[string]string{"host": "web1", "service": ""}, nil},
		{"no flow", "", nil, map[string]string{"": "Choose a flow"}},
		{"unknown flow", "nosuch", nil, map[string]string{"": "no flow *nosuch*"}},
		{"refused", "locked", nil, map[string]string{"": "No one may run *locked*"}},
		{"missing and bad choice", "healthcheck", map[string]string{"env": "dev"}, map[string]string{"host": "Required", "env": "prod, staging"}},
		{"too long", "healthcheck", map[string]string{"host": "web1", "service": "a-very-long-name"}, map[string]string{"service": "Too long"}},
		{"unknown parameter", "healthcheck", map[string]string{"host": "web1", "colour": "red"}, map[string]string{"": "`colour`"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := h.b.CheckFlowForm(ev, tt.flow, tt.params)
			if len(got) != len(tt.want) {
				t.Fatalf("CheckFlowForm(%s, %v) = %v, want problems for %v", tt.flow, tt.params, got, slicesOf(tt.want))
			}
			for k, w := range tt.want {
				if !strings.Contains(got[k], w) {
					t.Errorf("CheckFlowForm(%s)[%q] = %q, want it to contain %q", tt.flow, k, got[k], w)
				}
			}
		})
	}
}

func slicesOf(m map[string]string) []string {
	var out []string
	for k := range maps.Keys(m) {
		out = append(out, k)
	}
	return out
}
