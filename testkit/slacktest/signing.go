package slacktest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Sign returns Slack's v0 request signature: "v0=" + hex(HMAC-SHA256(secret,
// "v0:{unix ts}:{body}")).
func Sign(secret string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:", ts.Unix())
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// SignRequest sets X-Slack-Request-Timestamp and X-Slack-Signature on req
// for body signed with secret at ts, as Slack does for HTTP-mode requests.
func SignRequest(req *http.Request, body []byte, secret string, ts time.Time) {
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("X-Slack-Signature", Sign(secret, ts, body))
}

// SetRetry sets the headers Slack adds when it retries an Events API
// delivery (num 1..3; reason e.g. "http_timeout").
func SetRetry(req *http.Request, num int, reason string) {
	req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(num))
	req.Header.Set("X-Slack-Retry-Reason", reason)
}

// Content types of Slack's HTTP-mode requests.
const (
	ContentTypeForm = "application/x-www-form-urlencoded"
	ContentTypeJSON = "application/json"
)

// NewSignedRequest builds a POST of body to target with Slack's headers
// (Content-Type, User-Agent) signed with secret at ts; sign with a stale ts
// or another secret to test rejection.
func NewSignedRequest(ctx context.Context, target, contentType string, body []byte, secret string, ts time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("signed request: %w", err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	SignRequest(req, body, secret, ts)
	return req, nil
}

// PostEventRetry POSTs an Events API body to target again, as Slack's retry
// num (1 to MaxRetries) of a delivery the app did not answer with a 2xx within
// 3 s: JSON, signed with secret at ts, with X-Slack-Retry-Num and
// X-Slack-Retry-Reason (http_timeout, http_error, connection_failed,
// too_many_redirects, ssl_error or unknown_error). Sign with the first
// delivery's ts to test replay windows. The caller closes the response body.
func PostEventRetry(ctx context.Context, client *http.Client, target string, body []byte, secret string, ts time.Time, num int, reason string) (*http.Response, error) {
	if num < 1 || num > MaxRetries {
		return nil, fmt.Errorf("post event retry %d: Slack retries 1 to %d times", num, MaxRetries)
	}
	req, err := NewSignedRequest(ctx, target, ContentTypeJSON, body, secret, ts)
	if err != nil {
		return nil, err
	}
	SetRetry(req, num, reason)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post event retry %d: %w", num, err)
	}
	return resp, nil
}

// SlashCommandBody returns the form body Slack POSTs for a slash command in
// HTTP mode, with c completed as SendSlashCommand would (a response_url on
// the fake, a trigger ID).
func (s *Server) SlashCommandBody(c SlashCommand) ([]byte, Delivery) {
	s.mu.Lock()
	s.fillCommandLocked(&c)
	fields := c.fields(s.opts.AppID)
	s.mu.Unlock()
	form := url.Values{}
	for k, v := range fields {
		form.Set(k, v)
	}
	return []byte(form.Encode()), Delivery{ResponseURL: c.ResponseURL, TriggerID: c.TriggerID}
}

// BlockActionBody returns the form body ("payload=" + JSON) Slack POSTs to
// the interactivity URL for a button press.
func (s *Server) BlockActionBody(a BlockAction) ([]byte, Delivery, error) {
	s.mu.Lock()
	p := s.blockActionPayloadLocked(&a)
	s.mu.Unlock()
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, Delivery{}, fmt.Errorf("block action body: %w", err)
	}
	return []byte(url.Values{"payload": {string(raw)}}.Encode()), Delivery{ResponseURL: a.ResponseURL, TriggerID: a.TriggerID}, nil
}

// MessageEventBody returns the event_callback JSON Slack POSTs for a
// "message" event in HTTP mode.
func (s *Server) MessageEventBody(e MessageEvent) ([]byte, Delivery, error) {
	return s.eventBody("message", e)
}

// AppMentionBody returns the event_callback JSON for an "app_mention" event.
func (s *Server) AppMentionBody(e MessageEvent) ([]byte, Delivery, error) {
	return s.eventBody("app_mention", e)
}

func (s *Server) eventBody(typ string, e MessageEvent) ([]byte, Delivery, error) {
	s.mu.Lock()
	p := s.eventCallbackLocked(typ, &e)
	s.mu.Unlock()
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, Delivery{}, fmt.Errorf("%s body: %w", typ, err)
	}
	return raw, Delivery{EventID: e.EventID, TS: e.TS}, nil
}

// URLVerificationBody returns the JSON Slack POSTs when the Events API
// request URL is configured; the app must echo challenge.
func URLVerificationBody(challenge string) []byte {
	raw, _ := json.Marshal(map[string]string{"token": VerificationToken, "challenge": challenge, "type": "url_verification"})
	return raw
}
