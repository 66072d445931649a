package main

import (
	"slices"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
)

func TestReloadNamesKeysThatNeedARestart(t *testing.T) {
	a := defaultConfig()
	a.Flows = []FlowConfig{{Name: "healthcheck", UUID: "f1"}}
	b := a
	b.Flows = []FlowConfig{{Name: "healthcheck", UUID: "f2"}}
	b.Bridge.QueueSize = 99
	b.Bridge.ChatPerMinute = 3
	b.Store.Path = "elsewhere.db"
	b.Slack.SigningSecret = bridge.Secret("new")
	changed := changedKeys(a, b)
	want := []string{"bridge.chat_per_minute", "bridge.queue_size", "flows", "slack.signing_secret", "store.path"}
	if !slices.Equal(changed, want) {
		t.Fatalf("changedKeys = %q, want %q", changed, want)
	}
	live, restart := splitReload(changed)
	if !slices.Equal(live, []string{"bridge.chat_per_minute", "flows", "slack.signing_secret"}) || !slices.Equal(restart, []string{"bridge.queue_size", "store.path"}) {
		t.Errorf("splitReload = %q, %q", live, restart)
	}
	if got := changedKeys(a, a); len(got) != 0 {
		t.Errorf("changedKeys of the same config = %q, want none", got)
	}
}
