package storetest

import (
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func sameContext(a, b store.Context) bool {
	return a.Key == b.Key && a.Text == b.Text && a.Told == b.Told && a.Updated.Equal(b.Updated)
}

func testContexts(t *testing.T, o Opener) {
	t.Run("RoundTrip", func(t *testing.T) {
		cs := o.Open(t)
		want := store.Context{Key: "slack/T1/D1/1700000000.000100", Text: "The user is viewing <#C1>. «ünïcode»", Updated: at(1)}
		if err := cs.PutConversationContext(t.Context(), want); err != nil {
			t.Fatalf("PutConversationContext() = %v", err)
		}
		got, ok, err := cs.ConversationContext(t.Context(), want.Key)
		if err != nil || !ok || !sameContext(got, want) {
			t.Errorf("ConversationContext() = %+v, %v, %v, want %+v", got, ok, err, want)
		}
	})
	t.Run("PutReplaces", func(t *testing.T) {
		cs := o.Open(t)
		key := "slack/T1/D1/1700000000.000200"
		for _, c := range []store.Context{
			{Key: key, Text: "first", Updated: at(1)},
			{Key: key, Text: "first", Told: true, Updated: at(2)},
			{Key: key, Text: "second", Updated: at(3)},
		} {
			if err := cs.PutConversationContext(t.Context(), c); err != nil {
				t.Fatalf("PutConversationContext(%+v) = %v", c, err)
			}
			got, ok, err := cs.ConversationContext(t.Context(), key)
			if err != nil || !ok || !sameContext(got, c) {
				t.Errorf("after PutConversationContext(%+v): ConversationContext() = %+v, %v, %v", c, got, ok, err)
			}
		}
	})
	t.Run("EmptyTextDeletes", func(t *testing.T) {
		cs := o.Open(t)
		key := "slack/T1/D1/1700000000.000300"
		if err := cs.PutConversationContext(t.Context(), store.Context{Key: key, Text: "x", Updated: at(1)}); err != nil {
			t.Fatal(err)
		}
		if err := cs.PutConversationContext(t.Context(), store.Context{Key: key, Updated: at(2)}); err != nil {
			t.Fatalf("PutConversationContext(empty) = %v", err)
		}
		if got, ok, err := cs.ConversationContext(t.Context(), key); err != nil || ok {
			t.Errorf("ConversationContext() after delete = %+v, %v, %v, want none", got, ok, err)
		}
		// Deleting what is not there is no error.
		if err := cs.PutConversationContext(t.Context(), store.Context{Key: key + "x"}); err != nil {
			t.Errorf("PutConversationContext(empty, unknown key) = %v", err)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		cs := o.Open(t)
		for _, key := range []string{"slack/T1/D1/nothing", strings.Repeat("k", 600)} {
			if got, ok, err := cs.ConversationContext(t.Context(), key); err != nil || ok {
				t.Errorf("ConversationContext(%.20q…) = %+v, %v, %v, want none", key, got, ok, err)
			}
		}
	})
	t.Run("KeysAreSeparate", func(t *testing.T) {
		cs := o.Open(t)
		a := store.Context{Key: "slack/T1/D1/1.1", Text: "a", Updated: at(1)}
		b := store.Context{Key: "slack/T1/D1/1.10", Text: "b", Told: true, Updated: at(2)}
		for _, c := range []store.Context{a, b} {
			if err := cs.PutConversationContext(t.Context(), c); err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range []store.Context{a, b} {
			if got, ok, err := cs.ConversationContext(t.Context(), want.Key); err != nil || !ok || !sameContext(got, want) {
				t.Errorf("ConversationContext(%q) = %+v, %v, %v, want %+v", want.Key, got, ok, err, want)
			}
		}
	})
	t.Run("EmptyKeyRefused", func(t *testing.T) {
		cs := o.Open(t)
		if err := cs.PutConversationContext(t.Context(), store.Context{Text: "x", Updated: at(1)}); err == nil {
			t.Error("PutConversationContext(empty key) = nil, want an error")
		}
	})
	if o.Reopen != nil {
		t.Run("Durable", func(t *testing.T) {
			s := o.Open(t)
			want := store.Context{Key: "slack/T1/D1/1700000000.000400", Text: "kept", Told: true, Updated: at(4)}
			if err := s.PutConversationContext(t.Context(), want); err != nil {
				t.Fatal(err)
			}
			s = o.Reopen(t, s)
			if got, ok, err := s.ConversationContext(t.Context(), want.Key); err != nil || !ok || !sameContext(got, want) {
				t.Errorf("ConversationContext() after reopen = %+v, %v, %v, want %+v", got, ok, err, want)
			}
		})
	}
}
