package discordtest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// RouteListMessages is Get Channel Messages: a channel's history.
const RouteListMessages = "GET /api/v9/channels/{channel}/messages"

// Get Channel Messages as Discord serves it: limit 1 to 100 (default 50);
// at most one of around, before and after; the messages newest first. Its
// bucket, per channel, takes MaxHistoryPerChannel requests per
// HistoryWindow; past it the answer is 429 with retry_after.
const (
	MaxHistoryLimit      = 100
	defaultHistoryLimit  = 50
	MaxHistoryPerChannel = 5
	HistoryWindow        = 5 * time.Second
)

// handleListMessages serves a channel's history: the messages posted there
// (not ephemeral ones, not deleted ones), selected by
// after, before or around and limit, newest first.
func (s *Server) handleListMessages(c *call) (reply, *apiError) {
	q := c.r.URL.Query()
	var fe formErrors
	limit := defaultHistoryLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxHistoryLimit {
			fe.add("limit", "NUMBER_TYPE_MAX", "int value should be between 1 and %d.", MaxHistoryLimit)
		}
		limit = n
	}
	anchors := 0
	var anchor uint64
	var which string
	for _, k := range []string{"around", "before", "after"} {
		v := q.Get(k)
		if v == "" {
			continue
		}
		anchors++
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fe.add(k, "NUMBER_TYPE_COERCE", "Value %q is not snowflake.", v)
		}
		anchor, which = n, k
	}
	if anchors > 1 {
		fe.add("_query", "BASE_TYPE_BAD", "Only one of around, before and after may be given.")
	}
	if err := fe.err(); err != nil {
		return reply{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.channels[c.path("channel")]; !ok {
		return reply{}, errUnknownChannel()
	}
	type dated struct {
		id uint64
		m  *Message
	}
	var all []dated
	for _, m := range s.messages {
		if m.ChannelID != c.path("channel") || m.Deleted || m.Ephemeral() {
			continue
		}
		id, err := strconv.ParseUint(m.ID, 10, 64)
		if err != nil {
			continue
		}
		all = append(all, dated{id, m})
	}
	slices.SortFunc(all, func(a, b dated) int { return cmp.Compare(a.id, b.id) })
	switch which {
	case "after":
		i, _ := slices.BinarySearchFunc(all, anchor+1, func(d dated, t uint64) int { return cmp.Compare(d.id, t) })
		all = all[i:min(len(all), i+limit)]
	case "around":
		i, _ := slices.BinarySearchFunc(all, anchor, func(d dated, t uint64) int { return cmp.Compare(d.id, t) })
		lo := max(0, i-limit/2)
		all = all[lo:min(len(all), lo+limit)]
	default: // before, or the latest
		i := len(all)
		if which == "before" {
			i, _ = slices.BinarySearchFunc(all, anchor, func(d dated, t uint64) int { return cmp.Compare(d.id, t) })
		}
		all = all[max(0, i-limit):i]
	}
	out := make([]*wireMessage, 0, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		out = append(out, s.restContentLocked(s.wireLocked(all[i].m), all[i].m))
	}
	return reply{body: out}, nil
}

// historyLimitLocked counts a history request, or returns the limit to
// answer when its channel is over its bucket. Other routes pass.
func (s *Server) historyLimitLocked(route string, r *http.Request) (RateLimit, bool) {
	if route != RouteListMessages {
		return RateLimit{}, false
	}
	channel := r.PathValue("channel")
	if s.history == nil {
		s.history = make(map[string][]time.Time)
	}
	now := s.now()
	recent := s.history[channel]
	i := 0
	for i < len(recent) && !recent[i].After(now.Add(-HistoryWindow)) {
		i++
	}
	recent = recent[i:]
	if len(recent) >= MaxHistoryPerChannel {
		s.history[channel] = recent
		wait := recent[len(recent)-MaxHistoryPerChannel].Add(HistoryWindow).Sub(now)
		return RateLimit{RetryAfter: wait, Bucket: fmt.Sprintf("history-%08x", fnv32(channel))}, true
	}
	s.history[channel] = append(recent, now)
	return RateLimit{}, false
}
