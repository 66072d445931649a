package bridge

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Progresser is implemented by responders that can rewrite a message in
// place to show how long work has been running, without sending anything
// new. ref is a flow's progress message ("Running …"), or "" for the
// working indicator of a chat answer where it is a message (Slack's
// placeholder). Progress returns an error when it cannot rewrite in place
// (an ephemeral message nothing can edit, a response_url with no use to
// spare); the bridge then stops trying for that work. A platform rate limit
// is not waited out: the update is skipped (nil), the next one may pass.
type Progresser interface {
	Progress(ctx context.Context, ref MessageRef, r Reply) error
}

// progress rewrites a message with the time elapsed, every
// Config.ProgressInterval until stop is called. stop cancels an update under
// way and waits for it, so nothing rewrites the message once the answer has
// replaced it. Most answers come long before the first update is due, so
// until then progress costs one timer: no goroutine, no context.
func (b *Bridge) progress(ctx context.Context, log *zap.Logger, r Responder, ref MessageRef, reply func(elapsed time.Duration) Reply) (stop func()) {
	p, ok := r.(Progresser)
	if !ok || b.cfg.ProgressInterval <= 0 {
		return func() {}
	}
	var (
		mu       sync.Mutex
		stopped  bool
		cancel   context.CancelFunc // of the update under way
		updating sync.WaitGroup
		timer    *time.Timer
	)
	start := b.cfg.Now()
	update := func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		uctx, c := context.WithCancel(ctx)
		cancel = c
		updating.Add(1)
		mu.Unlock()
		defer updating.Done()
		err := p.Progress(uctx, ref, reply(b.cfg.Now().Sub(start)))
		c()
		mu.Lock()
		defer mu.Unlock()
		cancel = nil
		if err != nil {
			if !stopped {
				log.Debug("progress not shown; no more updates", zap.Error(err))
			}
			return
		}
		if !stopped {
			timer.Reset(b.cfg.ProgressInterval)
		}
	}
	mu.Lock()
	timer = time.AfterFunc(b.cfg.ProgressInterval, update)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		timer.Stop()
		if cancel != nil {
			cancel()
		}
		mu.Unlock()
		updating.Wait()
	}
}

// flowProgress is a running flow's message: its name, its description, and
// the time it has been running once that is worth saying.
func flowProgress(note string, f *Flow, public bool, elapsed time.Duration) Reply {
	var s strings.Builder
	fmt.Fprintf(&s, "%sRunning *%s*…", note, f.Name)
	if elapsed > 0 {
		fmt.Fprintf(&s, " %s so far.", humanDuration(elapsed))
	}
	if d := strings.TrimSpace(f.Description); d != "" {
		fmt.Fprintf(&s, "\n_%s_", strings.Join(strings.Fields(d), " "))
	}
	return Reply{Kind: ReplyProgress, Ephemeral: !public, Text: s.String()}
}

// thinkingProgress is a slow answer's placeholder.
func thinkingProgress(elapsed time.Duration) Reply {
	return Reply{Kind: ReplyProgress, Text: fmt.Sprintf(msgThinking, humanDuration(elapsed))}
}
