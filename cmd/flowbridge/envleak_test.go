package main

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// leakBase is a config with every section on and one entry in every list,
// so that each key that can carry a ${VAR} reference is read and checked.
const leakBase = `
[workspace]
base_url = "https://ws.example.com"
workspace_uuid = "ws"
api_token = "token"
[admin]
listen = "127.0.0.1:9090"
[log]
level = "info"
[[agents]]
name = "helper"
uuid = "agent-1"
default = true
channels = ["C0123ABC"]
[[flows]]
name = "healthcheck"
uuid = "flow-1"
allow = ["everyone"]
  [[flows.params]]
  name = "host"
  choices = ["web1"]
[[schedules]]
name = "morning"
flow = "healthcheck"
params = { host = "web1" }
cron = "@daily"
platform = "slack"
channel = "C0123ABC"
[console]
enabled = true
[slack]
enabled = true
bot_token = "xoxb-1"
app_token = "xapp-1"
[discord]
enabled = true
token = "abc.def.ghi"
application_id = "900000000000000001"
`

// refKeys lists the paths of every string key of t (and its lists' first
// entries) where a ${VAR} reference is expanded.
func refKeys(t reflect.Type, path string) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := joinKey(path, name)
		switch ft := t.Field(i).Type; {
		case ft.Kind() == reflect.String:
			out = append(out, key)
		case ft.Kind() == reflect.Struct && !ft.Implements(textUnmarshaler) && !reflect.PointerTo(ft).Implements(textUnmarshaler):
			out = append(out, refKeys(ft, key)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String:
			out = append(out, key+"[0]")
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, refKeys(ft.Elem(), key+"[0]")...)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.String:
			out = append(out, key+".host")
		}
	}
	return out
}

// setKey sets the value at a refKeys path in a decoded TOML document.
func setKey(doc map[string]any, key, value string) {
	var cur any = doc
	parts := strings.Split(key, ".")
	for n, part := range parts {
		name, idx, isList := strings.Cut(part, "[")
		m := cur.(map[string]any)
		last := n == len(parts)-1
		switch {
		case isList && last:
			m[name] = []any{value}
		case isList:
			i, _ := strconv.Atoi(strings.TrimSuffix(idx, "]"))
			list, _ := m[name].([]any)
			for len(list) <= i {
				list = append(list, map[string]any{})
			}
			m[name] = list
			cur = list[i]
		case last:
			m[name] = value
		default:
			if _, ok := m[name].(map[string]any); !ok {
				m[name] = map[string]any{}
			}
			cur = m[name]
		}
	}
}

func TestConfigNeverEchoesAReferencedValue(t *testing.T) {
	t.Parallel()
	// A secret written by mistake into a key that is not a secret (or into
	// part of one) is never printed, whatever the key makes of it: errors
	// name the key and the variable.
	secrets := map[string]string{
		"plain":  "xoxb-7777-LEAKED-secret-a1b2",
		"quoted": `lk"q\d-LEAKED-sec ret`,
	}
	if out, _, err := runCmd(t, nil, "", "check-config", "-config", writeFile(t, leakBase)); err != nil {
		t.Fatalf("the base config is invalid: %v\n%s", err, out)
	}
	keys := refKeys(reflect.TypeFor[Config](), "")
	if len(keys) < 40 {
		t.Fatalf("found %d keys that take references, want every string key: %v", len(keys), keys)
	}
	for label, secret := range secrets {
		for _, key := range keys {
			for _, form := range []string{"${LEAK}", "https://ws.example.com/?t=${LEAK}", "x${LEAK}x"} {
				t.Run(fmt.Sprintf("%s/%s/%s", label, key, form), func(t *testing.T) {
					var doc map[string]any
					if err := toml.Unmarshal([]byte(leakBase), &doc); err != nil {
						t.Fatal(err)
					}
					setKey(doc, key, form)
					data, err := toml.Marshal(doc)
					if err != nil {
						t.Fatal(err)
					}
					out, errOut, err := runCmd(t, map[string]string{"LEAK": secret}, "", "check-config", "-config", writeFile(t, string(data)))
					all := out + errOut
					if err != nil {
						all += err.Error()
					}
					for _, part := range []string{secret, strconv.Quote(secret), "LEAKED"} {
						if strings.Contains(all, part) {
							t.Fatalf("%s = %q with LEAK=%q: output shows the value:\n%s", key, form, secret, all)
						}
					}
					if err != nil && !strings.Contains(err.Error(), "${LEAK}") && strings.Contains(err.Error(), ": "+key+": ") {
						t.Errorf("%s = %q: the error names the key but not the variable:\n%v", key, form, err)
					}
				})
			}
		}
	}
}
