package slack

import (
	"context"
	"encoding/json"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/zap"
)

// onSocketEvent handles one event of the socketmode client. Envelopes are
// acknowledged before anything else happens; the work they ask for is queued
// and runs after the ack.
func (a *Adapter) onSocketEvent(ctx context.Context, sm *socketmode.Client, evt socketmode.Event) {
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
				a.ack(ctx, sm, env.EnvelopeID, nil)
			}
			a.log.Debug("unhandled socket message", zap.String("type", env.Type), zap.Error(e.Cause))
		}
	case socketmode.EventTypeEventsAPI:
		a.touch()
		a.ackRequest(ctx, sm, evt.Request, nil)
		if ev, ok := evt.Data.(slackevents.EventsAPIEvent); ok {
			retry := 0
			if evt.Request != nil {
				retry = evt.Request.RetryAttempt
			}
			a.onEventsAPI(ctx, ev, retry)
		}
	case socketmode.EventTypeSlashCommand:
		a.touch()
		cmd, ok := evt.Data.(slackgo.SlashCommand)
		if !ok {
			a.ackRequest(ctx, sm, evt.Request, nil)
			return
		}
		immediate, work := a.onCommand(ctx, cmd)
		a.ackRequest(ctx, sm, evt.Request, immediate)
		work()
	case socketmode.EventTypeInteractive:
		a.touch()
		a.ackRequest(ctx, sm, evt.Request, nil)
		if cb, ok := evt.Data.(slackgo.InteractionCallback); ok {
			a.onInteraction(ctx, cb)
		}
	default:
		a.ackRequest(ctx, sm, evt.Request, nil)
	}
}

func (a *Adapter) ackRequest(ctx context.Context, sm *socketmode.Client, req *socketmode.Request, payload any) {
	if req == nil || req.EnvelopeID == "" {
		return
	}
	a.ack(ctx, sm, req.EnvelopeID, payload)
}

func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, envelopeID string, payload any) {
	if err := sm.AckCtx(ctx, envelopeID, payload); err != nil && ctx.Err() == nil {
		a.log.Warn("ack failed", zap.String("envelope", envelopeID), zap.Error(err))
	}
}
