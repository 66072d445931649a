package bridge_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

func TestProcessAloneHoldsNothingBack(t *testing.T) {
	// A process that shares its store with no other records every event
	// of its conversations itself: nothing can be in another's hands, and
	// an entry runs at once, however long the order hold.
	synctest.Test(t, func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Replicas.OrderHold = time.Hour
		b, _ := newBubbleBridge(t, cfg, workspacetest.Agent{})
		rec := newRecorder()
		began := time.Now()
		if err := handle(b, keyed("c/1", "test/msg/1", "hello", rec)); err != nil {
			t.Fatal(err)
		}
		<-rec.notify
		if took := time.Since(began); took >= time.Second {
			t.Errorf("answered after %v, want at once (no order hold for a process alone)", took)
		}
	})
}

func TestLoneReplicaHoldsNothingBack(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, loneReplicaHoldsNothingBack)
}

func loneReplicaHoldsNothingBack(t *testing.T, open func() sharedStore) {
	// One replica on a shared store is a process alone: an hour's order
	// hold delays none of its answers (waitReplies gives up after 20 s).
	fake := newReplicaFake(t, workspacetest.Agent{})
	p := newChatPlatform()
	r0 := newReplica(t, open(), fake, p, bridge.ReplicaConfig{Holder: "r0", OrderHold: time.Hour})
	if err := receive(r0.b, p.event("c/1", "test/msg/1", "alone")).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.waitReplies(t, "test/msg/1")

}

// slowInbox is a replica's store whose Receive takes delay(key) longer, as
// on a busy machine.
type slowInbox struct {
	store.Store
	delay func(key string) time.Duration
}

func (s *slowInbox) Receive(ctx context.Context, e store.InboxEntry) (bool, error) {
	if d := s.delay(e.Key); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return s.Store.Receive(ctx, e)
}

func TestReplicasKeepABurstsOrder(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, replicasKeepABurstsOrder)
}

func replicasKeepABurstsOrder(t *testing.T, open func() sharedStore) {
	// A user sends four messages at once; they reach two replicas in
	// turn, and the later ones are committed first. Whichever replica
	// holds the conversation runs them as the user wrote them.
	fake := newReplicaFake(t, workspacetest.Agent{})
	p := newChatPlatform()
	const n = 4
	delay := func(key string) time.Duration {
		var i int
		if _, err := fmt.Sscanf(key, "test/msg/b%d", &i); err != nil {
			return 0
		}
		return time.Duration(n-1-i) * 40 * time.Millisecond // the last first
	}
	var rs []*bridge.Bridge
	var ms []*meeting
	for i := range 2 {
		m := newMeeting(open(), 2)
		st := &slowInbox{Store: m, delay: delay}
		rs, ms = append(rs, newReplicaOn(t, defaultConfig(), st, fake, p, bridge.ReplicaConfig{Holder: fmt.Sprintf("r%d", i), OrderHold: 250 * time.Millisecond})), append(ms, m)
	}
	waitMet(t, ms...)
	var keys, want []string
	var wg sync.WaitGroup
	for i := range n {
		ev := p.event("c/1", fmt.Sprintf("test/msg/b%d", i), fmt.Sprintf("c1 m%d", i))
		ev.Order = int64(i + 1)
		keys, want = append(keys, ev.Key), append(want, ev.Text)
		wg.Go(func() {
			if err := receive(rs[i%2], ev).Wait(t.Context()); err != nil {
				t.Errorf("Receive(%s) = %v", ev.Key, err)
			}
		})
	}
	wg.Wait()
	p.waitReplies(t, keys...)
	if got := convMessages(t, fake)["c1"]; !slices.Equal(got, want) {
		t.Errorf("agent read %q, want %q", got, want)
	}
}

func TestSlowRecordingKeepsABurstsOrder(t *testing.T) {
	t.Parallel()
	forEachSharedStore(t, slowRecordingKeepsABurstsOrder)
}

func slowRecordingKeepsABurstsOrder(t *testing.T, open func() sharedStore) {
	// On a busy machine recording takes 500 ms and more, twice the
	// order hold: a burst's later message, recorded at once by one
	// replica, still waits for the earlier one another replica takes
	// 500 ms to record, since the hold covers how long recording takes.
	fake := newReplicaFake(t, workspacetest.Agent{})
	p := newChatPlatform()
	const slow = 500 * time.Millisecond
	delay := func(key string) time.Duration {
		switch key {
		case "test/msg/2": // the burst's later message, recorded at once
			return 0
		}
		return slow
	}
	var rs []*bridge.Bridge
	var ms []*meeting
	for i := range 2 {
		m := newMeeting(open(), 2)
		st := &slowInbox{Store: m, delay: delay}
		rs, ms = append(rs, newReplicaOn(t, defaultConfig(), st, fake, p, bridge.ReplicaConfig{Holder: fmt.Sprintf("r%d", i), OrderHold: 250 * time.Millisecond})), append(ms, m)
	}
	waitMet(t, ms...)
	// The machine has been busy a while: each replica has recorded slowly.
	for i, r := range rs {
		key := fmt.Sprintf("test/msg/warm%d", i)
		if err := receive(r, p.event(fmt.Sprintf("c/warm%d", i), key, fmt.Sprintf("w%d warm", i))).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		p.waitReplies(t, key)
	}
	first := p.event("c/1", "test/msg/1", "c1 first")
	first.Order = 1
	second := p.event("c/1", "test/msg/2", "c1 second")
	second.Order = 2
	var wg sync.WaitGroup
	for i, ev := range []bridge.Event{first, second} {
		wg.Go(func() {
			if err := receive(rs[i], ev).Wait(t.Context()); err != nil {
				t.Errorf("Receive(%s) = %v", ev.Key, err)
			}
		})
	}
	wg.Wait()
	p.waitReplies(t, first.Key, second.Key)
	if got, want := convMessages(t, fake)["c1"], []string{"c1 first", "c1 second"}; !slices.Equal(got, want) {
		t.Errorf("agent read %q, want %q", got, want)
	}
}
