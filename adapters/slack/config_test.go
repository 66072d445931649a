package slack

import (
	"strings"
	"testing"
)

func validSocket() Config {
	c := DefaultConfig()
	c.Enabled = true
	c.BotToken = "xoxb-1-abc"
	c.AppToken = "xapp-1-abc"
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*Config)
		want   []string // substrings of the error; none means valid
		absent []string
	}{
		{name: "socket ok", edit: func(*Config) {}},
		{name: "disabled is not checked", edit: func(c *Config) { *c = Config{} }},
		{name: "zero values take defaults", edit: func(c *Config) {
			*c = Config{Enabled: true, BotToken: "xoxb-1", AppToken: "xapp-1"}
		}},
		{name: "http ok", edit: func(c *Config) {
			c.Mode, c.AppToken, c.SigningSecret, c.PublicURL = ModeHTTP, "", "s3cret", "https://bot.example.com"
		}},
		{name: "socket needs app token", edit: func(c *Config) { c.AppToken = "" },
			want: []string{"slack.app_token: required in socket mode (the app-level token, xapp-…"}},
		{name: "app token prefix", edit: func(c *Config) { c.AppToken = "xoxb-2" },
			want: []string{"slack.app_token: must be an app-level token starting with xapp-"}},
		{name: "bot token missing", edit: func(c *Config) { c.BotToken = "" },
			want: []string{"slack.bot_token: required"}},
		{name: "bot token prefix", edit: func(c *Config) { c.BotToken = "xoxp-user" },
			want: []string{"slack.bot_token: must be a bot token starting with xoxb-"}},
		{name: "http needs signing secret and listen", edit: func(c *Config) {
			c.Mode, c.Listen = ModeHTTP, "3000"
		}, want: []string{"slack.signing_secret: required in http mode", `slack.listen: "3000" is not a host:port`}},
		{name: "http does not need app token", edit: func(c *Config) {
			c.Mode, c.AppToken, c.SigningSecret = ModeHTTP, "", "x"
		}},
		{name: "bad mode", edit: func(c *Config) { c.Mode = "rtm" },
			want: []string{`slack.mode: "rtm" is not one of`}},
		{name: "api url without slash", edit: func(c *Config) { c.APIURL = "http://127.0.0.1:1/api" },
			want: []string{`slack.api_url: "http://127.0.0.1:1/api" must end in "/"`}},
		{name: "api url not a url", edit: func(c *Config) { c.APIURL = "slack.com/api/" },
			want: []string{"slack.api_url:"}},
		{name: "commands", edit: func(c *Config) { c.FlowCommand, c.AgentCommand = "flow", "/Agent" },
			want: []string{`slack.flow_command: "flow" must start with "/"`, `slack.agent_command: "/Agent" must be one lower-case word`}},
		{name: "same commands", edit: func(c *Config) { c.AgentCommand = "/flow" },
			want: []string{"slack.agent_command: must differ from flow_command"}},
		{name: "scope and indicator", edit: func(c *Config) { c.SessionScope, c.WorkingIndicator = "user", "spinner" },
			want: []string{`slack.session_scope: "user"`, `slack.working_indicator: "spinner"`}},
		{name: "reaction with colons", edit: func(c *Config) { c.WorkingReaction = ":eyes:" },
			want: []string{"slack.working_reaction:"}},
		{name: "public url", edit: func(c *Config) {
			c.Mode, c.SigningSecret, c.PublicURL = ModeHTTP, "x", "ftp://x"
		}, want: []string{"slack.public_url:"}},
		{name: "every problem at once", edit: func(c *Config) { c.BotToken, c.AppToken, c.SessionScope = "", "", "x" },
			want: []string{"slack.bot_token", "slack.app_token", "slack.session_scope"}},
		{name: "secrets never printed", edit: func(c *Config) { c.BotToken, c.AppToken = "xoxp-SECRETVALUE", "xoxb-SECRETAPP" },
			want: []string{"slack.bot_token"}, absent: []string{"SECRETVALUE", "SECRETAPP"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validSocket()
			tt.edit(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(err.Error(), a) {
					t.Errorf("Validate() = %q, must not contain %q", err, a)
				}
			}
		})
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	c := validSocket()
	c.AppToken = ""
	if _, err := New(c, idleCore{t}, nil); err == nil || !strings.Contains(err.Error(), "slack.app_token") {
		t.Fatalf("New(without app token) error = %v, want slack.app_token", err)
	}
	if _, err := New(validSocket(), nil, nil); err == nil {
		t.Fatal("New(nil core) error = nil, want an error")
	}
}

// TestValidateManifestNeedsNoToken: the manifest is made before the app and
// its tokens exist, so only the settings it is made from are checked, enabled
// or not.
func TestValidateManifestNeedsNoToken(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // "" means valid
	}{
		{"no tokens, disabled", Config{}, ""},
		{"no tokens, enabled", Config{Enabled: true}, ""},
		{"http without signing secret", Config{Mode: ModeHTTP, PublicURL: "https://bot.example.com"}, ""},
		{"bad command", Config{FlowCommand: "flow"}, `slack.flow_command: "flow" must start with "/"`},
		{"bad public url", Config{Mode: ModeHTTP, PublicURL: "bot.example.com"}, "slack.public_url:"},
		{"bad mode, disabled", Config{Mode: "rtm"}, `slack.mode: "rtm"`},
		{"agent view", Config{AgentView: true}, ""},
		{"agent view and assistant", Config{AgentView: true, Assistant: true}, "slack.agent_view: cannot be used with slack.assistant"},
		{"long agent description", Config{AgentView: true, AgentDescription: strings.Repeat("a", 301)}, "slack.agent_description: 301 characters; Slack takes at most 300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.ValidateManifest()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateManifest() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidateManifest() = %v, want %q", err, tt.want)
			}
			if _, merr := Manifest(tt.cfg, nil, nil, "", "yaml"); (merr == nil) != (tt.want == "") {
				t.Errorf("Manifest() error = %v, want error %v", merr, tt.want != "")
			}
		})
	}
}
