package slacktest

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Slack's limits on rewriting messages. chat.update is a Tier 3 method: 50
// or more calls a minute per workspace (Slack allows bursts above it; the
// fake holds to 50). Slack names no limit per message, but a message
// rewritten over and over is refused in practice; the fake allows
// MaxUpdatesPerMessage in any UpdateWindowPerMessage.
const (
	DefaultUpdatesPerMinute = 50
	MaxUpdatesPerMessage    = 5
	UpdateWindowPerMessage  = 5 * time.Second
)

// updateLimits remembers recent chat.update calls, for the rate limits.
type updateLimits struct {
	workspace []time.Time
	message   map[msgKey][]time.Time
}

// recent drops the times before since.
func recent(ts []time.Time, since time.Time) []time.Time {
	i := 0
	for i < len(ts) && ts[i].Before(since) {
		i++
	}
	return ts[i:]
}

// updateLimitedLocked counts a chat.update of the message at k, or, when it
// is over a limit, answers 429 ratelimited with the seconds until it would
// pass in Retry-After, as Slack does.
func (s *Server) updateLimitedLocked(k msgKey) (apiResult, bool) {
	perMinute := s.opts.UpdatesPerMinute
	if perMinute == 0 {
		perMinute = DefaultUpdatesPerMinute
	}
	if perMinute < 0 {
		return apiResult{}, false
	}
	now := s.now()
	l := &s.updates
	if l.message == nil {
		l.message = make(map[msgKey][]time.Time)
	}
	l.workspace = recent(l.workspace, now.Add(-time.Minute))
	l.message[k] = recent(l.message[k], now.Add(-UpdateWindowPerMessage))
	var wait time.Duration
	if len(l.workspace) >= perMinute {
		wait = l.workspace[len(l.workspace)-perMinute].Add(time.Minute).Sub(now)
	}
	if m := l.message[k]; len(m) >= MaxUpdatesPerMessage {
		wait = max(wait, m[len(m)-MaxUpdatesPerMessage].Add(UpdateWindowPerMessage).Sub(now))
	}
	if wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		return apiResult{status: http.StatusTooManyRequests, body: map[string]any{"ok": false, "error": "ratelimited"},
			header: map[string]string{"Retry-After": strconv.Itoa(secs)}}, true
	}
	l.workspace = append(l.workspace, now)
	l.message[k] = append(l.message[k], now)
	return apiResult{}, false
}

// Slack's special rate limit of chat.postMessage (docs.slack.dev,
// apis/web-api/rate-limits): it "generally allows posting one message per
// second per channel, while also maintaining a workspace-wide limit", and
// for posting messages "Short bursts >1 allowed. If you attempt bursts,
// there is no guarantee" that the messages are taken. Slack names no burst
// size, and promises none, so the fake allows a short one,
// DefaultPostBurst (more than one, as documented; a placeholder and a
// two-part answer), refilled at PostsPerSecond: an app that posts faster
// into one channel meets 429 ratelimited with Retry-After here as it may on
// Slack. The workspace-wide limit has no documented figure and is not
// enforced.
//
// chat.postEphemeral is not under this limit: its reference puts it in
// Tier 4 (100+ a minute per workspace).
const (
	PostsPerSecond   = 1
	DefaultPostBurst = 3
)

// PostLimiter holds chat.postMessage to Slack's limit per channel, as the
// fake does, for a front that serves chat.postMessage itself
// (cmd/flowbridge-load): a token bucket per channel (rate.Limiter), whose
// refused reservation gives the Retry-After. Safe for concurrent use.
type PostLimiter struct {
	burst  int
	mu     sync.Mutex
	chans  map[string]*rate.Limiter
	pruned time.Time // when whole allowances were last dropped
}

// NewPostLimiter returns a limiter that takes burst messages into a
// channel at once (DefaultPostBurst when zero or less), then PostsPerSecond.
func NewPostLimiter(burst int) *PostLimiter {
	if burst <= 0 {
		burst = DefaultPostBurst
	}
	return &PostLimiter{burst: burst, chans: make(map[string]*rate.Limiter)}
}

// Take counts a message into channel at now and returns 0, or, past the
// channel's allowance, counts nothing and returns the Retry-After Slack
// answers with: the whole seconds until one more message would pass.
func (l *PostLimiter) Take(channel string, now time.Time) (retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.chans[channel]
	if lim == nil {
		lim = rate.NewLimiter(PostsPerSecond, l.burst)
		l.chans[channel] = lim
	}
	r := lim.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return (wait + time.Second - 1).Truncate(time.Second) // rounded up
	}
	if len(l.chans) > maxPostLimits && now.Sub(l.pruned) >= time.Second {
		// Channels whose allowance is whole need no limiter: a load run
		// posts into many. Once a second at most, so that many channels
		// busy at once cost no scan per post.
		l.pruned = now
		for ch, lim := range l.chans {
			if lim.TokensAt(now) >= float64(l.burst) {
				delete(l.chans, ch)
			}
		}
	}
	return 0
}

// postLimitedLocked counts a chat.postMessage into channel, or, past the
// channel's allowance, answers 429 ratelimited with the seconds until one
// more message would pass in Retry-After, as Slack does.
func (s *Server) postLimitedLocked(channel string) (apiResult, bool) {
	if s.posts == nil {
		return apiResult{}, false
	}
	wait := s.posts.Take(channel, s.now())
	if wait == 0 {
		return apiResult{}, false
	}
	return apiResult{status: http.StatusTooManyRequests, body: map[string]any{"ok": false, "error": "ratelimited"},
		header: map[string]string{"Retry-After": strconv.Itoa(int(wait / time.Second))}}, true
}

// maxPostLimits is how many channels' allowances are kept before the
// whole ones are dropped.
const maxPostLimits = 1024
