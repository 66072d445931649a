// Package workspacetest is an in-process fake of the AI workspace API, in the spirit of net/http/httptest.
package workspacetest

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// UnstartedURL is Server.URL before Start; only the in-memory Transport
// reaches it.
const UnstartedURL = "http://workspacetest.invalid"

// maxRequestBody bounds what the fake reads of a request body.
const maxRequestBody = 1 << 20

// Options configure a Server.
type Options struct {
	// WorkspaceUUID defaults to "ws-test"; other workspaces get 404.
	WorkspaceUUID string
	// Token defaults to "test-token".
	Token string
	// SessionField is where Create Session puts the new UUID: a key of
	// "result" when prefixed "result." (default "result.session_uuid"),
	// a top-level key otherwise (e.g. "uuid").
	SessionField string
	// StartAt gives meta.start_at of chat replies; default time.Now().UnixNano(),
	// larger than 2^53 so a float decode would lose digits.
	StartAt func() int64
	// NoRecord disables Requests, for load tests.
	NoRecord bool
}

// Flow is a flow the fake runs.
type Flow struct {
	UUID string
	// Template is the reply; {name} is replaced by the request body's value
	// for placeholder name, or by nothing when it is missing.
	Template string
	// Reply, when set, makes the response from the placeholders instead of
	// Template (for replies that depend on which were given).
	Reply func(params map[string]string) string
	// Output, when non-nil, is sent as result.output instead of
	// {"response": Template}.
	Output any
	// Delay is how long a run takes; beyond the request's timeout the
	// fake answers 408 when the timeout runs out.
	Delay time.Duration
	// Status, when non-zero, is the HTTP status sent (after Delay) with
	// Body and Header instead of a result.
	Status int
	Body   string
	Header http.Header
	// StatusCount limits Status to the first StatusCount runs; 0 means all.
	StatusCount int
	// Drip, when positive, sends the response body one byte per Drip after
	// the headers, as a server that trickles its answer does.
	Drip time.Duration
	// IgnoreTimeout makes the run take Delay whatever timeout the request
	// asked for, with no 408: an API that hangs past it.
	IgnoreTimeout bool
}

// Agent is an agent the fake chats as.
type Agent struct {
	UUID string
	// Delay is how long a chat reply takes.
	Delay time.Duration
	// Status, when non-zero, is the HTTP status sent (after Delay) to chat
	// messages with Body and Header; such a message is not a turn.
	Status int
	Body   string
	Header http.Header
	// StatusCount limits Status to the first StatusCount messages; 0 means all.
	StatusCount int
	// SessionStatus, when non-zero, is the status Create Session answers
	// with, sending Body and Header too.
	SessionStatus int
	// SessionStatusCount limits SessionStatus to the first
	// SessionStatusCount requests; 0 means all.
	SessionStatusCount int
	// Drip, when positive, sends the body of chat answers one byte per
	// Drip after the headers.
	Drip time.Duration
	// Reply makes the reply text; default "[turn N] You said: MESSAGE".
	Reply func(turn int, message string) string
}

// Request is a request the fake received.
type Request struct {
	Method string
	// Path is the path as sent, still escaped.
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
	At     time.Time
}

// Server is the fake API. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL to configure clients with: UnstartedURL until
	// Start, then http://127.0.0.1:PORT.
	URL string

	opts    Options
	handler http.Handler
	srv     *httptest.Server

	mu       sync.Mutex
	flows    map[string]*flowState
	agents   map[string]*agentState
	sessions map[string]*session
	requests []Request
	closed   bool
}

type flowState struct {
	Flow
	forced int
}

type agentState struct {
	Agent
	forced        int
	sessionForced int
	sessions      []string
}

type session struct {
	agent    string
	turns    int
	messages []string
}

// New returns a Server that is not listening. Reach it through Handler,
// Transport or Client, in memory and so also inside a testing/synctest
// bubble, with Server.URL (or any base URL) as the client's base URL; call
// Start, or use NewServer, to serve it on a loopback port as well.
func New(opts Options) *Server {
	opts.WorkspaceUUID = cmp.Or(opts.WorkspaceUUID, "ws-test")
	opts.Token = cmp.Or(opts.Token, "test-token")
	opts.SessionField = cmp.Or(opts.SessionField, "result.session_uuid")
	if opts.StartAt == nil {
		opts.StartAt = func() int64 { return time.Now().UnixNano() }
	}
	s := &Server{
		URL:      UnstartedURL,
		opts:     opts,
		flows:    map[string]*flowState{},
		agents:   map[string]*agentState{},
		sessions: map[string]*session{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/workspaces/{workspace}/prompts/{flow}/run/sync", s.runFlow)
	mux.HandleFunc("POST /api/v1/workspaces/{workspace}/agents/{agent}/sessions/{session}/chat", s.chat)
	mux.HandleFunc("POST /api/v1/workspaces/{workspace}/agents/{agent}/sessions", s.createSession)
	s.handler = s.record(mux)
	return s
}

// NewServer returns a Server listening on a loopback port.
func NewServer(opts Options) *Server {
	s := New(opts)
	s.Start()
	return s
}

// Start serves the fake on a loopback port and sets URL. Calling it again does nothing.
func (s *Server) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	s.srv = httptest.NewServer(s.handler)
	s.URL = s.srv.URL
}

// Close stops the loopback listener, waiting for requests in flight, and
// makes Transport fail like a refused dial.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// Handler returns the fake's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Transport returns a RoundTripper that serves requests in memory, in the
// calling goroutine, whatever their host; it works inside synctest bubbles.
func (s *Server) Transport() http.RoundTripper { return memTransport{s} }

// Client returns an HTTP client for the fake: over loopback once started,
// in memory before.
func (s *Server) Client() *http.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return s.srv.Client()
	}
	return &http.Client{Transport: memTransport{s}}
}

// AddFlow adds or replaces a flow.
func (s *Server) AddFlow(f Flow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flows[f.UUID] = &flowState{Flow: f}
}

// AddAgent adds or replaces an agent, keeping its sessions.
func (s *Server) AddAgent(a Agent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &agentState{Agent: a}
	if old, ok := s.agents[a.UUID]; ok {
		st.sessions = old.sessions
	}
	s.agents[a.UUID] = st
}

// AddSession makes sessionUUID a live session of an agent, as if an
// operator had created it elsewhere.
func (s *Server) AddSession(agentUUID, sessionUUID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[sessionUUID] = &session{agent: agentUUID}
	if a, ok := s.agents[agentUUID]; ok {
		a.sessions = append(a.sessions, sessionUUID)
	}
}

// ExpireSession forgets a session: the next chat on it gets 404.
func (s *Server) ExpireSession(sessionUUID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sessionUUID)
}

// Sessions returns the live sessions of an agent, oldest first.
func (s *Server) Sessions(agentUUID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[agentUUID]
	if !ok {
		return nil
	}
	var live []string
	for _, id := range a.sessions {
		if _, ok := s.sessions[id]; ok {
			live = append(live, id)
		}
	}
	return live
}

// Messages returns the chat messages a session accepted, in order.
func (s *Server) Messages(sessionUUID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.sessions[sessionUUID]; ok {
		return append([]string(nil), ss.messages...)
	}
	return nil
}

// Requests returns every request received, in order of arrival, unless
// Options.NoRecord is set.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) record(next http.Handler) http.Handler {
	if s.opts.NoRecord {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		rec := Request{
			Method: r.Method,
			Path:   r.URL.EscapedPath(),
			Query:  r.URL.Query(),
			Header: r.Header.Clone(),
			Body:   body,
			At:     time.Now(),
		}
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		next.ServeHTTP(w, r)
	})
}

func (s *Server) runFlow(w http.ResponseWriter, r *http.Request) {
	if !s.bearer(r) && !s.equalToken(r.URL.Query().Get("token")) {
		writeError(w, http.StatusUnauthorized, "invalid or missing API token")
		return
	}
	if r.PathValue("workspace") != s.opts.WorkspaceUUID {
		writeError(w, http.StatusNotFound, "workspace not found")
		return
	}
	s.mu.Lock()
	fs, ok := s.flows[r.PathValue("flow")]
	var f Flow
	forced := false
	if ok {
		f = fs.Flow
		forced = f.Status != 0 && (f.StatusCount == 0 || fs.forced < f.StatusCount)
		if forced {
			fs.forced++
		}
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "flow not found")
		return
	}

	timeout := 60 * time.Second
	if v := r.URL.Query().Get("timeout"); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs < 0 {
			writeError(w, http.StatusBadRequest, "timeout must be a whole number of seconds")
			return
		}
		timeout = time.Duration(secs) * time.Second
	}
	params, ok := readParams(r)
	if !ok {
		writeError(w, http.StatusBadRequest, "body must be a JSON object of strings")
		return
	}

	if f.IgnoreTimeout {
		timeout = f.Delay
	}
	if !wait(r.Context(), min(f.Delay, timeout)) {
		return
	}
	w = drip(w, r, f.Drip)
	if f.Delay > timeout {
		writeError(w, http.StatusRequestTimeout, fmt.Sprintf("flow did not finish within %d seconds", timeout/time.Second))
		return
	}
	if forced {
		writeRaw(w, f.Status, f.Header, f.Body)
		return
	}
	output := f.Output
	if output == nil {
		text := fill(f.Template, params)
		if f.Reply != nil {
			text = f.Reply(params)
		}
		output = map[string]string{"response": text}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"meta":   map[string]string{"status": "SUCCESS"},
		"result": map[string]any{"output": output},
	})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	if !s.bearer(r) {
		writeError(w, http.StatusUnauthorized, "invalid or missing API token")
		return
	}
	agentUUID, sessionUUID := r.PathValue("agent"), r.PathValue("session")
	s.mu.Lock()
	as, agentOK := s.agents[agentUUID]
	ss, sessionOK := s.sessions[sessionUUID]
	var a Agent
	if agentOK {
		a = as.Agent
	}
	s.mu.Unlock()
	switch {
	case r.PathValue("workspace") != s.opts.WorkspaceUUID:
		writeError(w, http.StatusNotFound, "workspace not found")
		return
	case !agentOK:
		writeError(w, http.StatusNotFound, "agent not found")
		return
	case !sessionOK || ss.agent != agentUUID:
		writeError(w, http.StatusNotFound, "session not found")
		return
	}
	var body struct {
		Message *string `json:"message"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody)).Decode(&body); err != nil || body.Message == nil {
		writeError(w, http.StatusBadRequest, `body must be a JSON object with a "message" string`)
		return
	}

	if !wait(r.Context(), a.Delay) {
		return
	}
	w = drip(w, r, a.Drip)
	s.mu.Lock()
	forced := a.Status != 0 && (a.StatusCount == 0 || as.forced < a.StatusCount)
	if forced {
		as.forced++
	}
	ss, sessionOK = s.sessions[sessionUUID]
	turn := 0
	if !forced && sessionOK {
		ss.turns++
		turn = ss.turns
		ss.messages = append(ss.messages, *body.Message)
	}
	s.mu.Unlock()
	switch {
	case forced:
		writeRaw(w, a.Status, a.Header, a.Body)
		return
	case !sessionOK:
		// Expired while the agent was thinking.
		writeError(w, http.StatusNotFound, "session not found")
		return
	}
	reply := a.Reply
	if reply == nil {
		reply = func(turn int, message string) string { return fmt.Sprintf("[turn %d] You said: %s", turn, message) }
	}
	writeJSON(w, http.StatusOK, chatResponse{
		Meta: chatMeta{
			AgentUUID: agentUUID,
			Message:   "Message sent",
			StartAt:   s.opts.StartAt(),
			Status:    "SUBMITTED",
		},
		Result: chatResult{Output: reply(turn, *body.Message)},
	})
}

type chatResponse struct {
	Meta   chatMeta   `json:"meta"`
	Result chatResult `json:"result"`
}

type chatMeta struct {
	AgentUUID string `json:"agent_uuid"`
	Message   string `json:"message"`
	StartAt   int64  `json:"start_at"`
	Status    string `json:"status"`
}

type chatResult struct {
	Output string `json:"output"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	if !s.bearer(r) {
		writeError(w, http.StatusUnauthorized, "invalid or missing API token")
		return
	}
	if r.PathValue("workspace") != s.opts.WorkspaceUUID {
		writeError(w, http.StatusNotFound, "workspace not found")
		return
	}
	agentUUID := r.PathValue("agent")
	id := uuid.NewString()
	s.mu.Lock()
	a, ok := s.agents[agentUUID]
	var forced Agent
	if ok && a.SessionStatus != 0 && (a.SessionStatusCount == 0 || a.sessionForced < a.SessionStatusCount) {
		a.sessionForced++
		forced = a.Agent
	} else if ok {
		a.sessions = append(a.sessions, id)
		s.sessions[id] = &session{agent: agentUUID}
	}
	s.mu.Unlock()
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "agent not found")
	case forced.SessionStatus != 0:
		writeRaw(w, forced.SessionStatus, forced.Header, forced.Body)
	default:
		var body map[string]any
		if key, ok := strings.CutPrefix(s.opts.SessionField, "result."); ok {
			body = map[string]any{"result": map[string]string{key: id}}
		} else {
			body = map[string]any{s.opts.SessionField: id}
		}
		writeJSON(w, http.StatusOK, body)
	}
}

// bearer reports whether r carries the token in its Authorization header.
func (s *Server) bearer(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && s.equalToken(token)
}

func (s *Server) equalToken(token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.opts.Token)) == 1
}

// readParams decodes a flow body: a JSON object of strings, or nothing.
func readParams(r *http.Request) (map[string]string, bool) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	if err != nil {
		return nil, false
	}
	params := map[string]string{}
	if strings.TrimSpace(string(data)) == "" {
		return params, true
	}
	if err := json.Unmarshal(data, &params); err != nil || params == nil {
		return nil, false
	}
	return params, true
}

// fill replaces each {name} in template with params[name].
func fill(template string, params map[string]string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(template, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(template[open:], '}')
		if end < 0 {
			break
		}
		b.WriteString(template[:open])
		b.WriteString(params[template[open+1:open+end]])
		template = template[open+end+1:]
	}
	b.WriteString(template)
	return b.String()
}

// wait pauses for d unless ctx ends first; time.Timer keeps it usable in synctest.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	w.Write(data)
}

// writeError answers with a small JSON body; the API document does not
// show the real error shape.
func writeError(w http.ResponseWriter, status int, message string) {
	data, _ := json.Marshal(map[string]string{"error": message})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}

func writeRaw(w http.ResponseWriter, status int, header http.Header, body string) {
	w.Header().Set("Content-Type", "application/json")
	for k, vs := range header {
		w.Header()[http.CanonicalHeaderKey(k)] = vs
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// dripWriter sends its headers at once and its body one byte per every.
type dripWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	ctx   context.Context
	every time.Duration
}

// drip returns w itself when every is not positive.
func drip(w http.ResponseWriter, r *http.Request, every time.Duration) http.ResponseWriter {
	if every <= 0 {
		return w
	}
	return &dripWriter{ResponseWriter: w, rc: http.NewResponseController(w), ctx: r.Context(), every: every}
}

func (d *dripWriter) WriteHeader(status int) {
	d.ResponseWriter.WriteHeader(status)
	d.rc.Flush()
}

func (d *dripWriter) Write(p []byte) (int, error) {
	for i := range p {
		if !wait(d.ctx, d.every) {
			return i, d.ctx.Err()
		}
		if _, err := d.ResponseWriter.Write(p[i : i+1]); err != nil {
			return i, err
		}
		if err := d.rc.Flush(); err != nil {
			return i + 1, err
		}
	}
	return len(p), nil
}

func (d *dripWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// memTransport serves requests through the fake's handler without sockets.
type memTransport struct{ s *Server }

// RoundTrip runs the handler in a goroutine and waits for it, or, once the
// handler flushes, returns a response whose body streams what it writes
// next; closing that body ends the handler's context and waits for it.
func (t memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	body := req.Body
	if body == nil {
		body = http.NoBody
	}
	t.s.mu.Lock()
	closed := t.s.closed
	t.s.mu.Unlock()
	if closed {
		body.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	if err := ctx.Err(); err != nil {
		body.Close()
		return nil, err
	}
	hctx, cancel := context.WithCancel(ctx)
	sr := req.Clone(hctx)
	sr.Body = body
	sr.RequestURI = req.URL.RequestURI()
	sr.RemoteAddr = "192.0.2.1:1234"
	sr.Host = req.URL.Host
	w := &memWriter{rec: httptest.NewRecorder(), streaming: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.s.handler.ServeHTTP(w, sr)
		w.finish(hctx)
	}()
	select {
	case <-done:
	case <-w.streaming:
	}
	if w.head == nil {
		// The handler returned without flushing: a complete response.
		cancel()
		body.Close()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		resp := w.rec.Result()
		resp.Request = req
		return resp, nil
	}
	resp := w.head
	resp.Body = &memBody{
		r:       io.MultiReader(resp.Body, w.pr),
		pr:      w.pr,
		ctx:     ctx,
		cancel:  cancel,
		done:    done,
		reqBody: body,
	}
	resp.Request = req
	return resp, nil
}

// memWriter records a response until the handler flushes, then passes
// what it writes through a pipe.
type memWriter struct {
	rec       *httptest.ResponseRecorder
	head      *http.Response // the response as of the first Flush
	pr        *io.PipeReader
	pw        *io.PipeWriter
	streaming chan struct{} // closed by the first Flush
}

func (w *memWriter) Header() http.Header { return w.rec.Header() }

func (w *memWriter) WriteHeader(status int) {
	if w.pw == nil {
		w.rec.WriteHeader(status)
	}
}

func (w *memWriter) Write(p []byte) (int, error) {
	if w.pw != nil {
		return w.pw.Write(p)
	}
	return w.rec.Write(p)
}

func (w *memWriter) Flush() {
	if w.pw != nil {
		return
	}
	w.rec.Flush()
	w.head = w.rec.Result()
	w.pr, w.pw = io.Pipe()
	close(w.streaming)
}

// finish ends a streamed body: at EOF, or with the request's error when
// the handler stopped because the request ended.
func (w *memWriter) finish(ctx context.Context) {
	if w.pw != nil {
		w.pw.CloseWithError(ctx.Err())
	}
}

// memBody is a streamed response body.
type memBody struct {
	r       io.Reader
	pr      *io.PipeReader
	ctx     context.Context
	cancel  context.CancelFunc
	done    <-chan struct{}
	reqBody io.Closer
	once    sync.Once
}

func (b *memBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.ctx.Err() != nil {
		err = b.ctx.Err()
	}
	return n, err
}

// Close ends the exchange as closing a connection would: the handler's
// context ends and its writes fail. It returns once the handler has.
func (b *memBody) Close() error {
	b.once.Do(func() {
		b.pr.Close()
		b.cancel()
		<-b.done
		b.reqBody.Close()
	})
	return nil
}
