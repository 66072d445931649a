package slacktest

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Slack's limits on conversations.replies (reference/methods/conversations.replies
// and the rate limit changes of 2025-05-29). The method is Tier 3 (50 or
// more calls a minute; the fake holds to 50) and pages at most 1,000
// messages. A commercially distributed app outside the Slack Marketplace
// may call it once a minute, for at most 15 messages a page.
const (
	RepliesPerMinute           = 50
	MaxRepliesLimit            = 1000
	DefaultRepliesLimit        = 1000
	RestrictedRepliesPerMinute = 1
	RestrictedRepliesLimit     = 15
)

// ThreadMessage is a message people wrote in a thread before the app was
// there to receive it: no event is delivered, but conversations.replies
// returns it.
type ThreadMessage struct {
	Channel  string
	ThreadTS string // "" posts a thread's root
	User     string
	BotID    string // another bot's message
	Text     string
	Files    []string // names of the files shared with it
}

// AddThreadMessage stores m as Slack would have it and returns its ts.
func (s *Server) AddThreadMessage(m ThreadMessage) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.learnChannelLocked(m.Channel, false, m.User)
	ts := s.nextTSLocked()
	thread := m.ThreadTS
	k := msgKey{m.Channel, ts}
	st := &stored{Message: Message{Channel: m.Channel, TS: ts, ThreadTS: thread, BotID: m.BotID, Text: m.Text, At: s.now()},
		author: m.User, fileNames: slices.Clone(m.Files)}
	s.msgs[k] = st
	s.order = append(s.order, k)
	if thread != "" {
		if root, ok := s.msgs[msgKey{m.Channel, thread}]; ok && root.ThreadTS == "" {
			root.ThreadTS = thread // a root with replies carries its own ts as thread_ts
		}
	}
	s.bumpLocked()
	return ts
}

// repliesLimitedLocked counts a conversations.replies call against its rate
// tier, or answers 429 ratelimited with Retry-After as Slack does.
func (s *Server) repliesLimitedLocked() (apiResult, bool) { return s.tier3LimitedLocked(&s.repliesAt) }

// tier3LimitedLocked counts a call of a history method (whose recent calls
// are *calls) against its tier, or answers 429 ratelimited with Retry-After.
func (s *Server) tier3LimitedLocked(calls *[]time.Time) (apiResult, bool) {
	perMinute := RepliesPerMinute
	if s.opts.RestrictedHistory {
		perMinute = RestrictedRepliesPerMinute
	}
	now := s.now()
	// A call a minute old no longer counts.
	i := 0
	for i < len(*calls) && !(*calls)[i].After(now.Add(-time.Minute)) {
		i++
	}
	*calls = (*calls)[i:]
	if len(*calls) >= perMinute {
		wait := (*calls)[len(*calls)-perMinute].Add(time.Minute).Sub(now)
		secs := int((wait + time.Second - 1) / time.Second)
		return apiResult{status: http.StatusTooManyRequests, body: map[string]any{"ok": false, "error": "ratelimited"},
			header: map[string]string{"Retry-After": strconv.Itoa(max(secs, 1))}}, true
	}
	*calls = append(*calls, now)
	return apiResult{}, false
}

// conversationsReplies answers a page of a thread, oldest first, as Slack
// does: the root and its replies between oldest and latest (exclusive
// unless inclusive), at most limit of them, the rest behind a cursor.
func (s *Server) conversationsReplies(p url.Values, _ *http.Request) apiResult {
	if res, limited := s.repliesLimitedLocked(); limited {
		return res
	}
	ch, root := p.Get("channel"), p.Get("ts")
	if !s.knownChannelLocked(ch) {
		return fail("channel_not_found")
	}
	r, found := s.msgs[msgKey{ch, root}]
	if !found || r.Deleted || r.Ephemeral {
		return fail("thread_not_found")
	}
	w, bad := s.historyWindow(p, DefaultRepliesLimit, MaxRepliesLimit)
	if bad {
		return fail("invalid_limit")
	}
	limit := w.limit
	after := ""
	if c := p.Get("cursor"); c != "" {
		raw, err := base64.StdEncoding.DecodeString(c)
		ts, ok := strings.CutPrefix(string(raw), "next_ts:")
		if err != nil || !ok || !validTS(ts) {
			return fail("invalid_cursor")
		}
		after = ts
	}
	var thread []*stored
	for _, k := range s.order {
		m := s.msgs[k]
		if m.Channel != ch || m.Deleted || m.Ephemeral || (m.TS != root && m.ThreadTS != root) {
			continue
		}
		if after != "" && compareTS(m.TS, after) <= 0 {
			continue
		}
		if !w.holds(m.TS) {
			continue
		}
		thread = append(thread, m)
	}
	slices.SortFunc(thread, func(a, b *stored) int { return compareTS(a.TS, b.TS) })
	more := len(thread) > limit
	if more {
		thread = thread[:limit]
	}
	replies := 0
	for _, k := range s.order {
		if m := s.msgs[k]; m.Channel == ch && m.ThreadTS == root && m.TS != root && !m.Deleted && !m.Ephemeral {
			replies++
		}
	}
	msgs := make([]map[string]any, 0, len(thread))
	for _, m := range thread {
		j := s.listedMessageJSON(m, p)
		if m.TS == root && replies > 0 {
			j["thread_ts"] = root
			j["reply_count"] = replies
		}
		msgs = append(msgs, j)
	}
	next := ""
	if more {
		next = base64.StdEncoding.EncodeToString([]byte("next_ts:" + thread[len(thread)-1].TS))
	}
	return ok(map[string]any{"messages": msgs, "has_more": more, "response_metadata": map[string]any{"next_cursor": next}})
}

// historyWindow is what a history method's page asks for: at most limit
// messages, between oldest and latest (exclusive unless inclusive).
type historyWindow struct {
	limit          int
	oldest, latest string
	inclusive      bool
}

// historyWindow reads a page's limit (def when absent or 0, at most max;
// the restricted tier's for a commercially distributed app outside the
// Marketplace) and time bounds from p; bad reports a limit Slack refuses.
func (s *Server) historyWindow(p url.Values, def, max int) (w historyWindow, bad bool) {
	w.limit = def
	if s.opts.RestrictedHistory {
		w.limit, max = RestrictedRepliesLimit, RestrictedRepliesLimit
	}
	if v := p.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return w, true
		}
		if n > 0 {
			w.limit = min(n, max)
		}
	}
	w.oldest, w.latest = p.Get("oldest"), p.Get("latest")
	w.inclusive = p.Get("inclusive") == "true" || p.Get("inclusive") == "1"
	return w, false
}

// holds reports whether a message at ts lies between the window's bounds.
func (w historyWindow) holds(ts string) bool {
	if w.oldest != "" && (compareTS(ts, w.oldest) < 0 || !w.inclusive && ts == w.oldest) {
		return false
	}
	return w.latest == "" || compareTS(ts, w.latest) < 0 || w.inclusive && ts == w.latest
}
