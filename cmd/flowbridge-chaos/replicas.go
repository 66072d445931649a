package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/loadkit"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// -replicas: several flowbridge processes on one PostgreSQL database, each
// with its own Socket Mode connection to the one fake Slack app (which
// spreads events over the sockets and redelivers, on another socket, an
// event not acknowledged within its deadline) and its own shards of the
// fake Discord (two shards). Users talk in Slack threads and DMs and in
// Discord guild channels and DMs, a burst of messages at a time, so that
// two messages of one conversation reach two replicas at once. Replicas are
// killed with SIGKILL and restarted (-kill-every), or lose their Slack
// socket or a Discord shard while they live (-drop-every). What became of
// each message is read from the fakes' records, as -kill-every's is
// (ledger.go), and the agent's view of each conversation from the fake
// workspace's sessions.

const (
	// quietFor is how long the bridge must have sent nothing, at the end,
	// before the records are read: late duplicates come within it.
	quietFor = time.Second
	// replicaShards is the fake Discord's shard count in -replicas runs.
	replicaShards = 2
	// maxReplicas is Slack's cap on an app's Socket Mode connections.
	maxReplicas = slacktest.MaxSocketConnections
	// settleTimeout bounds the wait for the last answers once the users
	// stop. It outlasts flowbridge's default conversation lease (15 s): a
	// conversation whose replica died waits for its lease to lapse.
	settleTimeout = 30 * time.Second
)

// defaultTestDSN is the database -dsn defaults to when
// FLOWBRIDGE_TEST_DATABASE_URL is not set: the one CI and the development
// machines run.
const defaultTestDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// replicaGuilds are the fake Discord's guilds: two on each shard.
var replicaGuilds = func() []string {
	var out []string
	for n := range 2 {
		for shard := range replicaShards {
			out = append(out, strconv.FormatUint(uint64(n*replicaShards+shard+1)<<22|uint64(n), 10))
		}
	}
	return out
}()

// replicaShardIDs returns the Discord shards replica i of n runs, nil for
// none. One replica runs both; with more, replica 0 runs shard 0 (and so
// the DMs and the slash commands), replica 1 shard 1, and the others no
// Discord at all. A shard held by two replicas would have its events sent
// to both (flowbridge does not coordinate them, see the README), and
// Discord redelivers nothing to a new session, so a standby holding a shard
// buys nothing: a shard's availability comes from restarting its replica.
func replicaShardIDs(i, n int) []int {
	switch {
	case n == 1:
		return []int{0, 1}
	case i < replicaShards:
		return []int{i}
	}
	return nil
}

// repConv is one simulated conversation of a -replicas run, alone in its
// channel: a Slack thread started by a mention (each message from a user
// of its own), a Slack DM (each message in a thread of its own), a Discord
// guild channel or a Discord DM (each message referenced by its answer).
// So a notice names its message (ledger.go).
type repConv struct {
	id       int
	platform string // "slack" or "discord"
	kind     string // "thread", "dm" or "channel"
	channel  string
	guild    string
	user     string
	root     string // a Slack thread's first message, once sent
}

// repOffer is one message offered: its tally in the live ledger, and what
// the count needs.
type repOffer struct {
	conv    *repConv
	t       *tally
	eventID string // Slack
	msgID   string // Discord
	key     string // its inbox key, as the adapters make it
	sent    bool   // the fake took it (Discord: a shard session existed)
}

// replica is one flowbridge process slot: restarted in place after a kill.
type replica struct {
	idx     int
	cfgPath string
	admin   string // host:port of /readyz
	shards  []int
	proc    *loadkit.Child
	starts  int
}

// replicaEnv is one -replicas run.
type replicaEnv struct {
	p        params
	n        int
	dir      string
	dsn      string // the run's schema
	schema   string
	drop     func(context.Context) error
	pg       *pgServer // -pg-restart-every's
	ws       *workspacetest.Server
	wsSrv    *httptest.Server
	slack    *slacktest.Server
	discord  *discordtest.Server
	fronts   []*httptest.Server
	frontTrs []*http.Transport
	reps     []*replica
	admin    *http.Client // for the replicas' /readyz
	convs    []*repConv
	think    time.Duration
	t0       time.Time

	mu        sync.Mutex
	live      *ledger
	offers    []*repOffer
	svc       map[marker]time.Duration // the agent's time per message
	touched   time.Time                // the bridges' latest call to a fake
	lastFault time.Time
	stats     repStats
	killedAt  []float64

	hooks hooks
}

// repStats count the faults a run made.
type repStats struct {
	Kills        int `json:"kills"`
	SlackDrops   int `json:"slack_socket_drops"`
	DiscordDrops int `json:"discord_shard_drops"`
	pgStats
}

// hooks let a test give a replicas run a database and a fault of its own
// (TestReplicasPGOutage).
type hooks struct {
	// database returns the PostgreSQL the run's schema goes in, in place of -dsn.
	database func() string
	// fault runs beside the users, the kills and the drops, until drive ends.
	fault func(drive context.Context, e *replicaEnv) error
}

// runReplicas runs the replicas scenario with n replicas and tears it all down.
func runReplicas(ctx context.Context, p params, n int, h hooks) (*replicaResult, error) {
	return loadkit.InTempDir(ctx, p.tmp, func(dir string) *replicaEnv {
		return &replicaEnv{p: p, n: n, hooks: h, dir: dir, live: newLedger(), svc: make(map[marker]time.Duration),
			admin: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	}, (*replicaEnv).run)
}

// usesSlack and usesDiscord say which platforms the run talks on.
func (e *replicaEnv) usesSlack() bool   { return e.p.Platform != "discord" }
func (e *replicaEnv) usesDiscord() bool { return e.p.Platform != "slack" }

// start builds the conversations, the schema, the fakes and their fronts,
// writes each replica's configuration and starts them all.
func (e *replicaEnv) Start(ctx context.Context) error {
	e.newConversations()
	base := e.p.DSN
	if e.hooks.database != nil {
		base = e.hooks.database()
	}
	if e.p.PGRestartEvery > 0 {
		pg, err := newPGServer(ctx, base, e.p.PGRestartCmd)
		if err != nil {
			return err
		}
		e.pg = pg
	}
	dsn, schema, drop, err := loadkit.NewSchema(ctx, base)
	if err != nil {
		return err
	}
	e.dsn, e.schema, e.drop = dsn, schema, drop
	e.startWorkspace()
	slackAPI, discordAPI, err := e.startPlatforms(ctx)
	if err != nil {
		return err
	}
	return e.startReplicas(ctx, slackAPI, discordAPI)
}

// newConversations spreads the conversations over the platforms and kinds,
// and sets the think time that offers -rate.
func (e *replicaEnv) newConversations() {
	p := e.p
	kinds := [][2]string{{"slack", "thread"}, {"slack", "dm"}, {"discord", "channel"}, {"discord", "dm"}}
	switch p.Platform {
	case "slack":
		kinds = kinds[:2]
	case "discord":
		kinds = kinds[2:]
	}
	for i := range p.Conversations {
		k := kinds[i%len(kinds)]
		c := &repConv{id: i, platform: k[0], kind: k[1]}
		switch k {
		case [2]string{"slack", "thread"}:
			c.channel = fmt.Sprintf("C%08d", i)
		case [2]string{"slack", "dm"}:
			c.channel, c.user = fmt.Sprintf("D%08d", i), fmt.Sprintf("U%08d", i)
		case [2]string{"discord", "channel"}:
			c.guild = replicaGuilds[(i/len(kinds))%len(replicaGuilds)]
			c.channel, c.user = fmt.Sprintf("8%017d", i), fmt.Sprintf("6%017d", i)
		default:
			c.channel, c.user = fmt.Sprintf("7%017d", i), fmt.Sprintf("6%017d", i)
		}
		e.convs = append(e.convs, c)
	}
	// Each conversation sends a burst per cycle (think plus the agent's
	// time per message); together they offer -rate messages a second.
	e.think = max(time.Duration(float64(p.Conversations*p.Burst)/p.Rate*float64(time.Second))-time.Duration(p.Burst)*p.APILatency, 0)
}

// startWorkspace starts the fake workspace, which records each message's
// time at the agent.
func (e *replicaEnv) startWorkspace() {
	p := e.p
	e.ws = workspacetest.New(workspacetest.Options{})
	e.ws.AddAgent(workspacetest.Agent{UUID: loadkit.AgentUUID, Delay: p.APILatency})
	wsHandler := e.ws.Handler()
	e.wsSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		e.touch()
		wsHandler.ServeHTTP(w, r)
		if m, ok := loadkit.FindMarker(body); ok {
			e.mu.Lock()
			if _, seen := e.svc[m]; !seen {
				e.svc[m] = time.Since(start)
			}
			e.mu.Unlock()
		}
	}))
}

// startPlatforms starts the fake Slack and Discord the run talks on, with
// their fronts, and returns the API URLs the bridges are given.
func (e *replicaEnv) startPlatforms(ctx context.Context) (slackAPI, discordAPI string, err error) {
	p := e.p
	if e.usesSlack() {
		e.slack = slacktest.NewServer(slacktest.Options{PingInterval: loadkit.SlackPingInterval, Redeliver: true, AckTimeout: p.SlackAckTimeout})
		front, err := e.newFront(e.slack.URL(), e.slackReplies)
		if err != nil {
			return "", "", err
		}
		slackAPI = front + "/api/"
	}
	if e.usesDiscord() {
		e.discord = discordtest.NewServer(discordtest.Options{Shards: replicaShards})
		for _, c := range e.convs {
			if c.kind != "channel" {
				continue
			}
			ch := discordgo.Channel{ID: c.channel, GuildID: c.guild, Type: discordgo.ChannelTypeGuildText, Name: fmt.Sprintf("load-%d", c.id)}
			if err := e.discord.AddChannel(ctx, ch); err != nil {
				return "", "", err
			}
		}
		if discordAPI, err = e.newFront(e.discord.URL, e.discordReplies); err != nil {
			return "", "", err
		}
	}

	return slackAPI, discordAPI, nil
}

// startReplicas writes each replica's configuration, starts them all and
// waits until each is ready.
func (e *replicaEnv) startReplicas(ctx context.Context, slackAPI, discordAPI string) error {
	for i := range e.n {
		admin, err := loadkit.FreePort()
		if err != nil {
			return err
		}
		r := &replica{idx: i, admin: admin, cfgPath: filepath.Join(e.dir, fmt.Sprintf("replica-%d.toml", i))}
		if e.usesDiscord() {
			r.shards = replicaShardIDs(i, e.n)
		}
		cfg, err := e.config(r, slackAPI, discordAPI)
		if err != nil {
			return err
		}
		if err := os.WriteFile(r.cfgPath, []byte(cfg), 0o600); err != nil {
			return err
		}
		e.reps = append(e.reps, r)
	}
	for _, r := range e.reps {
		if err := e.startReplica(r); err != nil {
			return err
		}
	}
	for _, r := range e.reps {
		if err := e.waitReady(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// newFront puts a proxy before a platform fake that reads the bridges'
// messages on their way (read), to pace the simulated users; the counts
// come from the fake's own records at the end. It returns the front's URL.
func (e *replicaEnv) newFront(target string, read func(r *http.Request, body []byte)) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: tr,
		// A killed bridge leaves its requests cut off: expected, not news.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.touch()
		if r.Method == http.MethodPost || r.Method == http.MethodPatch {
			body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
			if err != nil {
				http.Error(w, "read body", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			read(r, body)
		}
		proxy.ServeHTTP(w, r)
	}))
	e.fronts = append(e.fronts, srv)
	e.frontTrs = append(e.frontTrs, tr)
	return srv.URL, nil
}

func (e *replicaEnv) touch() {
	e.mu.Lock()
	e.touched = time.Now()
	e.mu.Unlock()
}

// slackReplies feeds the live ledger the bridges' Slack messages.
func (e *replicaEnv) slackReplies(r *http.Request, body []byte) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	switch method {
	case "chat.postMessage", "chat.update", "chat.postEphemeral":
	default:
		return
	}
	f, _ := url.ParseQuery(string(body))
	w := where{channel: f.Get("channel"), thread: f.Get("thread_ts"), user: f.Get("user")}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.live.reply(w, method+":"+strconv.Itoa(len(e.offers)), f.Get("text")+"\n"+f.Get("blocks"), time.Now())
}

// discordReplies feeds the live ledger the bridges' Discord messages.
func (e *replicaEnv) discordReplies(r *http.Request, body []byte) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v9/channels/")
	channel, tail, _ := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(tail, "messages") {
		return
	}
	var in struct {
		Content   string `json:"content"`
		Reference *struct {
			MessageID string `json:"message_id"`
		} `json:"message_reference"`
	}
	_ = json.Unmarshal(body, &in)
	w := where{channel: channel}
	if in.Reference != nil {
		w.ref = in.Reference.MessageID
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.live.reply(w, r.Method+" "+r.URL.Path, in.Content, time.Now())
}

// config is replica r's configuration: the run's schema, under an
// application_name of its own (replicaAppName), its admin port, Slack in
// Socket Mode and its Discord shards.
func (e *replicaEnv) config(r *replica, slackAPI, discordAPI string) (string, error) {
	dsn, err := withAppName(e.dsn, replicaAppName(e.schema, r.idx))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(loadkit.BaseConfig(e.wsSrv.URL, fmt.Sprintf("driver = \"postgres\"\ndsn = %q\n", dsn)+leaseKey(e.p.LeaseTTL)+orderHoldKey(e.p.OrderHold),
		e.p.Conversations*e.p.Burst+256, "dedupe_ttl = \"1h\"\n", r.admin, "info"))
	if slackAPI != "" {
		fmt.Fprintf(&b, `
[slack]
enabled = true
mode = "socket"
bot_token = %q
app_token = %q
api_url = %q
working_indicator = %q
`, e.slack.BotToken(), e.slack.AppToken(), slackAPI, e.p.WorkingIndicator)
	}
	if discordAPI != "" && len(r.shards) > 0 {
		ids := make([]string, len(r.shards))
		for i, s := range r.shards {
			ids[i] = strconv.Itoa(s)
		}
		fmt.Fprintf(&b, `
[discord]
enabled = true
token = %q
application_id = %q
api_url = %q
session_scope = "channel"
shard_count = %d
shard_ids = [%s]
`, e.discord.Token(), e.discord.ApplicationID(), discordAPI, replicaShards, strings.Join(ids, ", "))
	}
	return b.String(), nil
}

// leaseKey is the config line for store.lease_ttl, left out (flowbridge's
// default) when d is zero.
func leaseKey(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf("lease_ttl = %q\n", d.String())
}

// orderHoldKey is the config line for store.order_hold, left out
// (flowbridge's default) when hold is "".
func orderHoldKey(hold string) string {
	if hold == "" {
		return ""
	}
	return fmt.Sprintf("order_hold = %q\n", hold)
}

// startReplica starts r's process, its log numbered by its starts.
func (e *replicaEnv) startReplica(r *replica) error {
	c, err := loadkit.Start(e.p.flowbridge, []string{"run", "-config", r.cfgPath}, filepath.Join(e.dir, fmt.Sprintf("replica-%d-%02d.log", r.idx, r.starts)))
	if err != nil {
		return err
	}
	e.mu.Lock()
	r.proc = c
	r.starts++
	e.mu.Unlock()
	return nil
}

// waitReady waits until r's /readyz answers 200: its store open and its
// platforms connected.
func (e *replicaEnv) waitReady(ctx context.Context, r *replica) error {
	return e.waitAdmin(ctx, r, "ready", func(status int) bool { return status == http.StatusOK })
}

// waitServing waits until r's admin server answers at all (/healthz, any
// status). flowbridge listens there only from run on, after main has taken
// SIGTERM over from the Go runtime; before that, in the milliseconds after
// exec, a SIGTERM kills the process outright ("signal: terminated"), which
// says nothing of how flowbridge stops. A replica restarted just before the
// users stop is still there when stopAll comes.
func (e *replicaEnv) waitServing(ctx context.Context, r *replica) error {
	return e.waitAdmin(ctx, r, "serving", func(int) bool { return true })
}

// waitAdmin polls r's admin server until ok accepts an answer's status
// (/readyz for "ready", /healthz otherwise), r's process ends, or
// loadkit.StartTimeout passes.
func (e *replicaEnv) waitAdmin(ctx context.Context, r *replica, what string, ok func(status int) bool) error {
	ctx, cancel := context.WithTimeout(ctx, loadkit.StartTimeout)
	defer cancel()
	path := "/healthz"
	if what == "ready" {
		path = "/readyz"
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if status, answered := e.adminStatus(ctx, r, path); answered && ok(status) {
			return nil
		}
		select {
		case <-r.proc.Done:
			return fmt.Errorf("replica %d: %w", r.idx, r.proc.Exited())
		case <-ctx.Done():
			return fmt.Errorf("replica %d not %s within %s\n%s", r.idx, what, loadkit.StartTimeout, r.proc.LogTail())
		case <-tick.C:
		}
	}
}

// allReady reports whether every replica's /readyz answers 200 now.
func (e *replicaEnv) allReady(ctx context.Context) bool {
	for _, r := range e.reps {
		if !e.ready(ctx, r) {
			return false
		}
	}
	return true
}

// ready asks r's /readyz once.
func (e *replicaEnv) ready(ctx context.Context, r *replica) bool {
	status, answered := e.adminStatus(ctx, r, "/readyz")
	return answered && status == http.StatusOK
}

// adminStatus asks r's admin server for path once and returns the status,
// if it answered.
func (e *replicaEnv) adminStatus(ctx context.Context, r *replica, path string) (int, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.proc.AdminAddr(r.admin)+path, nil)
	if err != nil {
		return 0, false
	}
	resp, err := e.admin.Do(req)
	if err != nil {
		return 0, false
	}
	resp.Body.Close()
	return resp.StatusCode, true
}

// exitedAlone returns an error for the first replica whose process ended
// without being killed.
func (e *replicaEnv) exitedAlone() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.reps {
		select {
		case <-r.proc.Done:
			if !r.proc.Killed {
				return fmt.Errorf("replica %d: %w", r.idx, r.proc.Exited())
			}
		default:
		}
	}
	return nil
}

// run lets the users talk for -duration while the faults happen, lets the
// replicas answer what is left, stops them and counts.
func (e *replicaEnv) run(ctx context.Context) (*replicaResult, error) {
	p := e.p
	drive, stopDriving := context.WithCancelCause(ctx)
	defer stopDriving(nil)
	var users sync.WaitGroup
	defer users.Wait()
	e.t0 = time.Now()
	for _, c := range e.convs {
		users.Go(func() {
			if err := e.converse(drive, ctx, c); err != nil {
				stopDriving(err)
			}
		})
	}
	timer := time.NewTimer(p.Duration)
	var faults sync.WaitGroup
	faults.Go(func() {
		if err := e.faults(drive); err != nil {
			stopDriving(err)
		}
	})
	if e.p.pgFaulting() {
		faults.Go(func() {
			if err := e.pgFaults(drive); err != nil {
				stopDriving(err)
			}
		})
	}
	if e.hooks.fault != nil {
		faults.Go(func() {
			if err := e.hooks.fault(drive, e); err != nil {
				stopDriving(err)
			}
		})
	}
	select {
	case <-timer.C:
	case <-drive.Done():
	}
	timer.Stop()
	driven := time.Since(e.t0)
	stopDriving(nil)
	faults.Wait()
	users.Wait()
	if err := context.Cause(drive); err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	if !e.p.Restart {
		if err := e.settle(ctx); err != nil {
			return nil, err
		}
	}
	// With -restart, SIGTERM comes as soon as the users stop, with
	// answers in flight and messages queued: the next start must answer
	// what this one left.
	if err := e.stopAll(ctx); err != nil {
		return nil, err
	}
	kept := e.keptReplies()
	e.mu.Lock()
	starts := make([]int, len(e.reps)) // the run's, not the restart's
	for i, r := range e.reps {
		starts[i] = r.starts
	}
	e.mu.Unlock()
	if e.p.Restart {
		if err := e.restartAll(ctx); err != nil {
			return nil, err
		}
	}
	res, err := e.count(ctx, driven)
	if err != nil {
		return nil, err
	}
	res.KeptAtStop, res.Restarted, res.Starts = kept, e.p.Restart, starts
	res.PanicDetail = e.panicsInLogs()
	res.Panics = len(res.PanicDetail)
	if len(res.PanicDetail) > maxViolations {
		res.PanicDetail = res.PanicDetail[:maxViolations]
	}
	res.ElapsedSec = time.Since(e.t0).Seconds()
	return res, nil
}

// converse is one user: a burst of messages, a wait until each is answered
// or told (at most -reply-timeout), a pause, again, until drive ends. Sends
// use ctx, so a burst begun when drive ends is sent whole.
func (e *replicaEnv) converse(drive, ctx context.Context, c *repConv) error {
	cycle := e.think + time.Duration(e.p.Burst)*e.p.APILatency
	wait := time.Duration(0)
	if cycle > 0 {
		wait = mrand.N(cycle)
	}
	for seq := 0; ; {
		if !loadkit.Pause(drive, wait) {
			return nil
		}
		var dones []chan struct{}
		for range e.p.Burst {
			o, err := e.send(ctx, c, seq)
			seq++
			if err != nil {
				return fmt.Errorf("conversation %d: %w", c.id, err)
			}
			dones = append(dones, o.t.done)
		}
		t := time.NewTimer(e.p.ReplyTimeout)
		for _, d := range dones {
			select {
			case <-d:
			case <-t.C:
			case <-drive.Done():
			}
		}
		t.Stop()
		wait = 0
		if e.think > 0 {
			wait = mrand.N(2 * e.think)
		}
	}
}

// send offers message seq of c: registered in the live ledger first, so an
// answer racing the send finds it.
func (e *replicaEnv) send(ctx context.Context, c *repConv, seq int) (*repOffer, error) {
	m := marker{Conv: c.id, Seq: seq}
	text := "hello " + m.String() + " how are you"
	t := &tally{m: m, where: where{channel: c.channel}, done: make(chan struct{})}
	o := &repOffer{conv: c, t: t}
	var root string
	if c.platform != "discord" && c.kind == "dm" {
		// The thread hangs from a message Slack holds, as it would
		// (see killEnv.offer).
		root = e.slack.AddThreadMessage(slacktest.ThreadMessage{Channel: c.channel, User: c.user, Text: "a thread of " + m.String()})
	}
	e.mu.Lock()
	switch {
	case c.platform == "discord":
		// Named before it is sent, so a notice referencing it is matched
		// before the fake has answered the send; a snowflake of its time,
		// as catch-up's watermark reads it.
		o.msgID = e.discord.NewID()
		o.key = "discord/msg/" + o.msgID
		t.where.ref, t.id = o.msgID, o.msgID
	case c.kind == "dm":
		t.where.thread = root
	default:
		t.where.user = fmt.Sprintf("U%05dX%06d", c.id, seq)
	}
	t.offered = time.Now()
	e.live.add(t)
	e.offers = append(e.offers, o)
	e.mu.Unlock()

	var err error
	var eventID, ts string
	switch {
	case c.platform == "discord":
		mc := discordtest.MessageCreate{ID: o.msgID, ChannelID: c.channel, GuildID: c.guild, Author: discordgo.User{ID: c.user, Username: "u" + c.user[len(c.user)-6:]}, Content: text}
		if c.guild != "" {
			mc.Content = "<@" + e.discord.BotUser().ID + "> " + text
		}
		_, err = e.discord.SendMessage(ctx, mc)
		if errors.Is(err, discordtest.ErrNoSession) {
			// No replica has identified the shard yet: Discord would not
			// deliver it either. It counts as offered, never acknowledged.
			err = nil
			t.finish()
		} else if err == nil {
			o.sent = true
		}
	case c.kind == "dm":
		var d slacktest.Delivery
		d, err = e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: c.channel, ChannelType: "im", User: c.user, Text: text, ThreadTS: t.where.thread})
		eventID, ts, o.sent = d.EventID, d.TS, err == nil
	default:
		var d slacktest.Delivery
		d, err = e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: c.channel, User: t.where.user, Text: text, ThreadTS: c.root})
		if err == nil && c.root == "" {
			c.root = d.TS
		}
		eventID, ts, o.sent = d.EventID, d.TS, err == nil
	}
	e.mu.Lock()
	if eventID != "" {
		o.eventID, t.id = eventID, eventID
		o.key = "slack/msg/" + c.channel + "/" + ts
	}
	e.mu.Unlock()
	return o, err
}

// faults kills and drops on their timers until ctx ends.
func (e *replicaEnv) faults(ctx context.Context) error {
	next := func(d time.Duration) <-chan time.Time {
		if d <= 0 {
			return nil
		}
		// Uniform over [d/2, 3d/2): about d apart, never in lockstep with
		// the users' cycles.
		return time.After(d/2 + mrand.N(d))
	}
	kill, drop := next(e.p.KillEvery), next(e.p.DropEvery)
	var rotation []int
	drops := 0
	for {
		if err := e.exitedAlone(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kill:
			if len(rotation) == 0 {
				rotation = mrand.Perm(e.n)
			}
			r := e.reps[rotation[0]]
			rotation = rotation[1:]
			if err := e.killReplica(r); err != nil {
				return err
			}
			kill = next(e.p.KillEvery)
		case <-drop:
			e.dropOne(ctx, drops)
			drops++
			drop = next(e.p.DropEvery)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// killReplica SIGKILLs r and starts it again at once on the same config.
func (e *replicaEnv) killReplica(r *replica) error {
	r.proc.Kill()
	e.mu.Lock()
	e.stats.Kills++
	e.killedAt = append(e.killedAt, time.Since(e.t0).Seconds())
	e.lastFault = time.Now()
	e.mu.Unlock()
	return e.startReplica(r)
}

// dropOne drops, in turn, one live Slack socket and one Discord shard's
// connection, each picked at random, while their processes live.
func (e *replicaEnv) dropOne(ctx context.Context, k int) {
	slackTurn := e.usesSlack() && (k%2 == 0 || !e.usesDiscord())
	if slackTurn {
		ids := e.slack.LiveConnectionIDs()
		if len(ids) == 0 {
			return
		}
		if e.slack.DropConnectionID(ids[mrand.N(len(ids))]) == nil {
			e.mu.Lock()
			e.stats.SlackDrops++
			e.lastFault = time.Now()
			e.mu.Unlock()
		}
		return
	}
	// A shard that has not heartbeated yet (its replica restarting) is
	// skipped rather than waited for.
	wait, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if e.discord.DropShard(wait, mrand.N(replicaShards), replicaShards) == nil {
		e.mu.Lock()
		e.stats.DiscordDrops++
		e.lastFault = time.Now()
		e.mu.Unlock()
	}
}

// acked returns the offers the platform side counts as acknowledged: a
// Slack event any of whose deliveries was acked over a socket, and a
// Discord message recorded in the shared inbox. Discord acknowledges
// nothing of a gateway event: the inbox record is where flowbridge takes
// it on, and a message dispatched to a shard whose process was dying, or
// down, was never taken on (Discord does not redeliver it to a new session).
// It returns the inbox too: each key's seq, the order flowbridge took the
// messages on in.
func (e *replicaEnv) acked(ctx context.Context) (map[*repOffer]bool, map[string]int64, error) {
	ackedEvents := map[string]bool{}
	if e.slack != nil {
		event := map[string]string{}
		for _, d := range e.slack.Deliveries() {
			event[d.EnvelopeID] = d.EventID
		}
		for _, a := range e.slack.Acks() {
			if id := event[a.EnvelopeID]; id != "" {
				ackedEvents[id] = true
			}
		}
	}
	inbox, err := e.inbox(ctx)
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[*repOffer]bool, len(e.offers))
	for _, o := range e.offers {
		_, recorded := inbox[o.key]
		if o.eventID != "" && ackedEvents[o.eventID] || o.msgID != "" && recorded {
			out[o] = true
		}
	}
	return out, inbox, nil
}

// inbox reads the inbox of the run's schema: each message key's seq.
func (e *replicaEnv) inbox(ctx context.Context) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT key, seq FROM inbox WHERE starts_with(key, 'slack/msg/') OR starts_with(key, 'discord/msg/')")
	if err != nil {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	out := map[string]int64{}
	var key string
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&key, &seq}, func() error {
		out[key] = seq
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	return out, nil
}

// settle waits, at most settleTimeout (or -reply-timeout if longer), until
// every acknowledged message, and every Discord message offered, is
// answered or told, the bridges have called
// no fake for quietFor, an event left on a socket that died has had its
// deadline to be redelivered, and every replica is ready again: a shard
// that was dropped has resumed, and so been replayed what it missed.
func (e *replicaEnv) settle(ctx context.Context) error {
	deadline := time.Now().Add(max(e.p.ReplyTimeout, settleTimeout))
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := e.exitedAlone(); err != nil {
			return err
		}
		acked, _, err := e.acked(ctx)
		if err != nil {
			return err
		}
		e.mu.Lock()
		waiting := 0
		for o := range acked {
			if !o.t.resolved() {
				waiting++
			}
		}
		// A Discord message posted while its shard was away is not
		// recorded until the gateway replays it or a catch-up reads it
		// from the channel's history, which waits out Discord's rate
		// limits: it is still on its way, not lost, until the deadline.
		for _, o := range e.offers {
			if o.msgID != "" && !acked[o] && !o.t.resolved() {
				waiting++
			}
		}
		idle := time.Since(e.touched)
		sinceFault := time.Since(e.lastFault)
		e.mu.Unlock()
		if waiting == 0 && idle >= quietFor && sinceFault > e.p.SlackAckTimeout+quietFor && e.allReady(ctx) || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// restartAll starts every replica again once all have stopped, waits until
// they are ready and have answered what the stopped ones left (answers kept
// in the outbox, entries still received), then stops them again.
func (e *replicaEnv) restartAll(ctx context.Context) error {
	for _, r := range e.reps {
		if err := e.startReplica(r); err != nil {
			return err
		}
	}
	for _, r := range e.reps {
		if err := e.waitReady(ctx, r); err != nil {
			return err
		}
	}
	if err := e.settle(ctx); err != nil {
		return err
	}
	return e.stopAll(ctx)
}

// keptReplies counts the answers the replicas kept in the outbox when they
// stopped ("kept for the next start" in their logs).
func (e *replicaEnv) keptReplies() int {
	logs, _ := filepath.Glob(filepath.Join(e.dir, "replica-*.log"))
	n := 0
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			n += bytes.Count(b, []byte("kept for the next start"))
		}
	}
	return n
}

// stopAll stops every replica with SIGTERM, at once, once each is serving
// (one restarted by a kill just before may still be starting): each must
// then stop cleanly, with exit status 0.
func (e *replicaEnv) stopAll(ctx context.Context) error {
	for _, r := range e.reps {
		if err := e.waitServing(ctx, r); err != nil {
			return fmt.Errorf("before stopping: %w", err)
		}
	}
	errs := make([]error, len(e.reps))
	var wg sync.WaitGroup
	for i, r := range e.reps {
		wg.Go(func() {
			if err := r.proc.Stop(loadkit.StopTimeout); err != nil {
				errs[i] = fmt.Errorf("stopping replica %d: %w\n%s", r.idx, err, r.proc.LogTail())
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// close stops what still runs, drops the schema and closes the fakes.
func (e *replicaEnv) Close() error {
	var errs []error
	for _, r := range e.reps {
		if r.proc != nil {
			if err := r.proc.Stop(loadkit.StopTimeout); err != nil && !r.proc.Killed {
				errs = append(errs, fmt.Errorf("stopping replica %d: %w", r.idx, err))
			}
		}
	}
	if e.drop != nil && e.p.tmp.Keep {
		// Kept with the logs, so that what the replicas left can be read.
		fmt.Fprintf(e.p.tmp.Log, "kept schema %s\n", e.schema)
	} else if e.drop != nil {
		if err := e.drop(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	e.admin.CloseIdleConnections()
	for i, f := range e.fronts {
		f.CloseClientConnections()
		f.Close()
		e.frontTrs[i].CloseIdleConnections()
	}
	if e.slack != nil {
		e.slack.Close()
	}
	if e.discord != nil {
		e.discord.Close()
	}
	closeWorkspace(e.wsSrv, e.ws)
	return errors.Join(errs...)
}

// count reads the fakes' records into a fresh ledger, as the kill
// scenario's count does, then the agent's sessions for order and session
// changes.
func (e *replicaEnv) count(ctx context.Context, driven time.Duration) (*replicaResult, error) {
	acked, inbox, err := e.acked(ctx)
	if err != nil {
		return nil, err
	}
	l := newLedger()
	byMarker, lat := e.tallies(l, acked, driven)
	agentCalls, called := e.applyRecords(l)
	res := e.newResult(l, driven)
	res.AgentCalls = agentCalls
	res.AnsweredPerSec = float64(lat.answered) / driven.Seconds()
	res.AddedLatencyMS = loadkit.QuantilesOf(lat.added)
	res.EndToEndMS = loadkit.QuantilesOf(lat.e2e)
	e.countDeliveries(res)
	first := firstAnswers(l, byMarker)
	for _, o := range byMarker {
		e.countOffer(res, l, o, acked[o], first)
	}
	e.agentView(res, e.orderOf(byMarker, inbox, called))
	for i := range res.Violations {
		v := &res.Violations[i]
		if o := byMarker[markerOf(v.Marker)]; o != nil {
			v.Channel = o.conv.platform + " " + o.conv.kind + " " + v.Channel
		}
	}
	return res, nil
}

// latencies are the answers' times: end to end, added (minus the agent's
// own) and how many came while the users talked.
type latencies struct {
	e2e, added []time.Duration
	answered   int
}

// tallies adds every offer to l, as acknowledged or not, and returns the
// offers by marker and the answers' latencies as the live ledger saw them.
func (e *replicaEnv) tallies(l *ledger, acked map[*repOffer]bool, driven time.Duration) (map[marker]*repOffer, latencies) {
	e.mu.Lock()
	defer e.mu.Unlock()
	byMarker := make(map[marker]*repOffer, len(e.offers))
	var lat latencies
	for _, o := range e.offers {
		w := o.t.where
		if o.eventID != "" {
			// A Slack notice kept in the outbox names its message's inbox
			// key in its metadata, as in the kill scenario's count: without
			// it, the notice telling one message of a thread that
			// flowbridge restarted was matched by conversation, to its
			// answered sibling, and the message it told counted as untold.
			w.key = o.key
		}
		l.add(&tally{m: o.t.m, offered: o.t.offered, acked: acked[o], id: o.t.id, where: w})
		byMarker[o.t.m] = o
		if at := o.t.answeredAt; !at.IsZero() {
			d := at.Sub(o.t.offered)
			lat.e2e = append(lat.e2e, d)
			lat.added = append(lat.added, max(d-e.svc[o.t.m], 0))
			if at.Sub(e.t0) <= driven {
				lat.answered++
			}
		}
	}
	return byMarker, lat
}

// applyRecords applies to l, in order, the agent's requests and the
// messages the bridges posted, and returns the agent calls and each
// message's first.
func (e *replicaEnv) applyRecords(l *ledger) (int, map[marker]time.Time) {
	var recs []happening
	agentCalls := 0
	called := map[marker]time.Time{}
	for _, r := range e.ws.Requests() {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.Path, "/chat") {
			continue
		}
		if m, ok := loadkit.FindMarker(r.Body); ok {
			agentCalls++
			if _, seen := called[m]; !seen {
				called[m] = r.At
			}
			recs = append(recs, happening{r.At, func() { l.call(m) }})
		}
	}
	if e.slack != nil {
		recs = append(recs, slackReplies(e.slack, l)...)
	}
	if e.discord != nil {
		recs = append(recs, discordRecords(e.discord, l)...)
	}
	applyInOrder(recs)
	return agentCalls, called
}

// discordRecords returns, as ledger records, what the bots posted or
// edited in the fake Discord's channels.
func discordRecords(d *discordtest.Server, l *ledger) []happening {
	var recs []happening
	for _, m := range d.Messages() {
		if m.Source != discordtest.SourceChannel || m.Deleted {
			continue
		}
		w := where{channel: m.ChannelID}
		if m.Reference != nil {
			w.ref = m.Reference.MessageID
		}
		at := m.Timestamp
		if m.Edits > 0 {
			at = m.Edited
		}
		id, text := "discord:"+m.ID, m.Content
		recs = append(recs, happening{at, func() { l.reply(w, id, text, at) }})
	}
	return recs
}

// newResult is the run's result with the ledger's figures and the run's.
func (e *replicaEnv) newResult(l *ledger, driven time.Duration) *replicaResult {
	res := &replicaResult{killResult: *newKillResult(e.p, l, e.t0)}
	res.Mode = "replicas"
	res.Replicas, res.Store, res.Schema, res.Burst = e.n, "postgres", e.schema, e.p.Burst
	res.Platform, res.OrderHold = e.p.Platform, e.p.OrderHold
	res.DurationSec, res.DropEveryMS = driven.Seconds(), loadkit.MS(e.p.DropEvery)
	res.PGKillEveryMS, res.PGRestartEveryMS = loadkit.MS(e.p.PGKillEvery), loadkit.MS(e.p.PGRestartEvery)
	res.ThinkMS = loadkit.MS(e.think)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.reps {
		res.Shards = append(res.Shards, r.shards)
		res.Starts = append(res.Starts, r.starts)
	}
	res.repStats = e.stats
	res.killStats.Kills = e.stats.Kills
	res.KilledAtSec = slices.Clone(e.killedAt)
	res.OfferedPerSec = float64(res.MessagesOffered) / driven.Seconds()
	return res
}

// countDeliveries counts the fake Slack's first deliveries and redeliveries.
func (e *replicaEnv) countDeliveries(res *replicaResult) {
	if e.slack == nil {
		return
	}
	for _, d := range e.slack.Deliveries() {
		if d.Type != slacktest.TypeEventsAPI {
			continue
		}
		if d.RetryAttempt == 0 {
			res.Deliveries++
		} else {
			res.Redeliveries++
		}
	}
}

// firstAnswers is each conversation's first answer.
func firstAnswers(l *ledger, byMarker map[marker]*repOffer) map[int]time.Time {
	first := map[int]time.Time{}
	for _, o := range byMarker {
		if t := l.offers[o.t.m]; t != nil && !t.answeredAt.IsZero() {
			if at, ok := first[o.conv.id]; !ok || t.answeredAt.Before(at) {
				first[o.conv.id] = t.answeredAt
			}
		}
	}
	return first
}

// countOffer counts what became of one offer by platform: offered, not
// delivered, not acknowledged, lost, told "try again".
func (e *replicaEnv) countOffer(res *replicaResult, l *ledger, o *repOffer, acked bool, firstAnswer map[int]time.Time) {
	if o.conv.platform == "slack" {
		res.SlackOffered++
	} else {
		res.DiscordOffered++
	}
	if !o.sent {
		res.NotDelivered++
	}
	if !acked && o.conv.platform == "discord" {
		res.DiscordNotAcked++
	}
	t := l.offers[o.t.m]
	if t == nil {
		return
	}
	if !t.resolved() {
		res.Lost++
	}
	if slices.ContainsFunc(t.told, func(s string) bool { return strings.Contains(s, "cannot save") }) {
		res.ToldTryAgain++
		if len(t.answers) > 0 {
			res.ToldTryAgainAnswered++
		}
	}
	if slices.ContainsFunc(t.told, func(s string) bool { return strings.Contains(s, "could not read its session store") }) {
		res.ToldCouldNotRead++
	}
	for _, s := range t.told {
		if restartNotice(s) {
			continue
		}
		if res.NoticesByText == nil {
			res.NoticesByText = map[string]int{}
		}
		first, _, _ := strings.Cut(s, "\n")
		res.NoticesByText[oneLine(first)]++
	}
	if o.conv.platform != "discord" || t.resolved() {
		return
	}
	// A message posted while its shard's replica was down reaches the next
	// process that holds the shard when it RESUMEs the dead one's session
	// (Discord replays what the session missed); a session that could not
	// be resumed leaves it to the channels' history, which the first message
	// of a DM conversation never seen is not in (a bot cannot list its DMs).
	// The fake keeps every session resumable, so both must be 0; the DM's
	// are counted apart.
	if first, ok := firstAnswer[o.conv.id]; o.conv.kind == "dm" && (!ok || !first.Before(t.offered)) {
		res.DiscordFirstLost++
		return
	}
	res.DiscordLost++
	if len(res.DiscordLostDetail) < maxViolations {
		res.DiscordLostDetail = append(res.DiscordLostDetail, fmt.Sprintf("%s in %s %s (message %s, offered at %.3f s, acknowledged %v)",
			t.m, o.conv.kind, o.conv.channel, o.msgID, t.offered.Sub(e.t0).Seconds(), acked))
	}
}

// orderOf is what agentView judges the agent's order by.
func (e *replicaEnv) orderOf(byMarker map[marker]*repOffer, inbox map[string]int64, called map[marker]time.Time) order {
	ord := order{seq: map[marker]int64{}, called: called, acked: map[marker]time.Time{}}
	firstAck := map[string]time.Time{} // by event_id
	if e.slack != nil {
		event := map[string]string{}
		for _, d := range e.slack.Deliveries() {
			event[d.EnvelopeID] = d.EventID
		}
		for _, a := range e.slack.Acks() {
			if id := event[a.EnvelopeID]; id != "" {
				if at, ok := firstAck[id]; !ok || a.At.Before(at) {
					firstAck[id] = a.At
				}
			}
		}
	}
	for m, o := range byMarker {
		if seq, ok := inbox[o.key]; ok {
			ord.seq[m] = seq
		}
		if o.conv.platform == "slack" {
			ord.acked[m] = firstAck[o.eventID]
		}
	}
	return ord
}

// order is what agentView judges the agent's order by, per message: its
// inbox seq (the order flowbridge recorded it in), when its first request
// reached the agent, and, for Slack, when its first acknowledgement came
// (after it was recorded and committed).
type order struct {
	seq    map[marker]int64
	called map[marker]time.Time
	acked  map[marker]time.Time // Slack messages only
}

// agentView reads each session's messages as the fake agent received them.
// A conversation's messages must all go to one session (the run neither
// resets nor expires one), and come in order. Which order: the user's
// sending order cannot always be kept. A platform may deliver a message
// after a later one (Slack redelivers an event whose first delivery died
// with its replica after the events that followed it); two messages sent
// at once to two replicas are recorded in either order, and one recorded
// first may be committed, and so seen, last; one process may record
// messages that arrive together in another order than it dispatches them.
// So a violation is a message the agent received after one that came after
// it in every order the harness can see: sent later, recorded later and,
// on Slack, sent to the agent only after this one had been acknowledged
// (so this one was committed, and pending in the inbox, when the other was
// chosen to go first). Inversions of sending order short of that are
// counted apart.
func (e *replicaEnv) agentView(res *replicaResult, ord order) {
	sessionsOf := map[int]map[string]bool{}
	for _, s := range e.ws.Sessions(loadkit.AgentUUID) {
		seen := map[int][]marker{} // by conversation, in the agent's order
		for _, msg := range e.ws.Messages(s) {
			m, ok := loadkit.FindMarker([]byte(msg))
			if !ok {
				continue
			}
			if sessionsOf[m.Conv] == nil {
				sessionsOf[m.Conv] = map[string]bool{}
			}
			sessionsOf[m.Conv][s] = true
			seq, recorded := ord.seq[m]
			var violated *marker
			sentLater, recordedLater := false, false
			for _, p := range seen[m.Conv] {
				pseq, ok := ord.seq[p]
				later := ok && recorded && pseq > seq
				ackedAt, slack := ord.acked[m]
				before := !slack || !ackedAt.IsZero() && ackedAt.Before(ord.called[p])
				switch {
				case p.Seq > m.Seq && later && before:
					violated = &p
				case p.Seq > m.Seq:
					sentLater = true
				case later:
					recordedLater = true
				}
			}
			switch {
			case violated != nil:
				res.OrderViolations++
				if len(res.OrderDetail) < maxViolations {
					d := fmt.Sprintf("session %s: %s (inbox seq %d) after %s (inbox seq %d, at the agent %.3f s)", s, m, seq, *violated, ord.seq[*violated], ord.called[*violated].Sub(e.t0).Seconds())
					if at := ord.acked[m]; !at.IsZero() {
						d += fmt.Sprintf("; the first acknowledged at %.3f s", at.Sub(e.t0).Seconds())
					}
					res.OrderDetail = append(res.OrderDetail, d)
				}
			case sentLater:
				res.SendOrderInversions++
			case recordedLater:
				res.InboxOrderInversions++
			}
			seen[m.Conv] = append(seen[m.Conv], m)
		}
	}
	for conv, ss := range sessionsOf {
		if len(ss) > 1 {
			res.SessionChanged++
			if len(res.SessionDetail) < maxViolations {
				res.SessionDetail = append(res.SessionDetail, fmt.Sprintf("conversation %d (%s %s) in %d sessions", conv, e.convs[conv].platform, e.convs[conv].kind, len(ss)))
			}
		}
	}
	slices.Sort(res.SessionDetail)
}

// markerOf parses a marker's String.
func markerOf(s string) marker {
	m, _ := loadkit.FindMarker([]byte(s))
	return m
}

// replicaResult is a -replicas run's figures: -kill-every's, and those only
// replicas can break. The must-be-zero ones are -kill-every's three plus
// order_violations and sessions_changed.
type replicaResult struct {
	killResult
	repStats
	Replicas int    `json:"replicas"`
	Store    string `json:"store"`
	// Schema is the run's own, dropped at its end.
	Schema   string `json:"schema"`
	Platform string `json:"platform"`
	Burst    int    `json:"burst"`
	// OrderHold is the replicas' store.order_hold, "" for flowbridge's
	// default: what keeps the platform's order across replicas.
	OrderHold string  `json:"order_hold,omitempty"`
	ThinkMS   float64 `json:"think_ms"`
	// Shards are the Discord shards each replica runs; Starts how often
	// each was started while the users talked (-restart's start after
	// the end is not counted).
	Shards      [][]int `json:"discord_shards_by_replica"`
	Starts      []int   `json:"starts_by_replica"`
	DurationSec float64 `json:"duration_sec"`
	DropEveryMS float64 `json:"drop_every_ms"`

	SlackOffered   int `json:"slack_offered"`
	DiscordOffered int `json:"discord_offered"`
	// NotDelivered are messages the fake could not dispatch: no replica had
	// identified their Discord shard yet.
	NotDelivered int `json:"not_delivered"`
	// DiscordNotAcked are the Discord messages never recorded: sent to a
	// shard whose replica was down or dying.
	DiscordNotAcked int `json:"discord_not_acked"`
	// DiscordLost are Discord messages neither answered nor told, whether
	// or not a replica was up to receive them: must be 0, as the next
	// process resumes the shard's session and Discord replays what it
	// missed (or, were the session not resumable, a new session catches
	// up on its guilds' channels and its served DMs' history).
	// DiscordFirstLost are the first messages of a DM conversation, sent
	// while shard 0 was down, lost: must be 0 too, as the fake keeps the
	// sessions resumable; only a session that could not be resumed loses
	// them, as a bot cannot list its DM channels.
	DiscordLost       int      `json:"discord_lost"`
	DiscordFirstLost  int      `json:"discord_dm_first_contact_lost"`
	DiscordLostDetail []string `json:"discord_lost_detail,omitempty"`
	// The users told "cannot save … try again" (and of them, those
	// answered all the same), and the messages of any platform neither
	// answered nor told (acknowledged or not): TestReplicasPGOutage wants
	// 0, 0 and 0.
	ToldTryAgain         int `json:"told_try_again,omitempty"`
	ToldTryAgainAnswered int `json:"told_try_again_then_answered,omitempty"`
	// ToldCouldNotRead were told flowbridge "could not read its session
	// store"; NoticesByText counts every notice but "restarted while…" by
	// its text (its first line, cut short), "try again" or not.
	ToldCouldNotRead int            `json:"told_could_not_read,omitempty"`
	NoticesByText    map[string]int `json:"notices_by_text,omitempty"`
	// PGKillEveryMS and PGRestartEveryMS are -pg-kill-every and
	// -pg-restart-every: with either, a user told "cannot save" or "could
	// not read" breaks a promise (the store waits a fault out).
	PGKillEveryMS    float64 `json:"pg_kill_every_ms,omitempty"`
	PGRestartEveryMS float64 `json:"pg_restart_every_ms,omitempty"`
	// Panics are the lines of the replicas' logs that mention a panic
	// (PanicDetail, the first of them): must be 0.
	Panics         int               `json:"panics_in_logs"`
	PanicDetail    []string          `json:"panic_detail,omitempty"`
	Lost           int               `json:"lost,omitempty"`
	AnsweredPerSec float64           `json:"answered_per_sec"`
	AddedLatencyMS loadkit.Quantiles `json:"added_latency_ms"`
	EndToEndMS     loadkit.Quantiles `json:"end_to_end_ms"`

	// OrderViolations count messages the agent received after one of their
	// conversation that came after them in every order seen (agentView);
	// SessionChanged, conversations whose messages went to more than one
	// session. Both must be 0. SendOrderInversions and InboxOrderInversions
	// count messages received after one that came later in one of the two
	// orders only (see agentView): counted, not failed.
	OrderViolations      int `json:"order_violations"`
	SendOrderInversions  int `json:"send_order_inversions"`
	InboxOrderInversions int `json:"inbox_order_inversions"`
	SessionChanged       int `json:"sessions_changed"`
	// KeptAtStop are the answers the replicas had not posted when the run
	// ended with SIGTERM, kept in the outbox; with Restarted, the replicas
	// were started again to post them before anything was counted.
	KeptAtStop    int      `json:"replies_kept_at_stop"`
	Restarted     bool     `json:"restarted"`
	OrderDetail   []string `json:"order_detail,omitempty"`
	SessionDetail []string `json:"session_detail,omitempty"`
}

// broken returns the promises the run saw broken, or nil.
func (r *replicaResult) broken() error {
	errs := []error{r.killResult.broken()}
	if r.OrderViolations > 0 {
		errs = append(errs, fmt.Errorf("%d messages reached the agent after one of their conversation sent and recorded after them", r.OrderViolations))
	}
	if r.DiscordLost > 0 {
		errs = append(errs, fmt.Errorf("%d Discord messages neither answered nor told", r.DiscordLost))
	}
	if r.DiscordFirstLost > 0 {
		errs = append(errs, fmt.Errorf("%d first messages of a new Discord DM, posted while shard 0 was down, neither answered nor told", r.DiscordFirstLost))
	}
	if r.SessionChanged > 0 {
		errs = append(errs, fmt.Errorf("%d conversations changed session with no reset or expiry", r.SessionChanged))
	}
	if r.Panics > 0 {
		errs = append(errs, fmt.Errorf("%d lines of the replicas' logs mention a panic", r.Panics))
	}
	if r.PGKillEveryMS > 0 || r.PGRestartEveryMS > 0 {
		if n := r.ToldTryAgain + r.ToldCouldNotRead; n > 0 {
			errs = append(errs, fmt.Errorf("%d users told \"cannot save\" or \"could not read\" through database faults the store should wait out", n))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%d replicas: %w", r.Replicas, err)
	}
	return nil
}

// printReplicaTable prints one -replicas run's figures.
func printReplicaTable(w io.Writer, r *replicaResult) {
	fmt.Fprintf(w, "%d replicas on PostgreSQL, Discord shards by replica %v; %s, %d conversations, bursts of %d, %.0f messages/s offered, API %.0f ms, %.0f s, %d cores\n",
		r.Replicas, r.Shards, r.Platform, r.Conversations, r.Burst, r.Rate, r.APILatencyMS, r.DurationSec, r.Cores)
	fmt.Fprintf(w, "store.order_hold: %s\n", cmp.Or(r.OrderHold, "flowbridge's default"))
	fmt.Fprintf(w, "faults: %d SIGKILLs (about every %.0f ms) at %.1f s; %d Slack socket and %d Discord shard drops (about every %.0f ms); starts by replica %v\n",
		r.Kills, r.KillEveryMS, r.KilledAtSec, r.SlackDrops, r.DiscordDrops, r.DropEveryMS, r.Starts)
	if r.PGKillEveryMS > 0 || r.PGRestartEveryMS > 0 {
		fmt.Fprintf(w, "database faults: %d rounds of pg_terminate_backend (about every %.0f ms), %d backends ended; %d restarts (about every %.0f ms) at %.1f s, down %.1f s, every /readyz 200 %.2f s after (-1: not within %s)\n",
			r.PGKills, r.PGKillEveryMS, r.PGBackendsKilled, r.PGRestarts, r.PGRestartEveryMS, r.PGRestartedAtSec, r.PGDownSec, r.PGReadyAfterSec, pgReadyWithin)
	}
	printReplicaFigures(w, r)
	for _, v := range r.Violations {
		fmt.Fprintf(w, "BROKEN: %s\n", v)
	}
	for _, s := range r.OrderDetail {
		fmt.Fprintf(w, "OUT OF ORDER: %s\n", s)
	}
	for _, s := range r.SessionDetail {
		fmt.Fprintf(w, "SESSION CHANGED: %s\n", s)
	}
	for _, s := range r.DiscordLostDetail {
		fmt.Fprintf(w, "DISCORD LOST: %s\n", s)
	}
	for _, s := range r.PanicDetail {
		fmt.Fprintf(w, "PANIC: %s\n", s)
	}
	for _, text := range slices.Sorted(maps.Keys(r.NoticesByText)) {
		fmt.Fprintf(w, "told %d: %s\n", r.NoticesByText[text], text)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func printReplicaFigures(w io.Writer, r *replicaResult) {
	fmt.Fprintf(w, "  %-56s %d (Slack %d, Discord %d), %.1f/s\n", "messages offered", r.MessagesOffered, r.SlackOffered, r.DiscordOffered, r.OfferedPerSec)
	fmt.Fprintf(w, "  %-56s %d; %d never (%d on Discord; %d answered or told all the same; %d not dispatched)\n", "acknowledged (Slack ack, Discord inbox record)", r.MessagesAcked, r.NotAcked, r.DiscordNotAcked, r.NotAckedAnswered, r.NotDelivered)
	fmt.Fprintf(w, "  %-56s %d first, %d redeliveries\n", "Slack deliveries", r.Deliveries, r.Redeliveries)
	fmt.Fprintf(w, "  %-56s %d\n", "answered exactly once", r.AnsweredOnce)
	fmt.Fprintf(w, "  %-56s %d (then answered all the same: %d)\n", "told \"cannot save … try again\"", r.ToldTryAgain, r.ToldTryAgainAnswered)
	fmt.Fprintf(w, "  %-56s %d\n", "told \"could not read its session store\"", r.ToldCouldNotRead)
	fmt.Fprintf(w, "  %-56s %d\n", "lines of the replicas' logs that mention a panic", r.Panics)
	fmt.Fprintf(w, "  %-56s %d\n", "neither answered nor told, any platform", r.Lost)
	fmt.Fprintf(w, "  %-56s %.1f/s; added latency ms p50 %.1f p90 %.1f p99 %.1f max %.1f\n", "answers while the users talked", r.AnsweredPerSec, r.AddedLatencyMS.P50, r.AddedLatencyMS.P90, r.AddedLatencyMS.P99, r.AddedLatencyMS.Max)
	fmt.Fprintf(w, "  %-56s %d\n", "sent to the agent more than once (must be 0)", r.DuplicateAgentCalls)
	fmt.Fprintf(w, "  %-56s %d\n", "answered in more than one message (must be 0)", r.DuplicateReplies)
	fmt.Fprintf(w, "  %-56s %d (restarted to post them: %v)\n", "answers kept in the outbox at the final SIGTERM", r.KeptAtStop, r.Restarted)
	fmt.Fprintf(w, "  %-56s %d\n", "acknowledged, neither answered nor told (must be 0)", r.AckedSilent)
	fmt.Fprintf(w, "  %-56s %d; a new DM's first, shard 0 down: %d (must be 0)\n", "Discord messages neither answered nor told (must be 0)", r.DiscordLost, r.DiscordFirstLost)
	fmt.Fprintf(w, "  %-56s %d (behind one only sent later: %d, only recorded later: %d)\n", "order violations within a conversation (must be 0)", r.OrderViolations, r.SendOrderInversions, r.InboxOrderInversions)
	fmt.Fprintf(w, "  %-56s %d\n", "sessions changed without expiry or reset (must be 0)", r.SessionChanged)
	fmt.Fprintf(w, "  %-56s %d; something else %d; answered and told %d; told twice %d\n", "told \"restarted while…\"", r.ToldRestartedChat, r.ToldOther, r.AnsweredAndTold, r.ToldTwice)
	fmt.Fprintf(w, "  %-56s %d, %d (%d notices matched by conversation)\n", "stray answers, unattributed notices", r.StrayAnswers, r.UnattributedNotices, r.NoticesByConversation)
}

// closeWorkspace stops the workspace fake and the server that fronts it
// for flowbridge; either may be nil (a run that failed to start).
func closeWorkspace(front *httptest.Server, ws *workspacetest.Server) {
	if front != nil {
		front.CloseClientConnections()
		front.Close()
	}
	if ws != nil {
		ws.Close()
	}
}
