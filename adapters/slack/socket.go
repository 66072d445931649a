package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// maxPendingAcks bounds the envelopes waiting for the store before their
// acknowledgement. The loop reading the socket waits only when it is full,
// which takes the store stalling while thousands of events arrive.
const maxPendingAcks = 4096

// MaxFrameBytes bounds one Socket Mode message (all its frames). Slack's
// envelopes are a few kilobytes, tens with blocks. gorilla/websocket refuses a
// frame whose header announces more before reading any of its payload, so a
// message over it costs no memory; the connection is closed and opened again,
// and the refusal counted (frame_too_large).
const MaxFrameBytes = 1 << 20

// runSocket serves Socket Mode until ctx is done.
func (a *Adapter) runSocket(ctx context.Context) error {
	sm := socketmode.New(a.api, socketmode.OptionDialer(a.dialer()), socketmode.OptionReadLimit(MaxFrameBytes))
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	defer a.connected.Store(false)

	acks := &acker{sm: sm, log: a.log, queue: make(chan pendingAck, maxPendingAcks)}
	wg.Go(func() { acks.run(ctx) })
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- sm.RunContext(ctx) })
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-runErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("socket mode with slack.app_token: %w", err)
		case evt := <-sm.Events:
			a.onSocketEvent(ctx, acks, evt)
		}
	}
}

// onSocketEvent handles one event of the socketmode client, in the order
// they arrive. Envelopes go to the core at once and are acknowledged by the
// acker once the core has recorded them; nothing here waits for the store.
func (a *Adapter) onSocketEvent(ctx context.Context, acks *acker, evt socketmode.Event) {
	switch evt.Type {
	case socketmode.EventTypeConnecting:
		a.connected.Store(false)
		a.log.Debug("socket mode connecting")
	case socketmode.EventTypeConnectionError:
		a.connected.Store(false)
		if e, ok := evt.Data.(*slackgo.ConnectionErrorEvent); ok {
			a.log.Warn("socket mode connection failed", zap.Error(e.ErrorObj), zap.Duration("backoff", e.Backoff))
		}
	case socketmode.EventTypeConnected:
		a.log.Debug("socket mode connected")
	case socketmode.EventTypeHello:
		a.touch()
		a.connected.Store(true)
		a.markReady()
		a.log.Info("socket mode ready")
	case socketmode.EventTypeInvalidAuth:
		a.connected.Store(false)
		a.log.Error("socket mode refused the app token (slack.app_token)")
	case socketmode.EventTypeIncomingError:
		if e, ok := evt.Data.(*slackgo.IncomingEventError); ok {
			if errors.Is(e.ErrorObj, websocket.ErrReadLimit) {
				a.core.Refused("frame_too_large")
				a.log.Warn("socket message over the size limit refused; reconnecting", zap.Int("limit_bytes", MaxFrameBytes))
				return
			}
			a.log.Debug("socket read failed; reconnecting", zap.Error(e.ErrorObj))
		}
	case socketmode.EventTypeErrorWriteFailed:
		if e, ok := evt.Data.(*socketmode.ErrorWriteFailed); ok {
			a.log.Warn("socket write failed", zap.Error(e.Cause))
		}
	case socketmode.EventTypeErrorBadMessage:
		// Unknown envelope or inner event types land here; Slack still wants
		// them acknowledged or it retries them.
		if e, ok := evt.Data.(*socketmode.ErrorBadMessage); ok {
			var env struct {
				EnvelopeID string `json:"envelope_id"`
				Type       string `json:"type"`
			}
			if json.Unmarshal(e.Message, &env) == nil && env.EnvelopeID != "" {
				acks.add(ctx, pendingAck{envelopeID: env.EnvelopeID})
			}
			a.log.Debug("unhandled socket message", zap.String("type", truncate.Bytes(env.Type, 64)), zap.Error(e.Cause))
		}
	case socketmode.EventTypeEventsAPI:
		a.touch()
		var rec *bridge.Receipt
		if ev, ok := evt.Data.(slackevents.EventsAPIEvent); ok {
			retry := 0
			if evt.Request != nil {
				retry = evt.Request.RetryAttempt
			}
			rec = a.receiveEventsAPI(ev, retry)
		}
		acks.request(ctx, evt.Request, rec, nil)
	case socketmode.EventTypeSlashCommand:
		a.touch()
		var (
			rec       *bridge.Receipt
			immediate any
		)
		if cmd, ok := evt.Data.(slackgo.SlashCommand); ok {
			rec, immediate = a.receiveCommand(ctx, cmd)
		}
		acks.request(ctx, evt.Request, rec, immediate)
	case socketmode.EventTypeInteractive:
		a.touch()
		var (
			rec     *bridge.Receipt
			payload any
		)
		if cb, ok := evt.Data.(slackgo.InteractionCallback); ok {
			rec, payload = a.receiveInteractive(ctx, cb)
		}
		acks.request(ctx, evt.Request, rec, payload)
	default:
		acks.request(ctx, evt.Request, nil, nil)
	}
}

// pendingAck is an envelope to acknowledge once its receipt (if any) settles.
type pendingAck struct {
	envelopeID string
	rec        *bridge.Receipt
	payload    any
}

// acker acknowledges envelopes in arrival order on one goroutine, each once
// the core has recorded its event: the events recorded in one store commit
// are acknowledged together, and the loop reading the socket goes on
// meanwhile.
type acker struct {
	sm    *socketmode.Client
	log   *zap.Logger
	queue chan pendingAck
}

// request queues the acknowledgement of a socket request.
func (k *acker) request(ctx context.Context, req *socketmode.Request, rec *bridge.Receipt, payload any) {
	if req == nil || req.EnvelopeID == "" {
		return
	}
	k.add(ctx, pendingAck{envelopeID: req.EnvelopeID, rec: rec, payload: payload})
}

func (k *acker) add(ctx context.Context, p pendingAck) {
	select {
	case k.queue <- p:
	case <-ctx.Done():
	}
}

// run sends the queued acknowledgements until ctx is done. The envelope is
// acknowledged once the event is recorded, known already, or refused with
// its user told; one the store could not record is not, so that Slack sends
// it again. Envelopes left when ctx ends are not acknowledged either; the
// core knows those it recorded.
func (k *acker) run(ctx context.Context) {
	for {
		var p pendingAck
		select {
		case p = <-k.queue:
		case <-ctx.Done():
			return
		}
		if p.rec != nil {
			err := p.rec.Wait(ctx)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, bridge.ErrNotSaved) {
				k.log.Warn("event not recorded; not acknowledged, so Slack sends it again", zap.String("envelope", p.envelopeID), zap.Error(err))
				continue
			}
			if err != nil {
				k.log.Debug("event not taken", zap.String("envelope", p.envelopeID), zap.Error(err))
			}
		}
		if err := k.sm.AckCtx(ctx, p.envelopeID, p.payload); err != nil && ctx.Err() == nil {
			k.log.Warn("ack failed", zap.String("envelope", p.envelopeID), zap.Error(err))
		}
	}
}

// dialer is slack-go's default websocket dialer, with connections that
// record when anything (an envelope or a ping) was last read, for Ready.
func (a *Adapter) dialer() *websocket.Dialer {
	nd := &net.Dialer{Timeout: apiTimeout, KeepAlive: 30 * time.Second}
	return &websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: 45 * time.Second,
		WriteBufferSize:  32 << 10,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &activityConn{Conn: c, touch: a.touch}, nil
		},
	}
}

type activityConn struct {
	net.Conn
	touch func()
}

func (c *activityConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}
