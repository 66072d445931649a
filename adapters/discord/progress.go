package discord

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
)

var (
	_ bridge.Progresser = (*messageResponder)(nil)
	_ bridge.Progresser = (*interactionResponder)(nil)
)

// errNoProgress says a message cannot be rewritten in place.
var errNoProgress = errors.New("progress cannot be shown in place")

// Discord allows 5 edits per 5 seconds in a channel (discordtest's
// MaxEditsPerChannel); progress takes at most progressEdits of them, so the
// answers that replace progress messages find the rest free and never
// queue behind a 429, which discordgo waits out whatever the context.
const (
	progressEdits  = 3
	progressWindow = 5 * time.Second
)

// progressPace counts the progress edits of each channel in the last
// progressWindow. The zero value is ready.
type progressPace struct {
	mu    sync.Mutex
	edits map[string][]time.Time
}

// take reports whether channel may have one more progress edit now, and
// counts it when so.
func (p *progressPace) take(channel string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.edits == nil {
		p.edits = make(map[string][]time.Time)
	}
	recent := p.edits[channel]
	i := 0
	for i < len(recent) && now.Sub(recent[i]) >= progressWindow {
		i++
	}
	recent = recent[i:]
	if len(recent) >= progressEdits {
		p.edits[channel] = recent
		return false
	}
	if len(recent) == 0 && len(p.edits) > 1000 {
		// Drop the channels gone quiet, so the map does not grow forever.
		for c, ts := range p.edits {
			if len(ts) == 0 || now.Sub(ts[len(ts)-1]) >= progressWindow {
				delete(p.edits, c)
			}
		}
	}
	p.edits[channel] = append(recent, now)
	return true
}

// Progress rewrites a flow's "Running …" message posted in a channel (a
// text command). The working indicator of a chat answer is the typing
// indicator, which needs no rewriting: ref "" is refused.
func (r *messageResponder) Progress(ctx context.Context, ref bridge.MessageRef, reply bridge.Reply) error {
	channel, ids, ok := parseChannelRef(ref)
	if !ok || len(ids) != 1 {
		return errNoProgress
	}
	if !r.a.pace.take(channel, time.Now()) {
		return nil // skipped; the next may pass
	}
	return r.a.editChannel(ctx, channel, ids[0], render(reply)[0])
}

// Progress rewrites the deferred response of a command (or a follow-up of
// it) while its token lives.
func (r *interactionResponder) Progress(ctx context.Context, ref bridge.MessageRef, reply bridge.Reply) error {
	id, ok := strings.CutPrefix(string(ref), "wh/")
	r.mu.Lock()
	expired := r.expired
	r.mu.Unlock()
	if !ok || id == "" || expired {
		return errNoProgress
	}
	if !r.a.pace.take(r.i.ChannelID, time.Now()) {
		return nil
	}
	return r.a.editWebhook(ctx, r.i, id, render(reply)[0])
}
