package bridge

import (
	"fmt"
	"strings"
	"testing"
)

// TestCatalogIsLinear: an agent of n channels, each a default channel, is
// checked in n steps. Looking each default channel up in the agent's
// channel list was n² (200,000 channels did not finish); a set makes it a
// lookup. A default channel that is not one of the agent's channels is
// still refused.
func TestCatalogIsLinear(t *testing.T) {
	t.Parallel()
	const n = 200_000
	channels := make([]string, n)
	for i := range n {
		channels[i] = fmt.Sprintf("C%d", i)
	}
	agent := Agent{Name: "helper", UUID: "a", Channels: channels, DefaultChannels: channels}
	c, err := newCatalog(nil, []Agent{agent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.channelAgents) != n || c.channelAgents[channels[n-1]].Name != "helper" {
		t.Errorf("catalog of an agent of %d default channels: %d default channels, want %d", n, len(c.channelAgents), n)
	}
	agent.DefaultChannels = append(channels[:n:n], "C-elsewhere")
	if _, err := newCatalog(nil, []Agent{agent}, nil); err == nil || !strings.Contains(err.Error(), "channel C-elsewhere is not one of the agent's channels") {
		t.Errorf("newCatalog(default channel outside the channels) = %v, want it refused", err)
	}
}
