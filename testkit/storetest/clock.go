package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// testClock checks that the store takes every time it records from its
// caller: a change whose time is zero is refused with store.ErrNoTime and
// writes nothing, rather than stamped with the backend's own clock.
func testClock(t *testing.T, o Opener) {
	s := o.Open(t)
	ctx := t.Context()
	var zero time.Time
	receive(t, s, store.InboxEntry{Key: "k/held", Conversation: "c", Event: []byte("e"), Received: at(1)})
	for name, call := range map[string]func() error{
		"Receive": func() error {
			_, err := s.Receive(ctx, store.InboxEntry{Key: "k/new", Conversation: "c", Event: []byte("e")})
			return err
		},
		"MarkSent": func() error { return s.MarkSent(ctx, "k/held", zero) },
		"Finish":   func() error { return s.Finish(ctx, "k/held", "ref", nil, zero) },
		"PutReply": func() error { return s.PutReply(ctx, "k/held", []byte("r"), nil, zero) },
		"AppendAudit": func() error {
			return s.AppendAudit(ctx, store.AuditEntry{Flow: "f", Outcome: store.OutcomeOK})
		},
		"PutVote": func() error {
			_, err := s.PutVote(ctx, store.Vote{Reply: "r", Platform: "slack", User: "U1", Value: store.VoteUp})
			return err
		},
		"PutAnswer": func() error { return s.PutAnswer(ctx, store.Answer{Reply: "r", Platform: "slack"}) },
	} {
		if err := call(); !errors.Is(err, store.ErrNoTime) {
			t.Errorf("%s with a zero time = %v, want ErrNoTime", name, err)
		}
	}
	if got := pendingKeys(t, s); len(got) != 1 || got[0] != "k/held" {
		t.Errorf("Pending() = %q, want k/held alone", got)
	}
	if e, _ := pendingEntry(t, s, "k/held"); e.State != store.Received || e.Outbox != nil {
		t.Errorf("k/held = %+v, want it received, nothing kept", e)
	}
	if got, err := s.Audit(ctx, store.AuditFilter{}); err != nil || len(got) != 0 {
		t.Errorf("Audit() = %+v, %v, want none", got, err)
	}
	if got, err := s.Votes(ctx, store.FeedbackFilter{}); err != nil || len(got) != 0 {
		t.Errorf("Votes() = %+v, %v, want none", got, err)
	}
	if _, ok, err := s.Answer(ctx, "slack", "r"); err != nil || ok {
		t.Errorf("Answer() = %v, %v, want none", ok, err)
	}
}
