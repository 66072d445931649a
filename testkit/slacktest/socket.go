package slacktest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

// Socket Mode envelope types.
const (
	TypeEventsAPI     = "events_api"
	TypeSlashCommands = "slash_commands"
	TypeInteractive   = "interactive"
)

// socket is one Socket Mode WebSocket connection.
type socket struct {
	id   int
	ws   *websocket.Conn
	out  *atomic.Int64 // bytes written to the connection; nil if it was not accepted by countingListener
	wmu  sync.Mutex    // gorilla allows one concurrent writer
	done chan struct{}
	once sync.Once

	// Guarded by Server.mu.
	ready   bool // hello sent
	retired bool // told to disconnect, dropped or gone: no more deliveries
}

func (c *socket) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.ws.Close()
	})
}

// errPartlySent is a failed write of which some bytes reached the app: it
// may have read the message, or its header, before the connection went.
var errPartlySent = errors.New("slacktest: message partly written before the socket failed")

func (c *socket) write(msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var before int64
	if c.out != nil {
		before = c.out.Load()
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	err := c.ws.WriteMessage(websocket.TextMessage, msg)
	if err != nil && c.out != nil && c.out.Load() > before {
		return fmt.Errorf("%w: %w", errPartlySent, err)
	}
	return err
}

// countingListener counts the bytes written to each connection it accepts,
// so that a socket can tell a write that failed before any byte left from
// one the app may have read part of.
type countingListener struct{ net.Listener }

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c}, nil
}

type countingConn struct {
	net.Conn
	out atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

// Ack is an acknowledgement the app sent over the socket.
type Ack struct {
	Seq        uint64
	EnvelopeID string
	Type       string          // the acked envelope's type; "" when the envelope is unknown
	Payload    json.RawMessage // nil when the ack carried none
	Conn       int             // the socket it arrived on (1 for the first connection)
	At         time.Time       // Options.Now at arrival
	Delay      time.Duration   // wall time since the envelope was written to the socket
}

// Frame is a socket message from the app that was not an ack.
type Frame struct {
	Seq  uint64
	Conn int
	Data []byte
}

// Envelope is a raw Socket Mode envelope to deliver.
type Envelope struct {
	Type                   string // events_api, slash_commands, interactive, or anything
	Payload                any    // marshalled to JSON; json.RawMessage passes through
	AcceptsResponsePayload bool
	RetryAttempt           int
	RetryReason            string
}

// Delivery describes an envelope the fake delivered: what a Send helper returns, and
// what Deliveries lists.
type Delivery struct {
	EnvelopeID  string
	EventID     string // events_api
	TS          string // the message's ts for message and app_mention events
	ResponseURL string // slash commands and block actions
	TriggerID   string

	Type         string // the envelope type
	Conn         int    // the socket it was written to (1 for the first connection)
	RetryAttempt int    // 0 for a first delivery
	RetryReason  string // "timeout" for a redelivery
	Original     string // for a redelivery, the envelope ID of the first delivery
}

type envelope struct {
	Envelope
	id       string
	original string          // the first delivery's envelope ID, for a redelivery
	raw      json.RawMessage // the payload as sent
	sentAt   time.Time       // wall clock, for Ack.Delay and the ack deadline
	conn     int
	onAck    func(s *Server, a Ack) // under s.mu
	acked    bool
	event    *delivered // shared by an envelope and its redeliveries
	payload  map[string]any
}

// delivered is what the deliveries of one event share: once any is acked, Slack stops
// redelivering it.
type delivered struct{ acked bool }

func (s *Server) appsConnectionsOpen(r *http.Request) apiResult {
	ticket := uuid.NewString()
	s.tickets[ticket] = true
	return ok(map[string]any{"url": "ws://" + r.Host + "/link/?ticket=" + ticket + "&app_id=" + s.opts.AppID})
}

func (s *Server) handleSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	if s.closed || !s.tickets[ticket] {
		s.mu.Unlock()
		// Real tickets are single-use: a reconnect must call apps.connections.open again.
		http.Error(w, "invalid or used ticket", http.StatusUnauthorized)
		return
	}
	delete(s.tickets, ticket)
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &socket{ws: ws, done: make(chan struct{})}
	if cc, ok := ws.NetConn().(*countingConn); ok {
		c.out = &cc.out
	}
	defer c.close()

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if max := s.opts.MaxConnections; max > 0 && len(s.conns) >= max {
		// Slack turns an app's eleventh connection away before hello.
		s.refused++
		s.bumpLocked()
		s.mu.Unlock()
		msg, _ := json.Marshal(map[string]any{
			"type":       "disconnect",
			"reason":     "too_many_websockets",
			"debug_info": map[string]any{"host": "applink-fake-1"},
		})
		_ = c.write(msg)
		return
	}
	s.nconns++
	c.id = s.nconns
	s.conns = append(s.conns, c)
	live := 0
	for _, o := range s.conns {
		if !o.retired {
			live++
		}
	}
	s.mu.Unlock()

	hello, _ := json.Marshal(map[string]any{
		"type":            "hello",
		"num_connections": live,
		"debug_info": map[string]any{
			"host":                        "applink-fake-1",
			"build_number":                14,
			"approximate_connection_time": 18060,
		},
		"connection_info": map[string]any{"app_id": s.opts.AppID},
	})
	if err := c.write(hello); err != nil {
		s.forget(c)
		return
	}
	s.mu.Lock()
	c.ready = true
	s.bumpLocked()
	s.mu.Unlock()

	s.wg.Go(func() { s.pingLoop(c) })
	s.readLoop(c)
	s.forget(c)
}

func (s *Server) forget(c *socket) {
	c.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	c.retired = true
	s.conns = slices.DeleteFunc(s.conns, func(o *socket) bool { return o == c })
	s.bumpLocked()
}

// pingLoop sends WebSocket PINGs like Slack does; slack-go treats their
// absence as a dead connection.
func (s *Server) pingLoop(c *socket) {
	if s.opts.PingInterval <= 0 {
		return
	}
	t := time.NewTicker(s.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		s.mu.Lock()
		on := s.pings
		s.mu.Unlock()
		if !on {
			continue
		}
		c.wmu.Lock()
		err := c.ws.WriteControl(websocket.PingMessage, []byte("Ping from applink-fake-1"), time.Now().Add(5*time.Second))
		c.wmu.Unlock()
		if err != nil {
			return
		}
	}
}

func (s *Server) readLoop(c *socket) {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		var res struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		s.mu.Lock()
		if json.Unmarshal(data, &res) != nil || res.EnvelopeID == "" {
			s.frames = append(s.frames, Frame{Seq: s.bumpLocked(), Conn: c.id, Data: data})
			s.mu.Unlock()
			continue
		}
		a := Ack{EnvelopeID: res.EnvelopeID, Payload: res.Payload, Conn: c.id, At: s.now()}
		if len(a.Payload) == 0 || string(a.Payload) == "null" {
			a.Payload = nil
		}
		env := s.envelopes[a.EnvelopeID]
		if env != nil {
			a.Type = env.Type
			a.Delay = time.Since(env.sentAt)
		}
		a.Seq = s.bumpLocked()
		forget := s.opts.NoRecord && env != nil && env.Type == TypeEventsAPI
		if !forget {
			s.acks = append(s.acks, a)
		}
		if env != nil && !env.acked {
			env.acked = true
			env.event.acked = true
			if env.onAck != nil {
				env.onAck(s, a)
			}
		}
		if forget {
			delete(s.envelopes, a.EnvelopeID)
		}
		s.mu.Unlock()
	}
}

// Send delivers a raw envelope on the socket Options.Delivery picks, waiting
// for the app to connect if none is live. It returns the envelope ID.
func (s *Server) Send(ctx context.Context, e Envelope) (string, error) {
	env, err := s.newEnvelope(e)
	if err != nil {
		return "", err
	}
	return env.id, s.deliver(ctx, env)
}

func (s *Server) newEnvelope(e Envelope) (*envelope, error) {
	raw, err := json.Marshal(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("marshal payload: %w", err)
	}
	return &envelope{Envelope: e, id: uuid.NewString(), raw: raw, event: &delivered{}}, nil
}

func (s *Server) deliver(ctx context.Context, env *envelope) error {
	frame := map[string]any{
		"envelope_id":              env.id,
		"payload":                  env.raw,
		"type":                     env.Type,
		"accepts_response_payload": env.AcceptsResponsePayload,
	}
	if env.Type == TypeEventsAPI {
		frame["retry_attempt"] = env.RetryAttempt
		frame["retry_reason"] = env.RetryReason
	}
	msg, err := json.Marshal(frame)
	if err != nil {
		return fmt.Errorf("marshal envelope: %w", err)
	}
	for {
		var c *socket
		err := s.waitFor(ctx, "socket connection", func() bool {
			c = s.pickLocked()
			return c != nil
		})
		if err != nil {
			return fmt.Errorf("deliver %s %s: %w", env.Type, env.id, err)
		}
		// Registered before writing, so an ack racing the write finds it.
		s.mu.Lock()
		env.sentAt = time.Now()
		env.conn = c.id
		s.envelopes[env.id] = env
		s.mu.Unlock()
		err = c.write(msg)
		if err != nil {
			s.mu.Lock()
			c.retired = true
			s.bumpLocked()
			s.mu.Unlock()
		}
		// A write that failed before any byte left is tried on another
		// socket. One that failed part way is delivered as far as Slack
		// knows: the app may have read it (a frame over its read limit is
		// refused on its header, and the socket closed while the rest is
		// written), and writing it again would hand the app the same
		// envelope twice; Slack redelivers an unacked envelope after its
		// timeout, as Options.Redeliver does.
		if err == nil || errors.Is(err, errPartlySent) {
			s.mu.Lock()
			s.deliveredLocked(env)
			s.mu.Unlock()
			return nil
		}
	}
}

// pickLocked returns the live socket the next envelope goes to, or nil.
func (s *Server) pickLocked() *socket {
	var live []*socket
	for _, c := range s.conns {
		if c.ready && !c.retired {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return nil
	}
	if s.opts.Delivery == DeliverNewest {
		return live[len(live)-1]
	}
	next := live[0]
	for _, c := range live {
		if c.id > s.lastConn {
			next = c
			break
		}
	}
	s.lastConn = next.id
	return next
}

// deliveredLocked records a written envelope and, with Options.Redeliver, schedules the
// check of its ack.
func (s *Server) deliveredLocked(env *envelope) {
	if !s.opts.NoRecord {
		s.deliveries = append(s.deliveries, deliveryOf(env))
	}
	s.bumpLocked()
	if s.opts.Redeliver && env.Type == TypeEventsAPI && env.RetryAttempt < MaxRetries && !env.event.acked {
		s.pending = append(s.pending, env)
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// redeliverLoop redelivers, as Slack does, each pending envelope left unacknowledged
// for Options.AckTimeout.
func (s *Server) redeliverLoop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		var due []*envelope
		var next time.Time
		keep := s.pending[:0]
		for _, env := range s.pending {
			deadline := env.sentAt.Add(s.opts.AckTimeout)
			switch {
			case env.event.acked:
			case !now.Before(deadline):
				due = append(due, env)
			default:
				keep = append(keep, env)
				if next.IsZero() || deadline.Before(next) {
					next = deadline
				}
			}
		}
		clear(s.pending[len(keep):])
		s.pending = keep
		s.mu.Unlock()
		for _, env := range due {
			if _, err := s.redeliver(s.stopped, env); err != nil && s.stopped.Err() != nil {
				return
			}
		}
		if len(due) > 0 {
			continue
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = time.Until(next)
		}
		timer.Reset(wait)
		select {
		case <-s.stopped.Done():
			return
		case <-s.kick:
		case <-timer.C:
		}
	}
}

// Deliveries returns every envelope delivered so far, redeliveries included,
// in order (none with Options.NoRecord).
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deliveries)
}

// WaitDelivery waits for the first delivery, past or future, that match
// accepts: e.g. the fake's redelivery of an envelope the app left unacknowledged.
func (s *Server) WaitDelivery(ctx context.Context, match func(Delivery) bool) (Delivery, error) {
	var found Delivery
	err := s.waitFor(ctx, "delivery", func() bool {
		for _, d := range s.deliveries {
			if match(d) {
				found = d
				return true
			}
		}
		return false
	})
	return found, err
}

// RefusedConnections returns how many sockets were turned away with
// too_many_websockets because Options.MaxConnections were open.
func (s *Server) RefusedConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Acks returns every ack received so far, in order.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acks)
}

// Frames returns every socket message that was not an ack.
func (s *Server) Frames() []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.frames)
}

// WaitAck waits for the first ack of envelopeID.
func (s *Server) WaitAck(ctx context.Context, envelopeID string) (Ack, error) {
	var found Ack
	err := s.waitFor(ctx, "ack of "+envelopeID, func() bool {
		for _, a := range s.acks {
			if a.EnvelopeID == envelopeID {
				found = a
				return true
			}
		}
		return false
	})
	return found, err
}

// Acked reports whether envelopeID has been acked.
func (s *Server) Acked(envelopeID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	env := s.envelopes[envelopeID]
	return env != nil && env.acked
}

// Redeliver sends an envelope again as Slack does when it saw no ack in
// time: a new envelope ID, the same payload (so the same event_id),
// retry_attempt one higher and retry_reason "timeout".
func (s *Server) Redeliver(ctx context.Context, envelopeID string) (Delivery, error) {
	s.mu.Lock()
	old := s.envelopes[envelopeID]
	s.mu.Unlock()
	if old == nil {
		return Delivery{}, fmt.Errorf("redeliver %s: unknown envelope", envelopeID)
	}
	return s.redeliver(ctx, old)
}

// redeliver sends old's payload again in a new envelope, one retry later.
func (s *Server) redeliver(ctx context.Context, old *envelope) (Delivery, error) {
	e := old.Envelope
	e.Payload = old.raw
	e.RetryAttempt++
	e.RetryReason = "timeout"
	env, err := s.newEnvelope(e)
	if err != nil {
		return Delivery{}, err
	}
	env.onAck = old.onAck
	env.payload = old.payload
	env.event = old.event
	env.original = cmp.Or(old.original, old.id)
	if err := s.deliver(ctx, env); err != nil {
		return Delivery{}, err
	}
	return deliveryOf(env), nil
}

func deliveryOf(env *envelope) Delivery {
	d := Delivery{EnvelopeID: env.id, Type: env.Type, Conn: env.conn, RetryAttempt: env.RetryAttempt, RetryReason: env.RetryReason, Original: env.original}
	if env.payload == nil {
		return d
	}
	d.EventID, _ = env.payload["event_id"].(string)
	d.ResponseURL, _ = env.payload["response_url"].(string)
	d.TriggerID, _ = env.payload["trigger_id"].(string)
	if ev, ok := env.payload["event"].(map[string]any); ok {
		d.TS, _ = ev["ts"].(string)
		if m, ok := ev["message"].(map[string]any); ok {
			d.TS, _ = m["ts"].(string)
		}
		if del, ok := ev["deleted_ts"].(string); ok {
			d.TS = del
		}
	}
	return d
}

// newestLiveLocked returns the socket deliveries currently go to.
func (s *Server) newestLiveLocked() *socket {
	for _, c := range slices.Backward(s.conns) {
		if c.ready && !c.retired {
			return c
		}
	}
	return nil
}

// ErrNoConnection is returned by Disconnect and DropConnection when no
// socket is connected.
var ErrNoConnection = errors.New("slacktest: no socket connected")

// Disconnect sends {"type":"disconnect","reason":reason} on the newest live
// socket, as Slack does before rotating it ("refresh_requested") or shortly
// before closing it ("warning"). Later deliveries go to the other live
// sockets, or wait for the next one; the app is expected to close this one
// and reconnect.
func (s *Server) Disconnect(reason string) error {
	s.mu.Lock()
	c := s.newestLiveLocked()
	if c != nil {
		c.retired = true
		s.bumpLocked()
	}
	s.mu.Unlock()
	if c == nil {
		return ErrNoConnection
	}
	msg, _ := json.Marshal(map[string]any{
		"type":       "disconnect",
		"reason":     reason,
		"debug_info": map[string]any{"host": "applink-fake-1"},
	})
	if err := c.write(msg); err != nil {
		return fmt.Errorf("disconnect: %w", err)
	}
	return nil
}

// DropConnection closes the newest live socket abruptly, with no close
// frame, like a network failure.
func (s *Server) DropConnection() error {
	s.mu.Lock()
	c := s.newestLiveLocked()
	if c != nil {
		c.retired = true
		s.bumpLocked()
	}
	s.mu.Unlock()
	if c == nil {
		return ErrNoConnection
	}
	c.close()
	return nil
}

// LiveConnectionIDs returns the IDs (as in Ack.Conn and Delivery.Conn) of the
// sockets that are open and take deliveries, oldest first: with one socket
// per replica, the replicas a fault can be aimed at.
func (s *Server) LiveConnectionIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int
	for _, c := range s.conns {
		if c.ready && !c.retired {
			ids = append(ids, c.id)
		}
	}
	return ids
}

// DropConnectionID closes socket id abruptly, with no close frame, like a
// network failure on one replica's connection while its process lives. It
// returns ErrNoConnection when that socket is not live. Envelopes written to
// it and not acked are redelivered, with Options.Redeliver, on another socket.
func (s *Server) DropConnectionID(id int) error {
	s.mu.Lock()
	var c *socket
	for _, o := range s.conns {
		if o.id == id && o.ready && !o.retired {
			c = o
		}
	}
	if c != nil {
		c.retired = true
		s.bumpLocked()
	}
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("drop socket %d: %w", id, ErrNoConnection)
	}
	c.close()
	return nil
}

// SetPings turns the WebSocket PINGs on or off; with them off slack-go
// declares the connection dead after its ping interval and reconnects.
func (s *Server) SetPings(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pings = on
}

// Connections returns how many sockets have been accepted so far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nconns
}

// LiveConnections returns how many sockets are open and take deliveries.
func (s *Server) LiveConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		if c.ready && !c.retired {
			n++
		}
	}
	return n
}

// WaitConnections waits until n sockets in total have been accepted and
// greeted with hello, and one of them is live.
func (s *Server) WaitConnections(ctx context.Context, n int) error {
	return s.waitFor(ctx, fmt.Sprintf("%d socket connections", n), func() bool {
		return s.nconns >= n && s.newestLiveLocked() != nil
	})
}

// WaitLiveConnections waits until exactly n sockets are live (greeted with
// hello, not told to disconnect, not closed): e.g. every replica of an app connected.
func (s *Server) WaitLiveConnections(ctx context.Context, n int) error {
	return s.waitFor(ctx, fmt.Sprintf("%d live socket connections", n), func() bool {
		live := 0
		for _, c := range s.conns {
			if c.ready && !c.retired {
				live++
			}
		}
		return live == n
	})
}

// WaitSoleConnection waits until the newest socket opened is live and no
// other is. The fake learns that the app closed a socket only when its read
// of it fails, which on a busy machine can come after the app's next socket
// has been greeted; until then Send may deliver to the old socket, which
// nobody reads. A test that delivers after the app reconnected or restarted
// waits here first.
func (s *Server) WaitSoleConnection(ctx context.Context) error {
	return s.waitFor(ctx, "the newest socket alone live", func() bool {
		live := 0
		for _, c := range s.conns {
			if c.ready && !c.retired {
				live++
			}
		}
		c := s.newestLiveLocked()
		return live == 1 && c != nil && c.id == s.nconns
	})
}

// WaitDisconnected waits until no socket is live.
func (s *Server) WaitDisconnected(ctx context.Context) error {
	return s.waitFor(ctx, "no live socket", func() bool { return len(s.conns) == 0 })
}
