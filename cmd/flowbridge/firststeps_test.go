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

// TestRunConsoleOnlyWithoutInputSaysWhy: the README's Docker line with the
// example config (the console on, no -it) gives run an empty standard
// input that is no terminal. With the console its only adapter, run fails
// saying why and what to change, instead of exiting 0 at once in silence;
// a script on standard input is still answered and ends run with 0.
func TestRunConsoleOnlyWithoutInputSaysWhy(t *testing.T) {
	t.Parallel()
	path := writeFile(t, testConfig("", "[store]\npath = \""+filepath.ToSlash(filepath.Join(t.TempDir(), "store.db"))+"\"\n[admin]\nlisten = \"off\"\n"))
	_, errOut, err := runCmd(t, nil, "", "run", "-config", path)
	if !errors.Is(err, errNoConsoleInput) {
		t.Fatalf("run with the console only and no input = %v, want errNoConsoleInput", err)
	}
	for _, want := range []string{"not a terminal", "docker run -it", "[console] enabled = false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run's error %q does not say %q", err, want)
		}
	}
	if !strings.Contains(errOut, "input ended before any line was read") {
		t.Errorf("run's log does not say the console's input ended:\n%s", errOut)
	}
	if out, errOut, err := runCmd(t, nil, "/agent help\n", "run", "-config", path); err != nil || !strings.Contains(out, "/agent") {
		t.Errorf("run with a line of input = %v, output %q (log %s), want the line answered and 0", err, out, errOut)
	}
}
