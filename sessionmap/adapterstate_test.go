package sessionmap

import (
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// TestAdapterStatesMoved: adapter state a flowbridge of before kept as
// context records ("adapter-state/" keys) is moved to the adapter states
// at open, unless the one kept there is newer; a conversation's context
// stays where it is.
func TestAdapterStatesMoved(t *testing.T) {
	t.Parallel()
	s, path := openTest(t, Options{})
	ctx := t.Context()
	t1 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for _, c := range []store.Context{
		{Key: store.LegacyAdapterStatePrefix + "discord/gateway/0-of-1", Text: `{"seq":7}`, Updated: t1},
		{Key: store.LegacyAdapterStatePrefix + "discord/identify-budget", Text: "older", Updated: t1},
		{Key: "slack/T1/D1/1.1", Text: "viewing", Told: true, Updated: t1},
	} {
		if err := s.PutConversationContext(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// Kept already, and newer than its legacy record.
	if ok, err := s.PutAdapterState(ctx, "discord/identify-budget", "newer", t1.Add(time.Minute), 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for name, want := range map[string]store.AdapterState{
		"discord/gateway/0-of-1":  {Text: `{"seq":7}`, Version: 1, Updated: t1},
		"discord/identify-budget": {Text: "newer", Version: 1, Updated: t1.Add(time.Minute)},
	} {
		got, ok, err := s.AdapterState(ctx, name)
		if err != nil || !ok || got.Text != want.Text || got.Version != want.Version || !got.Updated.Equal(want.Updated) {
			t.Errorf("AdapterState(%q) after open = %+v, %v, %v, want %+v", name, got, ok, err, want)
		}
		if c, ok, err := s.ConversationContext(ctx, store.LegacyAdapterStatePrefix+name); err != nil || ok {
			t.Errorf("legacy record of %q still a context: %+v, %v, %v", name, c, ok, err)
		}
	}
	if c, ok, err := s.ConversationContext(ctx, "slack/T1/D1/1.1"); err != nil || !ok || c.Text != "viewing" {
		t.Errorf("a conversation's context after open = %+v, %v, %v, want it kept", c, ok, err)
	}
}
