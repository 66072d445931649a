package sessionmap

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// TestPruneSessions: sessions unused since before go, with their
// conversation's agent choice, context and latest reply; recent ones and
// ones of unknown age stay, and so does everything of theirs. (Sessions and
// reply records were never pruned: a store only grew.)
func TestPruneSessions(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Options{})
	s.chunk = 2 // several rounds
	ctx := t.Context()
	now := time.Unix(1_800_000_000, 0)
	cut := now.Add(-90 * 24 * time.Hour)
	type conv struct {
		key              string
		created, lastUse time.Time
		gone             bool
	}
	convs := []conv{
		{"slack/T1/C1/1.1", now.Add(-200 * 24 * time.Hour), now.Add(-100 * 24 * time.Hour), true},
		{"slack/T1/C1/1.2", now.Add(-200 * 24 * time.Hour), now.Add(-time.Hour), false},
		{"slack/T1/C1/1.3", now.Add(-100 * 24 * time.Hour), time.Time{}, true}, // never used: its creation counts
		{"slack/T1/C1/1.4", time.Time{}, time.Time{}, false},                   // age unknown
		{"discord/G/C5", now.Add(-300 * 24 * time.Hour), cut.Add(-time.Nanosecond), true},
		{"discord/G/C6", now.Add(-300 * 24 * time.Hour), cut, false},
		{"discord/G/C7", now, now, false},
	}
	for i, c := range convs {
		rec := Session{Key: c.key, Agent: "a", SessionUUID: testUUID(i), Created: c.created, LastUsed: c.lastUse}
		if err := s.PutSession(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := s.SetConversationAgent(ctx, c.key, "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.PutConversationContext(ctx, store.Context{Key: c.key, Text: "open: x", Updated: now}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetLastReply(ctx, c.key, "reply"); err != nil {
			t.Fatal(err)
		}
	}
	// An adapter's own state, under a key no conversation has, stays.
	if err := s.PutConversationContext(ctx, store.Context{Key: "discord/state/0", Text: "session", Updated: cut.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneSessions(ctx, cut)
	if err != nil || n != 3 {
		t.Fatalf("PruneSessions = %d, %v, want 3", n, err)
	}
	for _, c := range convs {
		_, hasSession, err1 := s.Session(ctx, c.key)
		_, hasAgent, err2 := s.ConversationAgent(ctx, c.key)
		_, hasContext, err3 := s.ConversationContext(ctx, c.key)
		_, hasReply, err4 := s.LastReply(ctx, c.key)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			t.Fatal(err1, err2, err3, err4)
		}
		for what, has := range map[string]bool{"session": hasSession, "agent choice": hasAgent, "context": hasContext, "latest reply": hasReply} {
			if has == c.gone {
				t.Errorf("%s (last used %v): %s kept = %v, want %v", c.key, c.lastUse, what, has, !c.gone)
			}
		}
	}
	if _, ok, err := s.ConversationContext(ctx, "discord/state/0"); err != nil || !ok {
		t.Errorf("an adapter's state after PruneSessions: %v, %v; want kept", ok, err)
	}
	if got := s.Stats().Sessions; got != int64(len(convs)-3) {
		t.Errorf("Stats().Sessions = %d, want %d", got, len(convs)-3)
	}
	if n, err := s.PruneSessions(ctx, cut); err != nil || n != 0 {
		t.Errorf("PruneSessions again = %d, %v, want 0", n, err)
	}
}

// TestPruneReplies: latest replies recorded (by a turn) before before go,
// the channel's copy included; recent ones and those recorded without a
// time stay.
func TestPruneReplies(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Options{})
	s.chunk = 2
	ctx := t.Context()
	now := time.Unix(1_800_000_000, 0)
	cut := now.Add(-30 * 24 * time.Hour)
	var turns []Turn
	for i, at := range []time.Time{cut.Add(-time.Hour), now} {
		key := fmt.Sprintf("slack/T1/C%d/1.1", i)
		rec := Session{Key: key, Agent: "a", SessionUUID: testUUID(i), Created: at, LastUsed: at}
		if err := s.PutSession(ctx, rec); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, Turn{Session: rec, Reply: fmt.Sprintf("answer %d", i), Also: []string{fmt.Sprintf("slack/T1/C%d/U1", i)}})
	}
	if n, err := s.PutTurns(ctx, turns); err != nil || n != 2 {
		t.Fatalf("PutTurns = %d, %v", n, err)
	}
	if err := s.SetLastReply(ctx, "slack/T1/C9/1.1", "no time"); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneReplies(ctx, cut)
	if err != nil || n != 2 {
		t.Fatalf("PruneReplies = %d, %v, want 2 (the old turn's reply and its channel copy)", n, err)
	}
	for key, want := range map[string]bool{
		"slack/T1/C0/1.1": false, "slack/T1/C0/U1": false,
		"slack/T1/C1/1.1": true, "slack/T1/C1/U1": true,
		"slack/T1/C9/1.1": true,
	} {
		text, ok, err := s.LastReply(ctx, key)
		if err != nil || ok != want {
			t.Errorf("LastReply(%s) after PruneReplies = %q, %v, %v; want kept %v", key, text, ok, err, want)
		}
	}
	if _, ok, _ := s.Session(ctx, "slack/T1/C0/1.1"); !ok {
		t.Error("PruneReplies dropped a session")
	}
}

// TestOpenCompacts: a file mostly free after pruning (bbolt reuses freed
// pages but never gives them back: after dedupe_ttl the inbox was empty
// and the file stayed 68 MB) is compacted at Open, keeping every record,
// the inbox's sequence and the store's identity; a file with little free
// space is left alone.
func TestOpenCompacts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "flowbridge.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id := s.Identity().ID
	old := time.Unix(1_700_000_000, 0)
	const n = 8000
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSessions)
		for i := range n {
			v, err := appendSession(nil, Session{Agent: "a", SessionUUID: testUUID(i), Created: old, LastUsed: old})
			if err != nil {
				return err
			}
			if err := b.Put([]byte(fixtureKey(i)), v); err != nil {
				return err
			}
		}
		return addCounter(tx, metaSessions, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	keep := Session{Key: "slack/T1/C1/1.1", Agent: "a", SessionUUID: testUUID(n), Created: now, LastUsed: now}
	if err := s.PutSession(ctx, keep); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(ctx, store.InboxEntry{Key: "slack/msg/C1/1.1", Event: []byte("e"), Received: now}); err != nil {
		t.Fatal(err)
	}
	if pruned, err := s.PruneSessions(ctx, now.Add(-time.Hour)); err != nil || pruned != n {
		t.Fatalf("PruneSessions = %d, %v, want %d", pruned, err, n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)

	s, err = Open(path, Options{CompactFree: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Compaction()
	after := fileSize(t, path)
	if c.Err != nil || c.Before != before || c.After != after || after > before/4 {
		t.Errorf("Open of a %d-byte file, most of it free = compaction %+v, file now %d bytes; want it compacted to under a quarter", before, c, after)
	}
	if got, ok, err := s.Session(ctx, keep.Key); err != nil || !ok || got.SessionUUID != keep.SessionUUID {
		t.Errorf("Session after compaction = %+v, %v, %v; want %+v", got, ok, err, keep)
	}
	if got := s.Identity().ID; got != id {
		t.Errorf("store ID after compaction = %s, want %s", got, id)
	}
	if pending, err := s.Pending(ctx); err != nil || len(pending) != 1 || pending[0].Seq != 1 {
		t.Errorf("Pending after compaction = %+v, %v; want the entry of seq 1", pending, err)
	}
	if _, err := s.Receive(ctx, store.InboxEntry{Key: "slack/msg/C1/1.2", Event: []byte("e"), Received: now}); err != nil {
		t.Fatal(err)
	}
	if pending, err := s.Pending(ctx); err != nil || len(pending) != 2 || pending[1].Seq != 2 {
		t.Errorf("Pending after a Receive = %+v, %v; want seq 2 next (the sequence kept)", pending, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Errorf("compaction left %s.compact behind: %v", path, err)
	}
	s, err = Open(path, Options{CompactFree: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Compaction(); c.Before != 0 {
		t.Errorf("Open of a compacted file = compaction %+v, want none", c)
	}
	_ = s.Close()
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// TestOpenCompactAsked: Options.Compact (the offline `store compact`)
// compacts a file with too little free space for Open to compact on its
// own, keeping its records.
func TestOpenCompactAsked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "flowbridge.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	now := time.Now()
	for i := range 500 {
		if err := s.PutSession(ctx, Session{Key: fixtureKey(i), Agent: "a", SessionUUID: testUUID(i), Created: now, LastUsed: now}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 499 {
		if _, err := s.DeleteSession(ctx, fixtureKey(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Compaction(); c.Before != 0 {
		t.Fatalf("Open of a file with little free = compaction %+v, want none (below the default)", c)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{Compact: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.Compaction()
	if c.Err != nil || c.Before == 0 || c.After > c.Before {
		t.Errorf("Open asked to compact = %+v, want it compacted", c)
	}
	if got, ok, err := s.Session(ctx, fixtureKey(499)); err != nil || !ok || got.SessionUUID != testUUID(499) {
		t.Errorf("Session after compaction = %+v, %v, %v", got, ok, err)
	}
}
