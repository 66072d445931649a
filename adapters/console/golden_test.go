package console_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowbridge/flowbridge/adapters/console"
	"github.com/flowbridge/flowbridge/bridge"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

var styles = []struct {
	name  string
	style console.Style
}{
	{"plain", console.StylePlain},
	{"ansi", console.StyleANSI}, // cat the file in a terminal to see it
}

// The core's own replies, and the console's, as a terminal shows them.
func TestGoldenCoreReplies(t *testing.T) {
	flows := []bridge.Flow{
		{Name: "deploy", UUID: "f1", Description: "Deploy a service", Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "host", Required: true}, {Name: "service"}}},
	}
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			out := runStyled(t, newBridge(t, flows, 0), "/flow help\n/flow deploy\n/agent help\n/flwo deploy\n/help\n", s.style)
			golden(t, "core."+s.name+".golden", out)
		})
	}
}

// tablesSample is the shared table sample: wide, ragged, escaped,
// formatted and oversized tables.
func tablesSample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "bridge", "markdown", "testdata", "tables.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Replies as agents and flows write them: standard Markdown.
func TestGoldenAgentReplies(t *testing.T) {
	core := &scriptedCore{replies: map[string][]bridge.Reply{
		"health": {
			{Kind: bridge.ReplyProgress, Text: "Running *healthcheck*…"},
			{Kind: bridge.ReplyFlow, Text: "Health check of **web1**\n\n| check | result |\n|---|---|\n| nginx | _ok_ |", Footer: "*healthcheck* · run by ann · 1.2 s",
				Buttons: []bridge.Button{{Label: "Share with channel", Action: bridge.Action{ID: bridge.ActionShare}}}},
		},
		"explain": {{Kind: bridge.ReplyAgent, Text: "## Restarting *nginx*\n\n" +
			"1. Check the config with `nginx -t`.\n" +
			"2. Reload it:\n\n" +
			"   ```sh\n   sudo systemctl reload nginx  # not **restart**\n   ```\n\n" +
			"See [the docs](https://nginx.org/en/docs/control.html) or <https://nginx.org/>; " +
			"keep `worker_processes` as is, and don't touch my_custom_module.\n\n" +
			"> _Note:_ a reload keeps connections open."}},
		"tables": {{Kind: bridge.ReplyAgent, Text: tablesSample(t)}},
		"confirm": {{Kind: bridge.ReplyConfirm, Text: "Run *deploy* with these parameters?\n• `host` = web1", Buttons: []bridge.Button{
			{Label: "Run", Action: bridge.Action{ID: bridge.ActionConfirm}},
			{Label: "Cancel", Action: bridge.Action{ID: bridge.ActionCancel}},
		}}},
	}}
	for _, s := range styles {
		t.Run(s.name, func(t *testing.T) {
			golden(t, "agent."+s.name+".golden", runStyled(t, core, "health\nexplain\ntables\nconfirm\n", s.style))
		})
	}
}
