package slack

import (
	"github.com/flowbridge/flowbridge/internal/netlimit"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// maxBody bounds an HTTP-mode request; Slack's payloads are far smaller.
const maxBody = 1 << 20

// request is a verified HTTP-mode request, decoded.
type request struct {
	kind      requestKind
	challenge string                     // kindChallenge
	event     slackevents.EventsAPIEvent // kindEvent
	command   slackgo.SlashCommand       // kindCommand
	action    slackgo.InteractionCallback
}

type requestKind int

const (
	kindIgnore requestKind = iota // acknowledged and dropped (ssl_check, unknown events)
	kindChallenge
	kindEvent
	kindCommandRequest
	kindInteraction
)

// decodeRequest decodes the body of a verified request: Events API JSON, a
// slash command form, or an interactivity form with a payload field.
func decodeRequest(contentType string, body []byte) (request, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return request{}, fmt.Errorf("content type %q: %w", contentType, err)
	}
	switch mt {
	case "application/json":
		var outer struct {
			Type      string `json:"type"`
			Challenge string `json:"challenge"`
		}
		if err := json.Unmarshal(body, &outer); err != nil {
			return request{}, fmt.Errorf("events body: %w", err)
		}
		switch outer.Type {
		case slackevents.URLVerification:
			return request{kind: kindChallenge, challenge: outer.Challenge}, nil
		case slackevents.CallbackEvent:
			ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
			if err != nil {
				// An inner event type slack-go does not know: acknowledged, ignored.
				return request{kind: kindIgnore}, nil
			}
			return request{kind: kindEvent, event: ev}, nil
		}
		return request{kind: kindIgnore}, nil
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return request{}, fmt.Errorf("form body: %w", err)
		}
		switch {
		case form.Has("payload"):
			var cb slackgo.InteractionCallback
			if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
				return request{}, fmt.Errorf("interaction payload: %w", err)
			}
			return request{kind: kindInteraction, action: cb}, nil
		case form.Get("ssl_check") == "1":
			return request{kind: kindIgnore}, nil
		case form.Has("command"):
			return request{kind: kindCommandRequest, command: slackgo.SlashCommand{
				Token:          form.Get("token"),
				TeamID:         form.Get("team_id"),
				TeamDomain:     form.Get("team_domain"),
				EnterpriseID:   form.Get("enterprise_id"),
				EnterpriseName: form.Get("enterprise_name"),
				ChannelID:      form.Get("channel_id"),
				ChannelName:    form.Get("channel_name"),
				UserID:         form.Get("user_id"),
				UserName:       form.Get("user_name"),
				Command:        form.Get("command"),
				Text:           form.Get("text"),
				ResponseURL:    form.Get("response_url"),
				TriggerID:      form.Get("trigger_id"),
				APIAppID:       form.Get("api_app_id"),
			}}, nil
		}
		return request{}, errors.New("form without command or payload")
	}
	return request{}, fmt.Errorf("unsupported content type %q", mt)
}

// Limits on what HTTP mode lets unauthenticated requests hold. Slack's own
// requests are a few kilobytes and arrive over a handful of connections.
const (
	// maxBodiesInFlight bounds the bytes of request bodies being read before
	// their signature is checked, across all requests; beyond it a request is
	// refused with 503, which Slack retries.
	maxBodiesInFlight = 8 << 20
	// maxConns bounds the open connections; further ones wait to be accepted.
	maxConns = 512
)

// handler is the HTTP-mode endpoint. A request's signature headers are
// checked before any of its body is read, the body is read only within the
// budget of bytes in flight, verified against the signing secret before it
// is parsed, and acknowledged once the core has recorded its event.
func (a *Adapter) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+EventsPath, a.serveEvents)
	return mux
}

func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request) {
	refuse := func(reason error, status int, label string) {
		a.core.Refused(label)
		// A flood of refusals must not become a flood of logs: the first
		// in a while at info, the rest at debug.
		level := zap.DebugLevel
		a.refusals.Do(func() { level = zap.InfoLevel })
		if ce := a.log.Check(level, "request refused"); ce != nil {
			ce.Write(zap.String("reason", reason.Error()), zap.String("remote", r.RemoteAddr))
		}
		http.Error(w, http.StatusText(status), status)
	}
	if err := checkHeaders(r.Header, a.now()); err != nil {
		refuse(err, http.StatusUnauthorized, "unsigned_request")
		return
	}
	if r.ContentLength > maxBody {
		refuse(errTooLarge, http.StatusRequestEntityTooLarge, "request_too_large")
		return
	}
	body, err := a.readBody(w, r)
	switch {
	case errors.Is(err, errNoBudget):
		w.Header().Set("Retry-After", "1")
		refuse(err, http.StatusServiceUnavailable, "request_bytes")
		return
	case errors.Is(err, errTooLarge):
		refuse(err, http.StatusRequestEntityTooLarge, "request_too_large")
		return
	case err != nil:
		refuse(err, http.StatusBadRequest, "unreadable_request")
		return
	}
	if err := verifySignature(r.Header, body, *a.secret.Load(), a.now()); err != nil {
		refuse(err, http.StatusUnauthorized, "unsigned_request")
		return
	}
	req, err := decodeRequest(r.Header.Get("Content-Type"), body)
	if err != nil {
		a.log.Info("undecodable request", zap.Error(err))
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	a.touch()
	var rec *bridge.Receipt
	switch req.kind {
	case kindChallenge:
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, req.challenge)
		return
	case kindEvent:
		retry, _ := strconv.Atoi(r.Header.Get("X-Slack-Retry-Num"))
		rec = a.receiveEventsAPI(req.event, retry)
	case kindCommandRequest:
		var immediate any
		rec, immediate = a.receiveCommand(r.Context(), req.command)
		if immediate != nil {
			writeJSON(w, immediate)
			return
		}
	case kindInteraction:
		var answer any
		rec, answer = a.receiveInteractive(r.Context(), req.action)
		if answer != nil {
			writeJSON(w, answer)
			return
		}
	}
	// The empty 200 is the ack, sent once the event is recorded (or known,
	// or refused with its user told). An event the store could not record
	// gets an error status instead, so that Slack sends it again.
	if rec != nil {
		if err := rec.Wait(r.Context()); errors.Is(err, bridge.ErrNotSaved) {
			a.log.Warn("event not recorded; Slack is asked to retry it", zap.Error(err))
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		} else if err != nil {
			a.log.Debug("event not taken", zap.Error(err))
		}
	}
	w.WriteHeader(http.StatusOK)
}

var (
	errTooLarge = errors.New("body larger than 1 MiB")
	errNoBudget = errors.New("too many request bytes in flight")
)

// readBody reads the request's body within the budget of bytes in flight:
// its Content-Length, or the most a body may have when it sends none.
func (a *Adapter) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n < 0 {
		n = maxBody
	}
	if !a.bodies.take(n) {
		return nil, errNoBudget
	}
	defer a.bodies.give(n)
	if r.ContentLength >= 0 {
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, errTooLarge
	}
	return body, err
}

// byteBudget is a semaphore on bytes: what requests may hold at once.
type byteBudget struct {
	limit int64

	mu   sync.Mutex
	used int64
	peak int64 // the most ever held at once, for tests
}

func newByteBudget(limit int64) *byteBudget { return &byteBudget{limit: limit} }

// take reserves n bytes, or reports false without waiting when they would
// exceed the limit.
func (b *byteBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// runHTTP serves the HTTP-mode endpoint until ctx is done.
func (a *Adapter) runHTTP(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on slack.listen %q: %w", a.cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           a.handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          zap.NewStdLog(a.log.Named("http")),
	}
	addr := ln.Addr().String()
	a.addr.Store(&addr)
	defer a.addr.Store(nil)
	a.log.Info("listening", zap.String("addr", addr), zap.String("path", EventsPath))
	a.markReady()

	var wg sync.WaitGroup
	defer wg.Wait()
	serveErr := make(chan error, 1)
	wg.Go(func() { serveErr <- srv.Serve(netlimit.Listen(ln, a.maxConns)) })
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	// By now the core has stopped; a request still being read is answered
	// within this second or cut (Slack retries it), and an idle keep-alive
	// connection, which Shutdown would otherwise wait on, does not hold the
	// process past its grace.
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		_ = srv.Close()
	}
	return nil
}
