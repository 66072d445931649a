package discord

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestFlowProgress: a long flow run by /flow shows its description in the
// deferred response, which is then edited with the time elapsed — no more
// often than leaves room in Discord's edits per channel, so no edit meets
// a 429 — and finally replaced by the result.
func TestFlowProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) {
		e.flows = append(e.flows, bridge.Flow{Name: "longcheck", UUID: "flow-long", Description: "Checks every service of a host", Allow: []string{"everyone"}})
		e.ws.AddFlow(workspacetest.Flow{UUID: "flow-long", Template: "Long check done", Delay: 1500 * time.Millisecond})
		e.core = func(c *bridge.Config) { c.ProgressInterval = 100 * time.Millisecond }
	})
	e.start(t)
	sent := e.interact(t, flowCommand("longcheck"))
	result := e.waitOriginal(t, sent.ID, "Long check done")
	var edits []string
	for _, r := range e.fake.Requests() {
		if r.Route != discordtest.RouteEditWebhookMessage || !strings.Contains(r.Path, "/messages/") {
			continue
		}
		if r.Status == http.StatusTooManyRequests {
			t.Errorf("edit refused with 429: progress went past Discord's edits per channel")
		}
		edits = append(edits, string(r.Body))
	}
	var progress int
	for _, b := range edits {
		if strings.Contains(b, "so far") {
			progress++
			if !strings.Contains(b, "Checks every service of a host") {
				t.Errorf("progress edit %s, want the flow's description", b)
			}
		}
	}
	if len(edits) == 0 || !strings.Contains(edits[0], "Running") || !strings.Contains(edits[0], "Checks every service") {
		t.Errorf("edits = %q, want the first to fill the deferral with the flow's name and description", edits)
	}
	// Every 100 ms for 1.5 s asked; three in any 5 s taken.
	if progress == 0 || progress > 3 {
		t.Errorf("%d progress edits, want 1 to 3", progress)
	}
	if !strings.Contains(result.Content, "Long check done") || strings.Contains(result.Content, "so far") {
		t.Errorf("final response = %q, want the result", result.Content)
	}
}
