package main

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/flowbridge/flowbridge/adapters/console"
	"github.com/flowbridge/flowbridge/adapters/discord"
	"github.com/flowbridge/flowbridge/adapters/slack"
	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
)

// This file is the one place a key's default and allowed range are written.
//
// To add a key: give its section's type (config.go, or the adapter's Config)
// a field with its toml tag; set its default in defaultConfig (a setting of
// the core or the workspace client takes its package's default, so the
// literal stays there); give a number its range in bounds, which Validate
// applies; pass it on where it is used (bridgeConfig, clientConfig, an
// adapter); then show it in config.example.toml and in the README's
// configuration table. TestConfigKeysDocumented checks that both name every
// key with the default and range written here.

// defaultConfig is the configuration before the file is read.
func defaultConfig() Config {
	core := bridge.DefaultConfig()
	return Config{
		Workspace: WorkspaceConfig{
			CreateSessionPath: workspace.DefaultCreateSessionPath,
			ChatTimeout:       Duration(workspace.DefaultChatTimeout),
			MaxRetries:        workspace.DefaultMaxRetries,
		},
		Store: StoreConfig{
			Driver:           driverBBolt,
			Path:             "flowbridge.db",
			AuditRetention:   Duration(90 * 24 * time.Hour),
			SessionRetention: Duration(90 * 24 * time.Hour),
			ReplyRetention:   Duration(30 * 24 * time.Hour),
			LeaseTTL:         Duration(core.Replicas.LeaseTTL),
			OrderHold:        Duration(core.Replicas.OrderHold),
		},
		Bridge: BridgeConfig{
			QueueSize:             core.QueueSize,
			MaxInFlight:           core.MaxInFlight,
			MaxScheduledInFlight:  core.ScheduledInFlight,
			DefaultFlowTimeout:    Duration(core.DefaultFlowTimeout),
			DedupeTTL:             Duration(10 * time.Minute),
			ShutdownGrace:         Duration(30 * time.Second),
			WorkingIndicatorDelay: Duration(core.IndicatorDelay),
			ProgressInterval:      Duration(core.ProgressInterval),
			MaxMessageBytes:       core.Limits.MaxMessageBytes,
			MaxParams:             core.Limits.MaxParams,
			MaxValueBytes:         core.Limits.MaxValueBytes,
			ChatPerMinute:         core.Limits.ChatPerMinute,
			FlowsPerMinute:        core.Limits.FlowsPerMinute,
			RateBurst:             core.Limits.Burst,
			MaxFiles:              core.Files.MaxFiles,
			MaxFileBytes:          int(core.Files.MaxFileBytes),
			FileReplyOver:         core.Files.ReplyOver,
			ThreadContextMessages: core.ThreadContext.Messages,
			ThreadContextChars:    core.ThreadContext.Chars,
		},
		Admin:   AdminConfig{Listen: "127.0.0.1:9090"},
		Log:     LogConfig{Level: "info", Format: "json"},
		Console: console.DefaultConfig(),
		Slack:   slack.DefaultConfig(),
		Discord: discord.DefaultConfig(),
	}
}

// followDefaults sets the defaults that follow another key, for the keys
// the file (doc, as decoded) leaves out: discord.catch_up_age is at most
// bridge.dedupe_ttl, so a shorter dedupe_ttl shortens its default (as it
// did when dedupe_ttl set the catch-up age), rather than make the file
// wrong.
func followDefaults(cfg *Config, doc map[string]any) {
	if dc, _ := doc["discord"].(map[string]any); dc["catch_up_age"] == nil {
		cfg.Discord.CatchUpAge = min(cfg.Discord.CatchUpAge, discord.Duration(cfg.Bridge.DedupeTTL))
	}
}

// bounds is the allowed range of every numeric key, by its path without
// list indices ("flows.timeout" is each flow's). Validate checks each value
// against it; config.example.toml and the README say each next to its key.
var bounds = map[string]bound{
	"workspace.chat_timeout": durationRange{min: time.Second, max: 30 * time.Minute},
	"workspace.max_retries":  intRange{min: 0, max: 10},

	"store.audit_retention":   durationRange{zero: "keep forever", min: time.Hour, max: 87600 * time.Hour},
	"store.lease_ttl":         durationRange{min: time.Second, max: 5 * time.Minute},
	"store.session_retention": durationRange{zero: "keep forever", min: time.Hour, max: 87600 * time.Hour},
	"store.reply_retention":   durationRange{zero: "keep forever", min: time.Hour, max: 87600 * time.Hour},
	"store.order_hold":        durationRange{zero: "no wait", min: 10 * time.Millisecond, max: 2 * time.Second},

	"bridge.queue_size":              intRange{min: 1, max: 10000},
	"bridge.max_in_flight":           intRange{min: 1, max: 100000},
	"bridge.max_scheduled_in_flight": intRange{min: 1, max: 10000},
	"bridge.default_flow_timeout":    durationRange{min: time.Second, max: time.Hour},
	"bridge.dedupe_ttl":              durationRange{min: time.Minute, max: 7 * 24 * time.Hour},
	"bridge.shutdown_grace":          durationRange{min: 0, max: 10 * time.Minute},
	"bridge.working_indicator_delay": durationRange{min: 0, max: 10 * time.Second},
	// Progress more often than every 15 s would spend the platforms' edit
	// limits (Slack's chat.update, Discord's edits per channel) on little.
	"bridge.progress_interval": durationRange{zero: "off", min: 15 * time.Second, max: 10 * time.Minute},
	"bridge.max_message_bytes": intRange{min: 1, max: 1000000},
	"bridge.max_params":        intRange{min: 1, max: 100},
	"bridge.max_value_bytes":   intRange{min: 1, max: 100000},
	"bridge.chat_per_minute":   floatRange{zero: "unlimited", min: 0, max: 6000},
	"bridge.flows_per_minute":  floatRange{zero: "unlimited", min: 0, max: 6000},
	"bridge.rate_burst":        intRange{min: 1, max: 1000},
	// A message brings at most max_files files of max_file_bytes each to
	// the agent; a longer reply than file_reply_over characters is posted
	// as a file where the platform's files setting is on.
	"bridge.max_files":       intRange{min: 1, max: 20},
	"bridge.max_file_bytes":  intRange{min: 1, max: 10000000},
	"bridge.file_reply_over": intRange{zero: "never", min: 500, max: 1000000},
	// The earlier messages of a thread the first message of a conversation
	// brings the agent: Slack reads the newest, in at most four calls.
	"bridge.thread_context_messages": intRange{zero: "off", min: 1, max: 200},
	"bridge.thread_context_chars":    intRange{min: 200, max: 100000},

	// Discord's catch-up reads back at most this far, and no further than
	// bridge.dedupe_ttl (checkAdapters).
	"discord.catch_up_age": durationRange{min: time.Minute, max: 7 * 24 * time.Hour},

	"flows.timeout": durationRange{zero: "bridge.default_flow_timeout", min: time.Second, max: time.Hour},
	// A request for approval waits for people: at least a few minutes, at
	// most a month (the token it is kept as lives that long).
	"flows.approval_timeout": durationRange{zero: fmtDuration(bridge.DefaultApprovalTimeout), min: 5 * time.Minute, max: 30 * 24 * time.Hour},
}

// bound is the allowed values of a numeric key.
type bound interface {
	// check adds a problem at key when v (the key's field) is out of bounds.
	check(ps *problems, key string, v reflect.Value)
	// String says the bounds as the example and the README write them.
	String() string
}

// checkBounds checks every value under v (at key path, "" for the whole
// config) that bounds names.
func checkBounds(ps *problems, v reflect.Value, path string) {
	walkKeys(v, path, func(path, key string, v reflect.Value) {
		if b, ok := bounds[key]; ok {
			b.check(ps, path, v)
		}
	})
}

// walkKeys calls f with each leaf key under v: its path ("flows[0].timeout")
// and its path without list indices ("flows.timeout").
func walkKeys(v reflect.Value, path string, f func(path, key string, v reflect.Value)) {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(textUnmarshaler):
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if name == "" || name == "-" || !t.Field(i).IsExported() {
				continue
			}
			walkKeys(v.Field(i), joinKey(path, name), f)
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		for i := range v.Len() {
			walkKeys(v.Index(i), fmt.Sprintf("%s[%d]", path, i), f)
		}
	default:
		f(path, indexless(path), v)
	}
}

// indexless drops the list indices of a key path: "flows[0].timeout" is "flows.timeout".
func indexless(path string) string {
	var b strings.Builder
	skip := false
	for _, r := range path {
		switch {
		case r == '[':
			skip = true
		case r == ']':
			skip = false
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// durationRange is the allowed span of a duration key; with zero set, 0 is
// allowed too and means that.
type durationRange struct {
	zero     string
	min, max time.Duration
}

func (r durationRange) String() string {
	s := fmtDuration(r.min) + " to " + fmtDuration(r.max)
	if r.zero != "" {
		return "0s (" + r.zero + ") or " + s
	}
	return s
}

func (r durationRange) check(ps *problems, key string, v reflect.Value) {
	d := time.Duration(v.Int())
	switch {
	case d == 0 && r.zero != "", d >= r.min && d <= r.max:
	case d < 0 && r.min == 0:
		ps.add(key, "cannot be negative: allowed %s", r)
	default:
		ps.add(key, "%s is out of range: allowed %s", fmtDuration(d), r)
	}
}

// intRange is the allowed span of a whole-number key; with zero set, 0 is
// allowed too and means that.
type intRange struct {
	zero     string
	min, max int
}

func (r intRange) String() string {
	s := fmt.Sprintf("%d to %d", r.min, r.max)
	if r.zero != "" {
		return "0 (" + r.zero + ") or " + s
	}
	return s
}

func (r intRange) check(ps *problems, key string, v reflect.Value) {
	n := int(v.Int())
	if n == 0 && r.zero != "" || n >= r.min && n <= r.max {
		return
	}
	ps.add(key, "%d is out of range: allowed %s", n, r)
}

// floatRange is the allowed span of a number key; 0 is its minimum and means zero.
type floatRange struct {
	zero     string
	min, max float64
}

func (r floatRange) String() string {
	return fmt.Sprintf("%g (%s) to %g", r.min, r.zero, r.max)
}

func (r floatRange) check(ps *problems, key string, v reflect.Value) {
	if f := v.Float(); !(f >= r.min && f <= r.max) { // also refuses NaN
		ps.add(key, "%g is out of range: allowed %s", f, r)
	}
}

// fmtDuration writes a duration as it would be written in the file ("1h", not "1h0m0s").
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
