package slacktest

import (
	"net/http"
	"strconv"
	"time"
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
