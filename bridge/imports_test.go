package bridge_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules keeps the design's dependency directions (DESIGN.md §1): the
// core knows no platform SDK, no bbolt and no adapter; the API client and the
// store import nothing of the project; each SDK stays inside its adapter.
func TestImportRules(t *testing.T) {
	t.Parallel()
	const mod = "github.com/flowbridge/flowbridge"
	out, err := exec.Command("go", "list", "-deps=false", "-json", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// Production imports only: tests may use fakes and the real store.
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		imports[p.ImportPath] = p.Imports
	}
	if len(imports) < 10 {
		t.Fatalf("go list found %d packages; the check would prove nothing", len(imports))
	}
	const (
		slackSDK   = "github.com/slack-go/slack"
		discordSDK = "github.com/bwmarrin/discordgo"
		bbolt      = "go.etcd.io/bbolt"
	)
	groupCommit := mod + "/internal/groupcommit"
	under := func(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }
	for pkg, imps := range imports {
		for _, imp := range imps {
			var broken string
			switch {
			case under(pkg, mod+"/bridge") && !under(pkg, mod+"/bridge/workspace") &&
				(under(imp, mod+"/adapters") || under(imp, mod+"/sessionmap") || under(imp, mod+"/cmd") || under(imp, slackSDK) || under(imp, discordSDK) || under(imp, bbolt)):
				broken = "the core imports no adapter, store or SDK"
			case (under(pkg, mod+"/bridge/workspace") || pkg == mod+"/bridge/store" || pkg == groupCommit) && under(imp, mod) && !under(imp, pkg) && imp != mod+"/internal/truncate":
				broken = "the API client, the store's records and the group commit import nothing of the project but internal/truncate"
			case pkg == mod+"/sessionmap" && under(imp, mod) && imp != mod+"/bridge/store" && imp != groupCommit:
				broken = "the store imports nothing of the project but the records it keeps (bridge/store) and the group commit"
			case pkg == mod+"/postgres" && under(imp, mod) && imp != mod+"/bridge/store" && imp != groupCommit:
				broken = "the PostgreSQL store imports nothing of the project but the records it keeps (bridge/store) and the group commit"
			// flowbridge-load and -chaos are exempt from the SDK rules: they drive
			// the fake Discord, whose API speaks discordgo's types; load's relay
			// uses both SDKs bare to measure what they cost without flowbridge.
			// Each platform's fake in testkit/ speaks its SDK's types too.
			case under(imp, slackSDK) && !under(pkg, mod+"/adapters/slack") && !under(pkg, mod+"/testkit/slacktest") && pkg != mod+"/cmd/flowbridge-load":
				broken = "only adapters/slack and its fake import slack-go"
			case under(imp, discordSDK) && !under(pkg, mod+"/adapters/discord") && !under(pkg, mod+"/testkit/discordtest") && pkg != mod+"/cmd/flowbridge-load" && pkg != mod+"/cmd/flowbridge-chaos":
				broken = "only adapters/discord and its fake import discordgo"
			case under(pkg, mod+"/adapters/") && under(imp, mod+"/adapters/") && strings.Split(strings.TrimPrefix(pkg, mod+"/adapters/"), "/")[0] != strings.Split(strings.TrimPrefix(imp, mod+"/adapters/"), "/")[0]:
				broken = "adapters never import each other"
			}
			if broken != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, broken)
			}
		}
	}
}
