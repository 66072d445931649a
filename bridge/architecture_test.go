package bridge_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
)

// TestArchitecturePageNamesRealTests: every test docs/architecture.md
// names as the guard of a promise exists, so the page cannot point at a
// test that was renamed or removed.
func TestArchitecturePageNamesRealTests(t *testing.T) {
	page, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := make(map[string]bool)
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`\bTest[A-Z]\w+`).FindAllString(string(page), -1)
	if len(named) < 20 {
		t.Fatalf("the page names %d tests; want the guard of every promise named", len(named))
	}
	for _, name := range named {
		if !defined[name] {
			t.Errorf("docs/architecture.md names %s, which no test file defines", name)
		}
	}
}

// TestEventsAreData: an Event carries no behaviour (no func fields, and no
// exported interface fields an adapter could fill with one), so a live
// event and one read back from the inbox are the same value; and the
// Bridge stays small enough to follow (issue 29: at most 15 fields).
func TestEventsAreData(t *testing.T) {
	ev := reflect.TypeFor[bridge.Event]()
	for i := range ev.NumField() {
		f := ev.Field(i)
		if f.Type.Kind() == reflect.Func || f.IsExported() && f.Type.Kind() == reflect.Interface {
			t.Errorf("Event.%s is %s: events are data; the core asks the adapter through bridge.Platform", f.Name, f.Type)
		}
	}
	if n := reflect.TypeFor[bridge.Bridge]().NumField(); n > 15 {
		t.Errorf("Bridge has %d fields, want at most 15", n)
	}
}
