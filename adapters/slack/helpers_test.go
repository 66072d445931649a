package slack

import (
	"sync"

	"github.com/flowbridge/flowbridge/bridge"
)

// nopCore accepts everything and remembers nothing.
type nopCore struct{}

func (nopCore) Handle(bridge.Event) error { return nil }
func (nopCore) FirstDelivery(string) bool { return true }

// recordingCore records events and de-duplicates in memory, for tests of the
// adapter's routing without the real core.
type recordingCore struct {
	mu     sync.Mutex
	seen   map[string]bool
	events []bridge.Event
	got    chan bridge.Event
}

func newRecordingCore() *recordingCore {
	return &recordingCore{seen: make(map[string]bool), got: make(chan bridge.Event, 100)}
}

func (c *recordingCore) Handle(ev bridge.Event) error {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
	c.got <- ev
	return nil
}

func (c *recordingCore) FirstDelivery(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[id] {
		return false
	}
	c.seen[id] = true
	return true
}
