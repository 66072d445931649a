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
	// maxRateRetries is how often one call waits out a 429 before giving up.
	maxRateRetries = 3
	// maxRetryAfter caps a Retry-After the adapter is willing to wait.
	maxRetryAfter = 2 * time.Minute
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

// withRetry calls fn, waiting out Slack's Retry-After when it answers 429.
// slack-go does not retry by itself unless told to, and only a rejected call
// is repeated, so nothing is sent twice.
func (a *Adapter) withRetry(ctx context.Context, op string, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		rl, ok := errors.AsType[*slackgo.RateLimitedError](err)
		if !ok || attempt >= maxRateRetries {
			return err
		}
		wait := min(max(rl.RetryAfter, time.Second), maxRetryAfter)
		a.log.Info("rate limited; waiting", zap.String("method", op), zap.Duration("retry_after", wait))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		}
	}
}
