package main

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// defaultOf is key's default: its value in defaultConfig, or for a key of a
// list entry ("flows.timeout") the zero value of its field.
func defaultOf(t *testing.T, key string) reflect.Value {
	t.Helper()
	v := reflect.ValueOf(defaultConfig())
	for name := range strings.SplitSeq(key, ".") {
		if v.Kind() == reflect.Slice {
			v = reflect.New(v.Type().Elem()).Elem()
		}
		f, ok := fieldByTag(v.Type(), name)
		if !ok {
			t.Fatalf("no field for %s", key)
		}
		v = v.FieldByIndex(f.Index)
	}
	return v
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); tag == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// sameValue compares a default with a value decoded from the docs; an empty
// list or table is the same whether nil or not.
func sameValue(a, b reflect.Value) bool {
	if (a.Kind() == reflect.Slice || a.Kind() == reflect.Map) && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// decodeAs decodes a TOML value (`"2m"`, `16`, `[]`) into a value of t.
func decodeAs(t reflect.Type, literal string) (reflect.Value, error) {
	holder := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: t, Tag: `toml:"v"`}}))
	if err := toml.Unmarshal([]byte("v = "+literal), holder.Interface()); err != nil {
		return reflect.Value{}, err
	}
	return holder.Elem().Field(0), nil
}

// readmeConfigRows returns the rows of the README's configuration table by key.
func readmeConfigRows(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(data), "\n## Configuration\n")
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string][]string{}
	cell := regexp.MustCompile(`(?:\\\||[^|])+`)
	for _, line := range strings.Split(section, "\n") {
		if m := regexp.MustCompile("^\\| `([a-z_.]+)` \\|").FindStringSubmatch(line); m != nil {
			var cells []string
			for _, c := range cell.FindAllString(strings.Trim(line, "|"), -1) {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows[m[1]] = cells
		}
	}
	return rows
}

// TestConfigKeysDocumented: the README's configuration table has a row for
// every key the code reads and none other; each row's default is the code's
// (a TOML value in backticks, or, for a key whose default is its zero,
// "required" or words), and each numeric key's row states its bounds.
func TestConfigKeysDocumented(t *testing.T) {
	rows := readmeConfigRows(t)
	keys := map[string]bool{}
	structKeys(reflect.TypeFor[Config](), "", keys)
	for key := range keys {
		row, ok := rows[key]
		if !ok {
			t.Errorf("README's configuration table has no row for %s", key)
			continue
		}
		if len(row) != 3 {
			t.Errorf("README's row for %s has %d cells, want key, default, allowed: %q", key, len(row), row)
			continue
		}
		def := defaultOf(t, key)
		literal, ok := strings.CutPrefix(row[1], "`")
		if ok {
			literal, _, ok = strings.Cut(literal, "`")
		}
		if !ok {
			if !def.IsZero() {
				t.Errorf("README's row for %s says its default is %q; the code's is %v: write it as a TOML value in backticks", key, row[1], def)
			}
			continue
		}
		got, err := decodeAs(def.Type(), literal)
		if err != nil {
			t.Errorf("README's default for %s, %s, is not a value of its type: %v", key, literal, err)
			continue
		}
		if !sameValue(got, def) {
			t.Errorf("README's default for %s is %s; the code's is %v", key, literal, def)
		}
	}
	for key := range rows {
		if !keys[key] {
			t.Errorf("README documents %s, which the code does not read", key)
		}
	}
	for key, r := range rangesByKey() {
		if row, ok := rows[key]; ok && len(row) == 3 && !strings.Contains(row[2], r) {
			t.Errorf("README's row for %s does not say its range %q:\n%s", key, r, row[2])
		}
	}
}

// TestExampleShowsDefaults: where config.example.toml sets a key that has a
// default (outside the lists of agents, flows and schedules, which are
// examples), it shows that default.
func TestExampleShowsDefaults(t *testing.T) {
	var doc map[string]any
	if err := toml.Unmarshal(readExample(t), &doc); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	tomlKeys(doc, "", set)
	n := 0
	for key := range set {
		section, _, _ := strings.Cut(key, ".")
		if section == "agents" || section == "flows" || section == "schedules" {
			continue
		}
		def := defaultOf(t, key)
		if def.IsZero() {
			continue // an example value, where the code has none
		}
		n++
		literal := exampleLiteral(t, key)
		got, err := decodeAs(def.Type(), literal)
		if err != nil {
			t.Errorf("config.example.toml's %s = %s: %v", key, literal, err)
			continue
		}
		if !sameValue(got, def) {
			t.Errorf("config.example.toml's %s = %s; the code's default is %v", key, literal, def)
		}
	}
	if n < 20 {
		t.Errorf("config.example.toml shows %d defaults; the check found too few to prove anything", n)
	}
}

// exampleLiteral is the value config.example.toml writes for key, as written.
func exampleLiteral(t *testing.T, key string) string {
	t.Helper()
	section, name, _ := strings.Cut(key, ".")
	text, ok := exampleEntry(strings.Split(string(readExample(t)), "\n"), section, name)
	if !ok {
		t.Fatalf("config.example.toml does not set %s", key)
	}
	lines := strings.Split(text, "\n")
	_, value, _ := strings.Cut(lines[len(lines)-1], "=")
	value, _, _ = strings.Cut(value, " #")
	return strings.TrimSpace(value)
}
