package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// shared returns a store o opens.
func shared(t *testing.T, o Opener) store.Store {
	t.Helper()
	return o.Open(t)
}

// testShared checks what replicas sharing a store rely on: leases, the
// shared inbox and tokens. Lease expiry is the backend's own clock, which
// the suite does not drive; it only uses a ttl so short that the lease is
// over within a moment.
func testShared(t *testing.T, o Opener) {
	t.Run("Claim", func(t *testing.T) {
		s := shared(t, o)
		ctx := t.Context()
		const conv = "slack/T1/C1/1.2"
		claim := func(name, holder string, want bool) {
			t.Helper()
			if got, err := s.Claim(ctx, name, holder, time.Minute); err != nil || got != want {
				t.Errorf("Claim(%q, %q) = %v, %v, want %v, nil", name, holder, got, err, want)
			}
		}
		claim(conv, "a", true)  // free
		claim(conv, "b", false) // a's
		claim(conv, "a", true)  // renewed
		if err := s.Release(ctx, conv, "b"); err != nil {
			t.Errorf("Release by a non-holder = %v, want nil", err)
		}
		claim(conv, "b", false) // still a's
		if err := s.Release(ctx, conv, "a"); err != nil {
			t.Fatalf("Release = %v", err)
		}
		claim(conv, "b", true)                     // free again
		claim("slack/T1/C2", "a", true)            // leases are per name
		claim(store.EntryLease("k/1"), "a", true)  // an entry's, beside its conversation's
		claim(store.EntryLease("k/1"), "b", false) // and as exclusive
		// A lease of a microsecond is over a microsecond later. The next
		// call may come sooner on a fast machine (the lease is then still
		// live, rightly), so another's claim is tried again until the
		// backend's clock has moved on: within a second, by when a
		// minute's lease would still be live.
		lapsed := func(name string) {
			t.Helper()
			deadline := time.Now().Add(time.Second)
			for {
				got, err := s.Claim(ctx, name, "b", time.Minute)
				if err != nil {
					t.Fatalf("Claim(%q, \"b\") = %v", name, err)
				}
				if got {
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("Claim(%q, \"b\") still refused a second after a's lease of a microsecond", name)
					return
				}
			}
		}
		if got, err := s.Claim(ctx, "c/short", "a", time.Microsecond); err != nil || !got {
			t.Fatalf("Claim with a short ttl = %v, %v", got, err)
		}
		lapsed("c/short")
		// A holder's Claim renews its lease from now by the ttl given: a
		// minute's lease claimed again for a microsecond is over by the
		// next call (a Claim that only said "yours" would keep the minute).
		claim("c/renewed", "a", true)
		if got, err := s.Claim(ctx, "c/renewed", "a", time.Microsecond); err != nil || !got {
			t.Fatalf("Claim renewing with a short ttl = %v, %v", got, err)
		}
		lapsed("c/renewed")
		for _, bad := range []struct {
			name, holder string
			ttl          time.Duration
		}{{"", "a", time.Second}, {conv, "", time.Second}, {conv, "a", 0}, {conv, "a", -time.Second}} {
			if _, err := s.Claim(ctx, bad.name, bad.holder, bad.ttl); err == nil {
				t.Errorf("Claim(%q, %q, %v) = nil error, want one", bad.name, bad.holder, bad.ttl)
			}
		}
	})

	t.Run("Holders", func(t *testing.T) {
		s := shared(t, o)
		ctx := t.Context()
		if got, err := s.Holders(ctx); err != nil || len(got) != 0 {
			t.Errorf("Holders of a new store = %q, %v, want none", got, err)
		}
		for _, l := range []struct {
			name, holder string
			ttl          time.Duration
		}{
			{store.ReplicaLease("a"), "a", time.Minute}, // a process's own, idle
			{"c/1", "b", time.Minute},
			{store.EntryLease("k/1"), "b", time.Minute},
			{"c/2", "c", time.Microsecond}, // over by the next call
			{store.ReplicaLease("d"), "d", time.Minute},
		} {
			if ok, err := s.Claim(ctx, l.name, l.holder, l.ttl); err != nil || !ok {
				t.Fatalf("Claim(%q, %q) = %v, %v", l.name, l.holder, ok, err)
			}
		}
		if err := s.Release(ctx, store.ReplicaLease("d"), "d"); err != nil {
			t.Fatal(err)
		}
		got, err := s.Holders(ctx)
		if slices.Sort(got); err != nil || !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("Holders = %q, %v, want [a b]: the holders of live leases, once each", got, err)
		}
	})
	t.Run("Renew", func(t *testing.T) {
		s := shared(t, o)
		ctx := t.Context()
		for name, holder := range map[string]string{"c/1": "a", "c/2": "a", "c/3": "b"} {
			if ok, err := s.Claim(ctx, name, holder, time.Minute); err != nil || !ok {
				t.Fatalf("Claim(%s) = %v, %v", name, ok, err)
			}
		}
		got, err := s.Renew(ctx, "a", []string{"c/1", "c/2", "c/3", "c/none"}, time.Hour)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, []string{"c/1", "c/2"}) {
			t.Errorf("Renew = %q, %v, want c/1 and c/2, a's own", got, err)
		}
		if ok, err := s.Claim(ctx, "c/1", "b", time.Minute); err != nil || ok {
			t.Errorf("Claim of a renewed lease by another = %v, %v, want false", ok, err)
		}
		if got, err := s.Renew(ctx, "a", nil, time.Hour); err != nil || len(got) != 0 {
			t.Errorf("Renew of nothing = %v, %v", got, err)
		}
	})

	t.Run("MarkSentUnder", func(t *testing.T) {
		// An entry is marked sent under a lease only while the lease is
		// its holder's; otherwise nothing changes, and the error says the
		// lease was lost.
		s := shared(t, o)
		ctx := t.Context()
		const conv = "slack/T1/C1/1.2"
		for _, k := range []string{"k1", "k2", "k3"} {
			receive(t, s, store.InboxEntry{Key: k, Conversation: conv, Event: []byte("e"), Received: at(1)})
		}
		lost := func(key, holder string) {
			t.Helper()
			if err := s.MarkSentUnder(ctx, key, conv, holder, at(2)); !errors.Is(err, store.ErrLeaseLost) {
				t.Errorf("MarkSentUnder(%s) by %s = %v, want ErrLeaseLost", key, holder, err)
			}
			if e, ok := pendingEntry(t, s, key); !ok || e.State != store.Received {
				t.Errorf("%s is %v after a MarkSentUnder refused, want received", key, e.State)
			}
		}
		lost("k1", "a") // no lease at all
		if ok, err := s.Claim(ctx, conv, "a", time.Minute); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := s.MarkSentUnder(ctx, "k1", conv, "a", at(2)); err != nil {
			t.Fatalf("MarkSentUnder by the holder = %v", err)
		}
		if e, _ := pendingEntry(t, s, "k1"); e.State != store.Sent {
			t.Errorf("k1 is %v, want sent", e.State)
		}
		if err := s.MarkSentUnder(ctx, "k1", conv, "a", at(3)); !errors.Is(err, store.ErrAlreadySent) {
			t.Errorf("MarkSentUnder of a sent entry = %v, want ErrAlreadySent", err)
		}
		lost("k2", "b") // a's lease, not b's
		if err := s.MarkSentUnder(ctx, "missing", conv, "a", at(3)); !errors.Is(err, store.ErrUnknownEntry) {
			t.Errorf("MarkSentUnder of an unknown key = %v, want ErrUnknownEntry", err)
		}
		finish(t, s, "k3", "", nil, at(3))
		if err := s.MarkSentUnder(ctx, "k3", conv, "a", at(4)); !errors.Is(err, store.ErrAlreadySent) {
			t.Errorf("MarkSentUnder of an answered entry = %v, want ErrAlreadySent", err)
		}
	})

	t.Run("PendingOf", func(t *testing.T) {
		s := shared(t, o)
		ctx := t.Context()
		for i, conv := range []string{"c/1", "c/2", "c/1", "c/1", "c/2"} {
			receive(t, s, store.InboxEntry{Key: fmt.Sprintf("k/%d", i), Conversation: conv, Event: []byte(fmt.Sprint(i)), Received: at(i)})
		}
		markSent(t, s, "k/0", at(10))
		finish(t, s, "k/2", "ref", nil, at(11))
		got, err := s.PendingOf(ctx, "c/1")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range got {
			keys = append(keys, e.Key)
			if e.Conversation != "c/1" || len(e.Event) == 0 {
				t.Errorf("entry %+v: want conversation c/1 with its event", e)
			}
		}
		if !slices.Equal(keys, []string{"k/0", "k/3"}) || got[0].State != store.Sent || got[1].State != store.Received || got[0].Seq >= got[1].Seq {
			t.Errorf("PendingOf(c/1) = %+v, want k/0 (sent) then k/3 (received), in seq order", got)
		}
		if got, err := s.PendingOf(ctx, "c/none"); err != nil || len(got) != 0 {
			t.Errorf("PendingOf of a conversation without entries = %v, %v", got, err)
		}
	})

	t.Run("PendingOfInPlatformOrder", func(t *testing.T) {
		// Replicas record one conversation's messages in either order:
		// PendingOf returns them in the platform's (Order), ties by Seq,
		// whether they came one at a time or together.
		s := shared(t, o)
		for _, e := range []store.InboxEntry{{Key: "k/30", Order: 30}, {Key: "k/10", Order: 10}} {
			e.Conversation, e.Event, e.Received = "c/1", []byte(e.Key), at(1)
			receive(t, s, e)
		}
		var wg sync.WaitGroup
		for _, e := range []store.InboxEntry{{Key: "k/20", Order: 20}, {Key: "k/5", Order: 5}, {Key: "k/20b", Order: 20}} {
			e.Conversation, e.Event, e.Received = "c/1", []byte(e.Key), at(2)
			wg.Go(func() {
				if ok, err := s.Receive(t.Context(), e); err != nil || !ok {
					t.Errorf("Receive(%s) = %v, %v", e.Key, ok, err)
				}
			})
		}
		wg.Wait()
		got, err := s.PendingOf(t.Context(), "c/1")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for i, e := range got {
			keys = append(keys, e.Key)
			if i > 0 && (e.Order < got[i-1].Order || e.Order == got[i-1].Order && e.Seq < got[i-1].Seq) {
				t.Errorf("PendingOf(c/1): %s (order %d, seq %d) after %s (order %d, seq %d)", e.Key, e.Order, e.Seq, got[i-1].Key, got[i-1].Order, got[i-1].Seq)
			}
		}
		if len(keys) != 5 || keys[0] != "k/5" || keys[1] != "k/10" || keys[4] != "k/30" {
			t.Errorf("PendingOf(c/1) = %q, want k/5, k/10, the two k/20s, k/30", keys)
		}
	})

	t.Run("Unleased", func(t *testing.T) {
		s := shared(t, o)
		ctx := t.Context()
		// The suite's times are long past; an entry received an hour
		// from now is younger than any minAge, whatever the store's clock.
		young := time.Now().Add(time.Hour).Truncate(time.Microsecond)
		for _, e := range []store.InboxEntry{
			{Key: "k/free", Conversation: "c/free", Received: at(1)},       // no lease: unleased
			{Key: "k/held", Conversation: "c/held", Received: at(1)},       // its conversation is leased
			{Key: "k/alone", Conversation: "c/alone", Received: at(1)},     // its own entry is leased
			{Key: "k/young", Conversation: "c/young", Received: young},     // just received
			{Key: "k/done", Conversation: "c/done", Received: at(1)},       // answered
			{Key: "k/expired", Conversation: "c/expired", Received: at(1)}, // its lease is over
		} {
			e.Event = []byte("e")
			receive(t, s, e)
		}
		finish(t, s, "k/done", "", nil, at(2))
		for name, ttl := range map[string]time.Duration{"c/held": time.Minute, store.EntryLease("k/alone"): time.Minute, "c/expired": time.Microsecond} {
			if ok, err := s.Claim(ctx, name, "r", ttl); err != nil || !ok {
				t.Fatalf("Claim(%s) = %v, %v", name, ok, err)
			}
		}
		got, err := s.Unleased(ctx, time.Second, 100)
		slices.Sort(got)
		if want := []string{"c/expired", "c/free"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("Unleased = %q, %v, want %q", got, err, want)
		}
		if got, err := s.Unleased(ctx, time.Second, 1); err != nil || len(got) != 1 {
			t.Errorf("Unleased with limit 1 = %q, %v", got, err)
		}
	})

	t.Run("Listen", func(t *testing.T) {
		// A listener hears "" once it listens, then the conversation of
		// every entry recorded, and not of a duplicate.
		s := shared(t, o)
		got := make(chan string, 10)
		done := make(chan error, 1)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		t.Cleanup(wg.Wait)
		t.Cleanup(cancel) // first: cleanups run last-in, first-out
		wg.Go(func() {
			done <- s.Listen(ctx, func(conv string) {
				select {
				case got <- conv:
				case <-ctx.Done():
				}
			})
		})
		next := func() string {
			t.Helper()
			select {
			case c := <-got:
				return c
			case err := <-done:
				t.Fatalf("Listen ended: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("no notification in 10s")
			}
			return ""
		}
		if c := next(); c != "" {
			t.Fatalf("first call = %q, want \"\" (listening)", c)
		}
		receive(t, s, store.InboxEntry{Key: "k/1", Conversation: "c/1", Event: []byte("e"), Received: at(1)})
		if c := next(); c != "c/1" {
			t.Errorf("notified of %q, want c/1", c)
		}
		if fresh, err := s.Receive(ctx, store.InboxEntry{Key: "k/1", Conversation: "c/dup", Event: []byte("e"), Received: at(2)}); err != nil || fresh {
			t.Fatalf("duplicate Receive = %v, %v", fresh, err)
		}
		receive(t, s, store.InboxEntry{Key: "k/2", Conversation: "c/2", Event: []byte("e"), Received: at(3)})
		if c := next(); c != "c/2" {
			t.Errorf("notified of %q, want c/2 (no duplicate)", c)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Listen after its context ended = %v, want nil", err)
		}
	})

	t.Run("EntryState", func(t *testing.T) {
		s := shared(t, o)
		ctx := t.Context()
		state := func(key string) (store.InboxState, bool) {
			t.Helper()
			st, ok, err := s.EntryState(ctx, key)
			if err != nil {
				t.Fatalf("EntryState(%q) = %v", key, err)
			}
			return st, ok
		}
		if _, ok := state("k/none"); ok {
			t.Error("EntryState of an unknown key: ok, want none")
		}
		receive(t, s, store.InboxEntry{Key: "k/1", Conversation: "c/1", Event: []byte("e"), Received: at(1)})
		for _, step := range []struct {
			do   func()
			want store.InboxState
		}{
			{func() {}, store.Received},
			{func() { markSent(t, s, "k/1", at(2)) }, store.Sent},
			{func() { finish(t, s, "k/1", "ref", nil, at(3)) }, store.Answered},
		} {
			step.do()
			if got, ok := state("k/1"); !ok || got != step.want {
				t.Errorf("EntryState = %v, %v, want %v", got, ok, step.want)
			}
		}
		if _, ok := state(""); ok {
			t.Error("EntryState of the empty key: ok, want none")
		}
	})

	t.Run("Tokens", func(t *testing.T) {
		s := shared(t, o)
		ctx := t.Context()
		now := at(1000)
		if err := s.PutToken(ctx, "confirm:1", []byte(`{"flow":"hc"}`), now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		if err := s.PutToken(ctx, "share:old", []byte(`x`), now.Add(-time.Minute), now.Add(-2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		// Taken once.
		data, exp, ok, err := s.TakeToken(ctx, "confirm:1")
		if err != nil || !ok || string(data) != `{"flow":"hc"}` || !exp.Equal(now.Add(time.Minute)) {
			t.Fatalf("TakeToken = %s, %v, %v, %v", data, exp, ok, err)
		}
		if _, _, ok, err := s.TakeToken(ctx, "confirm:1"); err != nil || ok {
			t.Errorf("second TakeToken = %v, %v, want none", ok, err)
		}
		if _, _, ok, err := s.TakeToken(ctx, "share:none"); err != nil || ok {
			t.Errorf("TakeToken of an unknown token = %v, %v", ok, err)
		}
		// An expired token is swept away by a later PutToken (by its now).
		if err := s.PutToken(ctx, "share:new", []byte(`y`), now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		if _, _, ok, err := s.TakeToken(ctx, "share:old"); err != nil || ok {
			t.Errorf("expired token after a PutToken = %v, %v, want swept", ok, err)
		}
		if err := s.PutToken(ctx, "", nil, now, now); err == nil {
			t.Error("PutToken with an empty ID = nil, want an error")
		}
	})

	t.Run("DueTokens", func(t *testing.T) {
		// A due token outlives its expiry: no PutToken sweeps it, and
		// DueTokens lists it, earliest first, under its prefix only, until
		// it is taken.
		s := shared(t, o)
		ctx := t.Context()
		now := at(1000)
		for _, tok := range []struct {
			id      string
			expires time.Time
		}{
			{"due:approve:slack:b", now.Add(-time.Minute)},
			{"due:approve:slack:a", now.Add(-2 * time.Minute)},
			{"due:approve:slack:later", now.Add(time.Hour)},
			{"due:approve:discord:x", now.Add(-time.Minute)},
			{"share:old", now.Add(-3 * time.Minute)},
		} {
			if err := s.PutToken(ctx, tok.id, []byte(tok.id), tok.expires, tok.expires.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		// Sweeps by PutToken, with room for every expired token.
		for i := range 3 {
			if err := s.PutToken(ctx, fmt.Sprintf("share:new%d", i), []byte(`y`), now.Add(time.Hour), now); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, ok, err := s.TakeToken(ctx, "share:old"); err != nil || ok {
			t.Errorf("expired share after a PutToken = %v, %v, want swept", ok, err)
		}
		ids, err := s.DueTokens(ctx, "due:approve:slack:", now, 10)
		if want := []string{"due:approve:slack:a", "due:approve:slack:b"}; err != nil || !slices.Equal(ids, want) {
			t.Errorf("DueTokens(slack) = %q, %v, want %q", ids, err, want)
		}
		if ids, err := s.DueTokens(ctx, "due:approve:slack:", now, 1); err != nil || !slices.Equal(ids, []string{"due:approve:slack:a"}) {
			t.Errorf("DueTokens(slack, limit 1) = %q, %v, want the earliest", ids, err)
		}
		if ids, err := s.DueTokens(ctx, "due:approve:", now, 10); err != nil || len(ids) != 3 {
			t.Errorf("DueTokens(every platform) = %q, %v, want 3", ids, err)
		}
		if _, err := s.DueTokens(ctx, "share:", now, 10); err == nil {
			t.Error("DueTokens under a prefix that is not due = nil error, want one")
		}
		// Taken once, whoever lists it.
		data, exp, ok, err := s.TakeToken(ctx, "due:approve:slack:a")
		if err != nil || !ok || string(data) != "due:approve:slack:a" || !exp.Equal(now.Add(-2*time.Minute)) {
			t.Fatalf("TakeToken(due) = %s, %v, %v, %v", data, exp, ok, err)
		}
		if ids, err := s.DueTokens(ctx, "due:approve:slack:", now, 10); err != nil || !slices.Equal(ids, []string{"due:approve:slack:b"}) {
			t.Errorf("DueTokens after a take = %q, %v", ids, err)
		}
		if ids, err := s.DueTokens(ctx, "due:approve:slack:", now.Add(2*time.Hour), 10); err != nil || len(ids) != 2 {
			t.Errorf("DueTokens later = %q, %v, want the later one too", ids, err)
		}
	})
}
