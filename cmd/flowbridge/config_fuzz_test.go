package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

const examplePath = "../../config.example.toml"

// exampleEnv sets every variable config.example.toml references.
func exampleEnv(t testing.TB, data []byte) func(string) string {
	t.Helper()
	env := map[string]string{}
	for _, m := range envRef.FindAllSubmatch(data, -1) {
		env[string(m[1])] = "value-of-" + string(m[1])
	}
	if len(env) == 0 {
		t.Fatal("config.example.toml references no ${ENV} variable; the api_token example should")
	}
	return mapEnv(env)
}

func readExample(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// commentedKey matches an example key that is commented out ("# choices = [...]").
var commentedKey = regexp.MustCompile(`(?m)^(\s*)#\s*([a-z_]+\s*=\s*\S.*)$`)

// uncommented returns the example with its commented-out keys enabled, so
// those are checked against the code as well.
func uncommented(data []byte) []byte {
	return commentedKey.ReplaceAll(data, []byte("$1$2"))
}

// FuzzParseConfig feeds the loader arbitrary files: it may refuse them, with
// an error, but never panic, and what it accepts is valid.
func FuzzParseConfig(f *testing.F) {
	example := readExample(f)
	f.Add(example)
	f.Add(uncommented(example))
	f.Add([]byte(""))
	f.Add([]byte("[workspace]\nbase_url = \"${"))
	getenv := func(k string) string {
		if k == "UNSET" {
			return ""
		}
		return "v-" + k
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseConfig(data, getenv)
		if err != nil {
			if cfg != nil {
				t.Errorf("parseConfig returned a config with error %v", err)
			}
			if err.Error() == "" {
				t.Error("empty error message")
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("accepted config does not validate: %v", err)
		}
		// What was accepted can be used: these run before any connection opens.
		_ = cfg.bridgeConfig()
		_ = cfg.warnings()
		_ = enabledAdapters(cfg)
	})
}

func TestExampleConfigDecodes(t *testing.T) {
	data := readExample(t)
	for _, tc := range []struct {
		name string
		data []byte
	}{{"as shipped", data}, {"commented keys enabled", uncommented(data)}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.data, exampleEnv(t, tc.data))
			if err != nil {
				t.Fatalf("parseConfig(config.example.toml) = %v", err)
			}
			if got := cfg.Workspace.APIToken.Value(); got != "value-of-FLOWBRIDGE_API_TOKEN" {
				t.Errorf("workspace.api_token = %q, want the expanded ${FLOWBRIDGE_API_TOKEN}", got)
			}
		})
	}
	if bytes := uncommented(data); string(bytes) == string(data) {
		t.Error("config.example.toml has no commented-out key; the uncommented check proves nothing")
	}
}

// TestExampleShowsDefaults: the example says every key "is shown with its
// default or an example"; where it shows the default, the code must agree.
func TestExampleShowsDefaults(t *testing.T) {
	data := readExample(t)
	cfg, err := parseConfig(data, exampleEnv(t, data))
	if err != nil {
		t.Fatal(err)
	}
	def := defaultConfig()
	cases := []struct {
		key       string
		got, want any
	}{
		{"workspace.create_session_path", cfg.Workspace.CreateSessionPath, def.Workspace.CreateSessionPath},
		{"workspace.chat_timeout", cfg.Workspace.ChatTimeout, def.Workspace.ChatTimeout},
		{"workspace.max_retries", cfg.Workspace.MaxRetries, def.Workspace.MaxRetries},
		{"store.driver", cfg.Store.Driver, def.Store.Driver},
		{"store.path", cfg.Store.Path, def.Store.Path},
		{"store.audit_retention", cfg.Store.AuditRetention, def.Store.AuditRetention},
		{"store.lease_ttl", cfg.Store.LeaseTTL, def.Store.LeaseTTL},
		{"store.order_hold", cfg.Store.OrderHold, def.Store.OrderHold},
		{"bridge.admins", len(cfg.Bridge.Admins), len(def.Bridge.Admins)},
		{"bridge.queue_size", cfg.Bridge.QueueSize, def.Bridge.QueueSize},
		{"bridge.max_in_flight", cfg.Bridge.MaxInFlight, def.Bridge.MaxInFlight},
		{"bridge.default_flow_timeout", cfg.Bridge.DefaultFlowTimeout, def.Bridge.DefaultFlowTimeout},
		{"bridge.dedupe_ttl", cfg.Bridge.DedupeTTL, def.Bridge.DedupeTTL},
		{"bridge.shutdown_grace", cfg.Bridge.ShutdownGrace, def.Bridge.ShutdownGrace},
		{"bridge.working_indicator_delay", cfg.Bridge.WorkingIndicatorDelay, def.Bridge.WorkingIndicatorDelay},
		{"bridge.max_message_bytes", cfg.Bridge.MaxMessageBytes, def.Bridge.MaxMessageBytes},
		{"bridge.max_params", cfg.Bridge.MaxParams, def.Bridge.MaxParams},
		{"bridge.max_value_bytes", cfg.Bridge.MaxValueBytes, def.Bridge.MaxValueBytes},
		{"bridge.chat_per_minute", cfg.Bridge.ChatPerMinute, def.Bridge.ChatPerMinute},
		{"bridge.flows_per_minute", cfg.Bridge.FlowsPerMinute, def.Bridge.FlowsPerMinute},
		{"bridge.rate_burst", cfg.Bridge.RateBurst, def.Bridge.RateBurst},
		{"bridge.max_files", cfg.Bridge.MaxFiles, def.Bridge.MaxFiles},
		{"bridge.max_file_bytes", cfg.Bridge.MaxFileBytes, def.Bridge.MaxFileBytes},
		{"bridge.file_reply_over", cfg.Bridge.FileReplyOver, def.Bridge.FileReplyOver},
		{"admin.listen", cfg.Admin.Listen, def.Admin.Listen},
		{"admin.token", cfg.Admin.Token.Value(), def.Admin.Token.Value()},
		{"log.level", cfg.Log.Level, def.Log.Level},
		{"log.format", cfg.Log.Format, def.Log.Format},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("%s in config.example.toml = %v, default in the code = %v", tc.key, tc.got, tc.want)
			}
		})
	}
	// The example's flow and agent decode into the fields they name.
	if len(cfg.Agents) != 1 || cfg.Agents[0].Name != "helper" || !cfg.Agents[0].Default {
		t.Errorf("agents = %+v, want the default agent helper", cfg.Agents)
	}
	if len(cfg.Flows) != 1 || cfg.Flows[0].Timeout.D() != 60*time.Second || !slices.Equal(cfg.Flows[0].Allow, []string{"everyone"}) || len(cfg.Flows[0].Params) != 2 || !cfg.Flows[0].Params[0].Required {
		t.Errorf("flows = %+v, want healthcheck with a 60s timeout, allow everyone and a required host", cfg.Flows)
	}
}

// TestExampleDocumentsEveryKey: every key the code reads appears in
// config.example.toml (commented out or not), and the example names no key the
// code does not read, so the two cannot drift apart.
func TestExampleDocumentsEveryKey(t *testing.T) {
	var doc map[string]any
	if err := toml.Unmarshal(uncommented(readExample(t)), &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	tomlKeys(doc, "", documented)
	code := map[string]bool{}
	structKeys(reflect.TypeFor[Config](), "", code)
	// A map-valued key (schedules.params) shows its entries as keys of its own.
	for k := range documented {
		for c := range code {
			if strings.HasPrefix(k, c+".") {
				delete(documented, k)
				documented[c] = true
			}
		}
	}

	var undocumented, unknown []string
	for k := range code {
		if !documented[k] {
			undocumented = append(undocumented, k)
		}
	}
	for k := range documented {
		if !code[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unknown)
	if len(undocumented) > 0 {
		t.Errorf("keys the code reads but config.example.toml does not show:\n  %s", strings.Join(undocumented, "\n  "))
	}
	if len(unknown) > 0 {
		t.Errorf("keys config.example.toml shows but the code does not read:\n  %s", strings.Join(unknown, "\n  "))
	}
}

func tomlKeys(v any, prefix string, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			key := joinKey(prefix, k)
			if m, ok := sub.(map[string]any); ok {
				tomlKeys(m, key, out)
				continue
			}
			if arr, ok := sub.([]any); ok && len(arr) > 0 {
				if _, tables := arr[0].(map[string]any); tables {
					for _, e := range arr {
						tomlKeys(e, key, out)
					}
					continue
				}
			}
			out[key] = true
		}
	}
}

func structKeys(t reflect.Type, prefix string, out map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		key := joinKey(prefix, name)
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(textUnmarshaler) {
			structKeys(ft, key, out)
			continue
		}
		out[key] = true
	}
}
