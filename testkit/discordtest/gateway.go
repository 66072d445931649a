package discordtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// writeTimeout bounds a frame write, so a client that stops reading cannot hang the fake.
const writeTimeout = 5 * time.Second

// ErrNoSession is returned when a dispatch has no gateway session to go to: no client has
// identified yet, or the last session was invalidated (closed with 1000, op 9…).
var ErrNoSession = errors.New("discordtest: no live gateway session (wait for READY with WaitReady)")

// IntentError is returned when the identified session did not ask for the intents an event
// needs, so Discord would not send it.
type IntentError struct {
	Event string
	Need  discordgo.Intent
	Have  discordgo.Intent
}

func (e *IntentError) Error() string {
	return fmt.Sprintf("discordtest: %s not dispatched: IDENTIFY intents %d lack %d", e.Event, e.Have, e.Need&^e.Have)
}

// Dispatch is one op 0 event the fake numbered for a session.
type Dispatch struct {
	SessionID string
	Seq       int64
	Type      string
	Data      json.RawMessage
}

// gwSession is a gateway session: what RESUME continues.
type gwSession struct {
	id      string
	shard   [2]int // [shard_id, num_shards] from IDENTIFY, [0, 1] without
	seq     int64
	intents discordgo.Intent
	log     []Dispatch // replayed on RESUME
	conn    *conn      // nil while no connection is attached
	invalid bool
}

// confirm drops the dispatches a heartbeat's sequence number says the client has: a
// RESUME never asks for them again, as it carries the client's last sequence number.
func (sess *gwSession) confirm(d json.RawMessage) {
	var seq int64
	// null, sent before the first dispatch, leaves seq at 0 and confirms nothing.
	if json.Unmarshal(d, &seq) != nil {
		return
	}
	i, _ := slices.BinarySearchFunc(sess.log, seq+1, func(d Dispatch, seq int64) int { return cmp.Compare(d.Seq, seq) })
	sess.log = slices.Delete(sess.log, 0, i)
}

// conn is one websocket connection. Fields other than ws and wmu are guarded by Server.mu.
type conn struct {
	index         int
	ws            *websocket.Conn
	wmu           sync.Mutex
	session       *gwSession
	identified    bool
	awaitIdentify bool // after op 9 the client may IDENTIFY again on this connection
	closing       bool // the fake sent a close frame: what the client sends after counts for nothing
}

type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

func encodeFrame(op int, d any, seq int64, t string) []byte {
	raw, err := json.Marshal(d)
	if err != nil {
		raw = []byte("null")
	}
	f := frame{Op: op, D: raw}
	if op == 0 {
		f.S, f.T = &seq, &t
	}
	b, _ := json.Marshal(f)
	return b
}

// write sends one frame within writeTimeout. A caller's context does not bound it: gorilla
// fails every later write on a connection once one has timed out, so a test's deadline
// falling mid-write would silently cut the bot off, which Discord never does.
func (c *conn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// closeWith sends a close frame and drops the connection, as Discord does on a fatal error.
func (s *Server) closeWith(c *conn, code int, text string) {
	s.mu.Lock()
	s.connRecords[c.index-1].ServerCloseCode = code
	c.closing = true
	if c.session != nil && !resumableClose(code) {
		c.session.invalid = true
	}
	s.notifyLocked()
	s.mu.Unlock()
	c.wmu.Lock()
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(writeTimeout))
	c.wmu.Unlock()
	c.ws.NetConn().Close()
}

// resumableClose reports whether a session survives the server closing with code.
func resumableClose(code int) bool {
	switch code {
	case 4000, 4001, 4002, 4003, 4005, 4008:
		return true
	}
	return code < 4000 && code != websocket.CloseNormalClosure && code != websocket.CloseGoingAway
}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	c := &conn{ws: ws}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	c.index = len(s.connRecords) + 1
	s.connRecords = append(s.connRecords, Connection{Index: c.index, Query: r.URL.RawQuery})
	s.conns[c] = struct{}{}
	s.notifyLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.connRecords[c.index-1].Closed = true
		if c.session != nil && c.session.conn == c {
			c.session.conn = nil
		}
		s.notifyLocked()
		s.mu.Unlock()
		ws.Close()
	}()

	q := r.URL.Query()
	if v := q.Get("v"); v != "" && v != "9" && v != "10" {
		s.closeWith(c, 4012, "Invalid API version.")
		return
	}
	if e := q.Get("encoding"); e != "" && e != "json" {
		s.closeWith(c, 4002, "Error while decoding payload.")
		return
	}
	hello := encodeFrame(10, map[string]int64{"heartbeat_interval": s.opts.HeartbeatInterval.Milliseconds()}, 0, "")
	if c.write(hello) != nil {
		return
	}
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			if ce, ok := errors.AsType[*websocket.CloseError](err); ok {
				s.mu.Lock()
				s.connRecords[c.index-1].ClientCloseCode = ce.Code
				// Discord ends a session closed with 1000 or 1001: the bot goes offline. Not
				// when it closed first: discordgo answers any close with Close, hence 1000.
				if c.session != nil && !c.closing && (ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway) {
					c.session.invalid = true
				}
				s.mu.Unlock()
			}
			return
		}
		var f frame
		if err := json.Unmarshal(data, &f); err != nil {
			s.closeWith(c, 4002, "Error while decoding payload.")
			return
		}
		switch f.Op {
		case 1:
			s.mu.Lock()
			s.connRecords[c.index-1].Heartbeats++
			if s.opts.NoRecord && c.session != nil {
				c.session.confirm(f.D)
			}
			ack := !s.noAcks
			if ack {
				s.connRecords[c.index-1].Acks++
			}
			s.notifyLocked()
			s.mu.Unlock()
			if ack && c.write(encodeFrame(11, nil, 0, "")) != nil {
				return
			}
		case 2:
			if !s.identify(r.Context(), c, f.D) {
				return
			}
		case 6:
			if !s.resume(r.Context(), c, f.D) {
				return
			}
		case 3, 4, 8:
			s.mu.Lock()
			ok := c.identified
			s.mu.Unlock()
			if !ok {
				s.closeWith(c, 4003, "Not authenticated.")
				return
			}
		default:
			s.closeWith(c, 4001, "Unknown opcode.")
			return
		}
	}
}

func tokenMatches(got, want string) bool {
	return strings.TrimPrefix(got, "Bot ") == want
}

// identify answers op 2 with READY and the guilds; false means the connection was closed.
func (s *Server) identify(ctx context.Context, c *conn, raw json.RawMessage) bool {
	var d struct {
		Token   string           `json:"token"`
		Intents discordgo.Intent `json:"intents"`
		Shard   *[2]int          `json:"shard"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		s.closeWith(c, 4002, "Error while decoding payload.")
		return false
	}
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	s.mu.Lock()
	h := Handshake{Conn: c.index, Op: 2, Token: d.Token, Intents: d.Intents, Shard: d.Shard, Raw: append(json.RawMessage(nil), raw...), At: s.now()}
	refuse := func(code int, text string) bool {
		h.CloseCode = code
		s.handshakes = append(s.handshakes, h)
		s.mu.Unlock()
		s.closeWith(c, code, text)
		return false
	}
	switch {
	case c.identified && !c.awaitIdentify:
		return refuse(4005, "Already authenticated.")
	case !tokenMatches(d.Token, s.opts.Token):
		return refuse(4004, "Authentication failed.")
	case d.Shard != nil && (d.Shard[1] < 1 || d.Shard[0] < 0 || d.Shard[0] >= d.Shard[1]):
		return refuse(4010, "Invalid shard.")
	case d.Intents >= 1<<26:
		return refuse(4013, "Invalid intent(s).")
	case s.opts.DenyMessageContent && d.Intents&discordgo.IntentMessageContent != 0:
		return refuse(4014, "Disallowed intent(s).")
	}
	s.spendIdentifyLocked()
	if answered, ok := s.invalidateLocked(c, h); answered {
		return ok
	}
	sess := &gwSession{id: fmt.Sprintf("fake-session-%d", len(s.sessions)+1), shard: [2]int{0, 1}, intents: d.Intents, conn: c}
	if d.Shard != nil {
		sess.shard = *d.Shard
	}
	if c.session != nil && c.session.conn == c {
		c.session.conn = nil
	}
	c.session, c.identified, c.awaitIdentify = sess, true, false
	s.sessions[sess.id] = sess
	s.routed[sess.shard] = sess
	s.current = sess
	h.SessionID = sess.id
	s.handshakes = append(s.handshakes, h)
	s.connRecords[c.index-1].SessionID = sess.id

	// A shard is told about, and then given, the guilds routed to it only.
	var mine []string
	for _, g := range s.guilds {
		if ShardOf(g, sess.shard[1]) == sess.shard[0] {
			mine = append(mine, g)
		}
	}
	guilds := make([]map[string]any, 0, len(mine))
	for _, g := range mine {
		guilds = append(guilds, map[string]any{"id": g, "unavailable": true})
	}
	ready := map[string]any{
		"v": 9, "session_id": sess.id, "resume_gateway_url": s.GatewayURL(), "session_type": "normal",
		"user": s.wireSelf(), "application": map[string]any{"id": s.opts.ApplicationID, "flags": 0},
		"guilds": guilds, "private_channels": []any{},
	}
	if d.Shard != nil {
		ready["shard"] = d.Shard
	}
	sess.seq++
	frames := [][]byte{encodeFrame(0, ready, sess.seq, "READY")}
	if d.Intents&discordgo.IntentsGuilds != 0 {
		for _, g := range mine {
			frames = append(frames, s.numberLocked(sess, "GUILD_CREATE", s.guildCreateLocked(g)))
		}
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, f := range frames {
		if c.write(f) != nil {
			return false
		}
	}
	return true
}

// resume answers op 6 with the missed dispatches and RESUMED, or op 9 when the session
// cannot be resumed; false means the connection was closed.
func (s *Server) resume(ctx context.Context, c *conn, raw json.RawMessage) bool {
	var d struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		s.closeWith(c, 4002, "Error while decoding payload.")
		return false
	}
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	s.mu.Lock()
	h := Handshake{Conn: c.index, Op: 6, Token: d.Token, SessionID: d.SessionID, Seq: d.Seq, Raw: append(json.RawMessage(nil), raw...), At: s.now()}
	if c.identified {
		h.CloseCode = 4005
		s.handshakes = append(s.handshakes, h)
		s.mu.Unlock()
		s.closeWith(c, 4005, "Already authenticated.")
		return false
	}
	if !tokenMatches(d.Token, s.opts.Token) {
		h.CloseCode = 4004
		s.handshakes = append(s.handshakes, h)
		s.mu.Unlock()
		s.closeWith(c, 4004, "Authentication failed.")
		return false
	}
	if answered, ok := s.invalidateLocked(c, h); answered {
		return ok
	}
	sess, ok := s.sessions[d.SessionID]
	if !ok || sess.invalid || d.Seq > sess.seq {
		// The client must IDENTIFY now; discordgo does so at once on this connection.
		c.awaitIdentify = true
		c.identified = true
		s.handshakes = append(s.handshakes, h)
		s.notifyLocked()
		s.mu.Unlock()
		return c.write(encodeFrame(9, false, 0, "")) == nil
	}
	if sess.conn != nil && sess.conn != c {
		sess.conn.session = nil
	}
	sess.conn = c
	c.session, c.identified = sess, true
	s.routed[sess.shard] = sess
	s.current = sess
	var frames [][]byte
	for _, f := range sess.log {
		if f.Seq > d.Seq {
			if s.replayGap != nil && s.replayGap(f) {
				h.Skipped = append(h.Skipped, f.Seq)
				continue
			}
			frames = append(frames, encodeFrame(0, f.Data, f.Seq, f.Type))
		}
	}
	h.Resumed, h.Replayed = true, len(frames)
	s.handshakes = append(s.handshakes, h)
	s.connRecords[c.index-1].SessionID = sess.id
	sess.seq++
	frames = append(frames, encodeFrame(0, map[string]any{}, sess.seq, "RESUMED"))
	s.notifyLocked()
	s.mu.Unlock()
	for _, f := range frames {
		if c.write(f) != nil {
			return false
		}
	}
	return true
}

// numberLocked gives the next sequence number of sess to an event, logs it for replay and
// returns the frame.
func (s *Server) numberLocked(sess *gwSession, name string, data any) []byte {
	raw, err := json.Marshal(data)
	if err != nil {
		raw = []byte("null")
	}
	sess.seq++
	sess.log = append(sess.log, Dispatch{SessionID: sess.id, Seq: sess.seq, Type: name, Data: raw})
	return encodeFrame(0, json.RawMessage(raw), sess.seq, name)
}

// ShardOf returns the shard Discord routes a guild's events to, (guild_id >> 22) %
// shardCount; events without a guild (DMs) go to shard 0. A guild id that is not a
// snowflake counts as shard 0.
func ShardOf(guildID string, shardCount int) int {
	if guildID == "" || shardCount <= 1 {
		return 0
	}
	id, err := strconv.ParseUint(guildID, 10, 64)
	if err != nil {
		return 0
	}
	return int((id >> 22) % uint64(shardCount))
}

// routesLocked returns the live sessions an event of guildID goes to: for each shard
// layout identified, the newest session of the shard the guild maps to.
func (s *Server) routesLocked(guildID string) []*gwSession {
	var out []*gwSession
	for shard, sess := range s.routed {
		if !sess.invalid && ShardOf(guildID, shard[1]) == shard[0] {
			out = append(out, sess)
		}
	}
	slices.SortFunc(out, func(a, b *gwSession) int {
		return cmp.Or(cmp.Compare(a.shard[1], b.shard[1]), cmp.Compare(a.shard[0], b.shard[0]))
	})
	return out
}

// dispatch sends an event about guildID ("" for none, as in DMs) to the session of the
// shard it belongs to; build makes the payload for the session's intents. The event is
// logged for replay even when no connection is attached.
func (s *Server) dispatch(ctx context.Context, name, guildID string, need discordgo.Intent, build func(intents discordgo.Intent) any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dispatch %s: %w", name, err)
	}
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	targets := s.routesLocked(guildID)
	if len(targets) == 0 {
		s.mu.Unlock()
		return fmt.Errorf("dispatch %s: %w", name, ErrNoSession)
	}
	type send struct {
		c *conn
		f []byte
	}
	var sends []send
	var ierr *IntentError
	numbered := false
	for _, sess := range targets {
		if sess.intents&need != need {
			if ierr == nil {
				ierr = &IntentError{Event: name, Need: need, Have: sess.intents}
			}
			continue
		}
		f := s.numberLocked(sess, name, build(sess.intents))
		numbered = true
		if sess.conn != nil {
			sends = append(sends, send{sess.conn, f})
		}
	}
	if !numbered {
		s.mu.Unlock()
		return ierr
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, sd := range sends {
		// A failed write is not an error: the event is replayed when the client resumes.
		sd.c.write(sd.f)
	}
	return nil
}

// dispatchEcho sends what Discord would send about the bot's own actions, if the session
// subscribed; the REST call succeeded either way.
func (s *Server) dispatchEcho(ctx context.Context, name, guildID string, need discordgo.Intent, data any) {
	s.dispatch(ctx, name, guildID, need, func(discordgo.Intent) any { return data })
}

// echo dispatches MESSAGE_CREATE or MESSAGE_UPDATE of a bot message, as Discord does, so
// a bridge's loop prevention is exercised. Ephemeral messages are seen by no one else.
func (s *Server) echo(ctx context.Context, name string, m *Message) {
	if m.Ephemeral() {
		return
	}
	s.mu.Lock()
	w := s.eventLocked(m)
	s.mu.Unlock()
	s.dispatchEcho(ctx, name, m.GuildID, messageIntent(m.GuildID), w)
}

func messageIntent(guildID string) discordgo.Intent {
	if guildID == "" {
		return discordgo.IntentsDirectMessages
	}
	return discordgo.IntentsGuildMessages
}

// WaitReady waits until a client has identified or resumed and is connected, and returns
// the session id.
func (s *Server) WaitReady(ctx context.Context) (string, error) {
	return waitFor(ctx, s, "gateway READY", func() (string, bool) {
		if c := s.current; c != nil && !c.invalid && c.conn != nil {
			return c.id, true
		}
		return "", false
	})
}

// WaitShardReady waits until a client has identified (or resumed) as shard shardID of
// shardCount and is connected, and returns the session id. A client that sent no shard in
// IDENTIFY is shard 0 of 1.
func (s *Server) WaitShardReady(ctx context.Context, shardID, shardCount int) (string, error) {
	return waitFor(ctx, s, fmt.Sprintf("gateway READY of shard [%d, %d]", shardID, shardCount), func() (string, bool) {
		if c := s.routed[[2]int{shardID, shardCount}]; c != nil && !c.invalid && c.conn != nil {
			return c.id, true
		}
		return "", false
	})
}

// Handshakes returns every IDENTIFY and RESUME received, in order.
func (s *Server) Handshakes() []Handshake {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Handshake(nil), s.handshakes...)
}

// WaitHandshake waits for an IDENTIFY or RESUME that match accepts.
func (s *Server) WaitHandshake(ctx context.Context, match func(Handshake) bool) (Handshake, error) {
	return waitFor(ctx, s, "gateway handshake", func() (Handshake, bool) { return firstMatch(s.handshakes, match) })
}

// Connections returns every gateway connection so far, in order.
func (s *Server) Connections() []Connection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Connection(nil), s.connRecords...)
}

// WaitConnection waits for a connection state that match accepts, e.g. a number of
// heartbeats.
func (s *Server) WaitConnection(ctx context.Context, match func(Connection) bool) (Connection, error) {
	return waitFor(ctx, s, "gateway connection", func() (Connection, bool) { return firstMatch(s.connRecords, match) })
}

// Dispatches returns every event numbered for any session, in order per session.
func (s *Server) Dispatches() []Dispatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Dispatch
	for i := 1; i <= len(s.sessions); i++ {
		if sess, ok := s.sessions[fmt.Sprintf("fake-session-%d", i)]; ok {
			out = append(out, sess.log...)
		}
	}
	return out
}

// SetHeartbeatAcks turns HEARTBEAT_ACK on (the default) or off; without acks discordgo
// reconnects after five intervals, as with a zombie connection.
func (s *Server) SetHeartbeatAcks(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noAcks = !on
}

// settledConn waits until the current session's connection has received its first
// heartbeat and returns it. discordgo sends that heartbeat right after Open; if the
// connection breaks while it is being written, discordgo's heartbeat goroutine starts a
// second reconnect alongside the listen goroutine's, and reads ShouldReconnectOnError
// unsynchronised. Waiting keeps the fake's faults to the one reconnect they model.
func (s *Server) settledConn(ctx context.Context) (*conn, error) {
	return waitFor(ctx, s, "a connection's first heartbeat", func() (*conn, bool) {
		if s.current == nil || s.current.invalid {
			return nil, false
		}
		c := s.current.conn
		if c == nil || s.connRecords[c.index-1].Heartbeats == 0 {
			return nil, false
		}
		return c, true
	})
}

// Reconnect sends op 7 RECONNECT on the current connection, once it has heartbeated;
// discordgo closes it with 1012 and RESUMEs on a new one.
func (s *Server) Reconnect(ctx context.Context) error {
	c, err := s.settledConn(ctx)
	if err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	return c.write(encodeFrame(7, nil, 0, ""))
}

// InvalidateSession sends op 9 INVALID_SESSION on the current connection, once it has
// heartbeated. With resumable false the session can no longer be resumed. discordgo
// ignores d and IDENTIFYs again on the same connection.
func (s *Server) InvalidateSession(ctx context.Context, resumable bool) error {
	c, err := s.settledConn(ctx)
	if err != nil {
		return fmt.Errorf("invalidate session: %w", err)
	}
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	s.mu.Lock()
	c.awaitIdentify = true
	if !resumable && c.session != nil {
		c.session.invalid = true
	}
	s.notifyLocked()
	s.mu.Unlock()
	return c.write(encodeFrame(9, resumable, 0, ""))
}

// SendOversized sends, on the current connection once it has heartbeated, one text
// message of size bytes (a dispatch whose data is filler), written as the stream of
// frames Discord would send, generated as it goes: the bytes are never held whole. A
// client that refuses it may close the connection mid-way; that is no error.
func (s *Server) SendOversized(ctx context.Context, size int) error {
	c, err := s.settledConn(ctx)
	if err != nil {
		return fmt.Errorf("send oversized: %w", err)
	}
	s.dispatchMu.Lock()
	defer s.dispatchMu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	w, err := c.ws.NextWriter(websocket.TextMessage)
	if err != nil {
		return fmt.Errorf("send oversized: %w", err)
	}
	head := []byte(`{"op":0,"t":"FILLER","s":null,"d":"`)
	w.Write(head)
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'a'
	}
	for left := size - len(head) - 2; left > 0; left -= len(chunk) {
		if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
			return nil
		}
	}
	w.Write([]byte(`"}`))
	w.Close()
	return nil
}

// DropConnection closes the current connection's socket without a close frame, like a
// network failure, once it has heartbeated. The session stays resumable; events dispatched
// meanwhile are replayed on RESUME.
func (s *Server) DropConnection(ctx context.Context) error {
	c, err := s.settledConn(ctx)
	if err != nil {
		return fmt.Errorf("drop connection: %w", err)
	}
	return s.drop(c)
}

// DropShard closes the connection of shard shardID of shardCount (the newest session that
// identified so) without a close frame, like a network failure on one replica's shard while
// its process lives, once it has heartbeated. Other shards are left alone. The session stays
// resumable; its events dispatched meanwhile are replayed on RESUME.
func (s *Server) DropShard(ctx context.Context, shardID, shardCount int) error {
	c, err := waitFor(ctx, s, fmt.Sprintf("shard %d of %d heartbeating", shardID, shardCount), func() (*conn, bool) {
		sess := s.routed[[2]int{shardID, shardCount}]
		if sess == nil || sess.invalid || sess.conn == nil {
			return nil, false
		}
		c := sess.conn
		return c, s.connRecords[c.index-1].Heartbeats > 0
	})
	if err != nil {
		return fmt.Errorf("drop shard: %w", err)
	}
	return s.drop(c)
}

// drop closes c's socket without a close frame and records it as dropped;
// its session stays resumable.
func (s *Server) drop(c *conn) error {
	s.mu.Lock()
	if c.session != nil && c.session.conn == c {
		c.session.conn = nil
	}
	s.connRecords[c.index-1].Dropped = true
	s.notifyLocked()
	s.mu.Unlock()
	return c.ws.NetConn().Close()
}

// CloseConnection closes the current connection with a close frame, once it has
// heartbeated, as Discord does on errors: 4000-4003, 4005 and 4008 keep the session
// resumable; others (4004, 4007, 4009, 4010-4014) end it.
func (s *Server) CloseConnection(ctx context.Context, code int, text string) error {
	c, err := s.settledConn(ctx)
	if err != nil {
		return fmt.Errorf("close connection: %w", err)
	}
	s.closeWith(c, code, text)
	return nil
}

// ExpireSessions ends every session no connection is attached to, as Discord does with a
// session not resumed within its window (a few minutes after its connection dropped or
// closed): a RESUME of one is answered with op 9, and events are no longer numbered for it.
// A test calls it to stand for that time passing while no bot is connected.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.sessions {
		if sess.conn == nil {
			sess.invalid = true
		}
	}
	s.notifyLocked()
}

// The IDENTIFY budget GET /gateway/bot reports at first (session_start_limit): Discord
// allows 1,000 a day.
const (
	DefaultSessionStartTotal = 1000
	DefaultSessionStartReset = 4 * time.Hour
)

// startLimitLocked returns the IDENTIFY budget, renewed once its reset time has passed.
func (s *Server) startLimitLocked() startLimit {
	if now := s.now(); !now.Before(s.startLimit.resetAt) {
		s.startLimit.remaining = s.startLimit.total
		s.startLimit.resetAt = now.Add(24 * time.Hour)
	}
	return s.startLimit
}

// spendIdentifyLocked counts one IDENTIFY against the budget, as Discord does, whatever
// its answer.
func (s *Server) spendIdentifyLocked() {
	s.startLimitLocked()
	s.startLimit.remaining = max(s.startLimit.remaining-1, 0)
}

// SetSessionStartLimit sets the IDENTIFY budget GET /gateway/bot reports: remaining of
// Discord's 1,000 a day, renewed after resetAfter. Each IDENTIFY spends one.
func (s *Server) SetSessionStartLimit(remaining int, resetAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLimit = startLimit{total: DefaultSessionStartTotal, remaining: remaining, resetAt: s.now().Add(resetAfter)}
}

// SessionStartRemaining returns how many IDENTIFYs the budget has left.
func (s *Server) SessionStartRemaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLimitLocked().remaining
}

// SetInvalidSessions makes the gateway answer every IDENTIFY and RESUME with op 9
// INVALID_SESSION (d false), as Discord does when it will not start or resume a session
// (an IDENTIFY over its rate, an outage), until it is turned off; the connection stays
// open for the client to IDENTIFY again. Such handshakes are recorded with Invalidated.
func (s *Server) SetInvalidSessions(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invalidating = on
	s.notifyLocked()
}

// SetReplayGap makes each RESUME's replay leave out the dispatches leaveOut accepts (nil:
// none), so the sequence numbers the client sees jump, as when Discord's replay buffer has
// lost events. What is left out stays in the channels' history. EveryNth(3) leaves out
// every third.
func (s *Server) SetReplayGap(leaveOut func(Dispatch) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replayGap = leaveOut
}

// EveryNth returns a SetReplayGap filter that leaves out every n-th dispatch it is asked
// about.
func EveryNth(n int) func(Dispatch) bool {
	var mu sync.Mutex
	i := 0
	return func(Dispatch) bool {
		mu.Lock()
		defer mu.Unlock()
		i++
		return n > 0 && i%n == 0
	}
}

// invalidateLocked answers a handshake with op 9 while SetInvalidSessions is on; it reports
// whether it did, and unlocks s.mu when it did.
func (s *Server) invalidateLocked(c *conn, h Handshake) (answered, ok bool) {
	if !s.invalidating {
		return false, false
	}
	h.Invalidated = true
	c.awaitIdentify, c.identified = true, true
	s.handshakes = append(s.handshakes, h)
	s.notifyLocked()
	s.mu.Unlock()
	return true, c.write(encodeFrame(9, false, 0, "")) == nil
}
