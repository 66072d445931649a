package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// TestPruneSessions: sessions unused since before go, with their
// conversation's agent choice, context and latest reply, in batches;
// recent ones and ones of unknown age stay, with everything of theirs.
func TestPruneSessions(t *testing.T) {
	t.Parallel()
	s, _ := openTest(t, Options{})
	s.batch = 2
	ctx := t.Context()
	now := time.Unix(1_800_000_000, 0).UTC()
	cut := now.Add(-90 * 24 * time.Hour)
	type conv struct {
		key              string
		created, lastUse time.Time
		gone             bool
	}
	convs := []conv{
		{"slack/T1/C1/1.1", now.Add(-200 * 24 * time.Hour), now.Add(-100 * 24 * time.Hour), true},
		{"slack/T1/C1/1.2", now.Add(-200 * 24 * time.Hour), now.Add(-time.Hour), false},
		{"slack/T1/C1/1.3", now.Add(-100 * 24 * time.Hour), time.Time{}, true},
		{"slack/T1/C1/1.4", time.Time{}, time.Time{}, false},
		{"discord/G/C5", now.Add(-300 * 24 * time.Hour), cut.Add(-time.Microsecond), true},
		{"discord/G/C6", now.Add(-300 * 24 * time.Hour), cut, false},
		{"discord/G/C7", now.Add(-300 * 24 * time.Hour), cut.Add(-time.Hour), true},
	}
	var turns []store.Turn
	for i, c := range convs {
		rec := store.Session{Key: c.key, Agent: "a", SessionUUID: fmt.Sprintf("0190f5a2-7c1e-7abc-8def-%012x", i), Created: c.created}
		if err := s.PutSession(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.LastUsed = c.lastUse
		turns = append(turns, store.Turn{Session: rec, Reply: "reply"})
		if err := s.SetConversationAgent(ctx, c.key, "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.PutConversationContext(ctx, store.Context{Key: c.key, Text: "open: x", Updated: now}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.PutTurns(ctx, turns); err != nil || n != len(turns) {
		t.Fatalf("PutTurns = %d, %v", n, err)
	}
	n, err := s.PruneSessions(ctx, cut)
	if err != nil || n != 4 {
		t.Fatalf("PruneSessions = %d, %v, want 4", n, err)
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
	if n, err := s.PruneSessions(ctx, cut); err != nil || n != 0 {
		t.Errorf("PruneSessions again = %d, %v, want 0", n, err)
	}
}
