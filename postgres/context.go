package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// ConversationContext returns what the conversation's user has open beside
// it; ok is false when nothing is recorded.
func (s *Store) ConversationContext(ctx context.Context, key string) (store.Context, bool, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return store.Context{}, false, fmt.Errorf("conversation context %q: %w", key, err)
	}
	defer cancel()
	if !storable(key) {
		return store.Context{}, false, nil
	}
	c := store.Context{Key: key}
	err = s.pool.QueryRow(ctx, `SELECT text, told, updated FROM conversation_contexts WHERE conversation = $1`, key).
		Scan(&c.Text, &c.Told, &c.Updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Context{}, false, nil
	}
	if err != nil {
		return store.Context{}, false, fmt.Errorf("conversation context %q: %w", key, err)
	}
	return c, true, nil
}

// PutConversationContext records c under c.Key; an empty text deletes it.
func (s *Store) PutConversationContext(ctx context.Context, c store.Context) error {
	if err := errors.Join(checkKey("conversation key", c.Key), checkText("context", c.Text)); err != nil {
		return fmt.Errorf("put conversation context: %w", err)
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return fmt.Errorf("put conversation context %q: %w", c.Key, err)
	}
	defer cancel()
	if c.Text == "" {
		_, err = s.pool.Exec(ctx, `DELETE FROM conversation_contexts WHERE conversation = $1`, c.Key)
	} else {
		_, err = s.pool.Exec(ctx, `
			INSERT INTO conversation_contexts (conversation, text, told, updated) VALUES ($1, $2, $3, $4)
			ON CONFLICT (conversation) DO UPDATE SET text = EXCLUDED.text, told = EXCLUDED.told, updated = EXCLUDED.updated`,
			c.Key, c.Text, c.Told, c.Updated.Truncate(time.Microsecond))
	}
	if err != nil {
		return fmt.Errorf("put conversation context %q: %w", c.Key, err)
	}
	return nil
}
