package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// stop calls s.Stop and checks its report.
func stop(t *testing.T, s store.Store, key, who string, now time.Time, want bool) {
	t.Helper()
	if got, err := s.Stop(t.Context(), key, who, now); err != nil || got != want {
		t.Fatalf("Stop(%q, %q) = %v, %v, want %v, nil", key, who, got, err, want)
	}
}

// testStops checks store.Stops and what it changes of store.Outbox.
func testStops(t *testing.T, o Opener) {
	t.Run("RefusesTheAnswer", func(t *testing.T) {
		for _, sent := range []bool{false, true} {
			name := "received"
			if sent {
				name = "sent"
			}
			t.Run(name, func(t *testing.T) {
				s := o.Open(t)
				conv := "slack/T/C/stopped"
				sess := store.Session{Key: conv, Agent: "helper", SessionUUID: "s-1", Created: at(0), LastUsed: at(0)}
				if err := s.PutSession(t.Context(), sess); err != nil {
					t.Fatal(err)
				}
				e := entry(1)
				e.Conversation = conv
				receive(t, s, e)
				state := store.Received
				if sent {
					markSent(t, s, e.Key, at(10))
					state = store.Sent
				}
				stop(t, s, e.Key, "U0ALICE", at(20), true)
				got, ok := pendingEntry(t, s, e.Key)
				if !ok || got.StoppedBy != "U0ALICE" || got.State != state || !got.Updated.Equal(at(20)) || got.Outbox != nil || string(got.Event) != string(e.Event) {
					t.Fatalf("pending entry after Stop = %+v, %v, want %v, stopped by U0ALICE at %v, with its event and no answer", got, ok, state, at(20))
				}
				// The answer is refused, and its turn with it.
				next := sess
				next.LastUsed = at(30)
				err := s.PutReply(t.Context(), e.Key, []byte("r"), &store.Turn{Session: next, Reply: "the answer"}, at(30))
				if !errors.Is(err, store.ErrStopped) {
					t.Fatalf("PutReply of a stopped entry = %v, want ErrStopped", err)
				}
				if got, _ := pendingEntry(t, s, e.Key); got.Outbox != nil || got.State != state || !got.Updated.Equal(at(20)) {
					t.Errorf("pending entry after a refused PutReply = %+v, want it as the Stop left it", got)
				}
				if got, _, err := s.Session(t.Context(), conv); err != nil || !sameSession(got, sess) {
					t.Errorf("Session(%q) after a refused PutReply = %+v, %v, want %+v unchanged", conv, got, err, sess)
				}
				if _, ok, err := s.LastReply(t.Context(), conv); err != nil || ok {
					t.Errorf("LastReply(%q) after a refused PutReply = %v, %v, want none", conv, ok, err)
				}
				// Finish still closes it (the core tells the user it stopped).
				finish(t, s, e.Key, "", nil, at(40))
				if st, ok, err := s.EntryState(t.Context(), e.Key); err != nil || !ok || st != store.Answered {
					t.Errorf("EntryState after Finish of a stopped entry = %v, %v, %v, want answered", st, ok, err)
				}
				if got := pendingKeys(t, s); len(got) != 0 {
					t.Errorf("Pending() after Finish = %q, want none", got)
				}
			})
		}
	})

	t.Run("AfterTheAnswer", func(t *testing.T) {
		// An answer kept before the stop stays kept; the entry is stopped
		// all the same, a later answer is refused, and Finish closes it.
		s := o.Open(t)
		e := entry(1)
		receive(t, s, e)
		markSent(t, s, e.Key, at(10))
		if err := s.PutReply(t.Context(), e.Key, []byte("kept"), nil, at(20)); err != nil {
			t.Fatalf("PutReply = %v", err)
		}
		stop(t, s, e.Key, "U0ALICE", at(30), true)
		got, ok := pendingEntry(t, s, e.Key)
		if !ok || got.StoppedBy != "U0ALICE" || got.State != store.Sent || string(got.Outbox) != "kept" {
			t.Fatalf("pending entry after PutReply, then Stop = %+v, %v, want Sent, stopped by U0ALICE, its answer kept", got, ok)
		}
		if err := s.PutReply(t.Context(), e.Key, []byte("notice"), nil, at(40)); !errors.Is(err, store.ErrStopped) {
			t.Errorf("PutReply replacing the answer of a stopped entry = %v, want ErrStopped", err)
		}
		if got, _ := pendingEntry(t, s, e.Key); string(got.Outbox) != "kept" {
			t.Errorf("Outbox after a refused PutReply = %q, want kept", got.Outbox)
		}
		finish(t, s, e.Key, "msg-1", nil, at(50))
		if got := pendingKeys(t, s); len(got) != 0 {
			t.Errorf("Pending() after Finish = %q, want none", got)
		}
	})

	t.Run("Answered", func(t *testing.T) {
		s := o.Open(t)
		e := entry(1)
		receive(t, s, e)
		finish(t, s, e.Key, "msg-1", nil, at(10))
		stop(t, s, e.Key, "U0ALICE", at(20), false)
		if err := s.PutReply(t.Context(), e.Key, []byte("r"), nil, at(30)); !errors.Is(err, store.ErrAlreadySent) {
			t.Errorf("PutReply of an answered entry a Stop left alone = %v, want ErrAlreadySent", err)
		}
		if st, ok, err := s.EntryState(t.Context(), e.Key); err != nil || !ok || st != store.Answered {
			t.Errorf("EntryState after Stop of an answered entry = %v, %v, %v, want answered", st, ok, err)
		}
	})

	t.Run("FirstKept", func(t *testing.T) {
		s := o.Open(t)
		e := entry(1)
		receive(t, s, e)
		stop(t, s, e.Key, "U0ALICE", at(10), true)
		stop(t, s, e.Key, "U0BOB", at(20), false)
		stop(t, s, e.Key, "U0ALICE", at(30), false)
		if got, _ := pendingEntry(t, s, e.Key); got.StoppedBy != "U0ALICE" || !got.Updated.Equal(at(10)) {
			t.Errorf("pending entry after three stops = %+v, want stopped by U0ALICE at %v", got, at(10))
		}
	})

	t.Run("Refused", func(t *testing.T) {
		s := o.Open(t)
		for _, key := range []string{"slack/msg/C0456/404.000000", ""} {
			if got, err := s.Stop(t.Context(), key, "U0ALICE", at(10)); !errors.Is(err, store.ErrUnknownEntry) || got {
				t.Errorf("Stop(%q) of a key never received = %v, %v, want false, ErrUnknownEntry", key, got, err)
			}
		}
		e := entry(1)
		receive(t, s, e)
		if got, err := s.Stop(t.Context(), e.Key, "U0ALICE", time.Time{}); !errors.Is(err, store.ErrNoTime) || got {
			t.Errorf("Stop at a zero time = %v, %v, want false, ErrNoTime", got, err)
		}
		if got, err := s.Stop(t.Context(), e.Key, "", at(10)); err == nil || got {
			t.Errorf("Stop by nobody = %v, %v, want false and an error", got, err)
		}
		if got, _ := pendingEntry(t, s, e.Key); got.StoppedBy != "" {
			t.Errorf("pending entry after refused stops = %+v, want it not stopped", got)
		}
	})

	t.Run("Visible", func(t *testing.T) {
		// Pending and PendingOf say who stopped each entry, and only it.
		s := o.Open(t)
		const conv = "discord/g/stops"
		for i := range 3 {
			e := entry(i)
			e.Conversation = conv
			e.Order = int64(i + 1)
			receive(t, s, e)
		}
		stop(t, s, entry(1).Key, "U0ALICE", at(10), true)
		want := map[string]string{entry(0).Key: "", entry(1).Key: "U0ALICE", entry(2).Key: ""}
		of, err := s.PendingOf(t.Context(), conv)
		if err != nil {
			t.Fatalf("PendingOf(%q) = %v", conv, err)
		}
		for name, got := range map[string][]store.InboxEntry{"Pending": pending(t, s), "PendingOf": of} {
			if len(got) != len(want) {
				t.Errorf("%s() = %d entries, want %d", name, len(got), len(want))
			}
			for _, e := range got {
				if e.StoppedBy != want[e.Key] {
					t.Errorf("%s() entry %q stopped by %q, want %q", name, e.Key, e.StoppedBy, want[e.Key])
				}
			}
		}
	})

	t.Run("Reopen", func(t *testing.T) {
		if o.Reopen == nil {
			t.Skip("Opener.Reopen is nil")
		}
		s := o.Open(t)
		e := entry(1)
		receive(t, s, e)
		markSent(t, s, e.Key, at(10))
		stop(t, s, e.Key, "U0ALICE", at(20), true)
		before, _ := pendingEntry(t, s, e.Key)
		s = o.Reopen(t, s)
		if got, ok := pendingEntry(t, s, e.Key); !ok || !sameEntry(got, before) || got.StoppedBy != "U0ALICE" {
			t.Errorf("pending entry after reopening = %+v, %v, want %+v", got, ok, before)
		}
		if err := s.PutReply(t.Context(), e.Key, []byte("r"), nil, at(30)); !errors.Is(err, store.ErrStopped) {
			t.Errorf("PutReply of an entry stopped before reopening = %v, want ErrStopped", err)
		}
		stop(t, s, e.Key, "U0BOB", at(40), false)
		finish(t, s, e.Key, "", nil, at(50))
		s = o.Reopen(t, s)
		if st, ok, err := s.EntryState(t.Context(), e.Key); err != nil || !ok || st != store.Answered {
			t.Errorf("EntryState after Finish and reopening = %v, %v, %v, want answered", st, ok, err)
		}
	})

	t.Run("AgainstPutReply", func(t *testing.T) {
		// A Stop and a PutReply of one entry at once: exactly one goes
		// first. Either the stop did (PutReply is refused and no answer is
		// kept) or the answer did (it is kept, and the stop still takes);
		// never an answer kept that PutReply was told was refused, nor one
		// refused that is kept.
		s := o.Open(t)
		const n = 32
		for i := range n {
			receive(t, s, entry(i))
			markSent(t, s, entry(i).Key, at(10))
		}
		var (
			wg      sync.WaitGroup
			stopped [n]bool
			stopErr [n]error
			putErr  [n]error
		)
		for i := range n {
			key := entry(i).Key
			wg.Go(func() { stopped[i], stopErr[i] = s.Stop(t.Context(), key, "U0ALICE", at(20)) })
			wg.Go(func() { putErr[i] = s.PutReply(t.Context(), key, fmt.Appendf(nil, "r%d", i), nil, at(20)) })
		}
		wg.Wait()
		got := make(map[string]store.InboxEntry)
		for _, e := range pending(t, s) {
			got[e.Key] = e
		}
		firsts := map[bool]int{}
		for i := range n {
			key := entry(i).Key
			e, ok := got[key]
			if stopErr[i] != nil || !stopped[i] || !ok || e.StoppedBy != "U0ALICE" {
				t.Errorf("Stop(%q) beside PutReply = %v, %v; entry %+v, %v; want true, and the entry stopped", key, stopped[i], stopErr[i], e, ok)
				continue
			}
			switch {
			case putErr[i] == nil:
				if string(e.Outbox) != fmt.Sprintf("r%d", i) {
					t.Errorf("PutReply(%q) succeeded beside a Stop, but the entry keeps %q", key, e.Outbox)
				}
			case errors.Is(putErr[i], store.ErrStopped):
				if e.Outbox != nil {
					t.Errorf("PutReply(%q) was refused (%v), but the entry keeps %q", key, putErr[i], e.Outbox)
				}
			default:
				t.Errorf("PutReply(%q) beside a Stop = %v, want nil or ErrStopped", key, putErr[i])
			}
			firsts[putErr[i] == nil]++
		}
		t.Logf("the answer first %d times, the stop %d", firsts[true], firsts[false])
	})
}
