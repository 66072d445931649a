package main

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// The ledger of a -kill-every run: what became of each message offered to
// the bridge, told by what reached the fakes. A chat answer or flow result
// carries its message's marker (the fake agent echoes the text, the fake flow
// the tag), so it is matched exactly. A notice ("flowbridge restarted while
// it was answering your message…", "busy", an error) carries none, so each
// message is given a place its notice names: a flow's own response_url; in a
// DM, a thread of its own (the DM stays one conversation); in a channel
// thread, a user of its own. Ephemeral notices go to the message's user and
// thread, so these match exactly too. A notice that names no such place (a
// placeholder replaced by an error) falls back to its conversation, see pick,
// and is counted apart.

// marker names one message (see loadkit.Marker).
type marker = loadkit.Marker

// tally is one offered message (a chat message or a /flow command) and what
// the fakes saw of it.
type tally struct {
	m       marker
	flow    bool
	offered time.Time // first delivery attempt
	acked   bool      // answered 200 at least once
	id      string    // Slack event_id or trigger_id, for reports
	where   where     // the message's place, which its notices name

	calls      int      // agent calls or flow runs that reached the workspace
	answers    []string // distinct messages that carried the answer
	told       []string // notices attributed to it, in order: one per message the user sees
	toldAt     []time.Time
	toldIDs    []string  // the messages that told it, each once: a notice replaced in place is one
	answeredAt time.Time // the first answer
	restarted  bool      // one of them is "flowbridge restarted while…"

	// done, when set (live pacing), is closed at the first answer or notice.
	done chan struct{}
}

func (t *tally) resolved() bool { return len(t.answers) > 0 || len(t.told) > 0 }

func (t *tally) finish() {
	if t.done == nil {
		return
	}
	select {
	case <-t.done:
	default:
		close(t.done)
	}
}

// where is where a reply went, or where a message is answered: a channel,
// and the thread, user, response_url and referenced message (Discord's
// message_reference, which a reply to a message carries) that narrow it
// down where known. key is the inbox key a Slack reply carries in its
// metadata (flowbridge_reply), or the one a message is recorded under: it
// names its message exactly.
type where struct {
	channel, thread, user, responseURL, ref, key string
}

// places are the keys under which a message's notices are found.
func (w where) places() []string {
	var p []string
	if w.key != "" {
		p = append(p, "key "+w.key)
	}
	if w.responseURL != "" {
		p = append(p, "url "+urlKey(w.responseURL))
	}
	if w.thread != "" {
		p = append(p, w.channel+" thread "+w.thread)
	}
	if w.user != "" {
		p = append(p, w.channel+" user "+w.user)
	}
	if w.ref != "" {
		p = append(p, w.channel+" ref "+w.ref)
	}
	return p
}

// ledger collects tallies and matches what the fakes record to them. It is
// not safe for concurrent use.
type ledger struct {
	offers  map[marker]*tally
	convs   map[int][]*tally  // by conversation, in offer order
	channel map[string]int    // Slack channel -> conversation
	places  map[string]*tally // see where.places; only places unique to one message

	strays       []string // answers carrying a marker nobody offered
	unattributed []string // notices with no waiting message to belong to
	byConv       int      // notices that named no message's place, matched by conversation
}

func newLedger() *ledger {
	return &ledger{
		offers:  make(map[marker]*tally),
		convs:   make(map[int][]*tally),
		channel: make(map[string]int),
		places:  make(map[string]*tally),
	}
}

// add registers an offered message. Its where must name a place of its own
// (a thread, user or response_url no other message has), or none.
func (l *ledger) add(t *tally) {
	l.offers[t.m] = t
	l.convs[t.m.Conv] = append(l.convs[t.m.Conv], t)
	if t.where.channel != "" {
		l.channel[t.where.channel] = t.m.Conv
	}
	for _, p := range t.where.places() {
		l.places[p] = t
	}
}

// call counts a request to the workspace (a chat message or a flow run)
// whose body carried m.
func (l *ledger) call(m marker) {
	if t := l.offers[m]; t != nil {
		t.calls++
	}
}

// reply takes a message the bridge produced: w is where it went (as much as
// is known), msgID names the message it created or changed (a reply that
// replaces another names the same one), text is its text and blocks.
func (l *ledger) reply(w where, msgID, text string, at time.Time) {
	if m, ok := loadkit.FindMarker([]byte(text)); ok {
		t := l.offers[m]
		if t == nil {
			l.strays = append(l.strays, msgID)
			return
		}
		if !slices.Contains(t.answers, msgID) {
			t.answers = append(t.answers, msgID)
		}
		if t.answeredAt.IsZero() {
			t.answeredAt = at
		}
		t.finish()
		return
	}
	if transient(text) {
		return
	}
	var t *tally
	for _, p := range w.places() {
		if t = l.places[p]; t != nil {
			break
		}
	}
	if t == nil {
		if conv, ok := l.channel[w.channel]; ok {
			t = l.pick(conv, text, at)
			l.byConv++
		}
	}
	if t == nil {
		l.unattributed = append(l.unattributed, w.channel+": "+oneLine(text))
		return
	}
	if slices.Contains(t.toldIDs, msgID) {
		// The same message rewritten (chat.update, or a response_url post
		// with replace_original): the user still sees one notice.
		return
	}
	t.toldIDs = append(t.toldIDs, msgID)
	t.told = append(t.told, text)
	t.toldAt = append(t.toldAt, at)
	if restartNotice(text) {
		t.restarted = true
	}
	t.finish()
}

// pick chooses which of a conversation's messages, offered before at, a
// notice that names no message's place belongs to. A conversation has one
// message in flight at a time, so there is usually one candidate; when a
// crash leaves several, the choice is a guess, which is why places exist. A restart
// notice goes, in this order, to one that reached the agent and has neither
// answer nor notice (sent when the process died), one that reached it and
// was answered but not told (the process died between the answer and
// closing its inbox entry: the core then tells needlessly), one that never
// reached it and waits (marked sent just before the crash), and last to one
// already told (told again). Other notices (busy, errors) go to the oldest
// waiting message. Oldest first within each class.
func (l *ledger) pick(conv int, text string, at time.Time) *tally {
	restart := restartNotice(text)
	classes := []func(*tally) bool{
		func(t *tally) bool { return t.calls > 0 && !t.resolved() },
		func(t *tally) bool { return restart && t.calls > 0 && len(t.told) == 0 },
		func(t *tally) bool { return t.calls == 0 && !t.resolved() },
		func(t *tally) bool { return restart && t.calls > 0 && len(t.answers) == 0 },
	}
	for _, match := range classes {
		for _, t := range l.convs[conv] {
			if !t.offered.After(at) && match(t) {
				return t
			}
		}
	}
	return nil
}

// urlKey is a response_url's path: the bridge posts to it through a front,
// while the fake records it under its own host.
func urlKey(u string) string {
	if i := strings.Index(u, "/response/"); i >= 0 {
		return u[i:]
	}
	return u
}

// transient reports the bridge's messages that stand for work under way: the
// "Thinking…" placeholder and a flow's "Running slow…".
func transient(text string) bool {
	if strings.TrimSpace(text) == "" || strings.Contains(text, "Thinking") {
		return true
	}
	return strings.Contains(text, "Running") && !strings.Contains(text, "restarted")
}

// restartNotice reports the notice for work cut short by a restart (bridge/messages.go).
func restartNotice(text string) bool { return strings.Contains(text, "flowbridge restarted while") }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// happening is something the fakes recorded (a workspace call, a reply),
// to be applied to a ledger in the order the records happened.
type happening struct {
	at    time.Time
	apply func()
}

// applyInOrder applies hs in the order they happened. Calls come before the
// replies made at the same instant (they are recorded first, and the sort
// is stable): an answer follows its call.
func applyInOrder(hs []happening) {
	slices.SortStableFunc(hs, func(a, b happening) int { return a.at.Compare(b.at) })
	for _, h := range hs {
		h.apply()
	}
}

// metadataKey returns the inbox key a Slack message's metadata carries
// (event type flowbridge_reply, see adapters/slack), or "".
func metadataKey(raw []byte) string {
	var md struct {
		EventType    string `json:"event_type"`
		EventPayload struct {
			Key string `json:"key"`
		} `json:"event_payload"`
	}
	if json.Unmarshal(raw, &md) != nil || md.EventType != "flowbridge_reply" {
		return ""
	}
	return md.EventPayload.Key
}

// slackReplies returns, as ledger records, what the bot posted or updated
// in the fake Slack's channels.
func slackReplies(s *slacktest.Server, l *ledger) []happening {
	var recs []happening
	for _, v := range s.MessageLog() {
		switch v.Op {
		case "chat.postMessage", "chat.update", "chat.postEphemeral":
		default:
			continue
		}
		id, text := v.Channel+":"+v.TS, v.Text+"\n"+string(v.Blocks)
		w := where{channel: v.Channel, thread: v.ThreadTS, user: v.User, key: metadataKey(v.Metadata)}
		recs = append(recs, happening{v.At, func() { l.reply(w, id, text, v.At) }})
	}
	return recs
}
