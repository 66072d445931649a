package bridge

import (
	"context"
	"fmt"
	"time"
)

// LastSeen returns, for each conversation with events keyed under
// keyPrefix recorded within maxAge, the highest Event.Order recorded: an
// adapter fetches the conversation's messages after it and hands them to
// Receive, which answers those it has not seen (all of them come after
// every entry of the conversation the inbox still holds).
func (b *Bridge) LastSeen(ctx context.Context, keyPrefix string, maxAge time.Duration) (map[string]int64, error) {
	last, err := b.store.LastOrders(ctx, keyPrefix, b.cfg.Now().Add(-maxAge))
	if err != nil {
		return nil, fmt.Errorf("last seen: %w", err)
	}
	return last, nil
}
