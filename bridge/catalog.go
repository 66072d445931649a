package bridge

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
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
	// Approvers, when set, are who may approve a run instead of its caller
	// (Confirm must be set): user IDs, "user:ID", "group:ID" or "role:ID"
	// (a Slack user group, a Discord role), a bare ID matching the user or
	// any of their groups. The request is posted in the conversation, for
	// them to Approve or Refuse, and waits ApprovalTimeout.
	Approvers []string
	// ApprovalTimeout is how long a request for approval stays open; 0
	// means DefaultApprovalTimeout. Only with Approvers.
	ApprovalTimeout time.Duration
}

// DefaultApprovalTimeout is how long a request for approval stays open
// unless its flow says otherwise: a working day's absence is not a refusal.
const DefaultApprovalTimeout = 24 * time.Hour

// approvalTimeout is how long a request for f's approval stays open.
func (f *Flow) approvalTimeout() time.Duration {
	if f.ApprovalTimeout > 0 {
		return f.ApprovalTimeout
	}
	return DefaultApprovalTimeout
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

// newCatalog checks flows and agents by CheckFlows and CheckAgents and
// indexes them. With one agent and none marked default, that one is the default.
func newCatalog(flows []Flow, agents []Agent, admins []string) (*catalog, error) {
	if err := errors.Join(CheckFlows(flows), CheckAgents(agents)); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	c := &catalog{
		flows:         make(map[string]*Flow, len(flows)),
		agents:        make(map[string]*Agent, len(agents)),
		channelAgents: make(map[string]*Agent),
		admins:        make(map[string]bool, len(admins)),
	}
	for i := range flows {
		f := flows[i]
		c.flows[f.Name] = &f
		c.flowNames = append(c.flowNames, f.Name)
	}
	for i := range agents {
		a := agents[i]
		c.agents[a.Name] = &a
		c.agentNames = append(c.agentNames, a.Name)
		for _, ch := range a.DefaultChannels {
			c.channelAgents[ch] = &a
		}
		if a.Default || len(agents) == 1 {
			c.defaultAgent = &a
		}
	}
	for _, a := range admins {
		c.admins[a] = true
	}
	slices.Sort(c.flowNames)
	slices.Sort(c.agentNames)
	return c, nil
}

// CatalogError is one problem of a catalog entry. Key names the entry and
// field as a configuration file spells them, "flows[2].params[0].name".
type CatalogError struct {
	Key, Msg string
}

func (e *CatalogError) Error() string { return e.Key + ": " + e.Msg }

// CheckFlows returns every problem of flows, each a *CatalogError, joined:
// the rules New and SetCatalog apply, for a configuration check to report
// before anything starts.
func CheckFlows(flows []Flow) error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, &CatalogError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	seen := map[string]bool{}
	for i, f := range flows {
		key := fmt.Sprintf("flows[%d]", i)
		switch {
		case f.Name == "":
			add(key+".name", "required")
		case NameProblem(f.Name) != "":
			add(key+".name", "%q %s (it is the command word)", f.Name, NameProblem(f.Name))
		case f.Name == "help":
			add(key+".name", "\"help\" is reserved for /flow help")
		case seen[f.Name]:
			add(key+".name", "flow %q is defined twice", f.Name)
		}
		seen[f.Name] = true
		if f.UUID == "" {
			add(key+".uuid", "required")
		}
		if len(f.Approvers) > 0 && !f.Confirm {
			add(key+".approvers", "set, but confirm is not: set confirm = true for a run to wait for its approval")
		}
		for j, r := range f.Approvers {
			if msg := ApproverProblem(r); msg != "" {
				add(fmt.Sprintf("%s.approvers[%d]", key, j), "%s", msg)
			}
		}
		switch {
		case f.ApprovalTimeout < 0:
			add(key+".approval_timeout", "cannot be negative")
		case f.ApprovalTimeout > 0 && len(f.Approvers) == 0:
			add(key+".approval_timeout", "set, but approvers is not: a caller's own confirmation waits %s", humanDuration(confirmTTL))
		}
		params := map[string]bool{}
		for j, p := range f.Params {
			pkey := fmt.Sprintf("%s.params[%d].name", key, j)
			switch {
			case p.Name == "":
				add(pkey, "required")
			case ParamProblem(p.Name) != "":
				add(pkey, "%q %s", p.Name, ParamProblem(p.Name))
			case params[p.Name]:
				add(pkey, "parameter %q is defined twice", p.Name)
			}
			params[p.Name] = true
		}
	}
	return errors.Join(errs...)
}

// CheckAgents is CheckFlows for agents: at least one, each named once with a
// UUID, exactly one default among several, and a channel the default of one
// agent at most, among that agent's channels.
func CheckAgents(agents []Agent) error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, &CatalogError{Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	seen := map[string]bool{}
	defaultOf := map[string]string{} // channel ID -> the agent it defaults to
	defaults := 0
	for i, a := range agents {
		key := fmt.Sprintf("agents[%d]", i)
		switch {
		case a.Name == "":
			add(key+".name", "required")
		case NameProblem(a.Name) != "":
			add(key+".name", "%q %s", a.Name, NameProblem(a.Name))
		case seen[a.Name]:
			add(key+".name", "agent %q is defined twice", a.Name)
		}
		seen[a.Name] = true
		if a.UUID == "" {
			add(key+".uuid", "required")
		}
		if a.Default {
			defaults++
		}
		channels := make(map[string]bool, len(a.Channels))
		for j, ch := range a.Channels {
			channels[ch] = true
			if strings.TrimSpace(ch) == "" {
				add(fmt.Sprintf("%s.channels[%d]", key, j), "empty: give a channel ID")
			}
		}
		for j, ch := range a.DefaultChannels {
			k := fmt.Sprintf("%s.default_channels[%d]", key, j)
			switch other, dup := defaultOf[ch]; {
			case strings.TrimSpace(ch) == "":
				add(k, "empty: give a channel ID")
			case dup:
				add(k, "channel %s is already the default of agent %q: a channel has one default agent", ch, other)
			case len(a.Channels) > 0 && !channels[ch]:
				add(k, "channel %s is not one of the agent's channels, where it may talk", ch)
			default:
				defaultOf[ch] = a.Name
			}
		}
	}
	switch {
	case len(agents) == 0:
		add("agents", "at least one agent is required")
	case defaults > 1 || defaults == 0 && len(agents) > 1:
		add("agents", "exactly one agent must have default = true (%d have)", defaults)
	}
	return errors.Join(errs...)
}

// MaxNameLen bounds a flow's or agent's name: Slack's and Discord's limit
// for a command word.
const MaxNameLen = 32

// NameProblem says what is wrong with a flow's or agent's name ("" if
// nothing): lower-case letters, digits, - and _, starting with a letter or
// digit, at most MaxNameLen characters.
func NameProblem(name string) string {
	return wordProblem(name, MaxNameLen, false)
}

// ParamProblem is NameProblem for a flow's parameter: upper case allowed,
// 64 characters.
func ParamProblem(name string) string {
	return wordProblem(name, 64, true)
}

func wordProblem(name string, limit int, upper bool) string {
	var why []string
	if n := utf8.RuneCountInString(name); n > limit {
		why = append(why, fmt.Sprintf("is %d characters long; the limit is %d", n, limit))
	}
	if !upper && strings.ToLower(name) != name {
		why = append(why, "must be lower case")
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		why = append(why, fmt.Sprintf("may hold only letters, digits, - and _, not %q", r))
	} else if name[0] == '-' || !upper && name[0] == '_' {
		why = append(why, "must start with a letter or digit")
	}
	return strings.Join(why, " and ")
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
