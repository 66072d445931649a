package postgres

import (
	"testing"
	"time"
)

// TestAdapterStatesMigrated: a schema of before adapter_states, holding
// adapter state as context records under "adapter-state/" keys, is
// migrated: the records become adapter states at version 1, leave the
// contexts, and a conversation's context stays.
func TestAdapterStatesMigrated(t *testing.T) {
	t.Parallel()
	dsn := newSchema(t)
	s := openDSN(t, dsn, Options{NoMigrate: true})
	if _, err := s.goose.UpTo(t.Context(), 8); err != nil {
		t.Fatalf("migrate to 8: %v", err)
	}
	updated := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	exec(t, dsn, `INSERT INTO conversation_contexts (conversation, text, told, updated) VALUES
		('adapter-state/discord/gateway/0-of-1', '{"seq":7}', false, $1),
		('slack/T1/D1/1.1', 'viewing', true, $1)`, updated)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	got, ok, err := s.AdapterState(t.Context(), "discord/gateway/0-of-1")
	if err != nil || !ok || got.Text != `{"seq":7}` || got.Version != 1 || !got.Updated.Equal(updated) {
		t.Errorf("AdapterState() after the migration = %+v, %v, %v, want the context record's text at version 1", got, ok, err)
	}
	if c, ok, err := s.ConversationContext(t.Context(), "adapter-state/discord/gateway/0-of-1"); err != nil || ok {
		t.Errorf("the legacy record is still a context: %+v, %v, %v", c, ok, err)
	}
	if c, ok, err := s.ConversationContext(t.Context(), "slack/T1/D1/1.1"); err != nil || !ok || c.Text != "viewing" {
		t.Errorf("a conversation's context after the migration = %+v, %v, %v, want it kept", c, ok, err)
	}
}
