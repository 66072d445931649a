package slack

import (
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

// handler is the HTTP-mode endpoint. Every request is verified against the
// signing secret before its body is parsed, and acknowledged before any work.
// ctx is the adapter's run context, for the work that follows the ack.
func (a *Adapter) handler(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+EventsPath, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read request", http.StatusBadRequest)
			return
		}
		if err := verifySignature(r.Header, body, a.cfg.SigningSecret.Value(), a.now()); err != nil {
			a.log.Info("request refused", zap.String("reason", err.Error()), zap.String("remote", r.RemoteAddr))
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		req, err := decodeRequest(r.Header.Get("Content-Type"), body)
		if err != nil {
			a.log.Info("undecodable request", zap.Error(err))
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		a.touch()
		work := func() {}
		switch req.kind {
		case kindChallenge:
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, req.challenge)
			return
		case kindEvent:
			retry, _ := strconv.Atoi(r.Header.Get("X-Slack-Retry-Num"))
			if retry > 0 {
				a.log.Debug("event redelivered", zap.Int("retry", retry), zap.String("reason", r.Header.Get("X-Slack-Retry-Reason")))
			}
			work = func() { a.onEventsAPI(ctx, req.event, retry) }
		case kindCommandRequest:
			immediate, cmdWork := a.onCommand(ctx, req.command)
			if immediate != nil {
				writeJSON(w, immediate)
				return
			}
			work = cmdWork
		case kindInteraction:
			work = func() { a.onInteraction(ctx, req.action) }
		}
		// The empty 200 is the ack; flush it before the work is queued.
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		work()
	})
	return mux
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
		return fmt.Errorf("slack: listen on slack.listen %q: %w", a.cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           a.handler(ctx),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
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
	wg.Go(func() { serveErr <- srv.Serve(ln) })
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("slack: serve %s: %w", addr, err)
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		_ = srv.Close()
	}
	return nil
}
