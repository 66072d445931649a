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

// TestExampleDecodesItsLists: the example's flow and agent decode into the
// fields they name.
func TestExampleDecodesItsLists(t *testing.T) {
	data := readExample(t)
	cfg, err := parseConfig(data, exampleEnv(t, data))
	if err != nil {
		t.Fatal(err)
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
