package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	slackgo "github.com/slack-go/slack"
	"go.uber.org/zap"
)

// Reading a thread's end. conversations.replies returns a thread oldest
// first, between oldest and latest; it has no newest-first order. So the
// messages just before a mention are read by time windows that end at the
// mention: the first page (the thread's start, which is all of a short
// thread) tells the thread's length (the root's reply_count), from which a
// window that should hold the wanted messages is guessed, then narrowed
// when it holds too many and widened toward the past when too few.
const (
	// maxThreadCalls bounds the conversations.replies calls of one
	// mention: the method is Tier 3 (about 50 a minute for the workspace),
	// a budget the outbox's look-ups before a re-post also need.
	maxThreadCalls = 4
	// maxThreadPage bounds the bytes of one conversations.replies answer,
	// counted as they are read: a page of huge messages ends the reading
	// of that window (a narrower one is tried) rather than being decoded
	// whole for a few kilobytes of it.
	maxThreadPage = 2 << 20
	// maxNameLookups bounds the users.info calls one mention makes to name
	// the authors it reads; authors past it that the cache does not know
	// are shown by their ID.
	maxNameLookups = 20
)

// errPageTooLarge is a conversations.replies answer over maxThreadPage.
var errPageTooLarge = errors.New("conversations.replies answer over the byte limit")

// threadEnd is what was read of a thread before a message.
type threadEnd struct {
	// msgs are the thread's messages just before it, oldest first, with
	// none missing between them and it.
	msgs []slackgo.Message
	// leftOut is how many messages of the thread before msgs were not
	// read, from the root's reply_count; 0 where it is not known.
	leftOut int
}

// readThreadEnd reads the at most want messages of the thread rooted at
// rt.ContextOf just before rt.UserTS, within maxThreadCalls calls. A first
// call that fails is the error; a later one ends the reading with what is
// read up to the message.
func (a *Adapter) readThreadEnd(ctx context.Context, rt route, want int) (threadEnd, error) {
	hi, ok1 := parseTS(rt.UserTS)
	root, ok2 := parseTS(rt.ContextOf)
	if !ok1 || !ok2 || hi <= root {
		return threadEnd{}, fmt.Errorf("thread %s before %s: not a thread's message", rt.ContextOf, rt.UserTS)
	}
	r := threadRead{a: a, rt: rt}

	// The thread's start: all of it when short. Inclusive bounds, so that
	// windows meeting at a ts lose no message there; the mention itself is
	// dropped by its ts.
	head, more, err := r.page(ctx, "", rt.UserTS, want+2)
	switch {
	case errors.Is(err, errPageTooLarge):
		// Its huge messages are for the windows to skip; the root alone
		// still tells the thread's length.
		head, more = nil, true
		if root, _, err := r.page(ctx, "", rt.ContextOf, 1); err == nil {
			head = root
		}
	case err != nil:
		return threadEnd{}, err
	case !more:
		return r.keepAll(head, want), nil
	}
	replies := 0
	for _, m := range head {
		if m.Timestamp == rt.ContextOf {
			replies = m.ReplyCount
		}
	}
	start := root // what the head page holds, up to and with this ts
	if len(head) > 0 {
		if last, ok := parseTS(head[len(head)-1].Timestamp); ok {
			start = last
		}
	}

	// A window that holds about twice the wanted messages if they were
	// spread evenly over the thread's time.
	span := (hi - root) / 16
	if replies > 0 {
		span = (hi - root) * int64(2*want) / int64(replies)
	}
	span = max(span, 1)
	var tail []slackgo.Message // contiguous up to the mention, oldest first
	upper, complete := hi, false
	for r.calls < maxThreadCalls && !complete && countKept(tail, rt) < want {
		lower := upper - span
		if lower <= start {
			lower, complete = start, true
		}
		got, more, err := r.page(ctx, formatTS(lower), formatTS(upper), earlierPage)
		switch {
		case errors.Is(err, errPageTooLarge) || err == nil && more:
			// Too much in the window: a narrower one at the same end, that
			// starts after the messages this page held.
			next := upper - max((upper-lower)/4, 1)
			if len(got) > 0 {
				if last, ok := parseTS(got[len(got)-1].Timestamp); ok && last > next && last < upper {
					next = last
				}
			}
			span, complete = upper-next, false
			continue
		case err != nil:
			a.log.Info("thread read in part; the agent gets the messages read up to the mention",
				zap.String("channel", rt.Channel), zap.Int("messages", len(tail)), zap.Error(err))
			r.calls = maxThreadCalls
			continue
		}
		tail = joinTS(got, tail)
		width := upper - lower
		upper = lower
		// Widen the next window by how short this one fell.
		if n := countKept(got, rt); n > 0 {
			span = width * int64(max(2, 2*(want-countKept(tail, rt))/n))
		} else {
			span = width * 8
		}
	}
	if complete {
		return r.keepAll(joinTS(head, tail), want), nil
	}
	kept := r.keep(tail, want)
	end := threadEnd{msgs: kept}
	if replies > 0 {
		// The root and the replies before the oldest kept were not read;
		// the replies from it up to the mention (with it) were. reply_count
		// also counts a reply posted after the mention before it was read.
		read := 0
		for _, m := range tail {
			if len(kept) == 0 || compareTS(m.Timestamp, kept[0].Timestamp) >= 0 {
				read++
			}
		}
		end.leftOut = max(1+replies-read, 1)
	}
	return end, nil
}

// threadRead counts the calls of one reading.
type threadRead struct {
	a     *Adapter
	rt    route
	calls int
}

// page reads the thread's messages from oldest to latest, both included
// ("" for no bound), at most limit of them, within maxThreadPage bytes.
func (r *threadRead) page(ctx context.Context, oldest, latest string, limit int) ([]slackgo.Message, bool, error) {
	r.calls++
	msgs, more, _, err := r.a.history.GetConversationRepliesContext(ctx, &slackgo.GetConversationRepliesParameters{
		ChannelID: r.rt.Channel, Timestamp: r.rt.ContextOf, Oldest: oldest, Latest: latest, Inclusive: true,
		Limit: min(limit, earlierPage),
	})
	if err != nil {
		return nil, false, fmt.Errorf("conversations.replies %s/%s: %w", r.rt.Channel, r.rt.ContextOf, err)
	}
	// Slack may repeat the root on every page; a bound is a bound.
	out := msgs[:0]
	for _, m := range msgs {
		if (oldest == "" || compareTS(m.Timestamp, oldest) >= 0) && (latest == "" || compareTS(m.Timestamp, latest) <= 0) {
			out = append(out, m)
		}
	}
	return out, more, nil
}

// keep returns the newest want of msgs that are talk before the mention.
func (r *threadRead) keep(msgs []slackgo.Message, want int) []slackgo.Message {
	var out []slackgo.Message
	for _, m := range msgs {
		if kept(m, r.rt) {
			out = append(out, m)
		}
	}
	if len(out) > want {
		out = out[len(out)-want:]
	}
	return out
}

// keepAll is the end of a thread read whole up to the mention.
func (r *threadRead) keepAll(msgs []slackgo.Message, want int) threadEnd {
	kept := r.keep(msgs, want)
	return threadEnd{msgs: kept, leftOut: countKept(msgs, r.rt) - len(kept)}
}

// kept reports whether m is someone talking before the mention: joins and
// the like are not, nor the mention itself.
func kept(m slackgo.Message, rt route) bool {
	return m.Timestamp != rt.UserTS && (keptSubtypes[m.SubType] || m.SubType == slackgo.MsgSubTypeBotMessage)
}

func countKept(msgs []slackgo.Message, rt route) int {
	n := 0
	for _, m := range msgs {
		if kept(m, rt) {
			n++
		}
	}
	return n
}

// joinTS joins two runs of messages, older then newer, that may both hold
// the message where they meet, without repeating it.
func joinTS(older, newer []slackgo.Message) []slackgo.Message {
	out := make([]slackgo.Message, 0, len(older)+len(newer))
	out = append(out, older...)
	for _, m := range newer {
		if len(out) > 0 && compareTS(m.Timestamp, out[len(out)-1].Timestamp) <= 0 {
			continue
		}
		out = append(out, m)
	}
	return out
}

// parseTS reads a Slack ts ("1716212345.000100") as microseconds.
func parseTS(ts string) (int64, bool) {
	sec, frac, ok := strings.Cut(ts, ".")
	if !ok || !digits(sec) || !digits(frac) || len(sec) > 12 {
		return 0, false
	}
	frac = (frac + "000000")[:6]
	s, err1 := strconv.ParseInt(sec, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return s*1_000_000 + f, true
}

func formatTS(us int64) string { return fmt.Sprintf("%d.%06d", us/1_000_000, us%1_000_000) }

// compareTS orders two Slack timestamps; one that does not parse sorts first.
func compareTS(a, b string) int {
	x, _ := parseTS(a)
	y, _ := parseTS(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// cappedTransport fails a response body once it is over max bytes, as it
// is read, and one that says it is over max at once.
type cappedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, errPageTooLarge
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: t.max}
	return resp, nil
}

type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errPageTooLarge
	}
	if b.left == 0 {
		// Exactly max read so far: a body that ends here is within the
		// limit, whether its end comes with the last bytes or (chunked)
		// in a read of its own; one byte more is over it.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			b.left -= int64(n)
			return 0, errPageTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1] // one byte more tells a body of exactly max from a longer one
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errPageTooLarge
	}
	return n, err
}
