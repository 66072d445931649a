package sessionmap

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// rawVersion returns the version byte of the stored record of key.
func rawVersion(t *testing.T, s *Store, key string) byte {
	t.Helper()
	var ver byte
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketInbox).Get([]byte(key))
		if len(v) == 0 {
			return errors.New("no record")
		}
		ver = v[0]
		return nil
	})
	if err != nil {
		t.Fatalf("record of %q: %v", key, err)
	}
	return ver
}

// TestStopRecordVersions: only an entry stopped and not yet answered is
// written as version 4, the one record an older flowbridge cannot read;
// its changes keep the stop, and answering it writes version 3 again.
func TestStopRecordVersions(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Options{NoSync: true})
	ctx := t.Context()
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for _, key := range []string{"k/plain", "k/stopped"} {
		if _, err := s.Receive(ctx, store.InboxEntry{Key: key, Conversation: "c", Event: []byte("ev"), Received: now}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.Stop(ctx, "k/stopped", "U0ALICE", now.Add(time.Second)); err != nil || !ok {
		t.Fatalf("Stop = %v, %v", ok, err)
	}
	check := func(when string, want map[string]byte) {
		t.Helper()
		for key, ver := range want {
			if got := rawVersion(t, s, key); got != ver {
				t.Errorf("%s: record of %q is version %d, want %d", when, key, got, ver)
			}
		}
	}
	check("after Stop", map[string]byte{"k/plain": inboxV3, "k/stopped": inboxV4})
	if err := s.MarkSent(ctx, "k/stopped", now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	check("after MarkSent", map[string]byte{"k/stopped": inboxV4})
	if e := inboxLayout(t, s)["k/stopped"]; e.StoppedBy != "U0ALICE" || e.State != store.Sent || string(e.Event) != "ev" {
		t.Errorf("stopped entry after MarkSent = %+v, want Sent, its event, stopped by U0ALICE", e)
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check() with a version 4 record = %v", err)
	}
	if err := s.Finish(ctx, "k/stopped", "", nil, now.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	check("after Finish", map[string]byte{"k/stopped": inboxV3})
	if e := inboxLayout(t, s)["k/stopped"]; e.StoppedBy != "" || e.State != store.Answered {
		t.Errorf("answered stopped entry = %+v, want answered, its stop dropped", e)
	}
}

// TestInboxRecordV3Stop: a version 3 record, as every flowbridge before
// stops wrote, reads as not stopped and takes a stop; a version 4 record
// whose stop names nobody, or is cut short, is damage.
func TestInboxRecordV3Stop(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Options{NoSync: true})
	now := time.Now()
	ns := binary.AppendVarint(nil, now.UnixNano())
	// version, state, seq, received, updated, conversation, reply, order, event, checksum
	v3 := slices.Concat([]byte{inboxV3, byte(store.Sent)}, seqKey(1), ns, ns, []byte{1, 'c', 0}, binary.AppendVarint(nil, 7), []byte("ev"), make([]byte, inboxSumLen))
	sealInbox(v3)
	putRawInbox(t, s, "slack/msg/1", 1, v3)
	if err := s.db.Update(func(tx *bolt.Tx) error { return addCounter(tx, metaInbox, 1) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("Check() of a store with a version 3 record = %v", err)
	}
	got, err := s.PendingOf(t.Context(), "c")
	if err != nil || len(got) != 1 || got[0].StoppedBy != "" || got[0].Order != 7 || string(got[0].Event) != "ev" {
		t.Fatalf("PendingOf() of a version 3 record = %+v, %v, want it, not stopped", got, err)
	}
	if ok, err := s.Stop(t.Context(), "slack/msg/1", "U0BOB", now); err != nil || !ok {
		t.Fatalf("Stop of a version 3 record = %v, %v", ok, err)
	}
	if e := inboxLayout(t, s)["slack/msg/1"]; e.StoppedBy != "U0BOB" || e.Order != 7 || string(e.Event) != "ev" || e.State != store.Sent {
		t.Errorf("version 3 record stopped = %+v, want its fields kept, stopped by U0BOB", e)
	}

	stopped, err := appendInbox(nil, store.InboxEntry{State: store.Sent, Seq: 1, Received: now, Updated: now, Conversation: "c", StoppedBy: "U", Event: []byte("ev")})
	if err != nil {
		t.Fatal(err)
	}
	if stopped[0] != inboxV4 {
		t.Fatalf("stopped record version %d, want %d", stopped[0], inboxV4)
	}
	// Version 4 whose stop is empty, resealed so only the field is wrong.
	nobody := slices.Concat([]byte{inboxV4, byte(store.Sent)}, seqKey(1), ns, ns, []byte{1, 'c', 0}, binary.AppendVarint(nil, 0), []byte{0}, []byte("ev"), make([]byte, inboxSumLen))
	sealInbox(nobody)
	cut := slices.Concat([]byte{inboxV4, byte(store.Sent)}, seqKey(1), ns, ns, []byte{1, 'c', 0}, binary.AppendVarint(nil, 0), []byte{9, 'U'}, make([]byte, inboxSumLen))
	sealInbox(cut)
	for name, v := range map[string][]byte{"stopped by nobody": nobody, "stop cut short": cut} {
		if e, err := decodeInbox(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeInbox(%s) = %+v, %v, want ErrCorrupt", name, e, err)
		}
	}
	if e, err := decodeInbox(stopped); err != nil || e.StoppedBy != "U" || string(e.Event) != "ev" {
		t.Errorf("decodeInbox(a version 4 record) = %+v, %v, want stopped by U", e, err)
	}
}
