package storetest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func sameAdapterState(a, b store.AdapterState) bool {
	return a.Text == b.Text && a.Version == b.Version && a.Updated.Equal(b.Updated)
}

func putState(t *testing.T, s store.Store, name, text string, updated time.Time, want int64) {
	t.Helper()
	if ok, err := s.PutAdapterState(t.Context(), name, text, updated, want); err != nil || !ok {
		t.Fatalf("PutAdapterState(%q, %q, version %d) = %v, %v, want it written", name, text, want, ok, err)
	}
}

// pruner is what a backend that prunes old conversations offers (both do;
// the core's maintenance calls it).
type pruner interface {
	PruneSessions(ctx context.Context, before time.Time) (int, error)
}

func testAdapterStates(t *testing.T, o Opener) {
	const name = "discord/gateway/0-of-1"
	t.Run("RoundTrip", func(t *testing.T) {
		s := o.Open(t)
		if got, ok, err := s.AdapterState(t.Context(), name); err != nil || ok || got.Version != 0 {
			t.Fatalf("AdapterState() of a name never written = %+v, %v, %v, want none at version 0", got, ok, err)
		}
		putState(t, s, name, `{"seq":7} «ünïcode»`, at(1), 0)
		want := store.AdapterState{Text: `{"seq":7} «ünïcode»`, Version: 1, Updated: at(1)}
		if got, ok, err := s.AdapterState(t.Context(), name); err != nil || !ok || !sameAdapterState(got, want) {
			t.Errorf("AdapterState() = %+v, %v, %v, want %+v", got, ok, err, want)
		}
		putState(t, s, name, `{"seq":8}`, at(2), 1)
		want = store.AdapterState{Text: `{"seq":8}`, Version: 2, Updated: at(2)}
		if got, ok, err := s.AdapterState(t.Context(), name); err != nil || !ok || !sameAdapterState(got, want) {
			t.Errorf("AdapterState() after a second write = %+v, %v, %v, want %+v", got, ok, err, want)
		}
	})
	t.Run("CompareAndSet", func(t *testing.T) {
		s := o.Open(t)
		// Nothing kept: only version 0 writes.
		if ok, err := s.PutAdapterState(t.Context(), name, "x", at(1), 1); err != nil || ok {
			t.Errorf("PutAdapterState(version 1) of a name never written = %v, %v, want false", ok, err)
		}
		putState(t, s, name, "first", at(2), 0)
		for _, want := range []int64{0, 2, -1} {
			if ok, err := s.PutAdapterState(t.Context(), name, "lost", at(3), want); err != nil || ok {
				t.Errorf("PutAdapterState(version %d) over version 1 = %v, %v, want false", want, ok, err)
			}
		}
		if got, ok, err := s.AdapterState(t.Context(), name); err != nil || !ok || got.Text != "first" || got.Version != 1 {
			t.Errorf("AdapterState() after refused writes = %+v, %v, %v, want the first at version 1", got, ok, err)
		}
	})
	t.Run("EmptyForgetsKeepingVersion", func(t *testing.T) {
		s := o.Open(t)
		putState(t, s, name, "kept", at(1), 0)
		putState(t, s, name, "", at(2), 1)
		got, ok, err := s.AdapterState(t.Context(), name)
		if err != nil || ok || got.Version != 2 {
			t.Fatalf("AdapterState() after writing \"\" = %+v, %v, %v, want none at version 2", got, ok, err)
		}
		// A write based on the read from before the forgetting loses.
		if ok, err := s.PutAdapterState(t.Context(), name, "stale", at(3), 0); err != nil || ok {
			t.Errorf("PutAdapterState(version 0) after a forgetting = %v, %v, want false", ok, err)
		}
		putState(t, s, name, "again", at(4), 2)
	})
	t.Run("NamesAreSeparate", func(t *testing.T) {
		s := o.Open(t)
		a, b := "discord/gateway/0-of-2", "discord/gateway/0-of-20"
		putState(t, s, a, "a", at(1), 0)
		putState(t, s, b, "b", at(2), 0)
		putState(t, s, b, "b2", at(3), 1)
		if got, ok, err := s.AdapterState(t.Context(), a); err != nil || !ok || got.Text != "a" || got.Version != 1 {
			t.Errorf("AdapterState(%q) = %+v, %v, %v, want a at version 1", a, got, ok, err)
		}
		if got, ok, err := s.AdapterState(t.Context(), b); err != nil || !ok || got.Text != "b2" || got.Version != 2 {
			t.Errorf("AdapterState(%q) = %+v, %v, %v, want b2 at version 2", b, got, ok, err)
		}
	})
	t.Run("NotAConversation", func(t *testing.T) {
		s := o.Open(t)
		putState(t, s, name, "state", at(1), 0)
		for _, key := range []string{name, store.LegacyAdapterStatePrefix + name} {
			if c, ok, err := s.ConversationContext(t.Context(), key); err != nil || ok {
				t.Errorf("ConversationContext(%q) = %+v, %v, %v: an adapter's state is no conversation's context", key, c, ok, err)
			}
		}
		// A conversation's context under the name is another record.
		if err := s.PutConversationContext(t.Context(), store.Context{Key: name, Text: "ctx", Updated: at(2)}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutConversationContext(t.Context(), store.Context{Key: name, Updated: at(3)}); err != nil {
			t.Fatal(err)
		}
		// Nothing that ends conversations ends it.
		if _, err := s.ExpireInbox(t.Context(), at(1_000_000_000)); err != nil {
			t.Fatal(err)
		}
		if p, ok := s.(pruner); ok {
			if _, err := p.PruneSessions(t.Context(), at(1_000_000_000)); err != nil {
				t.Fatal(err)
			}
		}
		if got, ok, err := s.AdapterState(t.Context(), name); err != nil || !ok || got.Text != "state" || got.Version != 1 {
			t.Errorf("AdapterState() after conversations were pruned = %+v, %v, %v, want the state kept", got, ok, err)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		s := o.Open(t)
		if _, err := s.PutAdapterState(t.Context(), "", "x", at(1), 0); err == nil {
			t.Error("PutAdapterState(empty name) = nil, want an error")
		}
		if _, err := s.PutAdapterState(t.Context(), name, "x", time.Time{}, 0); !errors.Is(err, store.ErrNoTime) {
			t.Errorf("PutAdapterState(zero time) = %v, want ErrNoTime", err)
		}
		if _, ok, _ := s.AdapterState(t.Context(), name); ok {
			t.Error("a refused write was kept")
		}
	})
	// Writers at once, each adding one to a count by read, then
	// compare-and-set, retried when it loses: no addition is lost.
	t.Run("ConcurrentCount", func(t *testing.T) {
		s := o.Open(t)
		const writers, adds = 6, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for range writers {
			wg.Go(func() {
				for range adds {
					for {
						cur, _, err := s.AdapterState(t.Context(), name)
						if err != nil {
							errs <- err
							return
						}
						n, _ := strconv.Atoi(cur.Text)
						ok, err := s.PutAdapterState(t.Context(), name, strconv.Itoa(n+1), at(n+1), cur.Version)
						if err != nil {
							errs <- err
							return
						}
						if ok {
							break
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, ok, err := s.AdapterState(t.Context(), name)
		if err != nil || !ok || got.Text != strconv.Itoa(writers*adds) || got.Version != writers*adds {
			t.Errorf("AdapterState() after %d additions at once = %+v, %v, %v, want %d at version %[4]d", writers*adds, got, ok, err, writers*adds)
		}
	})
	if o.Reopen != nil {
		t.Run("Durable", func(t *testing.T) {
			s := o.Open(t)
			putState(t, s, name, "kept", at(1), 0)
			putState(t, s, "forgotten", "x", at(1), 0)
			putState(t, s, "forgotten", "", at(2), 1)
			s = o.Reopen(t, s)
			want := store.AdapterState{Text: "kept", Version: 1, Updated: at(1)}
			if got, ok, err := s.AdapterState(t.Context(), name); err != nil || !ok || !sameAdapterState(got, want) {
				t.Errorf("AdapterState() after reopen = %+v, %v, %v, want %+v", got, ok, err, want)
			}
			if got, ok, err := s.AdapterState(t.Context(), "forgotten"); err != nil || ok || got.Version != 2 {
				t.Errorf("AdapterState(forgotten) after reopen = %+v, %v, %v, want none at version 2", got, ok, err)
			}
		})
	}
}
