package discord

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

func validConfig() Config {
	return Config{Enabled: true, Token: "abc.def.ghi", ApplicationID: "900000000000000001"}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // substrings of the error; none means valid
	}{
		{"valid", func(*Config) {}, nil},
		{"disabled skips checks", func(c *Config) { *c = Config{} }, nil},
		{"channel scope", func(c *Config) { c.SessionScope = ScopeChannel }, nil},
		{"guilds and threads", func(c *Config) { c.GuildIDs = []string{"1", "2"}; c.StartThreads = true }, nil},
		{"fake api url", func(c *Config) { c.APIURL = "http://127.0.0.1:8080" }, nil},
		{"missing token and app", func(c *Config) { c.Token = ""; c.ApplicationID = "" }, []string{"discord.token: required", "discord.application_id: required"}},
		{"token with prefix", func(c *Config) { c.Token = "Bot abc" }, []string{`discord.token: give the token without the "Bot " prefix`}},
		{"bad ids", func(c *Config) { c.ApplicationID = "app"; c.GuildIDs = []string{"1", "x", "1"} }, []string{"discord.application_id:", "discord.guild_ids[1]:", "discord.guild_ids[2]: \"1\" is listed twice"}},
		{"bad scope", func(c *Config) { c.SessionScope = "guild" }, []string{"discord.session_scope:"}},
		{"threads need thread scope", func(c *Config) { c.SessionScope = ScopeChannel; c.StartThreads = true }, []string{"discord.start_threads:"}},
		{"api url path", func(c *Config) { c.APIURL = "https://discord.com/api/v9" }, []string{"discord.api_url:"}},
		{"api url scheme", func(c *Config) { c.APIURL = "ftp://x" }, []string{"discord.api_url:"}},
		{"negative timeout", func(c *Config) { c.OpenTimeout = Duration(-time.Second) }, []string{"discord.open_timeout: -1s is out of range: allowed 0s (the default, 30s) or 1s to 5m"}},
		{"tiny timeout", func(c *Config) { c.OpenTimeout = Duration(time.Nanosecond) }, []string{"discord.open_timeout: 1ns is out of range"}},
		{"huge timeout", func(c *Config) { c.OpenTimeout = Duration(time.Hour) }, []string{"discord.open_timeout: 60m is out of range"}},
		{"longest timeout", func(c *Config) { c.OpenTimeout = Duration(MaxOpenTimeout) }, nil},
		{"two shards, all held", func(c *Config) { c.ShardCount = 2 }, nil},
		{"one replica's shard", func(c *Config) { c.ShardCount = 2; c.ShardIDs = []int{1} }, nil},
		{"most shards", func(c *Config) { c.ShardCount = MaxShardCount; c.ShardIDs = []int{MaxShardCount - 1} }, nil},
		{"shard id out of range", func(c *Config) { c.ShardCount = 2; c.ShardIDs = []int{0, 2} }, []string{"discord.shard_ids[1]: 2 is out of range: with shard_count = 2 the shards are 0 to 1"}},
		{"shard ids without shard count", func(c *Config) { c.ShardIDs = []int{1} }, []string{"discord.shard_ids[0]: 1 is out of range: with shard_count = 1 the shards are 0 to 0"}},
		{"negative shard id", func(c *Config) { c.ShardCount = 2; c.ShardIDs = []int{-1} }, []string{"discord.shard_ids[0]: -1 is out of range"}},
		{"shard listed twice", func(c *Config) { c.ShardCount = 4; c.ShardIDs = []int{3, 1, 3} }, []string{"discord.shard_ids[2]: 3 is listed twice"}},
		{"negative shard count", func(c *Config) { c.ShardCount = -2 }, []string{"discord.shard_count: -2 is out of range: allowed 1 to 1024"}},
		{"too many shards", func(c *Config) { c.ShardCount = 1025; c.ShardIDs = []int{-1, 1024} }, []string{"discord.shard_count: 1025 is more than 1024", "large bot sharding", "discord.shard_ids[0]: -1 is not a shard ID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.change(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigDecodeTOML(t *testing.T) {
	const doc = `
enabled = true
token = "secret-token"
application_id = "900000000000000001"
guild_ids = ["1"]
session_scope = "channel"
message_content_intent = true
api_url = "http://127.0.0.1:1"
allow_bots = true
start_threads = false
open_timeout = "5s"
shard_count = 4
shard_ids = [3, 1]
`
	var c Config
	dec := toml.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("Decode = %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	if c.Token.Value() != "secret-token" || time.Duration(c.OpenTimeout) != 5*time.Second || c.SessionScope != ScopeChannel || !c.AllowBots || !c.MessageContentIntent ||
		c.ShardCount != 4 || !slices.Equal(c.ShardIDs, []int{3, 1}) {
		t.Errorf("decoded %+v", c)
	}
	if s := c.Token.String(); strings.Contains(s, "secret") {
		t.Errorf("Token.String() = %q, want it redacted", s)
	}
	var bad Config
	if err := toml.Unmarshal([]byte(`open_timeout = "soon"`), &bad); err == nil {
		t.Errorf(`Unmarshal(open_timeout = "soon") = nil, want an error`)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := validConfig().withDefaults()
	if c.SessionScope != ScopeThread || c.APIURL != DefaultAPIURL || time.Duration(c.OpenTimeout) != DefaultOpenTimeout ||
		c.ShardCount != 1 || !slices.Equal(c.ShardIDs, []int{0}) {
		t.Errorf("withDefaults() = %+v", c)
	}
	sharded := validConfig()
	sharded.ShardCount = 3
	if got := sharded.withDefaults().ShardIDs; !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("withDefaults() with shard_count = 3: shard_ids = %v, want [0 1 2]", got)
	}
}

// TestMaxFlowTimeoutIsTheAdapters: check-config warns with the exported
// figure; the adapter caps flows with its own, and they must be one.
func TestMaxFlowTimeoutIsTheAdapters(t *testing.T) {
	if MaxFlowTimeout != maxFlowTimeout {
		t.Errorf("MaxFlowTimeout = %v, but the adapter caps flows at %v", MaxFlowTimeout, maxFlowTimeout)
	}
	if MaxFlowTimeout >= 15*time.Minute {
		t.Errorf("MaxFlowTimeout = %v, want it below the 15-minute life of an interaction token", MaxFlowTimeout)
	}
}

func TestValidateInviteNeedsNoToken(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string // "" means valid
	}{
		{Config{ApplicationID: "900000000000000001"}, ""},
		{Config{Enabled: true, ApplicationID: "900000000000000001"}, ""},
		{Config{}, "discord.application_id: required"},
		{Config{Token: "abc", ApplicationID: "my-app"}, `discord.application_id: "my-app" is not a Discord ID`},
	}
	for _, tt := range tests {
		err := tt.cfg.ValidateInvite()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ValidateInvite(%+v) = %v, want nil", tt.cfg, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ValidateInvite(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}
