package bridge_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestAdapterState: what an adapter saves is returned while it is younger
// than the age asked, by the core's clock, and not after; "" forgets it;
// it is no conversation's context.
func TestAdapterState(t *testing.T) {
	start := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	var offset atomic.Int64
	cfg := defaultConfig()
	cfg.Now = func() time.Time { return start.Add(time.Duration(offset.Load())) }
	b, _, st := newBubbleBridgeStore(t, cfg, workspacetest.Agent{})
	ctx := t.Context()
	const name = "discord/gateway/0-of-1"
	if _, ok, err := b.AdapterState(ctx, name, time.Minute); err != nil || ok {
		t.Fatalf("AdapterState() before any save = %v, %v; want none", ok, err)
	}
	if err := b.SaveAdapterState(ctx, name, `{"seq":7}`); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(time.Minute))
	if text, ok, err := b.AdapterState(ctx, name, time.Minute); err != nil || !ok || text != `{"seq":7}` {
		t.Errorf("AdapterState() a minute later, within a minute = %q, %v, %v; want the text saved", text, ok, err)
	}
	offset.Store(int64(time.Minute + time.Millisecond))
	if text, ok, err := b.AdapterState(ctx, name, time.Minute); err != nil || ok {
		t.Errorf("AdapterState() past a minute = %q, %v, %v; want none", text, ok, err)
	}
	if _, ok, _ := st.ConversationContext(ctx, name); ok {
		t.Errorf("the adapter's state is the context of conversation %q", name)
	}
	if err := b.SaveAdapterState(ctx, name, ""); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.AdapterState(ctx, name, time.Hour); err != nil || ok {
		t.Errorf("AdapterState() after saving \"\" = %v, %v; want none", ok, err)
	}
}
