package slack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// response waits for a response_url post whose text contains want.
func (e *e2e) response(ctx context.Context, url, want string) slacktest.ResponsePost {
	e.t.Helper()
	p, err := e.slack.WaitResponse(ctx, func(p slacktest.ResponsePost) bool {
		return p.URL == url && strings.Contains(p.Text, want)
	})
	if err != nil {
		e.t.Fatalf("waiting for a response containing %q: %v\nposts: %+v", want, err, e.slack.ResponseURLPosts())
	}
	if p.Error != "" {
		e.t.Errorf("response post refused: %s", p.Error)
	}
	return p
}

func TestE2EFlowCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		text      string
		want      string
		ephemeral bool
		progress  bool
	}{
		{name: "result", text: "healthcheck host=web1 service=nginx", want: "Checked web1 nginx", ephemeral: true, progress: true},
		{name: "missing parameter", text: "healthcheck service=nginx", want: "host", ephemeral: true},
		{name: "unknown flow", text: "nosuchflow a=b", want: "nosuchflow", ephemeral: true},
		{name: "timeout", text: "slow host=a", want: "did not finish", ephemeral: true, progress: true},
		{name: "help", text: "help", want: "healthcheck", ephemeral: true},
		{name: "public flow", text: "publiccheck host=web2", want: "Checked web2", progress: true},
	}
	e := startE2E(t, e2eOptions{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := waitCtx(t)
			d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: tt.text, UserID: e2eUser, ChannelID: e2eChannel}))
			ack := e.ack(ctx, d)
			if ack.Delay > 3*time.Second || len(ack.Payload) != 0 {
				t.Errorf("ack = {delay %s payload %s}, want an empty ack within 3 s", ack.Delay, ack.Payload)
			}
			if tt.progress {
				p := e.response(ctx, d.ResponseURL, "Running")
				if want := map[bool]string{true: "ephemeral", false: "in_channel"}[tt.ephemeral]; p.ResponseType != want {
					t.Errorf("progress response_type = %q, want %q", p.ResponseType, want)
				}
			}
			p := e.response(ctx, d.ResponseURL, tt.want)
			if want := map[bool]string{true: "ephemeral", false: "in_channel"}[tt.ephemeral]; p.ResponseType != want {
				t.Errorf("response_type = %q, want %q", p.ResponseType, want)
			}
			if tt.progress && !p.ReplaceOriginal {
				t.Error("result did not replace the progress message")
			}
		})
	}
	t.Run("unknown command", func(t *testing.T) {
		ctx := waitCtx(t)
		d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/other", UserID: e2eUser, ChannelID: e2eChannel}))
		if ack := e.ack(ctx, d); !strings.Contains(string(ack.Payload), "Unknown command") || !strings.Contains(string(ack.Payload), "ephemeral") {
			t.Errorf("ack payload = %s, want an ephemeral \"Unknown command\"", ack.Payload)
		}
	})
}

func TestE2EShareButton(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)
	d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=web1 service=nginx", UserID: e2eUser, ChannelID: e2eChannel}))
	p := e.response(ctx, d.ResponseURL, "Checked web1 nginx")
	if p.MessageTS == "" {
		t.Fatalf("result post created no message: %+v", p)
	}
	var result slacktest.Message
	for _, m := range e.slack.Messages() {
		if m.TS == p.MessageTS {
			result = m
		}
	}
	// slacktest's Message.Buttons trips over the context block's string
	// text, so find the button here.
	var blocks []struct {
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	var value string
	_ = json.Unmarshal(result.Blocks, &blocks)
	for _, b := range blocks {
		for _, el := range b.Elements {
			if el.Type == "button" && el.ActionID == bridge.ActionShare {
				value = el.Value
			}
		}
	}
	if value == "" {
		t.Fatalf("ephemeral result has no share button: %s", result.Blocks)
	}
	press := e.sent(e.slack.SendBlockAction(ctx, slacktest.BlockAction{
		UserID: e2eUser, ChannelID: e2eChannel, MessageTS: result.TS, IsEphemeral: true,
		ActionID: bridge.ActionShare, BlockID: actionsBlockID, Value: value, Label: "Share with channel",
	}))
	e.ack(ctx, press)

	shared := e.reply(ctx, e2eChannel, "Checked web1 nginx")
	if shared.Ephemeral || shared.Via != "chat.postMessage" {
		t.Errorf("shared message = {ephemeral %v via %s}, want a public chat.postMessage", shared.Ephemeral, shared.Via)
	}
	del, err := e.slack.WaitResponse(ctx, func(p slacktest.ResponsePost) bool { return p.URL == press.ResponseURL && p.DeleteOriginal })
	if err != nil || del.Error != "" {
		t.Fatalf("ephemeral not deleted: %v %+v", err, del)
	}
}

func TestE2ERateLimitIsWaitedOut(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: func(c *Config) { c.WorkingIndicator = IndicatorNone }})
	ctx := waitCtx(t)
	e.slack.RateLimit("chat.postMessage", 1, 1)
	start := time.Now()
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "hi"}))
	e.reply(ctx, e2eDM, "You said: hi")
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("reply after %s, want Retry-After (1 s) waited out", waited)
	}
	var statuses []int
	for _, c := range e.slack.Calls() {
		if c.Method == "chat.postMessage" {
			statuses = append(statuses, c.Status)
		}
	}
	if len(statuses) != 2 || statuses[0] != http.StatusTooManyRequests || statuses[1] != http.StatusOK {
		t.Errorf("chat.postMessage statuses = %v, want [429 200]", statuses)
	}
}

func TestE2EReconnects(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)
	steps := []struct {
		name   string
		break_ func() error
	}{
		{"disconnect", func() error { return e.slack.Disconnect("refresh_requested") }},
		{"dropped socket", e.slack.DropConnection},
	}
	// slacktest marks a socket live only after writing its hello, so the
	// adapter may be ready before the fake counts the socket.
	if err := e.slack.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i, s := range steps {
		if err := s.break_(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if err := e.slack.WaitConnections(ctx, i+2); err != nil {
			t.Fatalf("%s: no reconnection: %v", s.name, err)
		}
		text := "after " + s.name
		e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: text}))
		e.reply(ctx, e2eDM, "You said: "+text)
	}
}

func TestE2EUnknownEnvelopesAreAcked(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)
	for _, d := range []slacktest.Delivery{
		e.sent(e.slack.SendEvent(ctx, map[string]any{"type": "brand_new_event", "channel": e2eChannel})),
		e.sent(func() (slacktest.Delivery, error) {
			id, err := e.slack.Send(ctx, slacktest.Envelope{Type: "future_type", Payload: map[string]any{"x": 1}})
			return slacktest.Delivery{EnvelopeID: id}, err
		}()),
		e.sent(e.slack.SendEvent(ctx, map[string]any{"type": "reaction_added", "user": e2eUser, "reaction": "eyes"})),
	} {
		e.ack(ctx, d)
	}
}

func TestE2EHTTPMode(t *testing.T) {
	t.Parallel()
	const secret = "http-mode-secret"
	e := startE2E(t, e2eOptions{cfg: httpMode(secret)})
	post := func(t *testing.T, ctx context.Context, contentType string, body []byte, edit func(*http.Request)) (int, string) {
		t.Helper()
		return e.post(t, ctx, contentType, body, secret, time.Now(), edit)
	}
	const form = "application/x-www-form-urlencoded"

	t.Run("signed slash command", func(t *testing.T) {
		ctx := waitCtx(t)
		body, d := e.slack.SlashCommandBody(slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=web1 service=nginx", UserID: e2eUser, ChannelID: e2eChannel})
		start := time.Now()
		if status, _ := post(t, ctx, form, body, nil); status != http.StatusOK {
			t.Fatalf("status = %d, want 200", status)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("ack took %s, want under 3 s", took)
		}
		e.response(ctx, d.ResponseURL, "Checked web1 nginx")
	})
	t.Run("url verification", func(t *testing.T) {
		status, body := post(t, waitCtx(t), "application/json", slacktest.URLVerificationBody("chal-123"), nil)
		if status != http.StatusOK || body != "chal-123" {
			t.Errorf("url_verification = %d %q, want 200 chal-123", status, body)
		}
	})
	t.Run("event and its retry", func(t *testing.T) {
		ctx := waitCtx(t)
		body, _, err := e.slack.MessageEventBody(slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "over http"})
		if err != nil {
			t.Fatal(err)
		}
		if status, _ := post(t, ctx, "application/json", body, nil); status != http.StatusOK {
			t.Fatalf("status = %d, want 200", status)
		}
		e.reply(ctx, e2eDM, "You said: over http")
		if status, _ := post(t, ctx, "application/json", body, func(r *http.Request) { slacktest.SetRetry(r, 1, "http_timeout") }); status != http.StatusOK {
			t.Fatalf("retry status = %d, want 200", status)
		}
		body2, _, _ := e.slack.MessageEventBody(slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "next"})
		post(t, ctx, "application/json", body2, nil)
		e.reply(ctx, e2eDM, "You said: next")
		if n := strings.Count(strings.Join(e.ws.Messages(e.ws.Sessions(e2eAgent)[0]), "|"), "over http"); n != 1 {
			t.Errorf("agent saw the retried event %d times, want 1", n)
		}
	})

	refused := []struct {
		name string
		edit func(*http.Request)
	}{
		{"bad signature", func(r *http.Request) { r.Header.Set("X-Slack-Signature", "v0="+strings.Repeat("0", 64)) }},
		{"stale timestamp", func(r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			slacktest.SignRequest(r, body, secret, time.Now().Add(-6*time.Minute))
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}},
		{"missing header", func(r *http.Request) { r.Header.Del("X-Slack-Request-Timestamp") }},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			ctx := waitCtx(t)
			wsBefore, slackBefore := len(e.ws.Requests()), len(e.slack.Calls())
			body, _ := e.slack.SlashCommandBody(slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=evil", UserID: e2eUser, ChannelID: e2eChannel})
			if status, _ := post(t, ctx, form, body, tt.edit); status != http.StatusUnauthorized {
				t.Fatalf("status = %d, want 401", status)
			}
			if len(e.ws.Requests()) != wsBefore || len(e.slack.Calls()) != slackBefore {
				t.Errorf("a refused request caused API calls")
			}
		})
	}
}

func TestE2EBadTokens(t *testing.T) {
	t.Parallel()
	// A token Slack refuses ends Run, with the error naming the key once
	// and no "slack:" of its own (the caller names the adapter).
	for _, code := range []string{"invalid_auth", "not_authed", "account_inactive", "token_revoked"} {
		t.Run("bot token "+code, func(t *testing.T) {
			s, _ := newFakes(t, nil)
			s.FailNext("auth.test", 1, code)
			a, err := New(e2eConfig(s), idleCore{t}, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = a.Run(waitCtx(t))
			if err == nil || !strings.HasPrefix(err.Error(), "auth.test with slack.bot_token: ") || !strings.Contains(err.Error(), code) {
				t.Errorf("Run() = %v, want \"auth.test with slack.bot_token: …%s\"", err, code)
			}
		})
	}
	t.Run("other auth.test errors are retried", func(t *testing.T) {
		s, ws := newFakes(t, nil)
		s.FailNext("auth.test", 2, "internal_error")
		e := startE2E(t, e2eOptions{slack: s, ws: ws, adapter: func(a *Adapter) { a.firstRetry = time.Millisecond }})
		if n := s.CallCount("auth.test"); n != 3 {
			t.Errorf("auth.test called %d times, want 3", n)
		}
		e.ack(waitCtx(t), e.sent(s.SendMessage(waitCtx(t), slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "hi"})))
	})
	t.Run("app token", func(t *testing.T) {
		s, _ := newFakes(t, nil)
		cfg := e2eConfig(s)
		cfg.AppToken = "xapp-1-wrong"
		a, err := New(cfg, idleCore{t}, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = a.Run(waitCtx(t))
		if err == nil || !strings.Contains(err.Error(), "app_token") {
			t.Errorf("Run() = %v, want an error naming slack.app_token", err)
		}
	})
}

func TestE2EShutdownLeavesNoGoroutine(t *testing.T) {
	for _, mode := range []string{ModeSocket, ModeHTTP} {
		t.Run(mode, func(t *testing.T) {
			s, ws := newFakes(t, nil)
			cfg := e2eConfig(s)
			if mode == ModeHTTP {
				cfg.Mode, cfg.SigningSecret, cfg.Listen = ModeHTTP, "x", "127.0.0.1:0"
			}
			core := newTestCore(t, ws, "", zaptest.NewLogger(t))
			a, err := New(cfg, core, nil)
			if err != nil {
				t.Fatal(err)
			}
			before := goleak.IgnoreCurrent()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			wctx := waitCtx(t)
			select {
			case <-a.ready:
			case err := <-done:
				t.Fatalf("Run() = %v before connecting", err)
			case <-wctx.Done():
				t.Fatal("not connected")
			}
			if mode == ModeSocket {
				e := &e2e{t: t, slack: s}
				e.ack(wctx, e.sent(s.SendMessage(wctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "hi"})))
				e.reply(wctx, e2eDM, "You said: hi")
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
			core.close(t)
			if err := a.Ready(); err == nil {
				t.Error("Ready() = nil after Run returned")
			}
			if mode == ModeSocket {
				// The fake's goroutines for the socket end once it has read
				// the close, which on a busy machine can take longer than
				// goleak retries; an adapter that left its socket open fails
				// here.
				if err := s.WaitDisconnected(wctx); err != nil {
					t.Fatalf("the socket is still open after Run returned: %v", err)
				}
			}
			goleak.VerifyNone(t, before)
		})
	}
}

func TestE2EReactionIndicatorAndUserGroups(t *testing.T) {
	t.Parallel()
	s, ws := newFakes(t, nil)
	s.AddUserGroup(slacktest.UserGroup{ID: "S0OPS", Handle: "ops", Name: "Ops", Users: []string{e2eUser}})
	e := startE2E(t, e2eOptions{slack: s, ws: ws, cfg: func(c *Config) {
		c.WorkingIndicator, c.UserGroups = IndicatorReaction, true
	}})
	ctx := waitCtx(t)
	d := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "hi"}))
	e.reply(ctx, e2eDM, "You said: hi")
	if _, err := e.slack.WaitCall(ctx, func(c slacktest.Call) bool { return c.Method == "reactions.remove" }); err != nil {
		t.Fatalf("reaction never removed: %v", err)
	}
	for _, c := range e.slack.Calls() {
		if c.Method == "reactions.add" && c.Params.Get("timestamp") != d.TS {
			t.Errorf("reaction on %s, want the user's message %s", c.Params.Get("timestamp"), d.TS)
		}
	}
	u := e.a.users.lookup(ctx, e2eUser, "")
	if len(u.Groups) != 1 || u.Groups[0] != "S0OPS" || u.Name == "" {
		t.Errorf("lookup(%s) = %+v, want a name and groups [S0OPS]", e2eUser, u)
	}
}
