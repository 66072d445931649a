package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The config is checked in time linear in its size. These tests check the
// two steps that were quadratic (a file of 200,000 flows never finished):
// the line of each key (the TOML parser's Shape counts lines from the
// start of the file at each call) and whether a problem's key is already
// reported (every problem compared with every other). Each is checked
// against its plain definition, then run once at a size where n² steps
// would not end within the suite's timeout.

func TestLineIndex(t *testing.T) {
	t.Parallel()
	data := []byte("a\n\nbc\nd")
	for off, want := range []int{1, 1, 2, 3, 3, 3, 4} {
		if got := newLineIndex(data).line(off); got != want {
			t.Errorf("line(%d) of %q = %d, want %d", off, data, got, want)
		}
	}
}

func TestKeyIndexIsUnder(t *testing.T) {
	t.Parallel()
	keys := []string{"", "flows", "flows[1]", "flows[1].name", "flows[10].name", "flows[1].params[0].name", "flows[1].params",
		"workspace", "workspace.base_url", "workspace.base", "slack.bot_token", "slack"}
	for _, added := range [][]string{nil, {"flows[1]"}, {"flows[1].params[0].name", "slack"}, {"workspace.base_url", ""}, keys} {
		var x keyIndex
		for _, k := range added {
			x.add(k)
		}
		for _, k := range keys {
			want := false
			for _, path := range added {
				want = want || under(k, path)
			}
			if got := x.covers(k); got != want {
				t.Errorf("keyIndex%q.covers(%q) = %v, want %v (as under)", added, k, got, want)
			}
		}
	}
}

// manyFlows is n [[flows]] entries.
func manyFlows(n int, entry func(i int) string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(entry(i))
	}
	return b.String()
}

func TestConfigCheckIsLinear(t *testing.T) {
	t.Parallel()
	t.Run("lines of 200,000 flows (20,000 with -short)", func(t *testing.T) {
		t.Parallel()
		n := 200_000
		if testing.Short() {
			n = 20_000
		}
		head := testConfig("", "")
		text := head + manyFlows(n, func(i int) string {
			return fmt.Sprintf("[[flows]]\nname = \"f%d\"\nuuid = \"u%d\"\nallow = [\"everyone\"]\n", i, i)
		})
		pos := keyPositions([]byte(text))
		headLines := strings.Count(head, "\n")
		for _, i := range []int{0, 1, rand.IntN(n), n - 1} {
			key := fmt.Sprintf("flows[%d]", i+1) // flows[0] is testConfig's own
			if got, want := pos[key+".uuid"], headLines+4*i+3; got != want {
				t.Errorf("line of %s.uuid = %d, want %d", key, got, want)
			}
			if got, want := pos[key+".allow[0]"], headLines+4*i+4; got != want {
				t.Errorf("line of %s.allow[0] = %d, want %d", key, got, want)
			}
		}
	})
	t.Run("problems of 100,000 keys", func(t *testing.T) {
		t.Parallel()
		var x keyIndex
		for i := range 100_000 {
			x.add(fmt.Sprintf("flows[%d].timeout", i))
		}
		for i := range 100_000 {
			if !x.covers(fmt.Sprintf("flows[%d].timeout", i)) || x.covers(fmt.Sprintf("flows[%d].name", i)) {
				t.Fatalf("keyIndex of flows[*].timeout: covers flows[%d].timeout and not its name, want so", i)
			}
		}
	})
	t.Run("agent of 200,000 channels", func(t *testing.T) {
		t.Parallel()
		const n = 200_000
		channels := make([]string, n)
		for i := range n {
			channels[i] = fmt.Sprintf("C%d", i)
		}
		c := &Config{Agents: []AgentConfig{{Name: "helper", UUID: "a", Channels: channels, DefaultChannels: append(channels[:n:n], "C-elsewhere")}}}
		var ps problems
		c.checkAgents(&ps)
		if len(ps) != 1 || !strings.Contains(ps[0].Error(), fmt.Sprintf("agents[0].default_channels[%d]: channel C-elsewhere is not one of the agent's channels", n)) {
			t.Errorf("checkAgents(%d default channels, the last not a channel) = %v, want that one refused", n, ps)
		}
	})
	// The whole check, end to end, on a file where each flow has two
	// problems: one the shape check reports, one Validate does.
	t.Run("10,000 flows with problems", func(t *testing.T) {
		t.Parallel()
		const n = 10_000
		text := testConfig("", "") + manyFlows(n, func(i int) string {
			return fmt.Sprintf("[[flows]]\nname = \"F%d\"\nuuid = \"u%d\"\nallow = [\"everyone\"]\ntimeout = 3\n", i, i)
		})
		_, err := parseConfig([]byte(text), mapEnv(nil))
		ce, ok := err.(*configError)
		if !ok || len(ce.lines) != 2*n {
			t.Fatalf("parseConfig(%d flows with 2 problems each) = %v problems (%T), want %d", n, len(ce.lines), err, 2*n)
		}
		last := ce.lines[len(ce.lines)-1]
		if want := fmt.Sprintf("flows[%d].timeout", n); !strings.Contains(last, want) || !strings.HasPrefix(last, fmt.Sprintf("line %d:", strings.Count(text, "\n"))) {
			t.Errorf("last problem = %q, want %s on the file's last line", last, want)
		}
	})
}
