package slack

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

const (
	e2eAgent     = "agent-1"
	e2eFlow      = "flow-hc"
	e2eSlowFlow  = "flow-slow"
	e2eChannel   = "C0GENERAL"
	e2eDM        = "D0ALICE"
	e2eUser      = "U0ALICE"
	waitDeadline = 15 * time.Second
)

// e2e is the real core (bridge.New on workspacetest and a bbolt store) and
// the adapter, driven through the fake Slack with the real slack-go client.
type e2e struct {
	t     *testing.T
	slack *slacktest.Server
	ws    *workspacetest.Server
	path  string
	core  *testCore
	a     *Adapter
	stop  func()
	err   chan error // Run's result, once it returned
}

type e2eOptions struct {
	cfg   func(*Config)
	slack *slacktest.Server // reused across a restart
	ws    *workspacetest.Server
	path  string // store file, reused across a restart
	reply func(turn int, msg string) string
	// adapter, when set, adjusts the adapter before it runs.
	adapter func(*Adapter)
	// store, when set, stands between the core and its bbolt store.
	store func(*sessionmap.Store) bridge.Store
	// core, when set, adjusts the core's configuration.
	core func(*bridge.Config)
	// postBurst is the fake Slack's slacktest.Options.PostBurst, when it
	// makes the fakes.
	postBurst int
}

func newFakes(t *testing.T, reply func(int, string) string) (*slacktest.Server, *workspacetest.Server) {
	t.Helper()
	return newFakesOpts(t, reply, slacktest.Options{})
}

// newFakesOpts is newFakes with the fake Slack's options.
func newFakesOpts(t *testing.T, reply func(int, string) string, opts slacktest.Options) (*slacktest.Server, *workspacetest.Server) {
	t.Helper()
	s := slacktest.NewServer(opts)
	t.Cleanup(s.Close)
	ws := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(ws.Close)
	ws.AddAgent(workspacetest.Agent{UUID: e2eAgent, Reply: reply})
	ws.AddFlow(workspacetest.Flow{UUID: e2eFlow, Template: "Checked {host} {service}"})
	ws.AddFlow(workspacetest.Flow{UUID: e2eSlowFlow, Status: 408, Body: `{"message":"timeout"}`})
	return s, ws
}

func e2eConfig(s *slacktest.Server) Config {
	return Config{Enabled: true, BotToken: bridge.Secret(s.BotToken()), AppToken: bridge.Secret(s.AppToken()), APIURL: s.APIURL()}
}

func startE2E(t *testing.T, o e2eOptions) *e2e {
	t.Helper()
	if o.slack == nil {
		o.slack, o.ws = newFakesOpts(t, o.reply, slacktest.Options{PostBurst: o.postBurst})
	}
	if o.path == "" {
		o.path = filepath.Join(t.TempDir(), "store.db")
	}
	var change []func(*bridge.Config)
	if o.core != nil {
		change = append(change, o.core)
	}
	core := newTestCoreWith(t, o.ws, o.path, zaptest.NewLogger(t).Named("core"), o.store, change...)
	cfg := e2eConfig(o.slack)
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	a, err := New(cfg, core, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	if o.adapter != nil {
		o.adapter(a)
	}
	e := &e2e{t: t, slack: o.slack, ws: o.ws, path: o.path, core: core, a: a, err: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { e.err <- a.Run(ctx) }()
	e.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-e.err; err != nil {
			t.Errorf("Run() = %v, want nil after cancel", err)
		}
		core.close(t)
	})
	t.Cleanup(e.stop)
	e.waitReady()
	return e
}

// waitReady waits until the adapter is connected (socket) or listening (HTTP).
func (e *e2e) waitReady() {
	e.t.Helper()
	select {
	case <-e.a.ready:
	case err := <-e.err:
		e.err <- err
		e.t.Fatalf("Run() ended before connecting: %v", err)
	case <-time.After(waitDeadline):
		e.t.Fatal("adapter did not connect")
	}
	if err := e.a.Ready(); err != nil {
		e.t.Fatalf("Ready() = %v after connecting", err)
	}
}

// restart stops the bridge and starts a new one on the same store and fakes.
func (e *e2e) restart(cfg func(*Config)) *e2e {
	e.t.Helper()
	e.stop()
	next := startE2E(e.t, e2eOptions{cfg: cfg, slack: e.slack, ws: e.ws, path: e.path})
	next.soleSocket()
	return next
}

// soleSocket waits, in socket mode, until the fake Slack knows the sockets
// of earlier processes are closed, so that what it sends next reaches this
// one (see slacktest.Server.WaitSoleConnection).
func (e *e2e) soleSocket() {
	e.t.Helper()
	if e.a.cfg.Mode == ModeHTTP {
		return
	}
	if err := e.slack.WaitSoleConnection(waitCtx(e.t)); err != nil {
		e.t.Fatal(err)
	}
}

// httpMode is the e2e configuration of HTTP mode, signed with secret.
func httpMode(secret string) func(*Config) {
	return func(c *Config) {
		c.Mode, c.AppToken, c.SigningSecret, c.Listen = ModeHTTP, "", bridge.Secret(secret), "127.0.0.1:0"
	}
}

// post sends body to the HTTP-mode endpoint signed with secret at ts, and
// returns the status and body of the answer.
// It may be called from subtests: t is the caller's.
func (e *e2e) post(t *testing.T, ctx context.Context, contentType string, body []byte, secret string, ts time.Time, edit func(*http.Request)) (int, string) {
	t.Helper()
	req, err := slacktest.NewSignedRequest(ctx, "http://"+e.a.Addr()+EventsPath, contentType, body, secret, ts)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(req)
	}
	res, err := (&http.Client{Timeout: waitDeadline}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitDeadline)
	t.Cleanup(cancel)
	return ctx
}

// reply waits for the bot's answer (a post or an update of the
// placeholder) in channel whose text contains want.
func (e *e2e) reply(ctx context.Context, channel, want string) slacktest.Message {
	e.t.Helper()
	m, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.Channel == channel && m.BotID != "" && !m.Ephemeral && strings.Contains(m.Text, want)
	})
	if err != nil {
		e.t.Fatalf("waiting for a reply containing %q in %s: %v\nmessages: %+v", want, channel, err, e.slack.MessageLog())
	}
	return m
}

func (e *e2e) ack(ctx context.Context, d slacktest.Delivery) slacktest.Ack {
	e.t.Helper()
	a, err := e.slack.WaitAck(ctx, d.EnvelopeID)
	if err != nil {
		e.t.Fatalf("WaitAck(%s) = %v", d.EnvelopeID, err)
	}
	return a
}

// sent fails the test when a delivery to the app failed.
func (e *e2e) sent(d slacktest.Delivery, err error) slacktest.Delivery {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("delivering to the app: %v", err)
	}
	return d
}

func TestE2EMentionAckedBeforeSlowAgent(t *testing.T) {
	t.Parallel()
	gate, asked := make(chan struct{}), make(chan string, 1)
	release := sync.OnceFunc(func() { close(gate) })
	e := startE2E(t, e2eOptions{reply: func(turn int, msg string) string {
		asked <- msg
		<-gate // the agent "thinks" until the test lets it answer
		return "pong: " + msg
	}})
	t.Cleanup(release) // runs before the bridge's shutdown, which waits for the agent
	ctx := waitCtx(t)

	d := e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "<@" + e.slack.BotUserID() + "> hello"}))
	ack := e.ack(ctx, d)
	if ack.Delay > 3*time.Second {
		t.Errorf("ack took %s, want under 3 s", ack.Delay)
	}
	// The placeholder shows while the agent works, in the mention's thread.
	ph := e.reply(ctx, e2eChannel, "Thinking")
	if ph.ThreadTS != d.TS {
		t.Errorf("placeholder thread_ts = %q, want the mention's ts %q", ph.ThreadTS, d.TS)
	}
	select {
	case msg := <-asked:
		if msg != "hello" {
			t.Errorf("agent asked %q, want %q", msg, "hello")
		}
	case <-ctx.Done():
		t.Fatal("the agent was never asked")
	}
	release()
	m := e.reply(ctx, e2eChannel, "pong: hello")
	if m.ThreadTS != d.TS || m.TS != ph.TS || m.Op != "chat.update" {
		t.Errorf("reply = {ts %s thread %s op %s}, want the placeholder %s updated in thread %s", m.TS, m.ThreadTS, m.Op, ph.TS, d.TS)
	}
	if !ack.At.Before(m.At) {
		t.Errorf("ack at %v is not before the answer at %v", ack.At, m.At)
	}
}
