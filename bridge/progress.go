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
	// One value holds the state the timer and stop share: a message's
	// progress is set up for every answer, and separate variables captured
	// by the closures were each an allocation of their own.
	u := &progressUpdate{b: b, ctx: ctx, log: log, p: p, ref: ref, reply: reply, start: b.cfg.Now()}
	u.mu.Lock()
	u.timer = time.AfterFunc(b.cfg.ProgressInterval, u.update)
	u.mu.Unlock()
	return u.stop
}

// progressUpdate is one message's progress updates under way (see progress).
type progressUpdate struct {
	b     *Bridge
	ctx   context.Context
	log   *zap.Logger
	p     Progresser
	ref   MessageRef
	reply func(elapsed time.Duration) Reply
	start time.Time

	mu       sync.Mutex
	stopped  bool
	cancel   context.CancelFunc // of the update under way
	updating sync.WaitGroup
	timer    *time.Timer
}

func (u *progressUpdate) update() {
	u.mu.Lock()
	if u.stopped {
		u.mu.Unlock()
		return
	}
	uctx, c := context.WithCancel(u.ctx)
	u.cancel = c
	u.updating.Add(1)
	u.mu.Unlock()
	defer u.updating.Done()
	err := u.p.Progress(uctx, u.ref, u.reply(u.b.cfg.Now().Sub(u.start)))
	c()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cancel = nil
	if err != nil {
		if !u.stopped {
			u.log.Debug("progress not shown; no more updates", zap.Error(err))
		}
		return
	}
	if !u.stopped {
		u.timer.Reset(u.b.cfg.ProgressInterval)
	}
}

func (u *progressUpdate) stop() {
	u.mu.Lock()
	u.stopped = true
	u.timer.Stop()
	if u.cancel != nil {
		u.cancel()
	}
	u.mu.Unlock()
	u.updating.Wait()
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
