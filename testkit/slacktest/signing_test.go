package slacktest_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// Slack's published example (docs.slack.dev "Verifying requests from Slack").
func TestSignSlackExample(t *testing.T) {
	const (
		secret = "8f742231b10e8888abcd99yyyzzz85a5"
		body   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
		want   = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
	)
	if got := slacktest.Sign(secret, time.Unix(1531420618, 0), []byte(body)); got != want {
		t.Errorf("Sign() = %s, want %s", got, want)
	}
}

func verify(req *http.Request, body []byte, secret string) error {
	sv, err := slack.NewSecretsVerifier(req.Header, secret)
	if err != nil {
		return err
	}
	_, _ = sv.Write(body)
	return sv.Ensure()
}

func TestSignRequestVerifiedBySlackGo(t *testing.T) {
	const secret = "s3cret"
	body := []byte("token=x&text=hi")
	tests := []struct {
		name   string
		secret string
		ts     time.Time
		want   error
	}{
		{name: "fresh", secret: secret, ts: time.Now()},
		{name: "four minutes old", secret: secret, ts: time.Now().Add(-4 * time.Minute)},
		{name: "stale", secret: secret, ts: time.Now().Add(-6 * time.Minute), want: slack.ErrExpiredTimestamp},
		{name: "other secret", secret: "other", ts: time.Now(), want: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := slacktest.NewSignedRequest(t.Context(), "http://127.0.0.1/slack/events", slacktest.ContentTypeForm, body, tt.secret, tt.ts)
			if err != nil {
				t.Fatal(err)
			}
			err = verify(req, body, secret)
			switch {
			case tt.want == nil && err != nil:
				t.Errorf("verify() = %v, want nil", err)
			case tt.want == errAny && err == nil:
				t.Errorf("verify() = nil, want an error")
			case tt.want != nil && tt.want != errAny && !errors.Is(err, tt.want):
				t.Errorf("verify() = %v, want %v", err, tt.want)
			}
		})
	}
}

var errAny = errors.New("any error")

// serve posts a signed body to a handler that parses it like an HTTP-mode app.
func serve(t *testing.T, contentType string, body []byte, h func(r *http.Request)) {
	t.Helper()
	const secret = "s3cret"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if err := verify(r, raw, secret); err != nil {
			t.Errorf("verify() = %v", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		h(r)
	}))
	defer srv.Close()
	req, err := slacktest.NewSignedRequest(t.Context(), srv.URL+"/slack/events", contentType, body, secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
}

func TestHTTPModeBodies(t *testing.T) {
	fake := newServer(t, slacktest.Options{})

	t.Run("slash command", func(t *testing.T) {
		body, d := fake.SlashCommandBody(slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=web1", UserID: "U1", ChannelID: "C1"})
		serve(t, slacktest.ContentTypeForm, body, func(r *http.Request) {
			sc, err := slack.SlashCommandParse(r)
			if err != nil || sc.Command != "/flow" || sc.Text != "healthcheck host=web1" || sc.UserID != "U1" || sc.ChannelID != "C1" ||
				sc.ResponseURL != d.ResponseURL || sc.TeamID != fake.TeamID() || sc.TriggerID == "" {
				t.Errorf("SlashCommandParse() = %+v, %v", sc, err)
			}
		})
		if err := slack.PostWebhookCustomHTTPContext(t.Context(), d.ResponseURL, fake.Client(), &slack.WebhookMessage{Text: "ok"}); err != nil {
			t.Errorf("response_url of the HTTP command: %v", err)
		}
	})
	t.Run("block action", func(t *testing.T) {
		body, d, err := fake.BlockActionBody(slacktest.BlockAction{UserID: "U1", ChannelID: "C1", MessageTS: "1700000000.000100", IsEphemeral: true, ActionID: "share", Value: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		serve(t, slacktest.ContentTypeForm, body, func(r *http.Request) {
			cb, err := slack.InteractionCallbackParse(r)
			if err != nil || cb.Type != slack.InteractionTypeBlockActions || cb.ActionCallback.BlockActions[0].Value != "r1" ||
				!cb.Container.IsEphemeral || cb.ResponseURL != d.ResponseURL {
				t.Errorf("InteractionCallbackParse() = %+v, %v", cb, err)
			}
		})
	})
	t.Run("app mention", func(t *testing.T) {
		body, d, err := fake.AppMentionBody(slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		serve(t, slacktest.ContentTypeJSON, body, func(r *http.Request) {
			raw, _ := io.ReadAll(r.Body)
			ev, err := slackevents.ParseEvent(raw, slackevents.OptionNoVerifyToken())
			if err != nil {
				t.Fatalf("ParseEvent() error = %v", err)
			}
			cb := ev.Data.(*slackevents.EventsAPICallbackEvent)
			am, ok := ev.InnerEvent.Data.(*slackevents.AppMentionEvent)
			if !ok || cb.EventID != d.EventID || am.TimeStamp != d.TS || am.User != "U1" {
				t.Errorf("ParseEvent() = %+v, inner %+v", cb, ev.InnerEvent.Data)
			}
		})
	})
	t.Run("url verification", func(t *testing.T) {
		ev, err := slackevents.ParseEvent(slacktest.URLVerificationBody("ch4llenge"), slackevents.OptionNoVerifyToken())
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := ev.Data.(*slackevents.EventsAPIURLVerificationEvent); !ok || v.Challenge != "ch4llenge" || ev.Type != slackevents.URLVerification {
			t.Errorf("ParseEvent() = %+v", ev)
		}
	})
}
