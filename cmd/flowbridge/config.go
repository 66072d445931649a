package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/flowbridge/flowbridge/adapters/console"
	"github.com/flowbridge/flowbridge/adapters/discord"
	"github.com/flowbridge/flowbridge/adapters/slack"
	"github.com/flowbridge/flowbridge/bridge"
)

// Config is the whole TOML file; config.example.toml documents every key.
type Config struct {
	Workspace WorkspaceConfig `toml:"workspace"`
	Store     StoreConfig     `toml:"store"`
	Bridge    BridgeConfig    `toml:"bridge"`
	Admin     AdminConfig     `toml:"admin"`
	Log       LogConfig       `toml:"log"`
	Agents    []AgentConfig   `toml:"agents"`
	Flows     []FlowConfig    `toml:"flows"`
	Console   console.Config  `toml:"console"`
	Slack     slack.Config    `toml:"slack"`
	Discord   discord.Config  `toml:"discord"`
}

// WorkspaceConfig is the AI workspace API to call.
type WorkspaceConfig struct {
	BaseURL           string        `toml:"base_url"`
	WorkspaceUUID     string        `toml:"workspace_uuid"`
	APIToken          bridge.Secret `toml:"api_token"`
	CreateSessionPath string        `toml:"create_session_path"`
	ChatTimeout       Duration      `toml:"chat_timeout"`
	MaxRetries        int           `toml:"max_retries"`
}

// StoreConfig is the bbolt file.
type StoreConfig struct {
	Path string `toml:"path"`
	// AuditRetention drops audit entries older than this ("0s" keeps them forever).
	AuditRetention Duration `toml:"audit_retention"`
}

// BridgeConfig sets the core's limits.
type BridgeConfig struct {
	Admins             []string `toml:"admins"`
	QueueSize          int      `toml:"queue_size"`
	MaxInFlight        int      `toml:"max_in_flight"`
	DefaultFlowTimeout Duration `toml:"default_flow_timeout"`
	DedupeTTL          Duration `toml:"dedupe_ttl"`
	ShutdownGrace      Duration `toml:"shutdown_grace"`
	// WorkingIndicatorDelay is how long an answer may take before Slack's
	// placeholder or reaction, or Discord's typing indicator, shows.
	WorkingIndicatorDelay Duration `toml:"working_indicator_delay"`
	MaxMessageBytes       int      `toml:"max_message_bytes"`
	MaxParams             int      `toml:"max_params"`
	MaxValueBytes         int      `toml:"max_value_bytes"`
	ChatPerMinute         float64  `toml:"chat_per_minute"`
	FlowsPerMinute        float64  `toml:"flows_per_minute"`
	RateBurst             int      `toml:"rate_burst"`
}

// AdminConfig is the admin HTTP listener.
type AdminConfig struct {
	Listen string        `toml:"listen"`
	Token  bridge.Secret `toml:"token"`
}

// LogConfig chooses the log level and encoding.
type LogConfig struct {
	Level  string `toml:"level"`
	Format string `toml:"format"`
}

// AgentConfig is one [[agents]] entry.
type AgentConfig struct {
	Name        string   `toml:"name"`
	UUID        string   `toml:"uuid"`
	Description string   `toml:"description"`
	Default     bool     `toml:"default"`
	Channels    []string `toml:"channels"`
}

// FlowConfig is one [[flows]] entry.
type FlowConfig struct {
	Name        string        `toml:"name"`
	UUID        string        `toml:"uuid"`
	Description string        `toml:"description"`
	Timeout     Duration      `toml:"timeout"`
	Allow       []string      `toml:"allow"`
	Public      bool          `toml:"public"`
	Confirm     bool          `toml:"confirm"`
	Params      []ParamConfig `toml:"params"`
}

// ParamConfig is one [[flows.params]] entry.
type ParamConfig struct {
	Name        string   `toml:"name"`
	Description string   `toml:"description"`
	Required    bool     `toml:"required"`
	Choices     []string `toml:"choices"`
	Suggestions []string `toml:"suggestions"`
}

// Duration reads "30s"-style strings.
type Duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration (write e.g. \"30s\" or \"5m\")", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration back as a string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func defaultConfig() Config {
	return Config{
		Workspace: WorkspaceConfig{
			CreateSessionPath: "/api/v1/workspaces/{workspace_uuid}/agents/{agent_uuid}/sessions",
			ChatTimeout:       Duration(2 * time.Minute),
			MaxRetries:        2,
		},
		Store:  StoreConfig{Path: "flowbridge.db", AuditRetention: Duration(90 * 24 * time.Hour)},
		Bridge: BridgeConfig{QueueSize: 16, MaxInFlight: 256, DefaultFlowTimeout: Duration(60 * time.Second), DedupeTTL: Duration(10 * time.Minute), ShutdownGrace: Duration(30 * time.Second), WorkingIndicatorDelay: Duration(500 * time.Millisecond), MaxMessageBytes: 16000, MaxParams: 32, MaxValueBytes: 4000, RateBurst: 5},
		Admin:  AdminConfig{Listen: "127.0.0.1:9090"},
		Log:    LogConfig{Level: "info", Format: "json"},
	}
}

// loadConfig reads a config file: defaults, then the file decoded strictly,
// then ${ENV} references, then validation. Every problem is reported at once.
func loadConfig(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return parseConfig(data, getenv)
}

func parseConfig(data []byte, getenv func(string) string) (*Config, error) {
	cfg := defaultConfig()
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, decodeError(err)
	}
	if err := expandEnv(reflect.ValueOf(&cfg).Elem(), "", getenv); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return &cfg, nil
}

// decodeError lists every unknown key with its line, or the syntax error with its position.
func decodeError(err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var errs []error
		for _, e := range strict.Errors {
			row, col := e.Position()
			errs = append(errs, fmt.Errorf("line %d, column %d: unknown key %s", row, col, strings.Join(e.Key(), ".")))
		}
		return fmt.Errorf("config: %w", errors.Join(errs...))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		key := strings.Join(de.Key(), ".")
		if key != "" {
			key = " (" + key + ")"
		}
		return fmt.Errorf("config: line %d, column %d%s: %s", row, col, key, de.Error())
	}
	return fmt.Errorf("config: %w", err)
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${VAR} in every string of the config, after decoding, so a
// value can never change the TOML structure. An unset variable is an error
// naming the key: an empty token would only fail later, less clearly.
func expandEnv(v reflect.Value, path string, getenv func(string) string) error {
	var errs []error
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			errs = append(errs, expandEnv(v.Field(i), joinKey(path, name), getenv))
		}
	case reflect.Slice:
		for i := range v.Len() {
			errs = append(errs, expandEnv(v.Index(i), fmt.Sprintf("%s[%d]", path, i), getenv))
		}
	case reflect.String:
		s := v.String()
		if !strings.Contains(s, "${") {
			return nil
		}
		var missing []string
		out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
			name := ref[2 : len(ref)-1]
			val := getenv(name)
			if val == "" {
				missing = append(missing, name)
			}
			return val
		})
		for _, m := range missing {
			errs = append(errs, fmt.Errorf("%s: environment variable %s is not set", path, m))
		}
		v.SetString(out)
	}
	return errors.Join(errs...)
}

func joinKey(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Validate returns every problem in the config, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.Workspace.BaseURL == "" {
		add("workspace.base_url: required")
	} else if u, err := url.Parse(c.Workspace.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add("workspace.base_url: %q is not an http(s) URL", c.Workspace.BaseURL)
	}
	if c.Workspace.WorkspaceUUID == "" {
		add("workspace.workspace_uuid: required")
	}
	if c.Workspace.APIToken.IsZero() {
		add("workspace.api_token: required (e.g. api_token = \"${FLOWBRIDGE_API_TOKEN}\")")
	}
	if p := c.Workspace.CreateSessionPath; !strings.HasPrefix(p, "/") || !strings.Contains(p, "{agent_uuid}") {
		add("workspace.create_session_path: must start with / and contain {agent_uuid}")
	}
	if c.Store.Path == "" {
		add("store.path: required")
	}
	if c.Log.Level != "" {
		switch c.Log.Level {
		case "debug", "info", "warn", "error":
		default:
			add("log.level: %q is not one of debug, info, warn, error", c.Log.Level)
		}
	}
	switch c.Log.Format {
	case "", "json", "console":
	default:
		add("log.format: %q is not json or console", c.Log.Format)
	}
	if l := c.Admin.Listen; l != "" && l != "off" && c.Admin.Token.IsZero() && !isLoopback(l) {
		add("admin.token: required when admin.listen (%s) is not a loopback address", l)
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"bridge.queue_size", c.Bridge.QueueSize}, {"bridge.max_in_flight", c.Bridge.MaxInFlight}, {"bridge.max_message_bytes", c.Bridge.MaxMessageBytes}, {"bridge.max_params", c.Bridge.MaxParams}, {"bridge.max_value_bytes", c.Bridge.MaxValueBytes}} {
		if k.v <= 0 {
			add("%s: must be positive", k.key)
		}
	}
	if c.Bridge.ChatPerMinute < 0 || c.Bridge.FlowsPerMinute < 0 {
		add("bridge: chat_per_minute and flows_per_minute cannot be negative")
	}
	if c.Bridge.WorkingIndicatorDelay < 0 {
		add("bridge.working_indicator_delay: cannot be negative (0 shows the indicator at once)")
	}

	agents := map[string]bool{}
	defaults := 0
	for i, a := range c.Agents {
		key := fmt.Sprintf("agents[%d]", i)
		if a.Name == "" {
			add("%s.name: required", key)
		} else if !nameRE.MatchString(a.Name) {
			add("%s.name: %q must be lower-case letters, digits, - or _", key, a.Name)
		} else if agents[a.Name] {
			add("%s.name: agent %q is defined twice", key, a.Name)
		}
		agents[a.Name] = true
		if a.UUID == "" {
			add("%s.uuid: required", key)
		}
		if a.Default {
			defaults++
		}
	}
	if len(c.Agents) == 0 {
		add("agents: at least one [[agents]] entry is required")
	}
	if defaults > 1 || (defaults == 0 && len(c.Agents) > 1) {
		add("agents: exactly one agent must have default = true")
	}

	flows := map[string]bool{}
	for i, f := range c.Flows {
		key := fmt.Sprintf("flows[%d]", i)
		switch {
		case f.Name == "":
			add("%s.name: required", key)
		case !nameRE.MatchString(f.Name):
			add("%s.name: %q must be lower-case letters, digits, - or _ (it is the command word)", key, f.Name)
		case f.Name == "help":
			add("%s.name: \"help\" is reserved for /flow help", key)
		case flows[f.Name]:
			add("%s.name: flow %q is defined twice", key, f.Name)
		}
		flows[f.Name] = true
		if f.UUID == "" {
			add("%s.uuid: required", key)
		}
		if f.Timeout < 0 {
			add("%s.timeout: cannot be negative", key)
		}
		params := map[string]bool{}
		for j, p := range f.Params {
			pkey := fmt.Sprintf("%s.params[%d]", key, j)
			switch {
			case p.Name == "":
				add("%s.name: required", pkey)
			case !paramRE.MatchString(p.Name):
				add("%s.name: %q must be letters, digits, - or _", pkey, p.Name)
			case params[p.Name]:
				add("%s.name: parameter %q is defined twice", pkey, p.Name)
			}
			params[p.Name] = true
		}
	}
	if err := checkPlatforms(c); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

var (
	nameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	paramRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)
)

// warnings are problems that do not stop flowbridge but that an operator
// should hear about from check-config.
func (c *Config) warnings() []string {
	var w []string
	for i, f := range c.Flows {
		if len(f.Allow) == 0 {
			w = append(w, fmt.Sprintf("flows[%d] (%s): no allow rule, so no one can run it; add allow = [\"everyone\"] or a list of users, groups or channels", i, f.Name))
		}
	}
	if len(c.Bridge.Admins) == 0 {
		w = append(w, "bridge.admins: empty, so no one can switch agents with /agent use")
	}
	return w
}

// bridgeConfig converts the file's catalog and limits for the core.
func (c *Config) bridgeConfig() bridge.Config {
	bc := bridge.Config{
		Admins:             c.Bridge.Admins,
		QueueSize:          c.Bridge.QueueSize,
		MaxInFlight:        c.Bridge.MaxInFlight,
		DefaultFlowTimeout: c.Bridge.DefaultFlowTimeout.D(),
		DedupeTTL:          c.Bridge.DedupeTTL.D(),
		IndicatorDelay:     c.Bridge.WorkingIndicatorDelay.D(),
		Limits: bridge.Limits{
			MaxMessageBytes: c.Bridge.MaxMessageBytes, MaxParams: c.Bridge.MaxParams, MaxValueBytes: c.Bridge.MaxValueBytes,
			ChatPerMinute: c.Bridge.ChatPerMinute, FlowsPerMinute: c.Bridge.FlowsPerMinute, Burst: c.Bridge.RateBurst,
		},
	}
	bc.Flows, bc.Agents = c.catalog()
	return bc
}

func (c *Config) catalog() ([]bridge.Flow, []bridge.Agent) {
	flows := make([]bridge.Flow, 0, len(c.Flows))
	for _, f := range c.Flows {
		bf := bridge.Flow{Name: f.Name, UUID: f.UUID, Description: f.Description, Timeout: f.Timeout.D(), Allow: f.Allow, Public: f.Public, Confirm: f.Confirm}
		for _, p := range f.Params {
			bf.Params = append(bf.Params, bridge.Param{Name: p.Name, Description: p.Description, Required: p.Required, Choices: p.Choices, Suggestions: p.Suggestions})
		}
		flows = append(flows, bf)
	}
	agents := make([]bridge.Agent, 0, len(c.Agents))
	for _, a := range c.Agents {
		agents = append(agents, bridge.Agent{Name: a.Name, UUID: a.UUID, Description: a.Description, Default: a.Default, Channels: a.Channels})
	}
	return flows, agents
}
