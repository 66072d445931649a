package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// TestRunWithoutConfigSaysHowToMakeOne: the first thing a newcomer types
// after building, run with no flowbridge.toml, says how to make one, how to
// name another, and that dev needs none.
func TestRunWithoutConfigSaysHowToMakeOne(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "flowbridge.toml")
	for _, args := range [][]string{{"run", "-config", missing}, {"check-config", "-config", missing}} {
		_, _, err := runCmd(t, map[string]string{"FLOWBRIDGE_API_TOKEN": "t"}, "", args...)
		if err == nil {
			t.Fatalf("%v = nil, want an error", args)
		}
		for _, want := range []string{"cp config.example.toml " + missing, "-config FILE", "flowbridge dev"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v = %q, want it to say %q", args, err, want)
			}
		}
	}
}

// TestAuditRefusesUnknownOutcome: -outcome takes one of the outcomes the
// audit records; another is a usage error (exit status 2) listing them, not
// an empty table.
func TestAuditRefusesUnknownOutcome(t *testing.T) {
	t.Parallel()
	path := writeFile(t, testConfig("", "[store]\npath = \""+filepath.ToSlash(filepath.Join(t.TempDir(), "store.db"))+"\"\n[admin]\nlisten = \"off\"\n"))
	out, _, err := runCmd(t, nil, "", "audit", "-config", path, "-outcome", "bogus")
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Fatalf("audit -outcome bogus = %v (output %q), want a usage error", err, out)
	}
	for _, o := range store.Outcomes {
		if !strings.Contains(err.Error(), o) {
			t.Errorf("audit -outcome bogus = %q, want it to list %q", err, o)
		}
	}
	if out != "" {
		t.Errorf("audit -outcome bogus printed %q, want nothing", out)
	}
	if _, _, err := runCmd(t, nil, "", "audit", "-config", path, "-outcome", store.OutcomeOK); err != nil {
		t.Errorf("audit -outcome ok = %v, want it listed", err)
	}
}
