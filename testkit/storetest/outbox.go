package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// testOutbox checks store.Outbox.
func testOutbox(t *testing.T, o Opener) {
	putReply := func(t *testing.T, ob store.Outbox, key string, reply []byte, turn *store.Turn, n int) {
		t.Helper()
		if err := ob.PutReply(t.Context(), key, reply, turn, at(n)); err != nil {
			t.Fatalf("PutReply(%q) = %v", key, err)
		}
	}

	t.Run("KeptUntilFinish", func(t *testing.T) {
		for _, sent := range []bool{false, true} {
			name := "received"
			if sent {
				name = "sent"
			}
			t.Run(name, func(t *testing.T) {
				s := o.Open(t)
				ob := s
				e := entry(1)
				receive(t, s, e)
				if sent {
					markSent(t, s, e.Key, at(10))
				}
				reply := []byte(`{"text":"the answer \u2713"}`)
				putReply(t, ob, e.Key, reply, nil, 20)
				got, ok := pendingEntry(t, s, e.Key)
				if !ok || got.State != store.Sent || !bytes.Equal(got.Outbox, reply) || !got.Updated.Equal(at(20)) || !bytes.Equal(got.Event, e.Event) {
					t.Fatalf("pending entry after PutReply = %+v, %v, want Sent at %v with its event and Outbox %q", got, ok, at(20), reply)
				}
				// The request is not sent again for an answer kept.
				if err := s.MarkSent(t.Context(), e.Key, at(25)); !errors.Is(err, store.ErrAlreadySent) {
					t.Errorf("MarkSent after PutReply = %v, want ErrAlreadySent", err)
				}
				// A later answer (a notice after the retry budget) replaces it.
				again := []byte(`{"text":"not delivered"}`)
				putReply(t, ob, e.Key, again, nil, 30)
				if got, _ := pendingEntry(t, s, e.Key); !bytes.Equal(got.Outbox, again) {
					t.Errorf("Outbox after a second PutReply = %q, want %q", got.Outbox, again)
				}
				finish(t, s, e.Key, "msg-1", nil, at(40))
				if got := pendingKeys(t, s); len(got) != 0 {
					t.Errorf("Pending() after Finish = %q, want none", got)
				}
				if err := ob.PutReply(t.Context(), e.Key, reply, nil, at(50)); !errors.Is(err, store.ErrAlreadySent) {
					t.Errorf("PutReply of an answered entry = %v, want ErrAlreadySent", err)
				}
			})
		}
	})

	t.Run("Turn", func(t *testing.T) {
		s := o.Open(t)
		ob := s
		conv := "slack/T/C/outbox"
		sess := store.Session{Key: conv, Agent: "helper", SessionUUID: "s-1", Created: at(0), LastUsed: at(0)}
		if err := s.PutSession(t.Context(), sess); err != nil {
			t.Fatal(err)
		}
		e := entry(1)
		e.Conversation = conv
		receive(t, s, e)
		markSent(t, s, e.Key, at(10))
		next := sess
		next.LastUsed = at(20)
		also := conv + "#U0ALICE"
		putReply(t, ob, e.Key, []byte("r"), &store.Turn{Session: next, Reply: "the answer", Also: []string{also}}, 20)
		if got, ok, err := s.Session(t.Context(), conv); err != nil || !ok || !sameSession(got, next) {
			t.Errorf("Session(%q) after PutReply with a turn = %+v, %v, %v, want %+v", conv, got, ok, err, next)
		}
		for _, k := range []string{conv, also} {
			if got, ok, err := s.LastReply(t.Context(), k); err != nil || !ok || got != "the answer" {
				t.Errorf("LastReply(%q) after PutReply with a turn = %q, %v, %v, want the answer", k, got, ok, err)
			}
		}
		// A stale turn (the session was reset since) changes nothing, and
		// the answer is kept all the same.
		if _, err := s.DeleteSession(t.Context(), conv); err != nil {
			t.Fatal(err)
		}
		e2 := entry(2)
		e2.Conversation = conv
		receive(t, s, e2)
		putReply(t, ob, e2.Key, []byte("r2"), &store.Turn{Session: next, Reply: "stale"}, 30)
		if _, ok, err := s.Session(t.Context(), conv); err != nil || ok {
			t.Errorf("Session(%q) after a stale turn = %v, %v, want none", conv, ok, err)
		}
		if got, _, err := s.LastReply(t.Context(), conv); err != nil || got != "the answer" {
			t.Errorf("LastReply(%q) after a stale turn = %q, %v, want the answer", conv, got, err)
		}
		if got, _ := pendingEntry(t, s, e2.Key); string(got.Outbox) != "r2" {
			t.Errorf("Outbox with a stale turn = %q, want r2", got.Outbox)
		}
	})

	t.Run("RefusedWritesNothing", func(t *testing.T) {
		s := o.Open(t)
		ob := s
		conv := "slack/T/C/refused"
		sess := store.Session{Key: conv, Agent: "helper", SessionUUID: "s-1", Created: at(0), LastUsed: at(0)}
		if err := s.PutSession(t.Context(), sess); err != nil {
			t.Fatal(err)
		}
		next := sess
		next.LastUsed = at(20)
		turn := &store.Turn{Session: next, Reply: "nope"}
		if err := ob.PutReply(t.Context(), "slack/msg/C0456/404.000000", []byte("r"), turn, at(20)); !errors.Is(err, store.ErrUnknownEntry) {
			t.Errorf("PutReply of an unknown key = %v, want ErrUnknownEntry", err)
		}
		e := entry(1)
		e.Conversation = conv
		receive(t, s, e)
		finish(t, s, e.Key, "msg-1", nil, at(10))
		if err := ob.PutReply(t.Context(), e.Key, []byte("r"), turn, at(20)); !errors.Is(err, store.ErrAlreadySent) {
			t.Errorf("PutReply of an answered entry = %v, want ErrAlreadySent", err)
		}
		if got, _, err := s.Session(t.Context(), conv); err != nil || !sameSession(got, sess) {
			t.Errorf("Session(%q) after refused PutReplys = %+v, %v, want %+v unchanged", conv, got, err, sess)
		}
		if _, ok, err := s.LastReply(t.Context(), conv); err != nil || ok {
			t.Errorf("LastReply(%q) after refused PutReplys = %v, %v, want none", conv, ok, err)
		}
	})

	t.Run("Reopen", func(t *testing.T) {
		if o.Reopen == nil {
			t.Skip("Opener.Reopen is nil")
		}
		s := o.Open(t)
		e := entry(1)
		receive(t, s, e)
		putReply(t, s, e.Key, []byte("kept"), nil, 20)
		s = o.Reopen(t, s)
		if got, ok := pendingEntry(t, s, e.Key); !ok || got.State != store.Sent || string(got.Outbox) != "kept" {
			t.Errorf("pending entry after reopening = %+v, %v, want Sent with its answer kept", got, ok)
		}
	})
}
