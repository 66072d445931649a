package discord

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
)

// Session scopes: what one conversation (one Agent session) covers.
const (
	// ScopeThread makes every thread its own conversation; a mention in a plain
	// channel is the channel's conversation, or a new thread's with start_threads.
	ScopeThread = "thread"
	// ScopeChannel makes a channel and all its threads one conversation.
	ScopeChannel = "channel"
)

// DefaultAPIURL is Discord's REST base; the gateway address is discovered from it.
const DefaultAPIURL = "https://discord.com"

// DefaultOpenTimeout bounds one gateway connection attempt, since discordgo's
// Open has no deadline of its own and can wait forever for Hello or READY.
const DefaultOpenTimeout = 30 * time.Second

// The allowed span of open_timeout (0 takes DefaultOpenTimeout).
const (
	MinOpenTimeout = time.Second
	MaxOpenTimeout = 5 * time.Minute
)

// DefaultCatchUpAge is catch_up_age's default.
const DefaultCatchUpAge = 10 * time.Minute

// MaxShardCount is the largest shard_count. 1024 shards of at most 2,500
// guilds each hold 2.5 million guilds; a bot beyond that is moved by Discord
// to large bot sharding (shard counts in multiples of its max_concurrency,
// identifies in buckets), which flowbridge does not do.
const MaxShardCount = 1024

// MaxFlowTimeout caps a flow started by an interaction: Discord's
// interaction token lasts 15 minutes, and the result must replace the
// deferred response before it expires.
const MaxFlowTimeout = 14 * time.Minute

// Config is the [discord] section of the configuration.
type Config struct {
	// Enabled turns the adapter on.
	Enabled bool `toml:"enabled"`
	// Token is the bot token from the Developer Portal, without the "Bot " prefix.
	Token bridge.Secret `toml:"token"`
	// ApplicationID is the application's ID, used to register slash commands
	// and to build the invite URL.
	ApplicationID string `toml:"application_id"`
	// GuildIDs registers the slash commands in these guilds (updates are
	// instant there); empty registers them globally.
	GuildIDs []string `toml:"guild_ids"`
	// SessionScope is ScopeThread (default) or ScopeChannel.
	SessionScope string `toml:"session_scope"`
	// MessageContentIntent requests the privileged message content intent; it
	// must also be enabled in the Developer Portal. Without it, messages that do
	// not mention the bot (in threads the bot follows) arrive empty.
	MessageContentIntent bool `toml:"message_content_intent"`
	// APIURL is the scheme and host REST calls go to, default DefaultAPIURL.
	// Tests point it at a fake Discord; the gateway address comes from its
	// /api/v9/gateway answer.
	APIURL string `toml:"api_url"`
	// AllowBots lets other bots' messages reach the Agent. The bot's own
	// messages are always ignored.
	AllowBots bool `toml:"allow_bots"`
	// StartThreads starts a thread on a message that mentions the bot in a
	// plain channel, and the conversation continues in that thread (session
	// scope "thread" only).
	StartThreads bool `toml:"start_threads"`
	// OpenTimeout bounds one gateway connection attempt, default "30s".
	OpenTimeout Duration `toml:"open_timeout"`
	// ShardCount is how many shards the bot's guilds are split over, 1 (the
	// default) to MaxShardCount: Discord sends a guild's events to shard
	// (guild_id >> 22) % shard_count, and DMs to shard 0 only.
	ShardCount int `toml:"shard_count"`
	// ShardIDs are the shards this process connects, one gateway connection
	// each; empty (the default) is every shard, 0 to ShardCount-1. Replicas
	// split a bot by listing different shards; shard 0 must run in one of
	// them, or no DM is answered and no slash command registered.
	ShardIDs []int `toml:"shard_ids"`
	// Files lets text files attached to messages reach the Agent (downloaded
	// from Discord's CDN) and posts long replies as file attachments, which
	// needs the Attach Files permission in channels. Off by default.
	Files bool `toml:"files"`
	// UserInstall registers the commands for user installs too: people
	// add the app to their account and run /flow and /agent in any server,
	// DM or group DM, where the bot itself is not a member. Needs global
	// commands (no guild_ids). Off by default.
	UserInstall bool `toml:"user_install"`
	// CatchUpAge bounds how far back a new gateway session reads the
	// channels' history for messages posted while none was connected,
	// default DefaultCatchUpAge. It must not exceed how long the inbox
	// remembers answered messages (bridge.dedupe_ttl), or a message read
	// could be one answered and forgotten, and be answered again: the
	// process refuses such a configuration.
	CatchUpAge Duration `toml:"catch_up_age"`
}

// Duration is a time.Duration written in config as a string such as "30s".
type Duration time.Duration

// UnmarshalText parses a duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration: write a number with a unit, e.g. \"30s\" or \"1m\"", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as a string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// DefaultConfig returns the configuration defaults; withDefaults fills any
// key left empty with them.
func DefaultConfig() Config {
	return Config{SessionScope: ScopeThread, APIURL: DefaultAPIURL, OpenTimeout: Duration(DefaultOpenTimeout), ShardCount: 1, CatchUpAge: Duration(DefaultCatchUpAge)}
}

// withDefaults fills the keys left empty.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.SessionScope == "" {
		c.SessionScope = d.SessionScope
	}
	if c.APIURL == "" {
		c.APIURL = d.APIURL
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = d.OpenTimeout
	}
	if c.ShardCount == 0 {
		c.ShardCount = d.ShardCount
	}
	if c.CatchUpAge <= 0 {
		c.CatchUpAge = d.CatchUpAge
	}
	if len(c.ShardIDs) == 0 && c.ShardCount >= 1 && c.ShardCount <= MaxShardCount {
		c.ShardIDs = make([]int, c.ShardCount)
		for i := range c.ShardIDs {
			c.ShardIDs[i] = i
		}
	}
	return c
}

// Validate reports every problem of an enabled section at once, each with its key.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	c = c.withDefaults()
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("discord.%s: "+format, append([]any{key}, args...)...))
	}
	if c.Token.IsZero() {
		add("token", "required")
	} else if strings.HasPrefix(c.Token.Value(), "Bot ") {
		add("token", `give the token without the "Bot " prefix`)
	} else if strings.ContainsAny(c.Token.Value(), " \t\r\n") {
		add("token", "contains white space")
	}
	errs = append(errs, c.checkApplicationID())
	seen := make(map[string]bool)
	for i, g := range c.GuildIDs {
		switch {
		case !isSnowflake(g):
			add(fmt.Sprintf("guild_ids[%d]", i), "%q is not a Discord ID", g)
		case seen[g]:
			add(fmt.Sprintf("guild_ids[%d]", i), "%q is listed twice", g)
		}
		seen[g] = true
	}
	switch c.SessionScope {
	case ScopeThread, ScopeChannel:
	default:
		add("session_scope", "%q is not %q or %q", c.SessionScope, ScopeThread, ScopeChannel)
	}
	if c.UserInstall && len(c.GuildIDs) > 0 {
		add("user_install", "needs the commands registered globally: leave guild_ids empty (guild commands cannot be installed by users)")
	}
	if c.StartThreads && c.SessionScope == ScopeChannel {
		add("start_threads", "needs session_scope = %q", ScopeThread)
	}
	if u, err := url.Parse(c.APIURL); err != nil {
		add("api_url", "%v", err)
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add("api_url", "%q is not an http(s) URL with a host", c.APIURL)
	} else if u.Path != "" && u.Path != "/" {
		add("api_url", "%q: give only scheme and host, the API path is added", c.APIURL)
	}
	if d := time.Duration(c.OpenTimeout); d < MinOpenTimeout || d > MaxOpenTimeout {
		add("open_timeout", "%s is out of range: allowed 0s (the default, %s) or %s to %s", short(d), short(DefaultOpenTimeout), short(MinOpenTimeout), short(MaxOpenTimeout))
	}
	countOK := c.ShardCount >= 1 && c.ShardCount <= MaxShardCount
	switch {
	case c.ShardCount > MaxShardCount:
		add("shard_count", "%d is more than %d: a bot that needs more shards (over 2.5 million guilds) is moved to Discord's large bot sharding, which flowbridge does not do", c.ShardCount, MaxShardCount)
	case !countOK:
		add("shard_count", "%d is out of range: allowed 1 to %d", c.ShardCount, MaxShardCount)
	}
	held := make(map[int]bool)
	for i, id := range c.ShardIDs {
		key := fmt.Sprintf("shard_ids[%d]", i)
		switch {
		case id < 0 || (countOK && id >= c.ShardCount):
			if countOK {
				add(key, "%d is out of range: with shard_count = %d the shards are 0 to %d", id, c.ShardCount, c.ShardCount-1)
			} else {
				add(key, "%d is not a shard ID", id)
			}
		case held[id]:
			add(key, "%d is listed twice", id)
		}
		held[id] = true
	}
	return errors.Join(errs...)
}

// ValidateInvite reports what the invite URL needs and lacks: only the
// application ID, so no token has to be set to build it.
func (c Config) ValidateInvite() error { return c.checkApplicationID() }

func (c Config) checkApplicationID() error {
	switch {
	case c.ApplicationID == "":
		return errors.New("discord.application_id: required (Developer Portal → General Information → Application ID)")
	case !isSnowflake(c.ApplicationID):
		return fmt.Errorf("discord.application_id: %q is not a Discord ID", c.ApplicationID)
	}
	return nil
}

// short writes a duration as the config would ("5m", not "5m0s").
func short(d time.Duration) string {
	switch {
	case d != 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d != 0 && d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// isSnowflake reports whether s looks like a Discord ID: 1 to 20 digits.
func isSnowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
