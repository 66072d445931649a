package discordtest

import (
	"fmt"
	"net/http"
	"time"
)

// Discord's limit on editing messages: a bucket of MaxEditsPerChannel edits
// per EditWindow for each channel, shared by the bot's edits of channel
// messages and of its interaction responses there. Past it, an edit is
// answered 429 with retry_after, which discordgo sleeps before it tries
// again.
const (
	MaxEditsPerChannel = 5
	EditWindow         = 5 * time.Second
)

// editLimitLocked counts an edit request on route, or returns the limit to
// answer when the request's channel is over its bucket. Other routes pass.
func (s *Server) editLimitLocked(route string, r *http.Request) (RateLimit, bool) {
	var channel string
	switch route {
	case RouteEditMessage:
		channel = r.PathValue("channel")
	case RouteEditWebhookMessage:
		st, ok := s.byToken[r.PathValue("token")]
		if !ok {
			return RateLimit{}, false // the handler refuses it
		}
		channel = st.channelID
	default:
		return RateLimit{}, false
	}
	if s.opts.NoEditLimit || channel == "" {
		return RateLimit{}, false
	}
	if s.edits == nil {
		s.edits = make(map[string][]time.Time)
	}
	now := s.now()
	recent := s.edits[channel]
	i := 0
	for i < len(recent) && !recent[i].After(now.Add(-EditWindow)) {
		i++
	}
	recent = recent[i:]
	if len(recent) >= MaxEditsPerChannel {
		s.edits[channel] = recent
		wait := recent[len(recent)-MaxEditsPerChannel].Add(EditWindow).Sub(now)
		return RateLimit{RetryAfter: wait, Bucket: fmt.Sprintf("edit-%08x", fnv32(channel))}, true
	}
	s.edits[channel] = append(recent, now)
	return RateLimit{}, false
}
