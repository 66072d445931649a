package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// liveKeys are the keys a reload (SIGHUP) applies to the running bridge;
// a change to any other key is reported as needing a restart. A section
// listed with a trailing dot covers every key inside it.
var liveKeys = []string{
	"agents", "flows", "bridge.admins",
	"bridge.max_message_bytes", "bridge.max_params", "bridge.max_value_bytes",
	"bridge.chat_per_minute", "bridge.flows_per_minute", "bridge.rate_burst",
	"slack.signing_secret",
}

func isLive(key string) bool {
	return slices.Contains(liveKeys, key)
}

// changedKeys returns the key paths, by toml tags, whose values differ
// between a and b (two values of one struct type), sorted. Arrays of tables
// ([[agents]], [[flows]]) and lists count as one key each.
func changedKeys(a, b any) []string {
	var out []string
	diffValues(reflect.ValueOf(a), reflect.ValueOf(b), "", &out)
	slices.Sort(out)
	return out
}

func diffValues(a, b reflect.Value, key string, out *[]string) {
	if a.Kind() == reflect.Pointer {
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				*out = append(*out, key)
			}
			return
		}
		a, b = a.Elem(), b.Elem()
	}
	if a.Kind() != reflect.Struct || a.Type().Implements(stringerType) {
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, key)
		}
		return
	}
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		sub := name
		if key != "" {
			sub = key + "." + name
		}
		diffValues(a.Field(i), b.Field(i), sub, out)
	}
}

var stringerType = reflect.TypeFor[fmt.Stringer]()

// splitReload divides the changed keys into those the reload applies and
// those that need a restart.
func splitReload(changed []string) (live, restart []string) {
	for _, k := range changed {
		if isLive(k) {
			live = append(live, k)
		} else {
			restart = append(restart, k)
		}
	}
	return live, restart
}
