package bridge_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneClock: the core reads the time only through Config.Now, so a
// test (or a replica) that sets the clock sets all of it. time.Now may
// appear once, as Now's default; time.Since and time.Until read the wall
// clock behind Now's back.
func TestOneClock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var nows []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
				switch sel.Sel.Name {
				case "Now", "Since", "Until":
					nows = append(nows, fset.Position(sel.Pos()).String()+": time."+sel.Sel.Name)
				}
			}
			return true
		})
	}
	if len(nows) != 1 || !strings.HasPrefix(nows[0], "bridge.go:") {
		t.Errorf("the core reads the wall clock at %q; want only Config.Now's default in bridge.go", nows)
	}
}
