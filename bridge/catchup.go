package bridge

import (
	"context"
	"fmt"
	"time"
)

// RecentInbox is implemented by an inbox that can say how far each
// conversation's platform order was recorded (postgres.Store and
// sessionmap.Store, both checked in cmd/flowbridge): what an
// adapter whose platform does not redeliver (Discord) needs to fetch what
// it missed while down.
type RecentInbox interface {
	// LastOrders returns, per conversation with entries keyed under
	// keyPrefix and received at or after since, their highest Order.
	LastOrders(ctx context.Context, keyPrefix string, since time.Time) (map[string]int64, error)
}

// LastSeen returns, for each conversation with events keyed under
// keyPrefix recorded within maxAge, the highest Event.Order recorded: an
// adapter fetches the conversation's messages after it and hands them to
// Receive, which answers those it has not seen (all of them come after
// every entry of the conversation the inbox still holds). With a store
// that cannot tell, LastSeen returns nil and no error.
func (b *Bridge) LastSeen(ctx context.Context, keyPrefix string, maxAge time.Duration) (map[string]int64, error) {
	ri, ok := b.store.(RecentInbox)
	if !ok {
		return nil, nil
	}
	last, err := ri.LastOrders(ctx, keyPrefix, b.cfg.Now().Add(-maxAge))
	if err != nil {
		return nil, fmt.Errorf("last seen: %w", err)
	}
	return last, nil
}
