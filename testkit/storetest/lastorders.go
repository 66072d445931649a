package storetest

import (
	"maps"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// testLastOrders checks LastOrders (store.RecentInbox): per
// conversation, the highest Order of the entries under the key prefix
// received at or after since, whatever their state, and so after a reopen.
func testLastOrders(t *testing.T, o Opener) {
	s := o.Open(t)
	since := at(50)
	for _, e := range []store.InboxEntry{
		{Key: "discord/msg/10", Conversation: "discord/1/c", Order: 10, Received: at(100)},
		{Key: "discord/msg/30", Conversation: "discord/1/c", Order: 30, Received: at(100)},
		{Key: "discord/int/99", Conversation: "discord/1/c", Order: 99, Received: at(100)}, // not a message
		{Key: "discord/msg/20", Conversation: "discord/@me/d", Order: 20, Received: since},
		{Key: "discord/msg/5", Conversation: "discord/1/old", Order: 5, Received: at(49)},
		{Key: "discord/msg/7", Conversation: "discord/1/none", Received: at(100)}, // no order
		{Key: "slack/msg/C1/1.000001", Conversation: "slack/T/C1", Order: 1000001, Received: at(100)},
	} {
		e.Event = []byte("{}")
		receive(t, s, e)
	}
	markSent(t, s, "discord/msg/10", at(150))
	finish(t, s, "discord/msg/30", "ref", nil, at(200))
	// Answered after since, but received before it.
	finish(t, s, "discord/msg/5", "ref", nil, at(300))
	want := map[string]int64{"discord/1/c": 30, "discord/@me/d": 20}
	check := func(s store.Store) {
		t.Helper()
		got, err := s.LastOrders(t.Context(), "discord/msg/", since)
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("LastOrders = %v, %v, want %v", got, err, want)
		}
		got, err = s.LastOrders(t.Context(), "discord/msg/", at(101))
		if err != nil || len(got) != 0 {
			t.Errorf("LastOrders since after every entry = %v, %v, want none", got, err)
		}
	}
	check(s)
	if o.Reopen != nil {
		check(o.Reopen(t, s))
	}
}
