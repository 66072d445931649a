package slack

import (
	"context"
	"errors"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/bridge"
)

var _ bridge.Progresser = (*responder)(nil)

// errNoProgress says a message cannot be rewritten in place: an ephemeral
// chat message, or a response_url with no use to spare.
var errNoProgress = errors.New("progress cannot be shown in place")

// Slack accepts a response_url five times in 30 minutes. The first carries
// "Running …" and the result needs the last ones (one per part), so
// progress takes only the uses beyond urlReserve — one, at the first
// interval: a run of minutes shows early that it is alive — spaced by
// urlProgressGap should the reserve ever leave more.
const (
	urlReserve     = 3
	urlProgressGap = 2 * time.Minute
)

// progressGap is the least time between two progress rewrites of a message
// by chat.update, whatever pace the core asks for: Slack refuses a message
// rewritten many times in a few seconds, and the answer that replaces it
// must never wait behind such a refusal.
const progressGap = time.Second

// Progress rewrites a progress message in place: the placeholder of a slow
// answer (ref ""), a message the Web API posted (chat.update), or the
// message of a slash command's response_url while it has uses to spare. A
// rate limit skips the update rather than wait: the next may pass, and the
// answer must not queue behind a progress line.
func (r *responder) Progress(ctx context.Context, ref bridge.MessageRef, rep bridge.Reply) error {
	msgs := render(rep, !r.a.cfg.DisableMarkdownBlock)
	if len(msgs) == 0 {
		return errNoProgress
	}
	s := string(ref)
	switch {
	case s == "":
		r.mu.Lock()
		ts := r.placeholder
		r.mu.Unlock()
		if ts == "" {
			return errNoProgress
		}
		return r.progressUpdate(ctx, ts, msgs[0])
	case strings.HasPrefix(s, refMessage):
		channel, ts, ok := strings.Cut(strings.TrimPrefix(s, refMessage), ":")
		if !ok || channel != r.Channel || rep.Ephemeral {
			return errNoProgress
		}
		return r.progressUpdate(ctx, ts, msgs[0])
	case strings.HasPrefix(s, refURL):
		want := slackgo.ResponseTypeInChannel
		if rep.Ephemeral {
			want = slackgo.ResponseTypeEphemeral
		}
		if strings.TrimPrefix(s, refURL) != want || r.ResponseURL == "" {
			return errNoProgress
		}
		now := time.Now()
		r.mu.Lock()
		if maxURLUses-r.urlUses <= urlReserve {
			r.mu.Unlock()
			return errNoProgress
		}
		due := r.urlProgress.IsZero() || now.Sub(r.urlProgress) >= urlProgressGap
		if due {
			r.urlUses++
			r.urlProgress = now
		}
		r.mu.Unlock()
		if !due {
			return nil
		}
		return r.sendURL(ctx, urlMessage{ResponseType: want, Text: msgs[0].Text, Blocks: msgs[0].Blocks, ReplaceOriginal: true})
	}
	return errNoProgress
}

// progressUpdate rewrites the message at ts once, without waiting out a
// rate limit.
func (r *responder) progressUpdate(ctx context.Context, ts string, m outMessage) error {
	now := time.Now()
	r.mu.Lock()
	due := now.Sub(r.lastProgress) >= progressGap
	if due {
		r.lastProgress = now
	}
	r.mu.Unlock()
	if !due {
		return nil
	}
	_, _, _, err := r.a.api.UpdateMessageContext(ctx, r.Channel, ts, content(m)...)
	if _, limited := errors.AsType[*slackgo.RateLimitedError](err); limited {
		r.a.log.Debug("progress update rate limited; skipped")
		return nil
	}
	return err
}
