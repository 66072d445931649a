package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// Why the platform fronts: slacktest and discordtest keep every message for
// assertions and answer waits by scanning all of them under one lock, waking
// every waiter on each change. That is right for tests and quadratic under
// load, where it would also grow this process without bound and steal the
// CPU the bridge is measured on. So a front serves the hot, per-message
// routes (Slack chat.postMessage, chat.update, reactions; Discord message
// create and edit, typing) itself, with what the fake would answer, and
// finds the reply's loadkit.Marker there in O(1); everything else (auth, Socket Mode
// and gateway, users, commands, interactions, response URLs) goes to the fake.
// The fakes run with NoRecord, so the events this process sends are not kept
// either: a soak measures the bridge, not the generator's growing heap.

// replyFunc is told that the bridge sent the reply carrying m at time at.
type replyFunc func(m loadkit.Marker, at time.Time)

// meteredWorkspace serves workspacetest and records, per chat message, how
// long the API itself took: the bridge's added latency is the end-to-end time
// minus this.
type meteredWorkspace struct {
	fake *workspacetest.Server
	srv  *httptest.Server
	svc  sync.Map // marker -> time.Duration
}

func newMeteredWorkspace(latency, longFlow time.Duration) *meteredWorkspace {
	m := &meteredWorkspace{fake: workspacetest.New(workspacetest.Options{NoRecord: true})}
	m.fake.AddAgent(workspacetest.Agent{UUID: loadkit.AgentUUID, Delay: latency})
	m.fake.AddFlow(workspacetest.Flow{UUID: longFlowUUID, Template: "long flow done", Delay: longFlow})
	m.fake.AddFlow(workspacetest.Flow{UUID: quickFlowUUID, Template: "quick flow done", Delay: latency})
	next := m.fake.Handler()
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var mk loadkit.Marker
		found := false
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, "read body", http.StatusBadRequest)
				return
			}
			mk, found = loadkit.FindMarker(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
		if found {
			m.svc.Store(mk, time.Since(start))
		}
	}))
	return m
}

// service returns and forgets the API's time for the message m.
func (m *meteredWorkspace) service(mk loadkit.Marker) (time.Duration, bool) {
	v, ok := m.svc.LoadAndDelete(mk)
	if !ok {
		return 0, false
	}
	return v.(time.Duration), true
}

func (m *meteredWorkspace) URL() string { return m.srv.URL }

func (m *meteredWorkspace) Close() {
	m.srv.CloseClientConnections()
	m.srv.Close()
	m.fake.Close()
}

// front is a loopback server before a platform fake: hot routes are served
// by hot, the rest proxied to the fake.
type front struct {
	srv       *httptest.Server
	transport *http.Transport
}

func newFront(target string, hot func(mux *http.ServeMux)) *front {
	u, _ := url.Parse(target) // a fake's URL: http://127.0.0.1:port
	f := &front{transport: http.DefaultTransport.(*http.Transport).Clone()}
	f.transport.MaxIdleConnsPerHost = 64
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: f.transport,
	}
	mux := http.NewServeMux()
	hot(mux)
	mux.Handle("/", proxy)
	f.srv = httptest.NewServer(mux)
	return f
}

func (f *front) URL() string { return f.srv.URL }

func (f *front) Close() {
	f.srv.CloseClientConnections()
	f.srv.Close()
	f.transport.CloseIdleConnections()
}

// slackHot serves the Web API methods a chat message costs, as slacktest would.
type slackHot struct {
	botUserID, botID string
	onReply          replyFunc
	ts               atomic.Int64
	base             int64
	// limit, when set (-slack-post-limit), holds chat.postMessage to
	// Slack's message a second per channel, as slacktest does; refused
	// counts the posts it answered 429.
	limit   *slacktest.PostLimiter
	refused atomic.Int64
}

func newSlackHot(botUserID, botID string, onReply replyFunc) *slackHot {
	return &slackHot{botUserID: botUserID, botID: botID, onReply: onReply, base: time.Now().Unix()}
}

func (h *slackHot) register(mux *http.ServeMux) {
	for _, m := range []string{"chat.postMessage", "chat.update", "reactions.add", "reactions.remove", "chat.delete"} {
		mux.HandleFunc("POST /api/"+m, h.serve)
	}
}

func (h *slackHot) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	p, _ := url.ParseQuery(string(body))
	ch := p.Get("channel")
	if h.limit != nil && r.URL.Path == "/api/chat.postMessage" {
		if wait := h.limit.Take(ch, at); wait > 0 {
			// Not a reply yet: the bridge posts it again after wait.
			h.refused.Add(1)
			w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"ok":false,"error":"ratelimited"}`))
			return
		}
	}
	if mk, ok := loadkit.FindMarker(body); ok {
		h.onReply(mk, at)
	}
	var res map[string]any
	switch r.URL.Path {
	case "/api/chat.postMessage":
		ts := h.nextTS()
		res = map[string]any{"ok": true, "channel": ch, "ts": ts, "message": map[string]any{
			"type": "message", "user": h.botUserID, "bot_id": h.botID, "text": p.Get("text"), "ts": ts, "thread_ts": p.Get("thread_ts"),
		}}
	case "/api/chat.update":
		res = map[string]any{"ok": true, "channel": ch, "ts": p.Get("ts"), "text": p.Get("text")}
	case "/api/chat.delete":
		res = map[string]any{"ok": true, "channel": ch, "ts": p.Get("ts")}
	default:
		res = map[string]any{"ok": true}
	}
	writeJSONResponse(w, res)
}

// nextTS mints a unique Slack timestamp.
func (h *slackHot) nextTS() string {
	n := h.ts.Add(1)
	return fmt.Sprintf("%d.%06d", h.base+n/1_000_000, n%1_000_000)
}

// discordHot serves the REST routes a chat message costs, as discordtest would.
type discordHot struct {
	bot     map[string]any
	onReply replyFunc
	id      atomic.Int64
}

func newDiscordHot(botID, botName string, onReply replyFunc) *discordHot {
	h := &discordHot{bot: map[string]any{"id": botID, "username": botName, "discriminator": "0", "bot": true}, onReply: onReply}
	h.id.Store(1_300_000_000_000_000_000)
	return h
}

func (h *discordHot) register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v9/channels/{channel}/typing", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /api/v9/channels/{channel}/messages", h.message)
	mux.HandleFunc("PATCH /api/v9/channels/{channel}/messages/{message}", h.message)
}

func (h *discordHot) message(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if mk, ok := loadkit.FindMarker(body); ok {
		h.onReply(mk, at)
	}
	var in struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(body, &in)
	id := r.PathValue("message")
	if id == "" {
		id = strconv.FormatInt(h.id.Add(1), 10)
	}
	writeJSONResponse(w, map[string]any{
		"id": id, "channel_id": r.PathValue("channel"), "type": 0, "content": in.Content,
		"author": h.bot, "timestamp": at.UTC().Format(time.RFC3339Nano),
	})
}

func writeJSONResponse(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}
