package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// adapterStatePrefix starts the keys under which adapters keep state of
// their own (a Discord shard's gateway session) in the store's context
// records: a key, a text and a time, which every backend keeps already.
// No conversation key starts so: they start with their platform's name.
const adapterStatePrefix = "adapter-state/"

// AdapterState returns the text an adapter saved under name
// (SaveAdapterState), if it was saved within maxAge by the core's clock;
// ok is false otherwise.
func (b *Bridge) AdapterState(ctx context.Context, name string, maxAge time.Duration) (text string, ok bool, err error) {
	c, found, err := b.store.ConversationContext(ctx, adapterStatePrefix+name)
	if err != nil {
		return "", false, fmt.Errorf("adapter state %s: %w", name, err)
	}
	if !found || b.cfg.Now().Sub(c.Updated) > maxAge {
		return "", false, nil
	}
	return c.Text, true, nil
}

// SaveAdapterState keeps text under name for the next process, stamped
// with the core's clock, replacing what was saved before; "" forgets it.
func (b *Bridge) SaveAdapterState(ctx context.Context, name, text string) error {
	if err := b.store.PutConversationContext(ctx, store.Context{Key: adapterStatePrefix + name, Text: text, Updated: b.cfg.Now()}); err != nil {
		return fmt.Errorf("save adapter state %s: %w", name, err)
	}
	return nil
}
