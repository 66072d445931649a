package bridge

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Flow is an AI Flow users may run by name.
type Flow struct {
	// Name is the command word: "/flow NAME key=value …".
	Name        string
	UUID        string
	Description string
	// Timeout is passed to the API as its wait time; 0 means the bridge default.
	Timeout time.Duration
	Params  []Param
	// Allow lists who may run the flow: "everyone", user IDs, group or role IDs,
	// or "channel:ID". An empty list admits no one.
	Allow []string
	// Public sends the result to the channel instead of only to the caller.
	Public bool
	// Confirm asks the caller to confirm before the flow runs.
	Confirm bool
}

// Param is one of a Flow's placeholders.
type Param struct {
	Name        string
	Description string
	Required    bool
	// Choices, when set, are the only values accepted.
	Choices []string
	// Suggestions are offered for autocompletion but not enforced.
	Suggestions []string
}

// Agent is an AI Agent users can talk to.
type Agent struct {
	Name        string
	UUID        string
	Description string
	// Default marks the agent a new conversation uses.
	Default bool
	// Channels, when set, limits chat with this agent to these channel IDs.
	Channels []string
	// DefaultChannels are the channel IDs whose conversations use this agent
	// unless /agent use chose another there.
	DefaultChannels []string
	// Greeting opens a conversation the platform starts for the bot (Slack's
	// assistant threads); "" uses a default naming the agent.
	Greeting string
	// SuggestedPrompts are offered with the greeting.
	SuggestedPrompts []Prompt
}

// catalog is an immutable snapshot of flows, agents and admins; a reload swaps
// the whole snapshot so readers never see half of one.
type catalog struct {
	flows        map[string]*Flow
	agents       map[string]*Agent
	defaultAgent *Agent
	// channelAgents maps a channel ID to its default agent (DefaultChannels).
	channelAgents map[string]*Agent
	admins        map[string]bool
	flowNames     []string
	agentNames    []string
}

func newCatalog(flows []Flow, agents []Agent, admins []string) (*catalog, error) {
	c := &catalog{
		flows:         make(map[string]*Flow, len(flows)),
		agents:        make(map[string]*Agent, len(agents)),
		channelAgents: make(map[string]*Agent),
		admins:        make(map[string]bool, len(admins)),
	}
	var errs []error
	for i := range flows {
		f := flows[i]
		f.Name = strings.ToLower(f.Name)
		if f.Name == "" || f.UUID == "" {
			errs = append(errs, fmt.Errorf("flows[%d]: name and uuid are required", i))
			continue
		}
		if _, dup := c.flows[f.Name]; dup {
			errs = append(errs, fmt.Errorf("flows[%d]: flow %q is defined twice", i, f.Name))
			continue
		}
		c.flows[f.Name] = &f
		c.flowNames = append(c.flowNames, f.Name)
	}
	for i := range agents {
		a := agents[i]
		a.Name = strings.ToLower(a.Name)
		if a.Name == "" || a.UUID == "" {
			errs = append(errs, fmt.Errorf("agents[%d]: name and uuid are required", i))
			continue
		}
		if _, dup := c.agents[a.Name]; dup {
			errs = append(errs, fmt.Errorf("agents[%d]: agent %q is defined twice", i, a.Name))
			continue
		}
		c.agents[a.Name] = &a
		c.agentNames = append(c.agentNames, a.Name)
		for _, ch := range a.DefaultChannels {
			if other, dup := c.channelAgents[ch]; dup {
				errs = append(errs, fmt.Errorf("agents[%d]: channel %s is already the default of %q", i, ch, other.Name))
				continue
			}
			if len(a.Channels) > 0 && !slices.Contains(a.Channels, ch) {
				errs = append(errs, fmt.Errorf("agents[%d]: default channel %s is not one of its channels", i, ch))
				continue
			}
			c.channelAgents[ch] = &a
		}
		if a.Default {
			if c.defaultAgent != nil {
				errs = append(errs, fmt.Errorf("agents[%d]: only one agent can be the default (%q already is)", i, c.defaultAgent.Name))
			}
			c.defaultAgent = &a
		}
	}
	if c.defaultAgent == nil && len(agents) == 1 && len(c.agentNames) == 1 {
		c.defaultAgent = c.agents[c.agentNames[0]]
	}
	if c.defaultAgent == nil && len(c.agentNames) > 1 {
		errs = append(errs, errors.New("agents: mark one agent default = true"))
	}
	for _, a := range admins {
		c.admins[a] = true
	}
	slices.Sort(c.flowNames)
	slices.Sort(c.agentNames)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return c, nil
}

func (c *catalog) flowList() []Flow {
	out := make([]Flow, 0, len(c.flowNames))
	for _, n := range c.flowNames {
		out = append(out, *c.flows[n])
	}
	return out
}

func (c *catalog) agentList() []Agent {
	out := make([]Agent, 0, len(c.agentNames))
	for _, n := range c.agentNames {
		out = append(out, *c.agents[n])
	}
	return out
}
