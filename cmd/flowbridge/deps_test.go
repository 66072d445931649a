package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// testkitPath is the test kit's import path: fakes and harnesses for tests
// and tools, which the product never links.
const testkitPath = "github.com/flowbridge/flowbridge/testkit"

// TestDepsNoTestkit, in the manner of tailscale's deptest: the flowbridge
// binary, built for each platform it ships on, links nothing of testkit/.
// A fake linked into the product is code no one reviews as product code.
func TestDepsNoTestkit(t *testing.T) {
	t.Parallel()
	gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gotool); err != nil {
		if gotool, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to list the binary's dependencies: %v", err)
		}
	}
	for _, goos := range []string{"linux", "darwin", "windows"} {
		cmd := exec.Command(gotool, "list", "-deps", ".")
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOOS=%s go list -deps: %v\n%s", goos, err, stderr(err))
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 || deps[len(deps)-1] != "github.com/flowbridge/flowbridge/cmd/flowbridge" {
			t.Fatalf("GOOS=%s go list -deps printed no dependency list ending with the binary:\n%s", goos, out)
		}
		for _, dep := range deps {
			if dep == testkitPath || strings.HasPrefix(dep, testkitPath+"/") {
				t.Errorf("GOOS=%s: cmd/flowbridge links %s; the test kit is for tests and tools only", goos, dep)
			}
		}
	}
}

func stderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
