package sessionmap

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// TestConversationIndexBuiltForAnOldStore: a store written before the
// inbox_conv index has its entries in flight indexed at Open, so that
// PendingOf finds them; answered entries are not indexed.
func TestConversationIndexBuiltForAnOldStore(t *testing.T) {
	s, path := openTest(t, Options{})
	ctx := t.Context()
	now := time.Now()
	for _, e := range []store.InboxEntry{
		{Key: "k/1", Conversation: "c/a", Event: []byte("e1"), Received: now},
		{Key: "k/2", Conversation: "c/b", Event: []byte("e2"), Received: now},
		{Key: "k/3", Conversation: "c/a", Event: []byte("e3"), Received: now},
	} {
		if _, err := s.Receive(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(ctx, "k/3", "", nil, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The store as the build before wrote it: no index.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketInboxConv) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for conv, want := range map[string][]string{"c/a": {"k/1"}, "c/b": {"k/2"}} {
		got, err := s.PendingOf(ctx, conv)
		if err != nil || len(got) != len(want) || got[0].Key != want[0] {
			t.Errorf("PendingOf(%s) = %+v, %v; want %v", conv, got, err, want)
		}
	}
}
