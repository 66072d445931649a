package slack

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Connection modes.
const (
	ModeSocket = "socket"
	ModeHTTP   = "http"
)

// Session scopes.
const (
	ScopeThread  = "thread"
	ScopeChannel = "channel"
)

// Working indicators.
const (
	IndicatorPlaceholder = "placeholder"
	IndicatorReaction    = "reaction"
	IndicatorNone        = "none"
)

// DefaultAPIURL is Slack's Web API base, in the form slack-go's OptionAPIURL takes.
const DefaultAPIURL = "https://slack.com/api/"

// EventsPath is the one HTTP-mode endpoint for events, slash commands and
// interactivity, as in Slack's Bolt.
const EventsPath = "/slack/events"

// Config is the [slack] section of the configuration.
type Config struct {
	Enabled bool `toml:"enabled"`
	// Mode is "socket" (default; needs app_token, no public URL) or "http"
	// (needs signing_secret and a public URL reaching listen).
	Mode     string        `toml:"mode"`
	BotToken bridge.Secret `toml:"bot_token"`
	// AppToken is the app-level token (xapp-…) Socket Mode connects with.
	AppToken bridge.Secret `toml:"app_token"`
	// SigningSecret verifies HTTP-mode requests.
	SigningSecret bridge.Secret `toml:"signing_secret"`
	// Listen is the HTTP-mode address, e.g. ":3000".
	Listen string `toml:"listen"`
	// PublicURL is where Slack reaches listen in HTTP mode (e.g.
	// "https://bot.example.com"); only the app manifest uses it.
	PublicURL string `toml:"public_url"`
	// APIURL is the Web API base ending in "/" (tests and proxies point it elsewhere).
	APIURL       string `toml:"api_url"`
	FlowCommand  string `toml:"flow_command"`
	AgentCommand string `toml:"agent_command"`
	// SessionScope is "thread" (a mention starts a thread, which is the
	// conversation) or "channel" (a whole channel is one conversation and a
	// mention in it is answered in the channel).
	SessionScope string `toml:"session_scope"`
	// ThreadRepliesNeedMention makes the bot answer in its threads only when
	// mentioned; by default it answers every message in a thread it is part of.
	ThreadRepliesNeedMention bool `toml:"thread_replies_need_mention"`
	// AllowBots lets other bots' messages reach the agent; the bot's own
	// messages are always ignored.
	AllowBots bool `toml:"allow_bots"`
	// UserGroups looks up each user's user groups (usergroups.list, cached for
	// five minutes) so access rules can name them; it needs usergroups:read.
	UserGroups bool `toml:"user_groups"`
	// WorkingIndicator shows that the agent works: "placeholder" (a
	// "Thinking…" message replaced by the answer), "reaction" (an emoji on the
	// user's message, removed when the answer is sent) or "none".
	WorkingIndicator string `toml:"working_indicator"`
	// WorkingReaction is the emoji name for the reaction indicator.
	WorkingReaction string `toml:"working_reaction"`
	// DisableMarkdownBlock always renders converted mrkdwn sections instead of
	// Slack's markdown block (for workspaces or proxies that reject it).
	DisableMarkdownBlock bool `toml:"disable_markdown_block"`
	// Files lets text files shared with a message reach the agent (downloaded
	// with the bot token; needs files:read) and posts long replies as files
	// (files.getUploadURLExternal and completeUploadExternal; needs
	// files:write). Off by default.
	Files bool `toml:"files"`

	// Assistant serves Slack's assistant container (the app's split view):
	// each thread there is a conversation of its own, greeted with the
	// agent's suggested prompts, titled after its first message, showing
	// AssistantStatus while the agent works. It needs the assistant:write
	// scope and the assistant_view feature.
	Assistant bool `toml:"assistant"`
	// AssistantStatus is the status shown in an assistant thread, or an
	// agent_view thread, while the agent works, at most 50 characters.
	AssistantStatus string `toml:"assistant_status"`
	// AgentView serves Slack's Agent messaging experience (the
	// agent_view feature, which new apps must use instead of
	// assistant_view): the app's Messages tab greets the user with the
	// default agent's suggested prompts the first time they open it, each
	// thread there is a conversation of its own, what the user views in
	// Slack (app_context_changed) reaches the agent once per change, and
	// AssistantStatus shows while the agent works. It cannot be combined
	// with Assistant.
	AgentView bool `toml:"agent_view"`
	// AgentDescription is the manifest's agent_description: what Slack
	// tells users the agent does, at most 300 characters.
	AgentDescription string `toml:"agent_description"`
	// FlowForms opens a form (a modal) for "/flow" alone and for a flow
	// command without a required parameter, and serves the "Run a flow"
	// message shortcut. DefaultConfig turns it on; it needs no scope.
	FlowForms bool `toml:"flow_forms"`
}

// DefaultConfig returns the configuration defaults; New also fills any empty
// field with them.
func DefaultConfig() Config {
	return Config{
		Mode:             ModeSocket,
		Listen:           ":3000",
		APIURL:           DefaultAPIURL,
		FlowCommand:      "/flow",
		AgentCommand:     "/agent",
		SessionScope:     ScopeThread,
		WorkingIndicator: IndicatorPlaceholder,
		WorkingReaction:  "hourglass_flowing_sand",
		AssistantStatus:  DefaultAssistantStatus,
		AgentDescription: DefaultAgentDescription,
		FlowForms:        true,
	}
}

// withDefaults fills the empty fields from DefaultConfig. resolve is its
// one caller: every entry point that needs the defaults goes through it.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *string, def string) {
		if strings.TrimSpace(*v) == "" {
			*v = def
		}
	}
	set(&c.Mode, d.Mode)
	set(&c.Listen, d.Listen)
	set(&c.APIURL, d.APIURL)
	set(&c.FlowCommand, d.FlowCommand)
	set(&c.AgentCommand, d.AgentCommand)
	set(&c.SessionScope, d.SessionScope)
	set(&c.WorkingIndicator, d.WorkingIndicator)
	set(&c.WorkingReaction, d.WorkingReaction)
	set(&c.AssistantStatus, d.AssistantStatus)
	set(&c.AgentDescription, d.AgentDescription)
	return c
}

// UnusedKeys names the keys of the section that its mode does not read:
// app_token in HTTP mode, signing_secret in Socket Mode. The config loader
// leaves their ${ENV} references unread, so a copy of the example switched
// to the other mode needs no variable for them.
func (c Config) UnusedKeys() []string {
	if c.Mode == ModeHTTP {
		return []string{"app_token"}
	}
	return []string{"signing_secret"}
}

// Validate reports every problem of an enabled configuration, each naming its
// key; a disabled one is not checked.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	_, err := c.resolve(forAdapter)
	return err
}

// ValidateManifest reports problems of the settings the app manifest is made
// from, enabled or not. It needs no token, so the manifest can be made before
// the app exists.
func (c Config) ValidateManifest() error {
	_, err := c.resolve(forManifest)
	return err
}

// What a configuration is resolved for.
const (
	forAdapter  = iota // running: the mode's credentials are needed
	forManifest        // the app manifest: no token, but public_url in http mode
)

// resolve returns the configuration with its empty fields set to their
// defaults, and every problem it has for use.
func (c Config) resolve(use int) (Config, error) {
	c = c.withDefaults()
	var errs []error
	switch use {
	case forAdapter:
		errs = append(errs, c.credentialProblems())
	case forManifest:
		if c.Mode == ModeHTTP && c.PublicURL == "" {
			bad(&errs, "public_url", "required in http mode for the manifest: the HTTPS address that reaches listen, e.g. \"https://bot.example.com\" (Slack is sent to {public_url}%s)", EventsPath)
		}
	}
	return c, errors.Join(append(errs, c.settingProblems())...)
}

func bad(errs *[]error, key, format string, args ...any) {
	*errs = append(*errs, fmt.Errorf("slack.%s: %s", key, fmt.Sprintf(format, args...)))
}

// credentialProblems checks the tokens and secrets the mode needs.
func (c Config) credentialProblems() error {
	var errs []error
	switch {
	case c.BotToken.IsZero():
		bad(&errs, "bot_token", "required (the bot token, xoxb-…)")
	case !strings.HasPrefix(c.BotToken.Value(), "xoxb-"):
		bad(&errs, "bot_token", "must be a bot token starting with xoxb-")
	}
	switch c.Mode {
	case ModeSocket:
		switch {
		case c.AppToken.IsZero():
			bad(&errs, "app_token", "required in socket mode (the app-level token, xapp-…, with connections:write)")
		case !strings.HasPrefix(c.AppToken.Value(), "xapp-"):
			bad(&errs, "app_token", "must be an app-level token starting with xapp-")
		}
	case ModeHTTP:
		if c.SigningSecret.IsZero() {
			bad(&errs, "signing_secret", "required in http mode (Basic Information → Signing Secret)")
		}
	}
	return errors.Join(errs...)
}

// settingProblems checks everything but the credentials.
func (c Config) settingProblems() error {
	var errs []error
	switch c.Mode {
	case ModeSocket:
	case ModeHTTP:
		if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
			bad(&errs, "listen", "%q is not a host:port address such as \":3000\"", c.Listen)
		}
		if c.PublicURL != "" {
			if u, err := url.Parse(c.PublicURL); err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
				bad(&errs, "public_url", "%q is not an http(s) URL", c.PublicURL)
			}
		}
	default:
		bad(&errs, "mode", "%q is not one of \"socket\", \"http\"", c.Mode)
	}

	if u, err := url.Parse(c.APIURL); err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		bad(&errs, "api_url", "%q is not an http(s) URL", c.APIURL)
	} else if !strings.HasSuffix(c.APIURL, "/") {
		bad(&errs, "api_url", "%q must end in \"/\" (like %q)", c.APIURL, DefaultAPIURL)
	}

	for _, cmd := range []struct{ key, v string }{{"flow_command", c.FlowCommand}, {"agent_command", c.AgentCommand}} {
		if err := checkCommand(cmd.v); err != nil {
			bad(&errs, cmd.key, "%v", err)
		}
	}
	if c.FlowCommand == c.AgentCommand {
		bad(&errs, "agent_command", "must differ from flow_command (both %q)", c.FlowCommand)
	}

	switch c.SessionScope {
	case ScopeThread, ScopeChannel:
	default:
		bad(&errs, "session_scope", "%q is not one of \"thread\", \"channel\"", c.SessionScope)
	}
	switch c.WorkingIndicator {
	case IndicatorPlaceholder, IndicatorReaction, IndicatorNone:
	default:
		bad(&errs, "working_indicator", "%q is not one of \"placeholder\", \"reaction\", \"none\"", c.WorkingIndicator)
	}
	if n := runes(c.AssistantStatus); n > MaxStatusLength || strings.ContainsAny(c.AssistantStatus, "\n\r") {
		bad(&errs, "assistant_status", "%q must be one line of at most %d characters (Slack's limit)", truncate.Bytes(c.AssistantStatus, 60), MaxStatusLength)
	}
	if c.Assistant && c.AgentView {
		bad(&errs, "agent_view", "cannot be used with slack.assistant: a Slack app has either agent_view (new apps) or assistant_view; turn one off")
	}
	if n := runes(c.AgentDescription); n > MaxAgentDescription {
		bad(&errs, "agent_description", "%d characters; Slack takes at most %d", n, MaxAgentDescription)
	}
	if strings.ContainsAny(c.WorkingReaction, ": \t") {
		bad(&errs, "working_reaction", "%q must be an emoji name without colons, e.g. \"eyes\"", c.WorkingReaction)
	}
	return errors.Join(errs...)
}

// checkCommand applies Slack's rules for a slash command name.
func checkCommand(cmd string) error {
	name, ok := strings.CutPrefix(cmd, "/")
	switch {
	case !ok:
		return fmt.Errorf("%q must start with \"/\"", cmd)
	case name == "":
		return fmt.Errorf("%q needs a name after \"/\"", cmd)
	case len(cmd) > 32:
		return fmt.Errorf("%q is longer than Slack's 32 characters", cmd)
	case strings.ContainsAny(name, " \t/") || strings.ToLower(name) != name:
		return fmt.Errorf("%q must be one lower-case word", cmd)
	}
	return nil
}
