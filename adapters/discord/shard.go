package discord

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
)

// shard is one gateway connection: a discordgo session that identifies as
// shard id of count, and receives the events of the guilds Discord routes
// there, (guild_id >> 22) % count, and with id 0 the DMs.
type shard struct {
	id, count int
	session   *discordgo.Session
	gw        *gatewayConn

	// reconnect is signalled when the connection ended unasked.
	reconnect chan struct{}
	// connected is set while a session is live (READY or RESUMED came).
	connected atomic.Bool
	// pace spaces the shard's IDENTIFYs (identify.go).
	pace    identifyPace
	lastErr atomic.Pointer[string] // why the shard is not connected

	// The catch-up of the current session (catchup.go): the scopes whose
	// gateway messages are held while they catch up, and what the inbox
	// had recorded when the session identified.
	holdMu sync.Mutex
	held   map[string]*hold // by scope: a guild ID, dmScope, or a channel probed ("dm:" or "ch:" + its ID)
	last   *lastSeen
	// probe is the probing of channels the session's catch-up could not
	// know (catchup.go).
	probe *probe

	// The gateway session, kept for the next process to resume
	// (resume.go): its ID and URL from READY (or the store), and the
	// latest dispatch's sequence number.
	sessMu sync.Mutex
	sess   gatewaySession
	seq    atomic.Int64
	// seqp is discordgo's sequence number (sequenceOf), nil when it cannot
	// be read; lastSeq is the last one the read loop noted (gap.go).
	seqp    *int64
	lastSeq atomic.Int64
	// lastMsg is the snowflake of the newest message of the session the
	// read loop was handed, 0 before the first: where a sequence gap's
	// catch-up starts (gap.go).
	lastMsg atomic.Int64
	// readied tells keepSession of a new session (READY).
	readied chan struct{}
	// saved is the session last written, saveFailing whether the last
	// write failed; keepSession alone uses them, then saveLastSession.
	saved       gatewaySession
	saveFailing bool
}

func (sh *shard) signalReconnect() {
	select {
	case sh.reconnect <- struct{}{}:
	default:
	}
}

// problem says why the shard is not ready, "" when it is: not connected,
// or silent for longer than staleAfter.
func (sh *shard) problem() string {
	name := "discord gateway"
	if sh.count > 1 {
		name = fmt.Sprintf("discord gateway shard %d of %d", sh.id, sh.count)
	}
	if !sh.connected.Load() {
		if msg := sh.lastErr.Load(); msg != nil {
			return name + " not connected: " + *msg
		}
		return name + " not connected"
	}
	if last := sh.gw.lastActivity(); !last.IsZero() && time.Since(last) > staleAfter {
		return fmt.Sprintf("%s silent for %s", name, time.Since(last).Round(time.Second))
	}
	return ""
}

// identifyPacer spaces the gateway connections of the shards one process
// holds as Discord allows: shards fall in max_concurrency buckets (shard_id
// % max_concurrency), and each bucket identifies at most once per window. A
// reconnection may resume instead, which Discord does not count; the pacer
// cannot tell, and spaces it too. A nil pacer never waits.
type identifyPacer struct {
	buckets int
	every   time.Duration

	mu   sync.Mutex
	next map[int]time.Time // by bucket: when it may identify again
}

func newIdentifyPacer(buckets int, every time.Duration) *identifyPacer {
	return &identifyPacer{buckets: max(buckets, 1), every: every, next: make(map[int]time.Time)}
}

// wait blocks until shard shardID may identify, taking its bucket's turn; it
// reports false when ctx ends first.
func (p *identifyPacer) wait(ctx context.Context, shardID int) bool {
	if p == nil {
		return ctx.Err() == nil
	}
	bucket := shardID % p.buckets
	p.mu.Lock()
	now := time.Now()
	at := p.next[bucket]
	if at.Before(now) {
		at = now
	}
	p.next[bucket] = at.Add(p.every)
	p.mu.Unlock()
	if at.Equal(now) {
		return ctx.Err() == nil
	}
	return sleep(ctx, at.Sub(now))
}

// heartbeat is a gateway heartbeat (op 1); d may be null.
type heartbeat struct {
	Op int    `json:"op"`
	D  *int64 `json:"d"`
}

// drain sends a heartbeat and waits, at most within, for its ACK to be
// read, and reports whether it was. discordgo drops every event it reads
// once Close has begun, and Discord sends a closed session nothing again:
// the events the gateway sent before the heartbeat, still in the socket
// or behind a slow handler, would be lost. The gateway answers heartbeats
// in order with its events, and the handlers run on the read loop, so
// once the ACK is read every event before it has been handed over.
// discordgo tells of an ACK only by LastHeartbeatAck, which is read every
// few milliseconds.
func (sh *shard) drain(within time.Duration) bool {
	s := sh.session
	sent := time.Now()
	if err := s.GatewayWriteStruct(heartbeat{Op: 1}); err != nil {
		return false
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		s.RLock()
		ack := s.LastHeartbeatAck
		s.RUnlock()
		if !ack.Before(sent) {
			return true
		}
		select {
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}
