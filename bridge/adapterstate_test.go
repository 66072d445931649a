package bridge_test

import (
	"errors"
	"strconv"
	"sync"
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

// TestUpdateAdapterStateCounts: changes made at once, each a
// read-modify-write of one count, all count; a change is given what was
// saved within the age asked, and its error writes nothing.
func TestUpdateAdapterStateCounts(t *testing.T) {
	b, _, _ := newBubbleBridgeStore(t, defaultConfig(), workspacetest.Agent{})
	ctx := t.Context()
	const name, writers, adds = "discord/identify-budget", 4, 10
	add := func(text string, ok bool) (string, error) {
		n, _ := strconv.Atoi(text)
		return strconv.Itoa(n + 1), nil
	}
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range adds {
				if _, err := b.UpdateAdapterState(ctx, name, time.Hour, add); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if text, ok, err := b.AdapterState(ctx, name, time.Hour); err != nil || !ok || text != strconv.Itoa(writers*adds) {
		t.Errorf("AdapterState() after %d additions at once = %q, %v, %v", writers*adds, text, ok, err)
	}
	refuse := errors.New("refused")
	if _, err := b.UpdateAdapterState(ctx, name, time.Hour, func(string, bool) (string, error) { return "x", refuse }); !errors.Is(err, refuse) {
		t.Errorf("UpdateAdapterState(a change that fails) = %v, want its error", err)
	}
	if text, _, _ := b.AdapterState(ctx, name, time.Hour); text != strconv.Itoa(writers*adds) {
		t.Errorf("a failed change wrote %q", text)
	}
}
