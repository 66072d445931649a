package slack

import (
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

const testSecret = "test-signing-secret"

// httpAdapter is an HTTP-mode adapter that is not running, for tests of its
// handler; its Web API calls go to a fake Slack.
func httpAdapter(t *testing.T, core Core) *Adapter {
	t.Helper()
	s := slacktest.NewServer(slacktest.Options{})
	t.Cleanup(s.Close)
	c := validSocket()
	c.Mode, c.AppToken, c.SigningSecret, c.APIURL = ModeHTTP, "", testSecret, s.APIURL()
	a, err := New(c, core, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	a.self.Store(&identity{userID: "UBOT", botID: "BBOT", teamID: "T1"})
	return a
}

func signedRequest(body, contentType string, ts time.Time, secret string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, EventsPath, strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	s := strconv.FormatInt(ts.Unix(), 10)
	r.Header.Set(headerTimestamp, s)
	r.Header.Set(headerSignature, "v0="+hex.EncodeToString(sign(secret, s, []byte(body))))
	return r
}

func TestHTTPHandler(t *testing.T) {
	const form = "application/x-www-form-urlencoded"
	command := url.Values{
		"command": {"/flow"}, "text": {"healthcheck host=web1"}, "team_id": {"T1"}, "channel_id": {"C1"},
		"user_id": {"U1"}, "user_name": {"alice"}, "response_url": {"http://127.0.0.1:1/response/x"},
		"trigger_id": {"1.2.abc"},
	}.Encode()
	unknown := url.Values{"command": {"/nope"}, "team_id": {"T1"}, "channel_id": {"C1"}, "user_id": {"U1"}}.Encode()
	event := `{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":{"type":"message","channel_type":"im","channel":"D1","user":"U1","text":"hi","ts":"1.1"}}`
	unknownEvent := `{"type":"event_callback","team_id":"T1","event_id":"Ev2","event":{"type":"brand_new_event","channel":"C1"}}`
	action := url.Values{"payload": {`{"type":"block_actions","team":{"id":"T1"},"user":{"id":"U1","name":"alice"},"container":{"type":"message","channel_id":"C1","message_ts":"3.3","is_ephemeral":true},"response_url":"http://127.0.0.1:1/response/y","trigger_id":"1.3.abc","actions":[{"action_id":"share","block_id":"b1","value":"r1","type":"button"}]}`}}.Encode()
	now := time.Now()

	tests := []struct {
		name       string
		req        *http.Request
		wantStatus int
		wantBody   string
		wantEvent  *bridge.Event // nil: the core must see nothing
		wantKey    string
	}{
		{name: "url verification", req: signedRequest(`{"type":"url_verification","challenge":"3eZbrw1a","token":"x"}`, "application/json", now, testSecret),
			wantStatus: 200, wantBody: "3eZbrw1a"},
		{name: "signed slash command", req: signedRequest(command, form, now, testSecret), wantStatus: 200,
			wantEvent: &bridge.Event{Kind: bridge.KindCommand, Command: "flow", Text: "healthcheck host=web1", Conversation: "slack/T1/C1", User: bridge.User{ID: "U1", Name: "alice"}},
			wantKey:   "slack/cmd/1.2.abc"},
		{name: "unknown command", req: signedRequest(unknown, form, now, testSecret), wantStatus: 200, wantBody: `"response_type":"ephemeral"`},
		{name: "signed event", req: signedRequest(event, "application/json", now, testSecret), wantStatus: 200,
			wantEvent: &bridge.Event{Kind: bridge.KindMessage, Text: "hi", Conversation: "slack/T1/D1", User: bridge.User{ID: "U1", Name: "alice"}},
			wantKey:   "slack/msg/D1/1.1"},
		{name: "unknown event type acked", req: signedRequest(unknownEvent, "application/json", now, testSecret), wantStatus: 200},
		{name: "button", req: signedRequest(action, form, now, testSecret), wantStatus: 200,
			wantEvent: &bridge.Event{Kind: bridge.KindAction, Action: bridge.Action{ID: "share", Value: "r1", Message: "C1/3.3"}, Conversation: "slack/T1/C1", User: bridge.User{ID: "U1", Name: "alice"}},
			wantKey:   "slack/act/1.3.abc"},
		{name: "ssl check", req: signedRequest("ssl_check=1&token=x", form, now, testSecret), wantStatus: 200},
		{name: "bad signature", req: signedRequest(command, form, now, "wrong"), wantStatus: 401},
		{name: "stale timestamp", req: signedRequest(command, form, now.Add(-6*time.Minute), testSecret), wantStatus: 401},
		{name: "missing headers", req: func() *http.Request {
			r := signedRequest(command, form, now, testSecret)
			r.Header.Del(headerSignature)
			return r
		}(), wantStatus: 401},
		{name: "too large", req: signedRequest(strings.Repeat("a", maxBody+1), form, now, testSecret), wantStatus: 413},
		{name: "not json", req: signedRequest("{", "application/json", now, testSecret), wantStatus: 400},
		{name: "wrong method", req: httptest.NewRequest(http.MethodGet, EventsPath, nil), wantStatus: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core := newRecordingCore(t)
			a := httpAdapter(t, core)
			a.users.names["U1"] = cachedName{name: "alice", at: time.Now()}
			w := httptest.NewRecorder()
			a.handler().ServeHTTP(w, tt.req)
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d (body %q)", w.Code, tt.wantStatus, w.Body)
			}
			if !strings.Contains(w.Body.String(), tt.wantBody) {
				t.Errorf("body = %q, want it to contain %q", w.Body, tt.wantBody)
			}
			// The handler answers once the core has the event: nothing is pending.
			events := core.recorded()
			if tt.wantEvent == nil {
				if len(events) != 0 {
					t.Fatalf("core got %+v, want nothing", events)
				}
				return
			}
			if len(events) != 1 {
				t.Fatalf("core got %d events, want 1", len(events))
			}
			got, want := events[0], *tt.wantEvent
			if !a.Prepare(t.Context(), &got) {
				t.Fatal("Prepare dropped the event")
			}
			if reply, err := a.Responder(got); err != nil || reply == nil {
				t.Fatalf("Responder = %v, %v", reply, err)
			}
			if got.Kind != want.Kind || got.Command != want.Command || got.Text != want.Text ||
				got.Conversation != want.Conversation || got.Action != want.Action || got.Key != tt.wantKey ||
				got.User.ID != want.User.ID || got.User.Name != want.User.Name || got.Platform != "slack" {
				t.Errorf("core got %+v, want %+v with key %q", got, want, tt.wantKey)
			}
		})
	}
}

// TestHTTPSigningSecretRotates: after SetSigningSecret (a reload), requests
// signed with the new secret pass and those signed with the old one do not.
func TestHTTPSigningSecretRotates(t *testing.T) {
	t.Parallel()
	a := httpAdapter(t, idleCore{t})
	challenge := `{"type":"url_verification","challenge":"c1"}`
	status := func(secret string) int {
		w := httptest.NewRecorder()
		a.handler().ServeHTTP(w, signedRequest(challenge, "application/json", time.Now(), secret))
		return w.Code
	}
	if got := status(testSecret); got != http.StatusOK {
		t.Fatalf("status with the configured secret = %d, want 200", got)
	}
	a.SetSigningSecret("rotated")
	if got := status(testSecret); got != http.StatusUnauthorized {
		t.Errorf("status with the old secret = %d, want 401", got)
	}
	if got := status("rotated"); got != http.StatusOK {
		t.Errorf("status with the new secret = %d, want 200", got)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add("application/json", []byte(`{"type":"url_verification","challenge":"c"}`))
	f.Add("application/json", []byte(`{"type":"event_callback","event":{"type":"app_mention","text":"<@U1>","ts":"1.1","channel":"C1"}}`))
	f.Add("application/json", []byte(`{"type":"event_callback","event":{"type":"message","subtype":"message_changed","message":{"text":"x"}}}`))
	f.Add("application/json", []byte(`{"type":"event_callback","event":null}`))
	f.Add("application/x-www-form-urlencoded", []byte("command=%2Fflow&text=a%3Db"))
	f.Add("application/x-www-form-urlencoded", []byte(`payload={"type":"block_actions","actions":[{}]}`))
	f.Add("application/x-www-form-urlencoded; charset=utf-8", []byte("payload=%7B"))
	f.Add("text/plain", []byte("x"))
	a := &Adapter{cfg: DefaultConfig()}
	a.self.Store(&identity{userID: "UBOT", botID: "BBOT"})
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		req, err := decodeRequest(contentType, body)
		if err != nil || req.kind != kindEvent {
			return
		}
		// What decodes must also pass the event filters without panicking.
		switch e := req.event.InnerEvent.Data.(type) {
		case *slackevents.AppMentionEvent:
			_, _ = a.fromMention("T1", e)
		case *slackevents.MessageEvent:
			_, _ = a.fromMessage("T1", e)
		}
	})
}
