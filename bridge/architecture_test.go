package bridge_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
