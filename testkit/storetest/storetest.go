// Package storetest checks that a backend keeps every promise of the store package's interfaces, as testing/fstest.TestFS does for a file system.
//
// A backend's test calls Run with an Opener; the same suite runs unchanged
// against bbolt (sessionmap) and any later backend. Times are compared to
// the microsecond, the precision PostgreSQL keeps, so the suite only uses
// times that are whole microseconds.
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// Opener makes the stores Run tests.
type Opener struct {
	// Open returns a new, empty store for t and arranges, with t.Cleanup,
	// to close it. Every subtest of Run opens its own.
	Open func(t *testing.T) store.Store
	// Reopen closes s, a store Open (or Reopen) returned for t, and returns
	// a store over the same data, as the next process would find it; it too
	// arranges to close what it returns. When Reopen is nil the durability
	// tests are skipped.
	Reopen func(t *testing.T, s store.Store) store.Store
}

// Run runs the suite against the stores o makes, one subtest per behaviour:
// Sessions, Inbox, Outbox, Stops, LastOrders, Audit, Contexts, AdapterStates,
// Feedback, Schedules, Ping, Clock, Shared (leases, the inbox by
// conversation, tokens), Concurrency and Reopen.
func Run(t *testing.T, o Opener) {
	if o.Open == nil {
		t.Fatal("storetest.Run: Opener.Open is nil")
	}
	t.Run("Sessions", func(t *testing.T) { testSessions(t, o) })
	t.Run("Inbox", func(t *testing.T) { testInbox(t, o) })
	t.Run("Outbox", func(t *testing.T) { testOutbox(t, o) })
	t.Run("Stops", func(t *testing.T) { testStops(t, o) })
	t.Run("LastOrders", func(t *testing.T) { testLastOrders(t, o) })
	t.Run("Audit", func(t *testing.T) { testAudit(t, o) })
	t.Run("Contexts", func(t *testing.T) { testContexts(t, o) })
	t.Run("AdapterStates", func(t *testing.T) { testAdapterStates(t, o) })
	t.Run("Feedback", func(t *testing.T) { testFeedback(t, o) })
	t.Run("Schedules", func(t *testing.T) { testSchedules(t, o) })
	t.Run("Ping", func(t *testing.T) { testPing(t, o) })
	t.Run("Clock", func(t *testing.T) { testClock(t, o) })
	t.Run("Shared", func(t *testing.T) { testShared(t, o) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, o) })
	t.Run("Reopen", func(t *testing.T) {
		if o.Reopen == nil {
			t.Skip("Opener.Reopen is nil")
		}
		testReopen(t, o)
	})
}

// t0 is the suite's clock: a whole microsecond, like every time it uses.
var t0 = time.Date(2025, 6, 1, 9, 0, 0, 123456000, time.UTC)

// at returns t0 plus n microseconds.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }

func sameSession(a, b store.Session) bool {
	return a.Key == b.Key && a.Agent == b.Agent && a.SessionUUID == b.SessionUUID &&
		a.Created.Equal(b.Created) && a.LastUsed.Equal(b.LastUsed)
}

func sameEntry(a, b store.InboxEntry) bool {
	return a.Key == b.Key && a.Seq == b.Seq && a.Conversation == b.Conversation && a.State == b.State &&
		bytes.Equal(a.Event, b.Event) && a.Reply == b.Reply && bytes.Equal(a.Outbox, b.Outbox) && a.StoppedBy == b.StoppedBy && a.Received.Equal(b.Received) && a.Updated.Equal(b.Updated)
}

func sameAudit(a, b store.AuditEntry) bool {
	return a.Time.Equal(b.Time) && a.Platform == b.Platform && a.User == b.User &&
		a.UserName == b.UserName && a.Channel == b.Channel && a.Conversation == b.Conversation &&
		a.Flow == b.Flow && maps.Equal(a.Params, b.Params) && a.Outcome == b.Outcome &&
		a.Detail == b.Detail && a.Duration == b.Duration && a.Approver == b.Approver
}

// ---- Sessions ----

func testSessions(t *testing.T, o Opener) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := o.Open(t)
		tests := []struct {
			name string
			rec  store.Session
		}{
			{"canonical uuid", store.Session{Key: "slack/T0123/C0456/1716212345.000100", Agent: "helper", SessionUUID: "0190f5a2-7c1e-7abc-8def-0123456789ab", Created: at(0), LastUsed: at(3_600_000_001)}},
			{"upper-case uuid kept as given", store.Session{Key: "discord/1/2", Agent: "helper", SessionUUID: "0190F5A2-7C1E-7ABC-8DEF-0123456789AB", Created: at(1)}},
			{"session id not a uuid", store.Session{Key: "console/local", Agent: "ops", SessionUUID: "sess_42", LastUsed: at(2)}},
			{"zero times stay zero", store.Session{Key: "discord/guild/thread", Agent: "a", SessionUUID: "x"}},
			{"time before 1970", store.Session{Key: "old", Agent: "a", SessionUUID: "y", Created: time.Date(1960, 1, 2, 3, 4, 5, 6000, time.UTC)}},
			{"time in another zone", store.Session{Key: "zone", Agent: "a", SessionUUID: "z", Created: at(5).In(time.FixedZone("X", 5*3600+1800))}},
			{"unicode", store.Session{Key: "slack/T/C/ü", Agent: "agént ✓", SessionUUID: "ß"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := s.PutSession(t.Context(), tt.rec); err != nil {
					t.Fatalf("PutSession(%+v) = %v", tt.rec, err)
				}
				got, ok, err := s.Session(t.Context(), tt.rec.Key)
				if err != nil || !ok || !sameSession(got, tt.rec) {
					t.Errorf("Session(%q) = %+v, %v, %v, want %+v, true, nil", tt.rec.Key, got, ok, err, tt.rec)
				}
			})
		}
	})

	t.Run("PutReplaces", func(t *testing.T) {
		s := o.Open(t)
		first := store.Session{Key: "k", Agent: "a", SessionUUID: "s-1", Created: at(0), LastUsed: at(0)}
		second := store.Session{Key: "k", Agent: "b", SessionUUID: "s-2", Created: at(10), LastUsed: at(20)}
		for _, rec := range []store.Session{first, second} {
			if err := s.PutSession(t.Context(), rec); err != nil {
				t.Fatalf("PutSession(%+v) = %v", rec, err)
			}
		}
		if got, ok, err := s.Session(t.Context(), "k"); err != nil || !ok || !sameSession(got, second) {
			t.Errorf("Session(k) after a replacement = %+v, %v, %v, want %+v", got, ok, err, second)
		}
		if list, err := s.ListSessions(t.Context(), ""); err != nil || len(list) != 1 {
			t.Errorf("ListSessions(\"\") after a replacement = %d sessions, %v, want 1", len(list), err)
		}
	})

	t.Run("Missing", func(t *testing.T) {
		s := o.Open(t)
		if got, ok, err := s.Session(t.Context(), "nope"); err != nil || ok || got != (store.Session{}) {
			t.Errorf("Session(%q) = %+v, %v, %v, want zero, false, nil", "nope", got, ok, err)
		}
	})

	t.Run("EmptyKeyRefused", func(t *testing.T) {
		s := o.Open(t)
		if err := s.PutSession(t.Context(), store.Session{Agent: "a", SessionUUID: "s"}); err == nil {
			t.Error("PutSession with an empty key = nil, want an error")
		}
	})

	t.Run("Delete", func(t *testing.T) {
		s := o.Open(t)
		const key = "slack/T1/C2"
		if err := s.PutSession(t.Context(), store.Session{Key: key, Agent: "a", SessionUUID: "s"}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetConversationAgent(t.Context(), key, "ops"); err != nil {
			t.Fatal(err)
		}
		for _, want := range []bool{true, false} {
			if got, err := s.DeleteSession(t.Context(), key); err != nil || got != want {
				t.Errorf("DeleteSession(%q) = %v, %v, want %v, nil", key, got, err, want)
			}
		}
		if got, err := s.DeleteSession(t.Context(), "never"); err != nil || got {
			t.Errorf("DeleteSession(never) = %v, %v, want false, nil", got, err)
		}
		if _, ok, err := s.Session(t.Context(), key); err != nil || ok {
			t.Errorf("Session(%q) after delete = %v, %v, want false, nil", key, ok, err)
		}
		// Forgetting the session keeps the conversation's agent choice.
		if got, ok, err := s.ConversationAgent(t.Context(), key); err != nil || !ok || got != "ops" {
			t.Errorf("ConversationAgent(%q) after DeleteSession = %q, %v, %v, want ops, true, nil", key, got, ok, err)
		}
	})

	t.Run("ListByPrefix", func(t *testing.T) {
		s := o.Open(t)
		// "%" and "_" are SQL LIKE wildcards; "Slack" sorts before "slack"
		// by bytes, not in most collations.
		keys := []string{"slack/T1/C1", "slack/T1/C1/1.1", "slack/T1/C2", "slack/T2/C1", "slack/TX1/C1", "slack/T_1/C1",
			"slack/T%/C1", "Slack/T1/C1", "discord/g/c", "console/local", "slack/T1/C1\x7f", "slack/T1/Cé"}
		for i, k := range keys {
			if err := s.PutSession(t.Context(), store.Session{Key: k, Agent: "a", SessionUUID: "s-" + k, Created: at(i)}); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			prefix string
			want   []string
		}{
			{"", []string{"Slack/T1/C1", "console/local", "discord/g/c", "slack/T%/C1", "slack/T1/C1", "slack/T1/C1/1.1", "slack/T1/C1\x7f", "slack/T1/C2", "slack/T1/Cé", "slack/T2/C1", "slack/TX1/C1", "slack/T_1/C1"}},
			{"slack/T1/", []string{"slack/T1/C1", "slack/T1/C1/1.1", "slack/T1/C1\x7f", "slack/T1/C2", "slack/T1/Cé"}},
			{"slack/T1/C1", []string{"slack/T1/C1", "slack/T1/C1/1.1", "slack/T1/C1\x7f"}},
			{"slack/T_", []string{"slack/T_1/C1"}},
			{"slack/T%", []string{"slack/T%/C1"}},
			{"Slack/", []string{"Slack/T1/C1"}},
			{"discord/", []string{"discord/g/c"}},
			{"zzz", nil},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%q", tt.prefix), func(t *testing.T) {
				got, err := s.ListSessions(t.Context(), tt.prefix)
				if err != nil {
					t.Fatalf("ListSessions(%q) = %v", tt.prefix, err)
				}
				var gotKeys []string
				for _, r := range got {
					if r.SessionUUID != "s-"+r.Key || r.Created.IsZero() {
						t.Errorf("ListSessions(%q) record %+v, want SessionUUID %q and its Created", tt.prefix, r, "s-"+r.Key)
					}
					gotKeys = append(gotKeys, r.Key)
				}
				if !slices.Equal(gotKeys, tt.want) {
					t.Errorf("ListSessions(%q) keys = %q, want %q", tt.prefix, gotKeys, tt.want)
				}
			})
		}
	})

	t.Run("ListMany", func(t *testing.T) {
		s := o.Open(t)
		const n = 150 // more than a small backend page or chunk
		want := make([]string, n)
		for i := range n {
			want[i] = fmt.Sprintf("slack/T1/C1/%04d", i)
			if err := s.PutSession(t.Context(), store.Session{Key: want[i], Agent: "a", SessionUUID: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		// Just past the prefix: must not leak in.
		if err := s.PutSession(t.Context(), store.Session{Key: "slack/T1/C10", Agent: "a", SessionUUID: "x"}); err != nil {
			t.Fatal(err)
		}
		got, err := s.ListSessions(t.Context(), "slack/T1/C1/")
		if err != nil {
			t.Fatal(err)
		}
		var gotKeys []string
		for _, r := range got {
			gotKeys = append(gotKeys, r.Key)
		}
		if !slices.Equal(gotKeys, want) {
			t.Errorf("ListSessions of %d sessions = %d keys, want them in order", n, len(gotKeys))
		}
	})

	t.Run("ConversationAgent", func(t *testing.T) {
		s := o.Open(t)
		const key = "slack/T/C/1.2"
		steps := []struct {
			set    string
			want   string
			wantOK bool
		}{
			{"helper", "helper", true},
			{"ops ✓", "ops ✓", true},
			{"", "", false}, // forgets
			{"", "", false}, // forgetting nothing is fine
			{"helper", "helper", true},
		}
		if got, ok, err := s.ConversationAgent(t.Context(), key); err != nil || ok || got != "" {
			t.Errorf("ConversationAgent(%q) before any choice = %q, %v, %v, want \"\", false, nil", key, got, ok, err)
		}
		for _, st := range steps {
			if err := s.SetConversationAgent(t.Context(), key, st.set); err != nil {
				t.Fatalf("SetConversationAgent(%q, %q) = %v", key, st.set, err)
			}
			if got, ok, err := s.ConversationAgent(t.Context(), key); err != nil || ok != st.wantOK || got != st.want {
				t.Errorf("ConversationAgent(%q) after setting %q = %q, %v, %v, want %q, %v, nil", key, st.set, got, ok, err, st.want, st.wantOK)
			}
		}
		if got, ok, err := s.ConversationAgent(t.Context(), "other"); err != nil || ok {
			t.Errorf("ConversationAgent(other) = %q, %v, %v, want none", got, ok, err)
		}
	})

	t.Run("LastReplyMissing", func(t *testing.T) {
		s := o.Open(t)
		if got, ok, err := s.LastReply(t.Context(), "nope"); err != nil || ok || got != "" {
			t.Errorf("LastReply(nope) = %q, %v, %v, want \"\", false, nil", got, ok, err)
		}
	})

	t.Run("PutTurns", func(t *testing.T) {
		// Each turn is applied only while its conversation still maps to
		// the turn's session, by the same rule as Finish's turn.
		s := o.Open(t)
		old := func(key, uuid string) store.Session {
			return store.Session{Key: key, Agent: "helper", SessionUUID: uuid, Created: at(0), LastUsed: at(0)}
		}
		for _, sess := range []store.Session{old("c/live", "s-1"), old("c/replaced", "s-new"), old("c/twice", "s-3")} {
			if err := s.PutSession(t.Context(), sess); err != nil {
				t.Fatal(err)
			}
		}
		turn := func(key, uuid, reply string, used int) store.Turn {
			sess := old(key, uuid)
			sess.LastUsed = at(used)
			return store.Turn{Session: sess, Reply: reply}
		}
		turns := []store.Turn{
			turn("c/live", "s-1", "answer ✓", 10),
			turn("c/replaced", "s-old", "stale", 10),
			turn("c/reset", "s-2", "gone", 10),
			turn("c/twice", "s-3", "first", 10),
			turn("c/twice", "s-3", "second", 20), // the later of one batch wins
		}
		if n, err := s.PutTurns(t.Context(), turns); err != nil || n != 3 {
			t.Fatalf("PutTurns = %d, %v, want 3 applied", n, err)
		}
		tests := []struct {
			key       string
			want      *store.Session
			wantReply string
		}{
			{"c/live", &turns[0].Session, "answer ✓"},
			{"c/replaced", &store.Session{Key: "c/replaced", Agent: "helper", SessionUUID: "s-new", Created: at(0), LastUsed: at(0)}, ""},
			{"c/reset", nil, ""},
			{"c/twice", &turns[4].Session, "second"},
		}
		for _, tt := range tests {
			got, ok, err := s.Session(t.Context(), tt.key)
			switch {
			case err != nil:
				t.Errorf("Session(%q) = %v", tt.key, err)
			case tt.want == nil && ok:
				t.Errorf("Session(%q) after PutTurns = %+v, want none: a turn brought it back", tt.key, got)
			case tt.want != nil && (!ok || !sameSession(got, *tt.want)):
				t.Errorf("Session(%q) after PutTurns = %+v, %v, want %+v", tt.key, got, ok, *tt.want)
			}
			if reply, ok, err := s.LastReply(t.Context(), tt.key); err != nil || ok != (tt.wantReply != "") || reply != tt.wantReply {
				t.Errorf("LastReply(%q) after PutTurns = %q, %v, %v, want %q", tt.key, reply, ok, err, tt.wantReply)
			}
		}
		if n, err := s.PutTurns(t.Context(), nil); err != nil || n != 0 {
			t.Errorf("PutTurns(nil) = %d, %v, want 0, nil", n, err)
		}
	})
}

// ---- Inbox ----

// entry is the i-th inbox entry of the tests: a distinct key and event.
func entry(i int) store.InboxEntry {
	return store.InboxEntry{
		Key:          fmt.Sprintf("slack/msg/C0456/1716212345.%06d", i),
		Conversation: fmt.Sprintf("slack/T0123/C0456/%d", i%3),
		Event:        []byte(fmt.Sprintf(`{"i":%d,"text":"hello\u0000\xff"}`, i)),
		Received:     at(i),
	}
}

func receive(t *testing.T, s store.Store, e store.InboxEntry) {
	t.Helper()
	if ok, err := s.Receive(t.Context(), e); err != nil || !ok {
		t.Fatalf("Receive(%q) = %v, %v, want true, nil", e.Key, ok, err)
	}
}

func markSent(t *testing.T, s store.Store, key string, now time.Time) {
	t.Helper()
	if err := s.MarkSent(t.Context(), key, now); err != nil {
		t.Fatalf("MarkSent(%q) = %v", key, err)
	}
}

func finish(t *testing.T, s store.Store, key, reply string, turn *store.Turn, now time.Time) {
	t.Helper()
	if err := s.Finish(t.Context(), key, reply, turn, now); err != nil {
		t.Fatalf("Finish(%q) = %v", key, err)
	}
}

func pending(t *testing.T, s store.Store) []store.InboxEntry {
	t.Helper()
	p, err := s.Pending(t.Context())
	if err != nil {
		t.Fatalf("Pending() = %v", err)
	}
	return p
}

func pendingKeys(t *testing.T, s store.Store) []string {
	t.Helper()
	var keys []string
	for _, e := range pending(t, s) {
		keys = append(keys, e.Key)
	}
	return keys
}

// pendingEntry returns the pending entry of key.
func pendingEntry(t *testing.T, s store.Store, key string) (store.InboxEntry, bool) {
	t.Helper()
	for _, e := range pending(t, s) {
		if e.Key == key {
			return e, true
		}
	}
	return store.InboxEntry{}, false
}

// checkSeqs checks that entries' Seqs strictly increase.
func checkSeqs(t *testing.T, entries []store.InboxEntry) {
	t.Helper()
	for i := 1; i < len(entries); i++ {
		if entries[i].Seq <= entries[i-1].Seq {
			t.Errorf("Pending()[%d].Seq = %d after %d: want strictly increasing", i, entries[i].Seq, entries[i-1].Seq)
		}
	}
}

func testInbox(t *testing.T, o Opener) {
	t.Run("ReceiveNew", func(t *testing.T) {
		s := o.Open(t)
		e := entry(1)
		receive(t, s, e)
		got := pending(t, s)
		if len(got) != 1 {
			t.Fatalf("Pending() = %d entries, want 1", len(got))
		}
		want := e
		want.State, want.Seq, want.Updated = store.Received, got[0].Seq, e.Received
		if got[0].Seq == 0 || !sameEntry(got[0], want) {
			t.Errorf("Pending()[0] = %+v, want %+v with a Seq", got[0], want)
		}
	})

	t.Run("ReceiveSetsStateAndSeq", func(t *testing.T) {
		s := o.Open(t)
		receive(t, s, entry(1))
		e := entry(2)
		e.State, e.Seq = store.Answered, 1 // ignored: Receive sets both
		receive(t, s, e)
		got := pending(t, s)
		if len(got) != 2 || got[1].Key != e.Key || got[1].State != store.Received || got[1].Seq <= got[0].Seq {
			t.Errorf("Pending() = %+v, want %q second, Received, with a Seq above %q's", got, e.Key, got[0].Key)
		}
	})

	t.Run("EmptyKeyRefused", func(t *testing.T) {
		s := o.Open(t)
		e := entry(1)
		e.Key = ""
		if ok, err := s.Receive(t.Context(), e); err == nil {
			t.Errorf("Receive with an empty key = %v, nil, want an error", ok)
		}
		if got := pending(t, s); len(got) != 0 {
			t.Errorf("Pending() after a refused Receive = %+v, want none", got)
		}
	})

	t.Run("Duplicate", func(t *testing.T) {
		// A repeat is recognised whatever state the entry is in, and
		// writes nothing.
		tests := []struct {
			name  string
			state store.InboxState
		}{
			{"received", store.Received},
			{"sent", store.Sent},
			{"answered", store.Answered},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := o.Open(t)
				e := entry(1)
				receive(t, s, e)
				if tt.state >= store.Sent {
					markSent(t, s, e.Key, at(100))
				}
				if tt.state == store.Answered {
					finish(t, s, e.Key, "msg-1", nil, at(200))
				}
				before := pending(t, s)
				again := entry(2)
				again.Key = e.Key
				for range 2 {
					if ok, err := s.Receive(t.Context(), again); err != nil || ok {
						t.Errorf("Receive(%q) of a %s entry = %v, %v, want false, nil", again.Key, tt.name, ok, err)
					}
				}
				after := pending(t, s)
				if len(after) != len(before) || len(after) > 0 && !sameEntry(after[0], before[0]) {
					t.Errorf("Pending() after a repeat = %+v, want unchanged %+v", after, before)
				}
				if tt.state == store.Answered {
					if err := s.MarkSent(t.Context(), e.Key, at(300)); err == nil {
						t.Errorf("MarkSent(%q) after the repeat = nil, want the entry still answered", e.Key)
					}
				}
			})
		}
	})

	t.Run("SeqIncreases", func(t *testing.T) {
		s := o.Open(t)
		const n = 40
		for i := range n {
			receive(t, s, entry(i))
		}
		got := pending(t, s)
		if len(got) != n {
			t.Fatalf("Pending() = %d entries, want %d", len(got), n)
		}
		for i, e := range got {
			if e.Key != entry(i).Key {
				t.Fatalf("Pending()[%d] = %q, want %q: arrival order", i, e.Key, entry(i).Key)
			}
		}
		checkSeqs(t, got)
		// Entries answered and expired free no Seq for reuse.
		last := got[n-1].Seq
		for i := range n {
			finish(t, s, entry(i).Key, "", nil, at(1000))
		}
		if gone, err := s.ExpireInbox(t.Context(), at(2000)); err != nil || gone != n {
			t.Fatalf("ExpireInbox = %d, %v, want %d", gone, err, n)
		}
		receive(t, s, entry(0))
		if got := pending(t, s); len(got) != 1 || got[0].Seq <= last {
			t.Errorf("Pending() after expiry and a new Receive = %+v, want one entry with Seq above %d", got, last)
		}
	})

	t.Run("MarkSent", func(t *testing.T) {
		s := o.Open(t)
		for i := range 3 {
			receive(t, s, entry(i))
		}
		before := pending(t, s)
		key := entry(1).Key
		markSent(t, s, key, at(500))
		got := pending(t, s)
		if len(got) != 3 || got[1].Key != key {
			t.Fatalf("Pending() after MarkSent = %+v, want the three in place", got)
		}
		want := before[1]
		want.State, want.Updated = store.Sent, at(500)
		if !sameEntry(got[1], want) {
			t.Errorf("entry after MarkSent = %+v, want %+v", got[1], want)
		}
		for _, i := range []int{0, 2} {
			if !sameEntry(got[i], before[i]) {
				t.Errorf("MarkSent(%q) changed %q: %+v, was %+v", key, got[i].Key, got[i], before[i])
			}
		}
		// Again: refused, and still Sent. MarkSent is the compare-and-set
		// that lets one process only send an entry's request.
		if err := s.MarkSent(t.Context(), key, at(600)); !errors.Is(err, store.ErrAlreadySent) {
			t.Errorf("MarkSent(%q) of a sent entry = %v, want ErrAlreadySent", key, err)
		}
		if e, ok := pendingEntry(t, s, key); !ok || e.State != store.Sent {
			t.Errorf("entry after a second MarkSent = %+v, %v, want Sent", e, ok)
		}
	})

	t.Run("Finish", func(t *testing.T) {
		// From either state the entry leaves Pending and stays a duplicate.
		tests := []struct {
			name string
			sent bool
		}{{"from received", false}, {"from sent", true}}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := o.Open(t)
				for i := range 3 {
					receive(t, s, entry(i))
				}
				key := entry(1).Key
				if tt.sent {
					markSent(t, s, key, at(500))
				}
				finish(t, s, key, "msg-ref-1", nil, at(600))
				if got, want := pendingKeys(t, s), []string{entry(0).Key, entry(2).Key}; !slices.Equal(got, want) {
					t.Errorf("Pending() keys after Finish(%q) = %q, want %q", key, got, want)
				}
				if ok, err := s.Receive(t.Context(), entry(1)); err != nil || ok {
					t.Errorf("Receive(%q) after Finish = %v, %v, want false, nil", key, ok, err)
				}
			})
		}
	})

	t.Run("NoWayBack", func(t *testing.T) {
		s := o.Open(t)
		e := entry(1)
		receive(t, s, e)
		finish(t, s, e.Key, "msg-1", nil, at(100))
		for name, err := range map[string]error{
			"MarkSent": s.MarkSent(t.Context(), e.Key, at(200)),
			"Finish":   s.Finish(t.Context(), e.Key, "msg-2", nil, at(200)),
		} {
			if err == nil || errors.Is(err, store.ErrUnknownEntry) {
				t.Errorf("%s(%q) of an answered entry = %v, want an error other than ErrUnknownEntry", name, e.Key, err)
			}
		}
		if got := pending(t, s); len(got) != 0 {
			t.Errorf("Pending() = %+v, want none", got)
		}
	})

	t.Run("FinishAppliesTurn", func(t *testing.T) {
		s := o.Open(t)
		conv := "slack/T0123/C0456/1716212345.000100"
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
		finish(t, s, e.Key, "msg-1", &store.Turn{Session: next, Reply: "the answer ✓"}, at(20))
		if got, ok, err := s.Session(t.Context(), conv); err != nil || !ok || !sameSession(got, next) {
			t.Errorf("Session(%q) after Finish with a turn = %+v, %v, %v, want %+v", conv, got, ok, err, next)
		}
		if got, ok, err := s.LastReply(t.Context(), conv); err != nil || !ok || got != "the answer ✓" {
			t.Errorf("LastReply(%q) after Finish with a turn = %q, %v, %v, want the reply", conv, got, ok, err)
		}
		// A later turn replaces the reply.
		e2 := entry(2)
		e2.Conversation = conv
		receive(t, s, e2)
		next.LastUsed = at(30)
		finish(t, s, e2.Key, "msg-2", &store.Turn{Session: next, Reply: "second"}, at(30))
		if got, _, err := s.LastReply(t.Context(), conv); err != nil || got != "second" {
			t.Errorf("LastReply(%q) after a second turn = %q, %v, want second", conv, got, err)
		}
		// Also keys get the reply as their latest too.
		e3 := entry(3)
		e3.Conversation = conv
		receive(t, s, e3)
		next.LastUsed = at(40)
		also := "slack/T0123/C0456#U0ALICE"
		finish(t, s, e3.Key, "msg-3", &store.Turn{Session: next, Reply: "third", Also: []string{also}}, at(40))
		if got, ok, err := s.LastReply(t.Context(), also); err != nil || !ok || got != "third" {
			t.Errorf("LastReply(%q) after a turn naming it in Also = %q, %v, %v, want third", also, got, ok, err)
		}
	})

	t.Run("FinishStaleTurn", func(t *testing.T) {
		// A turn whose session was reset or replaced since changes nothing
		// of the conversation, and the entry is still answered.
		tests := []struct {
			name   string
			change func(s store.Store, conv string) error
			want   *store.Session // the conversation's session after Finish; nil: none
		}{
			{"deleted", func(s store.Store, conv string) error { _, err := s.DeleteSession(t.Context(), conv); return err }, nil},
			{"replaced", func(s store.Store, conv string) error {
				return s.PutSession(t.Context(), store.Session{Key: conv, Agent: "helper", SessionUUID: "s-new", Created: at(5), LastUsed: at(5)})
			}, &store.Session{Agent: "helper", SessionUUID: "s-new", Created: at(5), LastUsed: at(5)}},
			{"never had one", func(store.Store, string) error { return nil }, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := o.Open(t)
				conv := "slack/T/C/" + tt.name
				old := store.Session{Key: conv, Agent: "helper", SessionUUID: "s-old", Created: at(0), LastUsed: at(0)}
				if tt.name != "never had one" {
					if err := s.PutSession(t.Context(), old); err != nil {
						t.Fatal(err)
					}
				}
				e := entry(1)
				e.Conversation = conv
				receive(t, s, e)
				markSent(t, s, e.Key, at(1))
				if err := tt.change(s, conv); err != nil {
					t.Fatal(err)
				}
				stale := old
				stale.LastUsed = at(10)
				finish(t, s, e.Key, "msg-1", &store.Turn{Session: stale, Reply: "stale"}, at(10))
				got, ok, err := s.Session(t.Context(), conv)
				switch {
				case err != nil:
					t.Errorf("Session(%q) = %v", conv, err)
				case tt.want == nil && ok:
					t.Errorf("Session(%q) after a stale turn = %+v, want none: the turn brought it back", conv, got)
				case tt.want != nil:
					want := *tt.want
					want.Key = conv
					if !ok || !sameSession(got, want) {
						t.Errorf("Session(%q) after a stale turn = %+v, %v, want %+v", conv, got, ok, want)
					}
				}
				if got, ok, err := s.LastReply(t.Context(), conv); err != nil || ok {
					t.Errorf("LastReply(%q) after a stale turn = %q, %v, %v, want none", conv, got, ok, err)
				}
				if len(pending(t, s)) != 0 {
					t.Errorf("entry still pending after Finish with a stale turn")
				}
			})
		}
	})

	t.Run("UnknownKey", func(t *testing.T) {
		s := o.Open(t)
		conv := "slack/T/C/1"
		sess := store.Session{Key: conv, Agent: "a", SessionUUID: "s-1", Created: at(0), LastUsed: at(0)}
		if err := s.PutSession(t.Context(), sess); err != nil {
			t.Fatal(err)
		}
		// An entry answered and expired is unknown as well.
		expired := entry(9)
		receive(t, s, expired)
		finish(t, s, expired.Key, "", nil, at(10))
		if _, err := s.ExpireInbox(t.Context(), at(11)); err != nil {
			t.Fatal(err)
		}
		turn := sess
		turn.LastUsed = at(50)
		for _, key := range []string{"never/received", expired.Key} {
			if err := s.MarkSent(t.Context(), key, at(20)); !errors.Is(err, store.ErrUnknownEntry) {
				t.Errorf("MarkSent(%q) = %v, want ErrUnknownEntry", key, err)
			}
			if err := s.Finish(t.Context(), key, "msg", &store.Turn{Session: turn, Reply: "nope"}, at(20)); !errors.Is(err, store.ErrUnknownEntry) {
				t.Errorf("Finish(%q) = %v, want ErrUnknownEntry", key, err)
			}
		}
		// The failed Finish applied nothing of its turn.
		if got, _, err := s.Session(t.Context(), conv); err != nil || !sameSession(got, sess) {
			t.Errorf("Session(%q) after Finish of an unknown key = %+v, %v, want %+v", conv, got, err, sess)
		}
		if got, ok, err := s.LastReply(t.Context(), conv); err != nil || ok {
			t.Errorf("LastReply(%q) after Finish of an unknown key = %q, %v, %v, want none", conv, got, ok, err)
		}
	})

	t.Run("PendingKeepsEvents", func(t *testing.T) {
		s := o.Open(t)
		all := make([]byte, 256)
		for i := range all {
			all[i] = byte(i)
		}
		events := map[string][]byte{
			"every byte": all,
			"empty":      nil,
			"large":      bytes.Repeat([]byte("0123456789abcdef"), 64<<10), // 1 MiB
			"json":       []byte(`{"type":"message","text":"héllo \"world\""}`),
		}
		names := slices.Sorted(maps.Keys(events))
		for i, name := range names {
			e := entry(i)
			e.Key, e.Event = "k/"+name, events[name]
			receive(t, s, e)
		}
		markSent(t, s, "k/every byte", at(100))
		got := pending(t, s)
		if len(got) != len(names) {
			t.Fatalf("Pending() = %d entries, want %d", len(got), len(names))
		}
		for i, e := range got {
			if e.Key != "k/"+names[i] || !bytes.Equal(e.Event, events[names[i]]) {
				t.Errorf("Pending()[%d] = %q with %d event bytes, want %q with its %d bytes intact", i, e.Key, len(e.Event), "k/"+names[i], len(events[names[i]]))
			}
		}
	})

	t.Run("PendingOnlyUnanswered", func(t *testing.T) {
		s := o.Open(t)
		const n = 30
		var want []string
		sent := make(map[string]bool)
		for i := range n {
			e := entry(i)
			receive(t, s, e)
			switch i % 3 {
			case 1:
				markSent(t, s, e.Key, at(100+i))
				sent[e.Key] = true
				want = append(want, e.Key)
			case 2:
				finish(t, s, e.Key, "ref", nil, at(100+i))
			default:
				want = append(want, e.Key)
			}
		}
		got := pending(t, s)
		var keys []string
		for i, e := range got {
			keys = append(keys, e.Key)
			wantState := store.Received
			if sent[e.Key] {
				wantState = store.Sent
			}
			if e.State != wantState {
				t.Errorf("Pending()[%d] %q in state %v, want %v", i, e.Key, e.State, wantState)
			}
		}
		if !slices.Equal(keys, want) {
			t.Errorf("Pending() keys = %q, want %q", keys, want)
		}
		checkSeqs(t, got)
	})

	t.Run("ExpireInbox", func(t *testing.T) {
		// Entries 0-9 are answered at at(1000+i); 10 and 11 stay Received
		// and Sent with old times.
		setup := func(t *testing.T) store.Store {
			s := o.Open(t)
			for i := range 10 {
				e := entry(i)
				receive(t, s, e)
				finish(t, s, e.Key, "ref", nil, at(1000+i))
			}
			receive(t, s, entry(10))
			receive(t, s, entry(11))
			markSent(t, s, entry(11).Key, at(12))
			return s
		}
		tests := []struct {
			name     string
			before   time.Time
			wantGone int
		}{
			{"before all", at(1000), 0},
			{"bound is exclusive", at(1003), 3},
			{"just past one", at(1003).Add(time.Microsecond), 4},
			{"all answered", at(5000), 10},
			{"far future", time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), 10},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := setup(t)
				gone, err := s.ExpireInbox(t.Context(), tt.before)
				if err != nil || gone != tt.wantGone {
					t.Fatalf("ExpireInbox(%v) = %d, %v, want %d, nil", tt.before, gone, err, tt.wantGone)
				}
				for i := range 10 {
					e := entry(i)
					isNew, err := s.Receive(t.Context(), e)
					if wantNew := i < tt.wantGone; err != nil || isNew != wantNew {
						t.Errorf("Receive(%q) after ExpireInbox(%v) = %v, %v, want %v (expired: new again)", e.Key, tt.before, isNew, err, wantNew)
					}
				}
				// Unanswered entries never expire.
				var keys []string
				for _, e := range pending(t, s) {
					keys = append(keys, e.Key)
				}
				want := []string{entry(10).Key, entry(11).Key}
				for i := range tt.wantGone {
					want = append(want, entry(i).Key) // received again above
				}
				if !slices.Equal(keys, want) {
					t.Errorf("Pending() after ExpireInbox(%v) = %q, want %q", tt.before, keys, want)
				}
				if gone, err := s.ExpireInbox(t.Context(), tt.before); err != nil || gone != 0 {
					t.Errorf("second ExpireInbox(%v) = %d, %v, want 0, nil", tt.before, gone, err)
				}
			})
		}
	})

	t.Run("ExpireMany", func(t *testing.T) {
		s := o.Open(t)
		const n = 150 // more than a small backend's chunk
		for i := range n {
			e := entry(i)
			receive(t, s, e)
			finish(t, s, e.Key, "", nil, at(1000+i))
		}
		if gone, err := s.ExpireInbox(t.Context(), at(1000+n-1)); err != nil || gone != n-1 {
			t.Errorf("ExpireInbox of %d = %d, %v, want %d", n, gone, err, n-1)
		}
		if ok, err := s.Receive(t.Context(), entry(n-1)); err != nil || ok {
			t.Errorf("Receive of the one left = %v, %v, want false", ok, err)
		}
	})
}

// ---- Audit ----

func auditDetails(es []store.AuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Detail
	}
	return out
}

func testAudit(t *testing.T, o Opener) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := o.Open(t)
		full := store.AuditEntry{
			Time: at(2_000_000), Platform: "slack", User: "U1", UserName: "Ann Ö", Channel: "C1",
			Conversation: "slack/T/C1/1.2", Flow: "healthcheck",
			Params:  map[string]string{"host": "web1", "service": "nginx \"proxy\"\n=x", "": "empty name"},
			Outcome: store.OutcomeOK, Detail: "fine ✓", Duration: 2500*time.Millisecond + 7*time.Microsecond,
			Approver: "U-approver",
		}
		bare := store.AuditEntry{Time: at(1), Flow: "bare", Outcome: store.OutcomeRefused}
		for _, e := range []store.AuditEntry{full, bare} {
			if err := s.AppendAudit(t.Context(), e); err != nil {
				t.Fatalf("AppendAudit(%+v) = %v", e, err)
			}
		}
		got, err := s.Audit(t.Context(), store.AuditFilter{})
		if err != nil || len(got) != 2 {
			t.Fatalf("Audit() = %d entries, %v, want 2", len(got), err)
		}
		if !sameAudit(got[0], bare) || !sameAudit(got[1], full) {
			t.Errorf("Audit() = %+v, want [%+v %+v]", got, bare, full)
		}
	})

	t.Run("TimeOrder", func(t *testing.T) {
		s := o.Open(t)
		// Appended out of time order, read back in time order; equal times
		// in the order appended.
		entries := []store.AuditEntry{
			{Time: at(3), Detail: "5"},
			{Time: at(2), Detail: "3"},
			{Time: at(0), Detail: "1"},
			{Time: at(2), Detail: "4"},
			{Time: at(1), Detail: "2"},
			{Time: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), Detail: "0"},
		}
		for _, e := range entries {
			if err := s.AppendAudit(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Audit(t.Context(), store.AuditFilter{})
		if want := []string{"0", "1", "2", "3", "4", "5"}; err != nil || !slices.Equal(auditDetails(got), want) {
			t.Errorf("Audit() = %v, %v, want %v", auditDetails(got), err, want)
		}
	})

	t.Run("Filter", func(t *testing.T) {
		s := o.Open(t)
		// Entry i at t0+i minutes; flows alternate, users cycle over three,
		// outcomes over four; the first twelve on Slack.
		flows := []string{"healthcheck", "restart"}
		users := []string{"U1", "U2", "U3"}
		outcomes := []string{store.OutcomeOK, store.OutcomeError, store.OutcomeRefused, store.OutcomeTimeout}
		for i := range 24 {
			e := store.AuditEntry{
				Time: t0.Add(time.Duration(i) * time.Minute), Platform: []string{"slack", "discord"}[i/12],
				Flow: flows[i%2], User: users[i%3], Outcome: outcomes[i%4], Detail: fmt.Sprint(i),
			}
			if err := s.AppendAudit(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}
		minute := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
		tests := []struct {
			name string
			f    store.AuditFilter
			want string
		}{
			{"all", store.AuditFilter{}, "[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23]"},
			{"limit", store.AuditFilter{Limit: 3}, "[0 1 2]"},
			{"since inclusive", store.AuditFilter{Since: minute(20)}, "[20 21 22 23]"},
			{"since between entries", store.AuditFilter{Since: minute(20).Add(time.Microsecond)}, "[21 22 23]"},
			{"until exclusive", store.AuditFilter{Until: minute(3)}, "[0 1 2]"},
			{"window", store.AuditFilter{Since: minute(5), Until: minute(8)}, "[5 6 7]"},
			{"flow", store.AuditFilter{Flow: "restart", Limit: 4}, "[1 3 5 7]"},
			{"user", store.AuditFilter{User: "U3"}, "[2 5 8 11 14 17 20 23]"},
			{"outcome", store.AuditFilter{Outcome: store.OutcomeRefused}, "[2 6 10 14 18 22]"},
			{"platform", store.AuditFilter{Platform: "discord", Limit: 2}, "[12 13]"},
			{"anded", store.AuditFilter{Flow: "healthcheck", User: "U1", Outcome: store.OutcomeRefused}, "[6 18]"},
			{"anded with since", store.AuditFilter{Flow: "healthcheck", User: "U1", Outcome: store.OutcomeRefused, Since: minute(7)}, "[18]"},
			{"newest", store.AuditFilter{Newest: true, Limit: 3}, "[21 22 23]"},
			{"newest without limit", store.AuditFilter{Newest: true, Since: minute(21)}, "[21 22 23]"},
			{"newest filtered before until", store.AuditFilter{Newest: true, Limit: 2, User: "U2", Until: minute(20)}, "[16 19]"},
			{"newest in window", store.AuditFilter{Newest: true, Limit: 2, Since: minute(2), Until: minute(9)}, "[7 8]"},
			{"limit above matches", store.AuditFilter{Platform: "slack", Outcome: store.OutcomeOK, Limit: 100}, "[0 4 8]"},
			{"nothing", store.AuditFilter{Flow: "nosuch"}, "[]"},
			{"empty window", store.AuditFilter{Since: minute(60)}, "[]"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.Audit(t.Context(), tt.f)
				if err != nil || fmt.Sprint(auditDetails(got)) != tt.want {
					t.Errorf("Audit(%+v) = %v, %v, want %s", tt.f, auditDetails(got), err, tt.want)
				}
			})
		}
	})

	t.Run("Prune", func(t *testing.T) {
		s := o.Open(t)
		const n = 150 // more than a small backend's chunk
		for i := range n {
			if err := s.AppendAudit(t.Context(), store.AuditEntry{Time: t0.Add(time.Duration(i) * time.Second), Detail: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		steps := []struct {
			before   time.Time
			wantGone int
		}{
			{t0, 0},
			{t0.Add(100 * time.Second), 100}, // exclusive: entry 100 stays
			{t0.Add(100 * time.Second), 0},
			{t0.Add(time.Hour), n - 100},
		}
		left := n
		for _, st := range steps {
			gone, err := s.PruneAudit(t.Context(), st.before)
			if err != nil || gone != st.wantGone {
				t.Fatalf("PruneAudit(%v) = %d, %v, want %d, nil", st.before, gone, err, st.wantGone)
			}
			left -= gone
			got, err := s.Audit(t.Context(), store.AuditFilter{})
			if err != nil || len(got) != left {
				t.Fatalf("Audit() after PruneAudit(%v) = %d entries, %v, want %d", st.before, len(got), err, left)
			}
			if left > 0 && got[0].Time.Before(st.before) {
				t.Errorf("Audit() after PruneAudit(%v) starts at %v", st.before, got[0].Time)
			}
		}
	})
}

// ---- Concurrency ----

func testConcurrency(t *testing.T, o Opener) {
	t.Run("Receive", func(t *testing.T) {
		// Every key delivered by several goroutines at once, many keys at
		// once: each is new exactly once.
		s := o.Open(t)
		const keys, copies = 64, 6
		var mu sync.Mutex
		winner := make(map[string][]byte)
		var wg sync.WaitGroup
		for c := range copies {
			for i := range keys {
				wg.Go(func() {
					e := entry(i)
					e.Event = fmt.Appendf(nil, "copy %d of %d", c, i)
					ok, err := s.Receive(t.Context(), e)
					if err != nil {
						t.Errorf("Receive(%q) = %v", e.Key, err)
						return
					}
					if ok {
						mu.Lock()
						if prev, dup := winner[e.Key]; dup {
							t.Errorf("Receive(%q) new twice: %q and %q", e.Key, prev, e.Event)
						}
						winner[e.Key] = e.Event
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		if len(winner) != keys {
			t.Errorf("%d keys accepted, want %d", len(winner), keys)
		}
		got := pending(t, s)
		if len(got) != keys {
			t.Fatalf("Pending() = %d entries, want %d", len(got), keys)
		}
		checkSeqs(t, got)
		for _, e := range got {
			if !bytes.Equal(e.Event, winner[e.Key]) {
				t.Errorf("Pending() %q holds %q, want the accepted copy %q", e.Key, e.Event, winner[e.Key])
			}
		}
	})

	t.Run("Lifecycle", func(t *testing.T) {
		// Whole lifecycles at once, each on its own conversation, beside
		// readers and an expiry.
		s := o.Open(t)
		const n = 48
		for i := range n {
			conv := fmt.Sprintf("discord/g/%d", i)
			if err := s.PutSession(t.Context(), store.Session{Key: conv, Agent: "a", SessionUUID: fmt.Sprint(i), Created: at(0), LastUsed: at(0)}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				conv := fmt.Sprintf("discord/g/%d", i)
				e := entry(i)
				e.Conversation = conv
				if ok, err := s.Receive(t.Context(), e); err != nil || !ok {
					t.Errorf("Receive(%q) = %v, %v", e.Key, ok, err)
					return
				}
				if err := s.MarkSent(t.Context(), e.Key, at(10)); err != nil {
					t.Errorf("MarkSent(%q) = %v", e.Key, err)
					return
				}
				turn := store.Turn{Session: store.Session{Key: conv, Agent: "a", SessionUUID: fmt.Sprint(i), Created: at(0), LastUsed: at(20)}, Reply: "r" + fmt.Sprint(i)}
				if err := s.Finish(t.Context(), e.Key, "ref", &turn, at(20)); err != nil {
					t.Errorf("Finish(%q) = %v", e.Key, err)
				}
			})
			wg.Go(func() {
				if _, err := s.Pending(t.Context()); err != nil {
					t.Errorf("Pending() = %v", err)
				}
				if _, err := s.ExpireInbox(t.Context(), at(0)); err != nil {
					t.Errorf("ExpireInbox() = %v", err)
				}
			})
		}
		wg.Wait()
		if got := pending(t, s); len(got) != 0 {
			t.Errorf("Pending() after every lifecycle = %d entries, want none", len(got))
		}
		for i := range n {
			conv := fmt.Sprintf("discord/g/%d", i)
			if got, _, err := s.LastReply(t.Context(), conv); err != nil || got != "r"+fmt.Sprint(i) {
				t.Errorf("LastReply(%q) = %q, %v, want r%d", conv, got, err, i)
			}
		}
	})
}

// ---- Reopen ----

func testReopen(t *testing.T, o Opener) {
	s := o.Open(t)
	conv := "slack/T0123/C0456/1716212345.000100"
	sess := store.Session{Key: conv, Agent: "helper", SessionUUID: "0190f5a2-7c1e-7abc-8def-0123456789ab", Created: at(0), LastUsed: at(0)}
	if err := s.PutSession(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	if err := s.SetConversationAgent(t.Context(), conv, "ops"); err != nil {
		t.Fatal(err)
	}
	// Entry 0 answered with a turn, 1 sent, 2 received.
	for i := range 3 {
		e := entry(i)
		e.Conversation = conv
		receive(t, s, e)
	}
	markSent(t, s, entry(0).Key, at(10))
	sess.LastUsed = at(20)
	finish(t, s, entry(0).Key, "msg-0", &store.Turn{Session: sess, Reply: "the answer"}, at(20))
	markSent(t, s, entry(1).Key, at(30))
	audit := store.AuditEntry{Time: at(40), Platform: "slack", User: "U1", UserName: "ann", Channel: "C0456", Conversation: conv,
		Flow: "healthcheck", Params: map[string]string{"host": "web1"}, Outcome: store.OutcomeOK, Detail: "fine", Duration: 1500 * time.Millisecond}
	if err := s.AppendAudit(t.Context(), audit); err != nil {
		t.Fatal(err)
	}
	before := pending(t, s)

	s = o.Reopen(t, s)

	if got, ok, err := s.Session(t.Context(), conv); err != nil || !ok || !sameSession(got, sess) {
		t.Errorf("Session after reopen = %+v, %v, %v, want %+v", got, ok, err, sess)
	}
	if got, _, err := s.ConversationAgent(t.Context(), conv); err != nil || got != "ops" {
		t.Errorf("ConversationAgent after reopen = %q, %v, want ops", got, err)
	}
	if got, _, err := s.LastReply(t.Context(), conv); err != nil || got != "the answer" {
		t.Errorf("LastReply after reopen = %q, %v, want %q", got, err, "the answer")
	}
	after := pending(t, s)
	if len(after) != len(before) || len(after) != 2 {
		t.Fatalf("Pending() after reopen = %+v, want %+v", after, before)
	}
	for i := range after {
		if !sameEntry(after[i], before[i]) {
			t.Errorf("Pending()[%d] after reopen = %+v, want %+v", i, after[i], before[i])
		}
	}
	for i := range 3 {
		if ok, err := s.Receive(t.Context(), entry(i)); err != nil || ok {
			t.Errorf("Receive(%q) after reopen = %v, %v, want false: it is held", entry(i).Key, ok, err)
		}
	}
	if got, err := s.Audit(t.Context(), store.AuditFilter{}); err != nil || len(got) != 1 || !sameAudit(got[0], audit) {
		t.Errorf("Audit() after reopen = %+v, %v, want [%+v]", got, err, audit)
	}
	// Seq goes on from where it was, and the entries move on as before.
	receive(t, s, entry(3))
	if got := pending(t, s); len(got) != 3 || got[2].Seq <= before[len(before)-1].Seq {
		t.Errorf("Pending() after a Receive following reopen = %+v, want a third entry with a higher Seq", got)
	}
	finish(t, s, entry(1).Key, "msg-1", nil, at(50))
	if gone, err := s.ExpireInbox(t.Context(), at(51)); err != nil || gone != 2 {
		t.Errorf("ExpireInbox after reopen = %d, %v, want 2 (the entry answered before and the one after)", gone, err)
	}
}
