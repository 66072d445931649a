package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// outbound is an answer as the outbox keeps it (store.InboxEntry.Outbox):
// the reply, and the message it takes the place of, if any (a flow's
// progress message).
type outbound struct {
	Reply   Reply      `json:"reply"`
	Replace MessageRef `json:"replace,omitempty"`
	// Unposted says that every attempt so far was refused (ErrNotPosted):
	// the next one need not look for an earlier one first.
	Unposted bool `json:"unposted,omitempty"`
	// Busy marks a message refused because its conversation's queue was
	// full: its user is told through the conversation's one busy notice
	// (tellBusy), not by a reply of its own, so that a flood kept in the
	// outbox at a crash is told by a notice per conversation after the
	// restart, not one per message.
	Busy bool `json:"busy,omitempty"`
}

// deliverAttempts bounds the sends of one answer before its user is told
// that it could not be posted; deliverBackoff is the wait before each
// further attempt. Each attempt already waits out the platform's
// Retry-After in its adapter: these are for an adapter that gave up.
const deliverAttempts = 3

var deliverBackoff = [deliverAttempts - 1]time.Duration{2 * time.Second, 10 * time.Second}

// tell answers ev with r, a reply that is all ev gets (a refusal such as
// "too long" or "slow down", help, a confirmation question): through the
// outbox, like the agent's answers, so that a crash or SIGTERM neither loses
// it (it is kept and posted after the restart) nor shows it twice (a
// re-post first looks for it, Reply.Once), and the entry is closed only
// once the platform has it or its user was told after the retry budget.
// Without it, a crash between posting a refusal and closing the entry left
// the entry received: the next start ran the message again, telling the
// user twice, or answering a message it had refused.
func (b *Bridge) tell(ctx context.Context, log *zap.Logger, ev Event, r Reply) {
	b.deliver(ctx, log, ev, "", r, nil)
}

// deliver posts r, ev's answer, and closes ev's inbox entry, applying turn.
// r (and turn) are recorded first: the entry is
// answered only once the platform has accepted r, or its user was told,
// after deliverAttempts, that it could not be posted. An answer not yet
// posted when the shutdown grace ends stays in the outbox, for the next
// start (or the replica that takes the conversation) to post, once.
// replace, when set, is the message r takes the place of.
func (b *Bridge) deliver(ctx context.Context, log *zap.Logger, ev Event, replace MessageRef, r Reply, turn *Turn) {
	e := ev.entry
	if by, ok := stoppedBy(ctx); ok {
		b.endStopped(ctx, log, ev, replace, r.Ephemeral, by)
		return
	}
	if e == nil || e.done {
		b.answered(ctx, log, ev, b.postPlain(ctx, ev, replace, r), turn)
		return
	}
	out := outbound{Reply: r, Replace: replace}
	data, err := json.Marshal(out)
	if err != nil {
		err = fmt.Errorf("encode reply: %w", err)
	} else {
		// Retried until the store takes it or the shutdown grace ends,
		// whether or not the store looks down: kept, the answer survives a
		// crash and is posted once; posted without it, a crash before the
		// entry is closed has the next start tell its user it restarted
		// (or run a refused message again). A retry of a write that
		// committed though its answer was lost writes the same again.
		put := func() error { return b.store.PutReply(recordCtx(ctx), e.key, data, turn, b.cfg.Now()) }
		never := func(error) bool { return false }
		err = b.retryWrite(b.ctx, log, "put_reply", put, never, func() bool { return true }, 0)
	}
	switch {
	case errors.Is(err, store.ErrStopped):
		// Stopped on another replica, or before this process's cancel
		// reached the run: the store refuses the answer.
		b.endStopped(ctx, log, ev, replace, r.Ephemeral, "")
		return
	case errors.Is(err, store.ErrAlreadySent):
		// Answered by another process (a replica that took the
		// conversation over): posting too would answer twice.
		log.Info("event answered by another process; reply not posted", zap.String("event_key", e.key))
		e.done = true
		return
	case err != nil:
		// The last resort: the store did not take the answer before the
		// shutdown grace ended (or refused it for good). The user can still
		// have it now; the entry, not closed either, makes the next start
		// tell them flowbridge restarted while answering.
		log.Warn("reply not kept in the outbox before shutdown; posting it all the same: its user may also be told after the restart that flowbridge restarted",
			zap.String("event_key", e.key), zap.Error(err))
		b.metrics.storeFailed("put_reply")
		b.answered(ctx, log, ev, b.postPlain(ctx, ev, replace, r), turn)
		return
	}
	b.post(ctx, log, ev, out, false)
}

// postPlain sends r without the outbox, in place of replace when set.
func (b *Bridge) postPlain(ctx context.Context, ev Event, replace MessageRef, r Reply) MessageRef {
	if replace != "" {
		return b.replace(ctx, ev, replace, r)
	}
	return b.send(ctx, ev, r)
}

// post sends an answer kept in the outbox until the platform accepts it,
// then closes its entry. again says an earlier attempt may have been
// posted (one of a process that stopped): the responder is asked to post
// it only if it is not there yet (Reply.Once, Reply.Again).
func (b *Bridge) post(ctx context.Context, log *zap.Logger, ev Event, out outbound, again bool) {
	e := ev.entry
	e.done = true // closed here, or left in the outbox
	again = again && !out.Unposted
	for attempt := 1; ; attempt++ {
		r := out.Reply
		r.Once, r.Again = e.key, again
		ref, err := b.postOnce(ctx, ev, out.Replace, r)
		if err == nil {
			b.finishEntry(ctx, log, ev.Conversation, e.key, ref)
			return
		}
		again = again || !errors.Is(err, ErrNotPosted)
		if b.ctx.Err() != nil {
			log.Warn("reply not delivered before shutdown; kept for the next start", zap.String("event_key", e.key), zap.Error(err))
			b.metrics.delivery(ev.Platform, "kept")
			if !again && !out.Unposted {
				b.markUnposted(ctx, log, e.key, out)
			}
			return
		}
		if attempt == deliverAttempts {
			// Not named once (Reply.Once), unlike the other notices: it
			// must take a path other than the one that kept refusing the
			// answer (on Slack an ephemeral: another method, another rate
			// tier), and an ephemeral cannot be found again. So a process
			// killed after posting it and before closing the entry can
			// have it shown twice, if the next one gives up on the answer
			// too.
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
			_, terr := ev.reply.Send(nctx, Reply{Kind: ReplyError, Ephemeral: true, Text: msgNotDelivered})
			cancel()
			if terr != nil && !errors.Is(terr, ErrNotPosted) {
				// Neither answered nor told: the entry is not done. Its
				// answer stays kept for the next start to try again.
				log.Error("reply not delivered and user not told; kept for the next start", zap.String("event_key", e.key), zap.Int("attempts", attempt), zap.Error(err), zap.NamedError("notice_error", terr))
				b.metrics.delivery(ev.Platform, "kept")
				return
			}
			log.Error("reply not delivered; user told", zap.String("event_key", e.key), zap.Int("attempts", attempt), zap.Error(err))
			b.metrics.delivery(ev.Platform, "told")
			b.finishEntry(ctx, log, ev.Conversation, e.key, "")
			return
		}
		log.Warn("reply not delivered; trying again", zap.String("event_key", e.key), zap.Int("attempt", attempt), zap.Error(err))
		t := time.NewTimer(deliverBackoff[attempt-1])
		select {
		case <-t.C:
		case <-b.ctx.Done():
			t.Stop()
		}
	}
}

// markUnposted records that the kept answer out was never posted, so that
// the next start posts it without looking for it (on Slack a history call
// of a slow rate tier). A failure only costs that look.
func (b *Bridge) markUnposted(ctx context.Context, log *zap.Logger, key string, out outbound) {
	out.Unposted = true
	data, err := json.Marshal(out)
	if err == nil {
		err = b.store.PutReply(recordCtx(ctx), key, data, nil, b.cfg.Now())
	}
	if err != nil {
		log.Debug("kept answer not marked unposted", zap.String("event_key", key), zap.Error(err))
	}
}

// postOnce makes one attempt at posting r, in place of replace when set.
// Work cut off by the end of the shutdown grace still makes one, on a fresh
// context bounded by noticeTimeout.
func (b *Bridge) postOnce(ctx context.Context, ev Event, replace MessageRef, r Reply) (MessageRef, error) {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
		defer cancel()
	}
	if u, ok := ev.reply.(Updater); ok && replace != "" {
		err := u.Update(ctx, replace, r)
		if err == nil || ctx.Err() != nil {
			return replace, err
		}
		b.log.Debug("update failed; sending instead", zap.Error(err))
	}
	return ev.reply.Send(ctx, r)
}

// finishEntry closes the entry of key, whose answer was posted (ref) or
// given up on.
func (b *Bridge) finishEntry(ctx context.Context, log *zap.Logger, conv, key string, ref MessageRef) {
	finish := func() error { return b.store.Finish(recordCtx(ctx), key, string(ref), nil, b.cfg.Now()) }
	// After a failed attempt, an entry no longer pending is that attempt's
	// own write, committed though its answer was lost.
	taken := func(error) bool { return b.disp.answeredAlready(key) }
	err := b.retryStore(b.ctx, log, "finish", finish, taken, func() bool { return true })
	if err != nil {
		// The user has the answer; after a crash it is looked for (and
		// found) before it would be posted again.
		log.Warn("inbox entry not closed", zap.String("event_key", key), zap.Error(err))
		b.metrics.storeFailed("finish")
	}
}

// outboxJob returns the job that posts the answer kept for an entry
// (e.Outbox) of a process that stopped before the platform had it, or
// false when e holds none. An answer that cannot be read is dropped.
func (b *Bridge) outboxJob(log *zap.Logger, ev Event, e store.InboxEntry) (*job, bool) {
	if e.Outbox == nil {
		return nil, false
	}
	var out outbound
	if err := json.Unmarshal(e.Outbox, &out); err != nil {
		log.Error("kept reply unreadable; dropped", zap.String("event_key", e.Key), zap.Error(err))
		out = outbound{Reply: Reply{Kind: ReplyError, Ephemeral: true, Text: msgNotDelivered}}
	}
	if ev.entry == nil {
		ev.entry = &entry{key: e.Key}
	}
	ev.entry.sent = true
	j := &job{ev: ev, kind: ev.Kind, out: &out, rec: newReceipt()}
	j.rec.settle(nil)
	return j, true
}
