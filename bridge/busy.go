package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// busyUpdateEvery spaces the updates of one busy notice: a flood of
// thousands of messages rewrites it a few times a minute, well inside
// Slack's chat.update tier (about 50 a minute) and Discord's edit limit.
const busyUpdateEvery = 5 * time.Second

// busyNotices keeps, per conversation and user, the one notice that tells
// the user their messages are not taken while the conversation's queue is
// full: the first refused message sends it, the next ones update its count
// in place (where the platform can rewrite it: Progresser) instead of
// sending one notice each. A conversation's notices are forgotten when it has no work left, so
// a later overflow is told afresh.
type busyNotices struct {
	mu    sync.Mutex
	convs map[string]map[string]*busyNotice // conversation -> user ID -> notice
}

// busyNotice is one user's notice in one conversation, guarded by
// busyNotices.mu; one goroutine at a time (the one that set sending)
// writes it to the platform.
type busyNotice struct {
	first   Event      // the event whose responder sent the notice
	ref     MessageRef // the notice, once sent
	refused int        // messages refused so far
	shown   int        // refused when the notice was last written
	sending bool       // a goroutine sends or updates it
	fixed   bool       // it cannot be updated: the platform refused an edit
	// sent is closed when the first send settles: told says whether the
	// platform took it, failed that it did not. The messages refused
	// while it is under way wait for it, since their users are told by
	// it or not at all.
	sent   chan struct{}
	told   bool
	failed bool
}

// forget drops conv's notices: its queue has drained, so the next overflow
// is news.
func (n *busyNotices) forget(conv string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.convs, conv)
}

// tellBusy tells ev's user that ev was not taken, through the one notice of
// ev's conversation and user. It returns the notice's reference and whether
// the platform took the notice: only then may ev's entry be closed. The
// first refused message sends the notice, and those refused while that
// send is under way wait for its outcome; a goroutine then brings its count
// up to date, at most every busyUpdateEvery (at once at shutdown), while
// messages keep being refused. A notice the platform did not take is not
// sent again while the overflow lasts: its messages, and those refused
// after it, stay kept as refused (keepBusy) for the next start (with
// replicas, whichever replica next takes their entries up) to tell
// (retellBusy), and a platform that refuses posts is not sent one post per
// message of a flood.
func (b *Bridge) tellBusy(ev Event) (MessageRef, bool) {
	n := &b.notices
	n.mu.Lock()
	users := n.convs[ev.Conversation]
	if users == nil {
		if n.convs == nil {
			n.convs = make(map[string]map[string]*busyNotice)
		}
		users = make(map[string]*busyNotice)
		n.convs[ev.Conversation] = users
	}
	note := users[ev.User.ID]
	if note == nil {
		note = &busyNotice{first: ev}
		users[ev.User.ID] = note
	}
	note.refused++
	if note.sending && !note.told {
		sent := note.sent
		n.mu.Unlock()
		<-sent
		n.mu.Lock()
	}
	ref, told := note.ref, note.told
	if note.failed || note.sending || note.fixed && told {
		n.mu.Unlock()
		return ref, told
	}
	note.sending = true
	if !told {
		note.sent = make(chan struct{})
		refused := note.refused
		n.mu.Unlock()
		got, err := b.sendBusy(note, refused)
		n.mu.Lock()
		close(note.sent)
		if err != nil {
			note.failed, note.sending = true, false
			n.mu.Unlock()
			return "", false
		}
		note.ref, note.told, note.shown = got, true, refused
		ref = got
	}
	n.mu.Unlock()
	b.mu.Lock()
	b.work.wg.Go(func() { b.updateBusy(note) })
	b.mu.Unlock()
	return ref, true
}

// updateBusy brings note's count up to date every busyUpdateEvery until no
// more messages are refused, the platform refuses an edit, or the bridge
// shuts down (then once more, at once).
func (b *Bridge) updateBusy(note *busyNotice) {
	n := &b.notices
	for {
		// Let the count grow before it is shown again: a flood's messages
		// come faster than any platform takes edits.
		t := time.NewTimer(busyUpdateEvery)
		select {
		case <-t.C:
		case <-b.work.quit:
		}
		t.Stop()
		n.mu.Lock()
		refused, ref := note.refused, note.ref
		if refused == note.shown || note.fixed {
			note.sending = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		fixed := b.rewriteBusy(note, ref, refused)
		n.mu.Lock()
		note.shown, note.fixed = refused, fixed
		n.mu.Unlock()
	}
}

// busyReply is the busy notice after refused messages were not taken.
func (b *Bridge) busyReply(refused int) Reply {
	return Reply{Kind: ReplyError, Ephemeral: true, Text: busyText(b.cfg.QueueSize, refused)}
}

// sendBusy sends note, counting refused messages. Its error says the
// platform did not take it (as far as the adapter knows: an adapter may
// return a reference with the error).
func (b *Bridge) sendBusy(note *busyNotice, refused int) (MessageRef, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 10*time.Second)
	defer cancel()
	ref, err := note.first.reply.Send(ctx, b.busyReply(refused))
	if err != nil {
		b.log.Warn("busy notice not delivered; its messages stay kept as refused for the next start",
			zap.String("platform", note.first.Platform), zap.String("conversation", note.first.Conversation), zap.Error(err))
	}
	return ref, err
}

// rewriteBusy updates note, sent as ref, with the count refused, and
// reports whether it cannot be updated (again).
func (b *Bridge) rewriteBusy(note *busyNotice, ref MessageRef, refused int) (fixed bool) {
	p, ok := note.first.reply.(Progresser)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 10*time.Second)
	defer cancel()
	if err := p.Progress(ctx, ref, b.busyReply(refused)); err != nil {
		// An ephemeral message the platform cannot edit: the one notice
		// stands for all the messages of this overflow.
		b.log.Debug("busy notice not updated; no more updates", zap.String("conversation", note.first.Conversation), zap.Error(err))
		return true
	}
	return false
}

// busyText is the busy notice after refused messages were not taken.
func busyText(waiting, refused int) string {
	if refused <= 1 {
		return fmt.Sprintf(msgQueueFull, waiting)
	}
	return fmt.Sprintf(msgQueueFullMore, waiting, refused)
}

// keepBusy records in the outbox, before its user is told, that ev was
// refused because its conversation's queue was full, and reports whether
// its user is to be told now. Without it, a crash between the busy notice
// and closing the entry left the entry received, and the next start ran
// the message its user had been told was not taken. A store that does not
// take the write is no reason to keep the user waiting: they are told all
// the same, as before the outbox. false means another process answered ev.
func (b *Bridge) keepBusy(ctx context.Context, log *zap.Logger, ev Event) bool {
	e := ev.entry
	if e == nil || e.done {
		return true
	}
	data, err := json.Marshal(outbound{Reply: Reply{Kind: ReplyError, Ephemeral: true, Text: busyText(b.cfg.QueueSize, 1)}, Busy: true})
	if err == nil {
		put := func() error { return b.store.PutReply(recordCtx(ctx), e.key, data, nil, b.cfg.Now()) }
		err = b.retryStore(ctx, log, "put_reply", put, func(error) bool { return false }, func() bool { return true })
	}
	switch {
	case errors.Is(err, store.ErrAlreadySent):
		e.done = true
		return false
	case err != nil:
		log.Warn("busy refusal not kept in the outbox; telling its user all the same", zap.String("event_key", e.key), zap.Error(err))
		b.metrics.storeFailed("put_reply")
	}
	return true
}

// retellBusy tells the user of a message refused busy by a process that
// stopped before closing its entry, or whose notice the platform did not
// take (a kept outbound with Busy set), through the conversation's one busy
// notice of this process, and closes the entry once that notice is
// delivered.
func (b *Bridge) retellBusy(ctx context.Context, log *zap.Logger, ev Event) {
	e := ev.entry
	e.done = true // closed here, or left in the outbox
	ref, told := b.tellBusy(ev)
	if !told {
		b.keptBusy(log, ev)
		return
	}
	b.finishEntry(ctx, log, ev.Conversation, e.key, ref)
}

// keptBusy notes that ev, refused busy, was not told: its busy notice was
// not delivered, so its entry stays open with the refusal kept, for the
// next start (with replicas, whichever replica next takes it up).
func (b *Bridge) keptBusy(log *zap.Logger, ev Event) {
	if ev.entry == nil {
		return
	}
	log.Debug("busy refusal not told; kept for the next start", zap.String("event_key", ev.entry.key))
	b.metrics.delivery(ev.Platform, "kept")
}
