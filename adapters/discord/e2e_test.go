package discord

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/postgres"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

const (
	guildID   = "1"
	channelID = "10"
)

var alice = discordgo.User{ID: "42", Username: "alice", GlobalName: "Alice"}

// env is a fake Discord and a fake workspace that bridges come and go on.
type env struct {
	fake *discordtest.Server
	ws   *workspacetest.Server
	wsRT http.RoundTripper // the workspace client's transport; tests may wrap it
	// discordRT, when set, wraps the adapter's REST transport.
	discordRT func(http.RoundTripper) http.RoundTripper
	storePath string
	// dsn, when set, puts the bridge on PostgreSQL (a pgtest schema)
	// instead of storePath.
	dsn string
	// wrapPG, when set with dsn, wraps the PostgreSQL store (fault injection).
	wrapPG func(*postgres.Store) e2eStore
	cfg    Config
	flows  []bridge.Flow
	agents []bridge.Agent
	admins []string
	files  bridge.FileLimits
	starts int
	// tap, when set, carries the gateway connections (see tap).
	tap *tap
	// core, when set, adjusts the core's configuration.
	core func(*bridge.Config)
	// log, when set, is the adapter's logger.
	log *zap.Logger
	// tune, when set, adjusts each adapter before it runs.
	tune func(*Adapter)
	// wrap, when set, stands between each adapter and its core.
	wrap func(Core) Core
}

func manyRegions() []string {
	out := make([]string, 30)
	for i := range out {
		out[i] = fmt.Sprintf("r%02d", i)
	}
	return out
}

func newEnv(t *testing.T, change func(*env)) *env {
	t.Helper()
	return newEnvWith(t, discordtest.Options{}, change)
}

func newEnvWith(t *testing.T, opts discordtest.Options, change func(*env)) *env {
	t.Helper()
	e := &env{
		fake:      discordtest.NewServer(opts),
		ws:        workspacetest.New(workspacetest.Options{}),
		storePath: filepath.Join(t.TempDir(), "s.db"),
		flows: []bridge.Flow{
			{Name: "healthcheck", UUID: "flow-hc", Description: "Check a service", Allow: []string{"everyone"}, Params: []bridge.Param{
				{Name: "host", Description: "Host", Required: true, Suggestions: []string{"web1", "web2", "db1"}},
				{Name: "service", Description: "Service", Choices: []string{"nginx", "postgres"}},
			}},
			{Name: "slow", UUID: "flow-slow", Timeout: time.Second, Allow: []string{"everyone"}},
			{Name: "region", UUID: "flow-region", Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "name", Required: true, Choices: manyRegions()}}},
			{Name: "wait", UUID: "flow-wait", Allow: []string{"everyone"}, Params: []bridge.Param{{Name: "n", Required: true}}},
		},
		agents: []bridge.Agent{{Name: "helper", UUID: "agent-1", Default: true}},
	}
	e.wsRT = e.ws.Transport()
	e.cfg = Config{Enabled: true, Token: bridge.Secret(e.fake.Token()), ApplicationID: e.fake.ApplicationID(), GuildIDs: []string{guildID}, APIURL: e.fake.URL}
	e.ws.AddFlow(workspacetest.Flow{UUID: "flow-hc", Template: "Checked {host} {service}"})
	e.ws.AddFlow(workspacetest.Flow{UUID: "flow-slow", Template: "late", Delay: 3 * time.Second})
	e.ws.AddFlow(workspacetest.Flow{UUID: "flow-region", Template: "Region {name}"})
	e.ws.AddFlow(workspacetest.Flow{UUID: "flow-wait", Template: "Done {n}"})
	e.ws.AddAgent(workspacetest.Agent{UUID: "agent-1"})
	if change != nil {
		change(e)
	}
	ctx := testCtx(t)
	if err := e.fake.AddChannel(ctx, discordgo.Channel{ID: channelID, GuildID: guildID, Type: discordgo.ChannelTypeGuildText, Name: "general"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.fake.Close()
		e.ws.Close()
	})
	return e
}

// testCtx bounds every wait of a test, so a missing reply fails instead of hanging.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// bridgeRun is one running flowbridge: store, core and adapter.
type bridgeRun struct {
	a       *Adapter
	core    *bridge.Bridge
	store   e2eStore
	metrics *prometheus.Registry
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
}

// e2eStore is the store a test bridge runs on: bbolt, or PostgreSQL when
// the env has a DSN.
type e2eStore interface {
	bridge.Store
	Close() error
}

// build makes a bridge on the env's store and fakes without running it.
func (e *env) build(t *testing.T) *bridgeRun {
	t.Helper()
	var store e2eStore
	var err error
	if e.dsn != "" {
		var pg *postgres.Store
		pg, err = postgres.Open(t.Context(), e.dsn, postgres.Options{MaxConns: 4})
		store = pg
		if err == nil && e.wrapPG != nil {
			store = e.wrapPG(pg)
		}
	} else {
		store, err = sessionmap.Open(e.storePath, sessionmap.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	wsc, err := workspace.New(workspace.Config{BaseURL: e.ws.URL, WorkspaceUUID: "ws-test", Token: "test-token", HTTPClient: &http.Client{Transport: e.wsRT}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics, err := bridge.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	bc := bridge.Config{Flows: e.flows, Agents: e.agents, Admins: e.admins, Metrics: metrics, Files: e.files}
	if e.core != nil {
		e.core(&bc)
	}
	core, err := bridge.New(bc, wsc, store, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	log := e.log
	if log == nil {
		log = zaptest.NewLogger(t)
	}
	var c Core = core
	if e.wrap != nil {
		c = e.wrap(core)
	}
	a, err := New(e.cfg, c, log)
	if err != nil {
		t.Fatal(err)
	}
	a.typingEvery = 20 * time.Millisecond
	a.retryMin = 10 * time.Millisecond
	a.identifyEvery = 10 * time.Millisecond
	a.idTiming = defaultIdentifyTiming.scaled(100)
	if e.discordRT != nil {
		a.session.Client.Transport = e.discordRT(a.session.Client.Transport)
	}
	if e.tap != nil {
		e.tap.route(a)
	}
	if e.tune != nil {
		e.tune(a)
	}
	return &bridgeRun{a: a, core: core, store: store, metrics: reg, done: make(chan error, 1)}
}

// run starts Run, and stops the bridge when the test ends.
func (r *bridgeRun) run(t *testing.T) {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.a.Run(runCtx) }()
	t.Cleanup(func() { r.stop(t) })
}

// start runs a bridge and waits until it is connected and, the first time,
// has registered its commands.
func (e *env) start(t *testing.T) *bridgeRun {
	t.Helper()
	ctx := testCtx(t)
	conns := len(e.fake.Connections())
	r := e.build(t)
	r.run(t)
	if _, err := e.fake.WaitHandshake(ctx, func(h discordtest.Handshake) bool { return h.Conn > conns }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	e.starts++
	if e.starts == 1 {
		if _, err := e.fake.WaitRequest(ctx, func(r discordtest.Request) bool {
			return r.Route == discordtest.RouteGuildCommands && r.Status == http.StatusOK
		}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// stop ends the adapter (Run waits for its goroutines), then the core and the store.
func (r *bridgeRun) stop(t *testing.T) {
	t.Helper()
	if err := r.stopWithin(t, 10*time.Second); err != nil {
		t.Errorf("Shutdown() = %v", err)
	}
}

// crash ends the adapter and closes the store as a process that dies
// would leave them, and leaves the core running: the caller shuts it down
// once the test no longer needs the store's file to itself.
func (r *bridgeRun) crash(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
		if err := r.store.Close(); err != nil {
			t.Errorf("store Close() = %v", err)
		}
	})
}

// stopWithin is stop with a shutdown grace of d for the work in flight.
// Work cut off by its end is reported, not failed: tests of restarts use it.
func (r *bridgeRun) stopWithin(t *testing.T, grace time.Duration) (shutdownErr error) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		shutdownErr = r.core.Shutdown(ctx)
		r.core.Close()
		if err := r.store.Close(); err != nil {
			t.Errorf("store Close() = %v", err)
		}
	})
	return shutdownErr
}

func mention(botID, text string) string { return "<@" + botID + "> " + text }

// waitBot waits for a bot message in channel that contains text.
func (e *env) waitBot(t *testing.T, channel, text string) discordtest.Message {
	t.Helper()
	m, err := e.fake.WaitMessage(testCtx(t), func(m discordtest.Message) bool {
		return m.Author.ID == e.fake.BotUser().ID && m.ChannelID == channel && strings.Contains(m.Content, text)
	})
	if err != nil {
		t.Fatalf("waiting for a bot message with %q in %s: %v", text, channel, err)
	}
	return m
}

func checkNoPings(t *testing.T, m discordtest.Message) {
	t.Helper()
	if len(m.Pings) != 0 {
		t.Errorf("message %s would ping %v, want no one", m.ID, m.Pings)
	}
	if m.AllowedMentions == nil || m.AllowedMentions.Parse == nil || len(m.AllowedMentions.Parse) != 0 {
		t.Errorf("message %s allowed_mentions = %+v, want parse []", m.ID, m.AllowedMentions)
	}
}

func TestMentionAndDM(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.start(t)
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID

	um, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(bot, "hello there")})
	if err != nil {
		t.Fatal(err)
	}
	reply := e.waitBot(t, channelID, "You said: hello there")
	if reply.Reference == nil || reply.Reference.MessageID != um.ID {
		t.Errorf("reply references %+v, want message %s", reply.Reference, um.ID)
	}
	checkNoPings(t, reply)
	// Events are read only after Open has reported the connection.
	if err := r.a.Ready(); err != nil {
		t.Errorf("Ready() = %v once events flow, want nil", err)
	}
	if n := e.fake.Typing(channelID); n == 0 {
		t.Errorf("typing indicator sent %d times, want at least once", n)
	}

	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "77", Author: alice, Content: "a direct question"}); err != nil {
		t.Fatal(err)
	}
	dm := e.waitBot(t, "77", "You said: a direct question")
	checkNoPings(t, dm)
}

func TestIgnoresOwnAndOtherBots(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.start(t)
	ctx := testCtx(t)
	bot := e.fake.BotUser()
	other := discordgo.User{ID: "55", Username: "otherbot", Bot: true}
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: "20", Author: other, Content: mention(bot.ID, "loop?")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "21", Author: other, Content: "a bot DM"}); err != nil {
		t.Fatal(err)
	}
	// A webhook's message has a plain (non-bot) author: only webhook_id tells.
	hook := discordgo.User{ID: "66", Username: "deploy-hook"}
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: "22", Author: hook, WebhookID: hook.ID, Content: mention(bot.ID, "deployed")}); err != nil {
		t.Fatal(err)
	}
	// A human's DM proves events are flowing; its reply comes back as the
	// bot's own MESSAGE_CREATE, which must not be answered either.
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "23", Author: alice, Content: "ping"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, "23", "You said: ping")
	r.stop(t) // Run returns only after every event handler has finished

	for _, req := range e.fake.Requests() {
		for _, ch := range []string{"20", "21", "22"} {
			if strings.Contains(req.Path, "/channels/"+ch+"/") || strings.HasSuffix(req.Path, "/channels/"+ch) {
				t.Errorf("request %s %s for a bot's or webhook's message, want none", req.Method, req.Path)
			}
		}
	}
	var replies int
	for _, m := range e.fake.Messages() {
		if m.Author.ID == bot.ID && m.ChannelID == "23" {
			replies++
		}
	}
	if replies != 1 {
		t.Errorf("%d bot messages in the DM, want 1 (no reply to its own message)", replies)
	}
}

func TestThreadKeepsSessionAcrossRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) {
		e.cfg.StartThreads = true
		e.cfg.MessageContentIntent = true
	})
	r := e.start(t)
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID

	um, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(bot, "first")})
	if err != nil {
		t.Fatal(err)
	}
	thread := um.ID // a thread started on a message has the message's ID
	e.waitBot(t, thread, "[turn 1] You said: first")
	if _, ok := e.fake.Channel(thread); !ok {
		t.Fatalf("no thread %s was started", thread)
	}

	// In the bot's thread no mention is needed.
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: thread, Author: alice, Content: "second"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, thread, "[turn 2] You said: second")

	r.stop(t)
	e.start(t) // the same store file
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: thread, Author: alice, Content: "third"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, thread, "[turn 3] You said: third")
	if n := len(e.ws.Sessions("agent-1")); n != 1 {
		t.Errorf("agent has %d sessions, want 1 reused across the restart", n)
	}
}

// TestThreadTakesChannelAgent: a thread started on a mention is its own
// conversation under its channel's: without a choice of its own it talks to
// the agent chosen for the channel, in a session of its own.
func TestThreadTakesChannelAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) {
		e.cfg.StartThreads = true
		e.cfg.MessageContentIntent = true
		e.agents = append(e.agents, bridge.Agent{Name: "ops", UUID: "agent-2"})
		e.admins = []string{alice.ID}
		e.ws.AddAgent(workspacetest.Agent{UUID: "agent-2", Reply: func(turn int, msg string) string { return fmt.Sprintf("[ops %d] %s", turn, msg) }})
	})
	e.start(t)
	ctx := testCtx(t)
	use := e.interact(t, discordgo.ApplicationCommandInteractionData{Name: "agent", Options: []*discordgo.ApplicationCommandInteractionDataOption{
		{Name: "use", Type: discordgo.ApplicationCommandOptionSubCommand, Options: []*discordgo.ApplicationCommandInteractionDataOption{
			{Name: "name", Type: discordgo.ApplicationCommandOptionString, Value: "ops"},
		}},
	}})
	e.waitOriginal(t, use.ID, "ops")

	um, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: channelID, Author: alice, Content: mention(e.fake.BotUser().ID, "first")})
	if err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, um.ID, "[ops 1] first")
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{GuildID: guildID, ChannelID: um.ID, Author: alice, Content: "second"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, um.ID, "[ops 2] second")
	if n, m := len(e.ws.Sessions("agent-2")), len(e.ws.Sessions("agent-1")); n != 1 || m != 0 {
		t.Errorf("sessions: %d of ops, %d of helper; want the thread's one, of ops", n, m)
	}
}

// flowCommand is /flow NAME with options.
func flowCommand(name string, opts ...[2]string) discordgo.ApplicationCommandInteractionData {
	sub := &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionSubCommand}
	for _, o := range opts {
		sub.Options = append(sub.Options, &discordgo.ApplicationCommandInteractionDataOption{Name: o[0], Type: discordgo.ApplicationCommandOptionString, Value: o[1]})
	}
	return discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub}}
}

func (e *env) interact(t *testing.T, data discordgo.InteractionData) discordtest.SentInteraction {
	t.Helper()
	sent, err := e.fake.SendInteraction(testCtx(t), discordtest.Interaction{GuildID: guildID, ChannelID: channelID, User: alice, Roles: []string{"7"}, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	return sent
}

// waitOriginal waits for the interaction's original response to contain text.
func (e *env) waitOriginal(t *testing.T, id, text string) discordtest.Message {
	t.Helper()
	m, err := e.fake.WaitMessage(testCtx(t), func(m discordtest.Message) bool {
		return m.InteractionID == id && m.Source == discordtest.SourceInteraction && strings.Contains(m.Content, text)
	})
	if err != nil {
		t.Fatalf("waiting for the response of %s to contain %q: %v", id, text, err)
	}
	return m
}

func TestSlashFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t)
	sent := e.interact(t, flowCommand("healthcheck", [2]string{"host", "web1"}, [2]string{"service", "nginx"}))
	ack, err := e.fake.WaitInteractionResponse(testCtx(t), sent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Code != 0 || ack.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || ack.Late >= 3*time.Second {
		t.Errorf("first response = type %d code %d after %s, want a deferral (5) within 3 s", ack.Type, ack.Code, ack.Late)
	}
	if ack.Data == nil || ack.Data.Flags&discordgo.MessageFlagsEphemeral == 0 {
		t.Errorf("deferral data = %+v, want ephemeral for a private flow", ack.Data)
	}
	m := e.waitOriginal(t, sent.ID, "Checked web1 nginx")
	checkNoPings(t, m)
	if !m.Ephemeral() {
		t.Errorf("result is public, want ephemeral")
	}
	if b := m.Buttons(); len(b) != 1 || !strings.HasPrefix(b[0].CustomID, "share:") {
		t.Errorf("result buttons = %+v, want one share button", b)
	}
	if n := len(e.fake.InteractionResponses(sent.ID)); n != 1 {
		t.Errorf("%d callbacks for one interaction, want 1", n)
	}
}

func TestSlashFlowFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t)

	t.Run("408", func(t *testing.T) {
		sent := e.interact(t, flowCommand("slow"))
		m := e.waitOriginal(t, sent.ID, "did not finish within 1 s")
		if strings.Contains(m.Content, "late") {
			t.Errorf("timed-out flow shows %q", m.Content)
		}
	})
	t.Run("unknown value", func(t *testing.T) {
		// Thirty choices are offered by autocomplete, so Discord lets any text through.
		sent := e.interact(t, flowCommand("region", [2]string{"name", "mars"}))
		m := e.waitOriginal(t, sent.ID, "mars")
		if strings.Contains(m.Content, "Region mars") {
			t.Errorf("flow ran with an unknown value: %q", m.Content)
		}
	})
	t.Run("autocomplete", func(t *testing.T) {
		data := flowCommand("healthcheck", [2]string{"host", "we"})
		data.Options[0].Options[0].Focused = true
		sent, err := e.fake.SendInteraction(testCtx(t), discordtest.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, GuildID: guildID, ChannelID: channelID, User: alice, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := e.fake.WaitInteractionResponse(testCtx(t), sent.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if resp.Data != nil {
			for _, c := range resp.Data.Choices {
				got = append(got, fmt.Sprint(c.Value))
			}
		}
		if resp.Code != 0 || strings.Join(got, ",") != "web1,web2" {
			t.Errorf("autocomplete answer = code %d, choices %v; want web1,web2", resp.Code, got)
		}
	})
}

// TestAutocompleteRefused: Discord refuses an autocomplete answer that comes
// after 3 s; the adapter logs it and goes on.
func TestAutocompleteRefused(t *testing.T) {
	t.Parallel()
	clock := discordtest.NewClock(time.Now())
	e := newEnvWith(t, discordtest.Options{Now: clock.Now}, nil)
	e.start(t)
	// The answer first meets a 429; while discordgo waits it out, 4 s pass.
	e.fake.RateLimit(discordtest.RouteInteractionCallback, discordtest.RateLimit{RetryAfter: 300 * time.Millisecond})
	data := flowCommand("healthcheck", [2]string{"host", "w"})
	data.Options[0].Options[0].Focused = true
	sent, err := e.fake.SendInteraction(testCtx(t), discordtest.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, GuildID: guildID, ChannelID: channelID, User: alice, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fake.WaitRequest(testCtx(t), func(r discordtest.Request) bool {
		return r.Route == discordtest.RouteInteractionCallback && r.Status == http.StatusTooManyRequests
	}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(4 * time.Second)
	if _, err := e.fake.WaitRequest(testCtx(t), func(r discordtest.Request) bool {
		return r.Route == discordtest.RouteInteractionCallback && r.Code == 10062
	}); err != nil {
		t.Fatalf("late autocomplete answer not refused: %v", err)
	}
	if resps := e.fake.InteractionResponses(sent.ID); len(resps) != 1 || resps[0].Code != 10062 {
		t.Errorf("autocomplete callbacks = %+v, want one, refused with 10062", resps)
	}
	// The next command is handled normally.
	next := e.interact(t, flowCommand("healthcheck", [2]string{"host", "web2"}))
	e.waitOriginal(t, next.ID, "Checked web2")
}

func TestShare(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t)
	sent := e.interact(t, flowCommand("healthcheck", [2]string{"host", "web1"}, [2]string{"service", "nginx"}))
	result := e.waitOriginal(t, sent.ID, "Checked web1 nginx")
	buttons := result.Buttons()
	if len(buttons) != 1 {
		t.Fatalf("result buttons = %+v, want the share button", buttons)
	}
	press, err := e.fake.SendInteraction(testCtx(t), discordtest.Interaction{
		GuildID: guildID, ChannelID: channelID, User: alice, MessageID: result.ID,
		Data: discordgo.MessageComponentInteractionData{CustomID: buttons[0].CustomID, ComponentType: discordgo.ButtonComponent},
	})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := e.fake.WaitMessage(testCtx(t), func(m discordtest.Message) bool {
		return m.Source == discordtest.SourceChannel && strings.Contains(m.Content, "Checked web1 nginx")
	})
	if err != nil {
		t.Fatalf("shared result not posted: %v", err)
	}
	if shared.Ephemeral() || shared.ChannelID != channelID || !strings.Contains(shared.Content, "shared by Alice") {
		t.Errorf("shared message = %+v, want a public channel message attributed to Alice", shared)
	}
	checkNoPings(t, shared)
	if _, err := e.fake.WaitMessage(testCtx(t), func(m discordtest.Message) bool {
		return m.ID == result.ID && strings.Contains(m.Content, "Shared") && len(m.Buttons()) == 0
	}); err != nil {
		t.Fatalf("private result not retired: %v", err)
	}
	resps := e.fake.InteractionResponses(press.ID)
	if len(resps) != 1 || resps[0].Type != discordgo.InteractionResponseDeferredMessageUpdate || resps[0].Code != 0 {
		t.Errorf("button callbacks = %+v, want one accepted type 6", resps)
	}
}

func TestMentionsAndLongReplies(t *testing.T) {
	t.Parallel()
	long := longReply() + "\n\nTHE END"
	e := newEnv(t, func(e *env) {
		e.ws.AddAgent(workspacetest.Agent{UUID: "agent-1", Reply: func(_ int, msg string) string {
			if msg == "long" {
				return long
			}
			return "@everyone <@&123> **x** @here <@42>"
		}})
	})
	e.start(t)
	ctx := testCtx(t)
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "30", Author: alice, Content: "ping them"}); err != nil {
		t.Fatal(err)
	}
	checkNoPings(t, e.waitBot(t, "30", "@everyone <@&123> **x**"))

	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "31", Author: alice, Content: "long"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, "31", "Paragraph with some words")
	e.waitBot(t, "31", "THE END") // parts are posted in order
	var parts int
	for _, m := range e.fake.Messages() {
		if m.ChannelID != "31" || m.Author.ID != e.fake.BotUser().ID {
			continue
		}
		parts++
		checkNoPings(t, m)
		if n := len([]rune(m.Content)); n > maxContent {
			t.Errorf("part of %d characters", n)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Errorf("part with unbalanced fences:\n%s", m.Content)
		}
	}
	if parts < 4 {
		t.Errorf("7,000-character reply came in %d parts, want at least 4", parts)
	}
}

func TestRegisteredCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.start(t)
	if !sameCommands(e.fake.Commands(guildID), Commands(e.flows, e.agents)) {
		t.Errorf("registered commands differ from the config")
	}
	if n := len(e.fake.CommandOverwrites()); n != 1 {
		t.Errorf("%d bulk overwrites, want 1", n)
	}
	r.stop(t)

	r = e.start(t)
	if err := r.a.SyncCommands(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	r.stop(t)
	if n := len(e.fake.CommandOverwrites()); n != 1 {
		t.Errorf("after a second start, %d bulk overwrites, want still 1", n)
	}

	e.flows = append(e.flows, bridge.Flow{Name: "extra", UUID: "flow-x", Allow: []string{"everyone"}})
	a, err := New(e.cfg, catalogCore{flows: e.flows, agents: e.agents}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.SyncCommands(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.fake.CommandOverwrites()); n != 2 {
		t.Errorf("after a flow was added, %d bulk overwrites, want 2", n)
	}
}

func TestGatewayReconnects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t)
	ctx := testCtx(t)
	for i, tc := range []struct {
		name    string
		disrupt func() error
		resumed bool // else a new session is identified
	}{
		{"op 7 reconnect", func() error { return e.fake.Reconnect(ctx) }, true},
		{"dropped connection", func() error { return e.fake.DropConnection(ctx) }, true},
		{"op 9 invalid session", func() error { return e.fake.InvalidateSession(ctx, false) }, false},
	} {
		session, err := e.fake.WaitReady(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns := len(e.fake.Connections())
		if err := tc.disrupt(); err != nil {
			t.Fatal(err)
		}
		// What follows the disruption: a handshake on a new connection, or
		// (op 9) a new session on the same one.
		h, err := e.fake.WaitHandshake(ctx, func(h discordtest.Handshake) bool { return h.Conn > conns || h.SessionID != session })
		if err != nil {
			t.Fatal(err)
		}
		if tc.resumed && (h.Op != 6 || !h.Resumed) || !tc.resumed && (h.Op != 2 || h.Resumed) {
			t.Errorf("after %s: handshake op %d resumed %v, want resumed %v", tc.name, h.Op, h.Resumed, tc.resumed)
		}
		if _, err := e.fake.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		ch := fmt.Sprint(40 + i)
		if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: ch, Author: alice, Content: "still there?"}); err != nil {
			t.Fatal(err)
		}
		e.waitBot(t, ch, "You said: still there?")
	}
}

func TestRateLimitWaitedOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t)
	e.fake.RateLimit(discordtest.RouteCreateMessage, discordtest.RateLimit{RetryAfter: 100 * time.Millisecond})
	if _, err := e.fake.SendMessage(testCtx(t), discordtest.MessageCreate{ChannelID: "50", Author: alice, Content: "limited"}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, "50", "You said: limited")
	var limited bool
	for _, r := range e.fake.Requests() {
		limited = limited || (r.Route == discordtest.RouteCreateMessage && r.Status == http.StatusTooManyRequests)
	}
	if !limited {
		t.Errorf("no 429 was served; the test did not exercise the limit")
	}
}
