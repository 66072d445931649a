package main

import (
	"strings"
	"testing"
)

// TestPathErrorsShowTheReference: a path built from a ${VAR} reference is
// shown in errors as written, with the reference, never with the value,
// which may be a secret.
func TestPathErrorsShowTheReference(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-LEAKED-value"
	env := map[string]string{"SECRET": secret}
	tests := []struct {
		name, config string
		args         []string
	}{
		{"run, log.file", testConfig("", "[log]\nfile = \"/nonexistent/${SECRET}.log\"\n"), []string{"run"}},
		{"sessions, store.path", testConfig("", "[store]\npath = \"/nonexistent/${SECRET}/store.db\"\n[admin]\nlisten = \"off\"\n"), []string{"sessions", "list"}},
		{"audit, store.path", testConfig("", "[store]\npath = \"/nonexistent/${SECRET}/store.db\"\n[admin]\nlisten = \"off\"\n"), []string{"audit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(tt.args, "-config", writeFile(t, tt.config))
			out, errOut, err := runCmd(t, env, "", args...)
			if err == nil {
				t.Fatalf("%v = nil error, want one about the path\n%s%s", tt.args, out, errOut)
			}
			if all := out + errOut + err.Error(); strings.Contains(all, "LEAKED") {
				t.Errorf("%v shows the value of ${SECRET}:\n%s", tt.args, all)
			}
			if !strings.Contains(err.Error(), "/nonexistent/${SECRET}") {
				t.Errorf("%v = %v, want the path as written, with ${SECRET}", tt.args, err)
			}
		})
	}
}
