package slack

import (
	"context"
	"errors"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
	"go.uber.org/zap"
)

const (
	// maxRateWait bounds the time one call spends waiting out 429s, however
	// many: each names its wait, so a 429 is no failure to count. A busy
	// channel's message a second (chat.postMessage), shared with other
	// replicas posting there, can refuse one post many times in a row, a
	// second each; a call is not held forever either.
	maxRateWait = 2 * time.Minute
)

// channelLocks serialise what the adapter sends to one channel, so a
// multi-part reply is not interleaved with another and a 429 wait holds back
// the messages queued behind it (Slack's chat.postMessage limit is per channel).
type channelLocks struct {
	mu sync.Mutex
	m  map[string]*channelLock
}

type channelLock struct {
	ch   chan struct{}
	refs int
}

func newChannelLocks() *channelLocks { return &channelLocks{m: make(map[string]*channelLock)} }

// lock takes the channel's lock, or gives up when ctx ends.
func (l *channelLocks) lock(ctx context.Context, channel string) (unlock func(), err error) {
	l.mu.Lock()
	cl := l.m[channel]
	if cl == nil {
		cl = &channelLock{ch: make(chan struct{}, 1)}
		l.m[channel] = cl
	}
	cl.refs++
	l.mu.Unlock()

	release := func() {
		l.mu.Lock()
		cl.refs--
		if cl.refs == 0 {
			delete(l.m, channel)
		}
		l.mu.Unlock()
	}
	select {
	case cl.ch <- struct{}{}:
		return func() { <-cl.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// withRetry calls fn, waiting out Slack's Retry-After when it answers 429,
// for up to maxRateWait in all. slack-go does not retry by itself unless
// told to, and only a rejected call is repeated, so nothing is sent twice.
func (a *Adapter) withRetry(ctx context.Context, op string, fn func() error) error {
	var waited time.Duration
	for {
		err := fn()
		rl, ok := errors.AsType[*slackgo.RateLimitedError](err)
		if !ok {
			return err
		}
		wait := max(rl.RetryAfter, time.Second)
		if waited+wait > maxRateWait {
			return err
		}
		waited += wait
		// A channel's message a second is met often under load: only
		// the longer waits of the rate tiers are news.
		level := zap.InfoLevel
		if wait <= time.Second {
			level = zap.DebugLevel
		}
		if ce := a.log.Check(level, "rate limited; waiting"); ce != nil {
			ce.Write(zap.String("method", op), zap.Duration("retry_after", wait), zap.Duration("waited", waited))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
	}
}
