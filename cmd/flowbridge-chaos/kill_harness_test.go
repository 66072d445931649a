package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// -kill-every: flowbridge in Slack's HTTP mode under load, killed with
// SIGKILL at random moments and restarted on the same store, while this
// process plays Slack: it posts signed events and slash commands to
// /slack/events, and after each restart redelivers recent events with
// X-Slack-Retry-Num, as Slack does when a delivery failed or seemed to. What
// became of each message is then read from the fakes' records (ledger.go).

const (
	// slackSecret is the signing secret of the fake Slack app.
	slackSecret = "flowbridge-load-signing-secret"
	// slackAckTimeout is how long Slack waits for an HTTP-mode delivery to
	// be answered; a slower answer counts as a failed delivery.
	slackAckTimeout = 3 * time.Second
	// maxSlackRetries is how often Slack retries an Events API delivery
	// before it gives up; slash commands it never retries.
	maxSlackRetries = 3
	// killFlowUUID is the -kill-every flow, "slow": it takes killFlowDelay
	// and answers "slow flow done TAG".
	killFlowUUID  = "44444444-4444-4444-4444-444444444444"
	killFlowDelay = 1500 * time.Millisecond
	// redeliveryFanOut bounds the concurrent redeliveries after a restart.
	redeliveryFanOut = 16
)

// killConv is one simulated conversation of a -kill-every run, alone in its
// channel: a DM, where each message starts a thread of its own; a thread
// started by a mention, where each message comes from a user of its own; or
// a channel where one user runs /flow slow. So an ephemeral notice, which
// goes to the message's user and thread, names its message (ledger.go).
type killConv struct {
	id      int
	kind    string // "dm", "thread" or "flow"
	user    string // the DM's or flow's user
	channel string
	root    string // a thread's first message, once sent
}

// offer is one message or command offered to the bridge, with its delivery
// history. Its fields from t on, and t's, are guarded by killEnv.mu.
type offer struct {
	conv        *killConv
	contentType string
	body        []byte
	responseURL string // a command's, as the bridge gets it

	t        *tally // in the live ledger
	ackProc  int    // which process acknowledged it first (0: the first)
	attempts int
	retries  int
	inFlight int
	ackBody  []byte
	ackAt    time.Time
	gaveUp   bool // Slack's retries ran out before any was acknowledged
}

// killEnv is one -kill-every run.
type killEnv struct {
	p         params
	dir       string
	cfgPath   string
	ws        *workspacetest.Server
	wsSrv     *httptest.Server
	slack     *slacktest.Server
	front     *httptest.Server
	frontTr   *http.Transport
	postTr    *http.Transport
	post      *http.Client // Slack's side: deliveries
	eventsURL string
	convs     []*killConv
	bridge    *loadkit.Child
	think     time.Duration
	t0        time.Time // the run's start; times reported are since it
	restart   restartFunc

	mu       sync.Mutex
	live     *ledger
	offers   []*offer
	touched  time.Time // the bridge's latest call to a fake
	replyIDs int
	proc     int // the process now running (0: the first)
	killedAt []float64
	stats    killStats
}

// restartFunc starts process k (k > 0) of a kill run its own way, or
// returns nil for the usual start (TestKillDamage damages the store first).
type restartFunc func(ctx context.Context, e *killEnv, k int) (*loadkit.Child, error)

// runKill runs the kill scenario and tears everything down, whatever happens.
func runKill(ctx context.Context, p params, restart restartFunc) (*killResult, error) {
	return loadkit.InTempDir(ctx, p.tmp, func(dir string) *killEnv { return &killEnv{p: p, dir: dir, live: newLedger(), restart: restart} }, (*killEnv).run)
}

// start builds the conversations, the fakes and the bridge's configuration.
func (e *killEnv) Start(context.Context) error {
	p := e.p
	flows := int(math.Round(float64(p.Conversations) * p.FlowShare))
	chats := p.Conversations - flows
	for i := range p.Conversations {
		c := &killConv{id: i, user: fmt.Sprintf("U%08d", i)}
		switch {
		case i >= chats:
			c.kind, c.channel = "flow", fmt.Sprintf("CF%07d", i)
		case i%2 == 0:
			c.kind, c.channel = "dm", fmt.Sprintf("D%08d", i)
		default:
			c.kind, c.channel = "thread", fmt.Sprintf("C%08d", i)
		}
		e.convs = append(e.convs, c)
	}
	// Each chat conversation sends one message per think time plus the
	// agent's; together they offer -rate messages a second.
	if chats > 0 {
		e.think = max(time.Duration(float64(chats)/p.Rate*float64(time.Second))-p.APILatency, 0)
	} else {
		e.think = time.Second
	}

	e.ws = workspacetest.New(workspacetest.Options{})
	e.ws.AddAgent(workspacetest.Agent{UUID: loadkit.AgentUUID, Delay: p.APILatency})
	e.ws.AddFlow(workspacetest.Flow{UUID: killFlowUUID, Template: "slow flow done {tag}", Delay: killFlowDelay})
	wsHandler := e.ws.Handler()
	e.wsSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		m, found := loadkit.FindMarker(body)
		e.mu.Lock()
		e.touched = time.Now()
		if found {
			e.live.call(m)
		}
		e.mu.Unlock()
		wsHandler.ServeHTTP(w, r)
	}))

	e.slack = slacktest.NewServer(slacktest.Options{})
	if err := e.startFront(); err != nil {
		return err
	}
	e.postTr = http.DefaultTransport.(*http.Transport).Clone()
	e.postTr.MaxIdleConnsPerHost = 64
	e.post = &http.Client{Transport: e.postTr, Timeout: slackAckTimeout}

	listen, err := loadkit.FreePort()
	if err != nil {
		return err
	}
	e.eventsURL = "http://" + listen + "/slack/events"
	e.cfgPath = filepath.Join(e.dir, "flowbridge.toml")
	return os.WriteFile(e.cfgPath, []byte(e.config(listen)), 0o600)
}

// startFront puts a proxy before the fake Slack that reads, on their way,
// the bridge's messages and response_url posts, to pace the simulated users:
// a user sends again once the last message is answered or told. The counts
// come from the fake's own records at the end.
func (e *killEnv) startFront() error {
	u, err := url.Parse(e.slack.URL())
	if err != nil {
		return err
	}
	e.frontTr = http.DefaultTransport.(*http.Transport).Clone()
	e.frontTr.MaxIdleConnsPerHost = 64
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: e.frontTr,
		// A killed bridge leaves its requests cut off: expected, not news.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/{method}", func(w http.ResponseWriter, r *http.Request) {
		switch method := r.PathValue("method"); method {
		case "chat.postMessage", "chat.update", "chat.postEphemeral":
			body, ok := readBody(w, r)
			if !ok {
				return
			}
			// A post the fake refused (429 past a channel's message a
			// second) is no reply: it is posted again. Anything else may
			// be one, also when the bridge was killed before the fake's
			// answer reached it (the proxy's 502).
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			proxy.ServeHTTP(sw, r)
			if sw.status == http.StatusTooManyRequests {
				e.mu.Lock()
				e.touched = time.Now()
				e.mu.Unlock()
				return
			}
			f, _ := url.ParseQuery(string(body))
			e.mu.Lock()
			e.replyIDs++
			id := fmt.Sprintf("%s#%d", method, e.replyIDs)
			if method == "chat.update" {
				id = f.Get("channel") + ":" + f.Get("ts")
			}
			w := where{channel: f.Get("channel"), thread: f.Get("thread_ts"), user: f.Get("user"), key: metadataKey([]byte(f.Get("metadata")))}
			e.live.reply(w, id, f.Get("text")+"\n"+f.Get("blocks"), time.Now())
			e.touched = time.Now()
			e.mu.Unlock()
		default:
			e.mu.Lock()
			e.touched = time.Now()
			e.mu.Unlock()
			proxy.ServeHTTP(w, r)
		}
	})
	mux.HandleFunc("POST /response/{id}", e.responseURL(proxy))
	mux.Handle("/", proxy)
	e.front = httptest.NewServer(mux)
	return nil
}

// responseURL serves a slash command's response_url on its way to the fake:
// the live ledger sees the notice or result it carries.
func (e *killEnv) responseURL(proxy http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		var in struct {
			Text           string          `json:"text"`
			Blocks         json.RawMessage `json:"blocks"`
			DeleteOriginal bool            `json:"delete_original"`
		}
		_ = json.Unmarshal(body, &in)
		e.mu.Lock()
		if !in.DeleteOriginal {
			e.live.reply(where{responseURL: r.URL.Path}, r.URL.Path, in.Text+"\n"+string(in.Blocks), time.Now())
		}
		e.touched = time.Now()
		e.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}
}

// readBody reads r's body and puts it back for the proxy; a body that
// cannot be read is answered 400 and false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// config is the bridge's configuration: Slack in HTTP mode on listen, the
// fakes' addresses, the store in the temporary directory, and the slow flow.
func (e *killEnv) config(listen string) string {
	return loadkit.BaseConfig(e.wsSrv.URL, fmt.Sprintf("path = %q\n", filepath.Join(e.dir, "flowbridge.db")),
		e.p.Conversations+256, "", "127.0.0.1:0", "info") + fmt.Sprintf(`
[[flows]]
name = "slow"
uuid = %q
description = "A flow that takes a second and a half"
timeout = "60s"
allow = ["everyone"]
  [[flows.params]]
  name = "tag"
  description = "Echoed in the result"
  required = false

[slack]
enabled = true
mode = "http"
bot_token = %q
signing_secret = %q
listen = %q
api_url = %q
`, killFlowUUID, e.slack.BotToken(), slackSecret, listen, e.front.URL+"/api/")
}

// run starts the bridge, kills and restarts it -kills times while the users
// talk, lets the last process answer everything, and counts.
func (e *killEnv) run(ctx context.Context) (*killResult, error) {
	drive, stopDriving := context.WithCancelCause(ctx)
	var users sync.WaitGroup
	// Deferred calls run last first: the users are told to stop before
	// they are waited for, or a run that fails would wait for ever.
	defer users.Wait()
	defer stopDriving(nil)

	// Each user's first message waits up to one think cycle, and a short run
	// (exponential kill delays) can end before some have spoken; the last
	// process serves until every conversation has offered once, so each kind
	// of conversation (chat and /flow) meets the bridge in every run.
	allSpoke := make(chan struct{})
	var silent atomic.Int64
	silent.Store(int64(len(e.convs)))
	spoke := func() {
		if silent.Add(-1) == 0 {
			close(allSpoke)
		}
	}
	startUsers := func() {
		for _, c := range e.convs {
			users.Go(func() {
				if err := e.converse(drive, ctx, c, spoke); err != nil {
					stopDriving(err)
				}
			})
		}
	}
	e.t0 = time.Now()
	for k := 0; k <= e.p.Kills; k++ {
		if err := context.Cause(drive); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if err := e.life(ctx, k, startUsers, allSpoke); err != nil {
			return nil, err
		}
	}
	// The users stop; the last process answers what is left.
	driven := time.Since(e.t0)
	stopDriving(nil)
	users.Wait()
	if err := context.Cause(drive); err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	return e.finish(ctx, driven)
}

// life is process k's: started, the users started with the first, Slack's
// redeliveries once it listens, and, unless it is the last, a SIGKILL at a
// random moment. The last lives until every user has spoken.
func (e *killEnv) life(ctx context.Context, k int, startUsers func(), allSpoke <-chan struct{}) error {
	if err := e.startProcess(ctx, k); err != nil {
		return err
	}
	last := k == e.p.Kills
	// The first process is timed from when it listens, so the users have a
	// bridge before the first kill; later ones from their start, so that
	// some die while they start and resume.
	killAt := time.Now().Add(e.killDelay())
	if k == 0 || last {
		killAt = time.Time{}
	}
	ready, err := e.waitReady(ctx, killAt)
	if err != nil {
		return err
	}
	if k == 0 {
		killAt = time.Now().Add(e.killDelay())
		startUsers()
	}
	var round sync.WaitGroup
	if ready && k > 0 {
		round.Go(func() { e.redeliver(ctx) })
	}
	if last {
		round.Wait()
		select {
		case <-allSpoke:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err = e.until(ctx, killAt)
	e.bridge.Kill()
	e.postTr.CloseIdleConnections()
	round.Wait()
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.killedAt = append(e.killedAt, time.Since(e.t0).Seconds())
	e.stats.Kills++
	if !ready {
		e.stats.KilledBeforeReady++
	}
	return nil
}

// startProcess starts process k: restart's way if it has one, else on the
// configuration with a log of its own.
func (e *killEnv) startProcess(ctx context.Context, k int) error {
	var b *loadkit.Child
	var err error
	if k > 0 && e.restart != nil {
		if b, err = e.restart(ctx, e, k); err != nil {
			return err
		}
	}
	if b == nil {
		if b, err = loadkit.Start(e.p.flowbridge, []string{"run", "-config", e.cfgPath}, filepath.Join(e.dir, fmt.Sprintf("flowbridge-%02d.log", k))); err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.bridge, e.proc = b, k
	return nil
}

// finish lets the last process answer what is left, stops it and counts.
func (e *killEnv) finish(ctx context.Context, driven time.Duration) (*killResult, error) {
	if err := e.settle(ctx); err != nil {
		return nil, err
	}
	// Connections Slack's side dialled and never used would hold the
	// bridge's HTTP shutdown for seconds (net/http waits 5 s for a new
	// connection's first request); Slack has nothing more to send.
	e.postTr.CloseIdleConnections()
	if err := e.bridge.Stop(loadkit.StopTimeout); err != nil {
		return nil, fmt.Errorf("stopping flowbridge: %w\n%s", err, e.bridge.LogTail())
	}
	res := e.count()
	res.ElapsedSec = time.Since(e.t0).Seconds()
	res.OfferedPerSec = float64(res.MessagesOffered) / driven.Seconds()
	return res, nil
}

// killDelay draws the time to the next kill: exponential around -kill-every
// (memoryless, so kills land at any phase of the work), at most three times it.
func (e *killEnv) killDelay() time.Duration {
	d := time.Duration(rand.ExpFloat64() * float64(e.p.KillEvery))
	return min(d, 3*e.p.KillEvery)
}

// until waits for t, failing when the bridge exits on its own.
func (e *killEnv) until(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-e.bridge.Done:
		return e.bridge.Exited()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitReady waits until the bridge answers Slack's URL verification, and
// reports false when killAt (unless zero) comes first.
func (e *killEnv) waitReady(ctx context.Context, killAt time.Time) (bool, error) {
	deadline := time.Now().Add(loadkit.StartTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if e.verified(ctx) {
			return true, nil
		}
		select {
		case <-e.bridge.Done:
			return false, e.bridge.Exited()
		case <-ctx.Done():
			return false, ctx.Err()
		case <-tick.C:
		}
		now := time.Now()
		if !killAt.IsZero() && now.After(killAt) {
			return false, nil
		}
		if now.After(deadline) {
			return false, fmt.Errorf("flowbridge did not answer on %s within %s\n%s", e.eventsURL, loadkit.StartTimeout, e.bridge.LogTail())
		}
	}
}

func (e *killEnv) verified(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	const challenge = "flowbridge-load-ready"
	status, body, err := e.postSlack(ctx, slacktest.ContentTypeJSON, slacktest.URLVerificationBody(challenge), 0)
	return err == nil && status == http.StatusOK && string(body) == challenge
}

// converse is one user: send, wait for the answer or a notice (at most
// -reply-timeout), think, send again, until drive ends. Deliveries use ctx,
// so one under way when drive ends completes.
func (e *killEnv) converse(drive, ctx context.Context, c *killConv, spoke func()) error {
	cycle := e.think + e.p.APILatency
	first := true
	spokeOnce := sync.OnceFunc(spoke)
	// A user stopped before speaking (a run that failed) must not hold the
	// run's end.
	defer spokeOnce()
	for seq := 0; ; seq++ {
		wait := time.Duration(0)
		switch {
		case first && cycle > 0:
			wait = rand.N(cycle)
		case !first && e.think > 0:
			wait = rand.N(2 * e.think)
		}
		first = false
		if !loadkit.Pause(drive, wait) {
			return nil
		}
		o, err := e.offer(c, seq)
		if err != nil {
			return fmt.Errorf("conversation %d: %w", c.id, err)
		}
		e.deliver(ctx, o, 0)
		spokeOnce()
		e.mu.Lock()
		if c.kind == "flow" && !o.t.acked {
			// Slack never retries a slash command: the user saw an error.
			o.gaveUp = true
			o.t.finish()
		}
		done := o.t.done
		e.mu.Unlock()
		t := time.NewTimer(e.p.ReplyTimeout)
		select {
		case <-done:
		case <-t.C:
		case <-drive.Done():
		}
		t.Stop()
	}
}

// offer makes message seq of conversation c: its Slack payload, with a
// unique text carrying its marker, registered before its first delivery.
func (e *killEnv) offer(c *killConv, seq int) (*offer, error) {
	m := marker{Conv: c.id, Seq: seq}
	t := &tally{m: m, flow: c.kind == "flow", where: where{channel: c.channel}, done: make(chan struct{})}
	o := &offer{conv: c, t: t, contentType: slacktest.ContentTypeJSON}
	text := "hello " + m.String() + " how are you"
	switch c.kind {
	case "flow":
		// The response_url leads through the front, so the pacing sees its posts.
		o.responseURL = e.front.URL + urlKey(e.slack.NewResponseURL(c.channel, c.user))
		t.where.responseURL = o.responseURL
		body, d := e.slack.SlashCommandBody(slacktest.SlashCommand{Command: "/flow", Text: "slow tag=" + m.String(), UserID: c.user, ChannelID: c.channel, ResponseURL: o.responseURL})
		o.body, o.contentType, t.id = body, slacktest.ContentTypeForm, d.TriggerID
		t.where.key = "slack/cmd/" + d.TriggerID
	case "dm":
		// The message's thread hangs from a message of the user's that
		// Slack holds, as it would: a reply looked for after a restart is
		// looked for in that thread (conversations.replies).
		t.where.thread = e.slack.AddThreadMessage(slacktest.ThreadMessage{Channel: c.channel, User: c.user, Text: "a thread of " + m.String()})
		body, d, err := e.slack.MessageEventBody(slacktest.MessageEvent{Channel: c.channel, ChannelType: "im", User: c.user, Text: text, ThreadTS: t.where.thread})
		if err != nil {
			return nil, err
		}
		o.body, t.id = body, d.EventID
		t.where.key = "slack/msg/" + c.channel + "/" + d.TS
	default:
		t.where.user = fmt.Sprintf("U%05dX%06d", c.id, seq)
		body, d, err := e.slack.AppMentionBody(slacktest.MessageEvent{Channel: c.channel, User: t.where.user, Text: text, ThreadTS: c.root})
		if err != nil {
			return nil, err
		}
		if c.root == "" {
			c.root = d.TS
		}
		o.body, t.id = body, d.EventID
		t.where.key = "slack/msg/" + c.channel + "/" + d.TS
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t.offered = time.Now()
	e.live.add(t)
	e.offers = append(e.offers, o)
	return o, nil
}

// deliver posts o once, as a retry when retry > 0, and records the outcome.
func (e *killEnv) deliver(ctx context.Context, o *offer, retry int) {
	e.mu.Lock()
	o.inFlight++
	e.mu.Unlock()
	status, body, err := e.postSlack(ctx, o.contentType, o.body, retry)
	e.mu.Lock()
	defer e.mu.Unlock()
	o.inFlight--
	o.attempts++
	if retry == 0 {
		e.stats.Deliveries++
	} else {
		e.stats.Redeliveries++
	}
	if err != nil || status != http.StatusOK {
		e.stats.FailedDeliveries++
		return
	}
	if retry > 0 {
		e.stats.RedeliveriesAcked++
	}
	if !o.t.acked {
		o.t.acked = true
		o.ackAt = time.Now()
		o.ackBody = body
		o.ackProc = e.proc
	}
}

// postSlack signs and posts body to the bridge's /slack/events as Slack
// does, with the retry headers when retry > 0.
func (e *killEnv) postSlack(ctx context.Context, contentType string, body []byte, retry int) (int, []byte, error) {
	req, err := slacktest.NewSignedRequest(ctx, e.eventsURL, contentType, body, slackSecret, time.Now())
	if err != nil {
		return 0, nil, err
	}
	if retry > 0 {
		slacktest.SetRetry(req, retry, "http_timeout")
	}
	resp, err := e.post.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, b, err
}

// redeliver is what Slack does after a failed delivery, compressed to the
// moment the bridge is back: every event not yet acknowledged, and a random
// half of those acknowledged within -redeliver-window (as if their answer
// had been too slow), each at most maxSlackRetries times in all.
func (e *killEnv) redeliver(ctx context.Context) {
	now := time.Now()
	type retry struct {
		o   *offer
		num int
	}
	var batch []retry
	e.mu.Lock()
	for _, o := range e.offers {
		if o.conv.kind == "flow" || o.inFlight > 0 || o.gaveUp || o.retries >= maxSlackRetries {
			continue
		}
		if o.t.acked && (now.Sub(o.t.offered) > e.p.RedeliverWindow || rand.N(2) == 0) {
			continue
		}
		o.retries++
		batch = append(batch, retry{o, o.retries})
	}
	e.mu.Unlock()

	work := make(chan retry)
	var wg sync.WaitGroup
	for range min(redeliveryFanOut, len(batch)) {
		wg.Go(func() {
			for r := range work {
				e.deliver(ctx, r.o, r.num)
			}
		})
	}
	for _, r := range batch {
		work <- r
	}
	close(work)
	wg.Wait()

	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range batch {
		if !r.o.t.acked && r.o.retries >= maxSlackRetries {
			r.o.gaveUp = true
			r.o.t.finish()
		}
	}
}

// settle waits, at most -reply-timeout, until every acknowledged message is
// answered or told and the bridge has called no fake for quietFor.
func (e *killEnv) settle(ctx context.Context) error {
	// A kept answer is posted again after a crash only once it has been
	// looked for, with a history call of Slack's Tier 3 (50 a minute,
	// which the fake holds to): after many crashes the last answers may
	// wait out that minute. The deadline is only reached when something
	// is still unanswered.
	deadline := time.Now().Add(max(e.p.ReplyTimeout, tier3Window))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		e.mu.Lock()
		waiting := 0
		for _, o := range e.offers {
			if o.t.acked && !o.t.resolved() {
				waiting++
			}
		}
		idle := time.Since(e.touched)
		e.mu.Unlock()
		if waiting == 0 && idle >= quietFor || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.bridge.Done:
			return e.bridge.Exited()
		case <-tick.C:
		}
	}
}

// tier3Window is the longest a Slack Tier 3 method's Retry-After lasts.
const tier3Window = 65 * time.Second

// close stops the bridge (if a process still runs), then the fakes.
func (e *killEnv) Close() error {
	var err error
	if e.bridge != nil {
		if serr := e.bridge.Stop(loadkit.StopTimeout); serr != nil && !e.bridge.Killed {
			err = fmt.Errorf("stopping flowbridge: %w\n%s", serr, e.bridge.LogTail())
		}
	}
	if e.postTr != nil {
		e.postTr.CloseIdleConnections()
	}
	if e.front != nil {
		e.front.CloseClientConnections()
		e.front.Close()
		e.frontTr.CloseIdleConnections()
	}
	if e.slack != nil {
		e.slack.Close()
	}
	closeWorkspace(e.wsSrv, e.ws)
	return err
}

// count reads the fakes' records into a fresh ledger: the workspace's
// requests, the fake Slack's message versions and response_url posts, and
// the acknowledgements' bodies, in the order they happened.
func (e *killEnv) count() *killResult {
	l := newLedger()
	var recs []happening
	e.mu.Lock()
	for _, o := range e.offers {
		t := &tally{m: o.t.m, flow: o.t.flow, offered: o.t.offered, acked: o.t.acked, id: o.t.id, where: o.t.where}
		l.add(t)
		if len(bytes.TrimSpace(o.ackBody)) > 0 {
			text, key := string(o.ackBody), "ack:"+o.t.id
			recs = append(recs, happening{o.ackAt, func() { l.reply(o.t.where, key, text, o.ackAt) }})
		}
	}
	stats, killedAt := e.stats, slices.Clone(e.killedAt)
	byMarker := make(map[string]*offer, len(e.offers))
	for _, o := range e.offers {
		byMarker[o.t.m.String()] = o
	}
	e.mu.Unlock()

	agentCalls, flowRuns := 0, 0
	for _, r := range e.ws.Requests() {
		if r.Method != http.MethodPost {
			continue
		}
		m, ok := loadkit.FindMarker(r.Body)
		switch {
		case !ok:
			continue
		case strings.HasSuffix(r.Path, "/chat"):
			agentCalls++
		case strings.HasSuffix(r.Path, "/run/sync"):
			flowRuns++
		default:
			continue
		}
		recs = append(recs, happening{r.At, func() { l.call(m) }})
	}
	recs = append(recs, slackReplies(e.slack, l)...)
	for _, p := range e.slack.ResponseURLPosts() {
		if p.Error != "" || p.DeleteOriginal {
			continue
		}
		id, text := "url:"+p.MessageTS, p.Text+"\n"+string(p.Blocks)
		recs = append(recs, happening{p.At, func() { l.reply(where{responseURL: p.URL}, id, text, p.At) }})
	}
	applyInOrder(recs)
	res := newKillResult(e.p, l, e.t0)
	res.killStats = stats
	res.KilledAtSec = killedAt
	for _, vs := range [][]violation{res.Violations, res.ToldTwiceDetail} {
		for i := range vs {
			v := &vs[i]
			o := byMarker[v.Marker]
			v.Deliveries = o.attempts
			if o.t.acked {
				v.AckedSec = o.ackAt.Sub(e.t0).Seconds()
				v.AckedBy = o.ackProc
			}
		}
	}
	res.AgentCalls, res.FlowRuns = agentCalls, flowRuns
	return res
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// printKillTable prints a -kill-every run's figures.
func printKillTable(w io.Writer, r *killResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "parameters\tSlack HTTP mode, %d conversations (%d run /flow slow), %.0f messages/s offered, API %.0f ms, a kill about every %.0f ms, redelivery window %.0f s, %d cores\n",
		r.Conversations, r.FlowConvs, r.Rate, r.APILatencyMS, r.KillEveryMS, r.RedeliverSec, r.Cores)
	fmt.Fprintf(tw, "kills\t%d (%d before the process listened), in %.1f s\n", r.Kills, r.KilledBeforeReady, r.ElapsedSec)
	fmt.Fprintf(tw, "offered\t%d messages, %d /flow commands (%.1f messages/s while the users talked)\n", r.MessagesOffered, r.CommandsOffered, r.OfferedPerSec)
	fmt.Fprintf(tw, "acknowledged (200, at least once)\t%d messages, %d commands; %d never (%d of them answered or told all the same)\n", r.MessagesAcked, r.CommandsAcked, r.NotAcked, r.NotAckedAnswered)
	fmt.Fprintf(tw, "deliveries\t%d first, %d redeliveries with X-Slack-Retry-Num (%d acknowledged), %d failed\n", r.Deliveries, r.Redeliveries, r.RedeliveriesAcked, r.FailedDeliveries)
	fmt.Fprintf(tw, "workspace calls\t%d chat, %d flow runs\n", r.AgentCalls, r.FlowRuns)
	fmt.Fprintf(tw, "sent to the agent more than once (must be 0)\t%d\n", r.DuplicateAgentCalls)
	fmt.Fprintf(tw, "flow runs sent more than once (must be 0)\t%d\n", r.DuplicateFlowRuns)
	fmt.Fprintf(tw, "answered in more than one message (must be 0)\t%d\n", r.DuplicateReplies)
	fmt.Fprintf(tw, "acknowledged, neither answered nor told (must be 0)\t%d\n", r.AckedSilent)
	fmt.Fprintf(tw, "answered exactly once\t%d\n", r.AnsweredOnce)
	fmt.Fprintf(tw, "told \"restarted while…\"\t%d messages, %d flows\n", r.ToldRestartedChat, r.ToldRestartedFlow)
	fmt.Fprintf(tw, "told something else\t%d\n", r.ToldOther)
	fmt.Fprintf(tw, "answered and told\t%d (told twice: %d)\n", r.AnsweredAndTold, r.ToldTwice)
	fmt.Fprintf(tw, "stray answers, unattributed notices\t%d, %d (%d notices matched by conversation, not by place)\n", r.StrayAnswers, r.UnattributedNotices, r.NoticesByConversation)
	tw.Flush()
	for _, v := range r.Violations {
		fmt.Fprintf(w, "BROKEN: %s\n", v)
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(w, "kills at (s): %.3f\n", r.KilledAtSec)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
