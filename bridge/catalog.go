package bridge

import "time"

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
}
