package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Dev mode's workspace: fixed IDs so a transcript reads the same each time.
const (
	devWorkspace = "dev-workspace"
	devToken     = "dev-token"
	devAgentUUID = "0b5e8d0e-5c7e-4d2f-9d55-0a1c2b3c4d5e"
	devFlowHC    = "9f1c7a52-6d0a-4a4e-8f43-1d2e3f4a5b6c"
	devFlowSlow  = "5d2b8e61-0c4f-4b8a-a1e2-7f8091a2b3c4"
	devFlowJSON  = "3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c7d"
)

// echoWorkspace is the AI workspace flowbridge dev talks to, on a loopback
// port: one agent that echoes each message with its turn in the session,
// and three flows (healthcheck, inventory, slow). It answers the API of
// workspace-api.md only as far as dev shows it; the tests' faithful fake is
// testkit/workspacetest, which the binary does not link.
type echoWorkspace struct {
	URL     string
	srv     *http.Server
	serving sync.WaitGroup // Serve and the handlers in flight

	mu    sync.Mutex
	turns map[string]int // session UUID -> messages it took
}

// startEchoWorkspace serves an echoWorkspace on 127.0.0.1.
func startEchoWorkspace() (*echoWorkspace, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("dev workspace: %w", err)
	}
	e := &echoWorkspace{URL: "http://" + ln.Addr().String(), turns: map[string]int{}}
	const base = "POST /api/v1/workspaces/" + devWorkspace
	mux := http.NewServeMux()
	mux.HandleFunc(base+"/agents/"+devAgentUUID+"/sessions", e.createSession)
	mux.HandleFunc(base+"/agents/"+devAgentUUID+"/sessions/{session}/chat", e.chat)
	mux.HandleFunc(base+"/prompts/{flow}/run/sync", e.runFlow)
	e.srv = &http.Server{Handler: e.authorized(mux), ReadHeaderTimeout: 10 * time.Second}
	e.serving.Go(func() { _ = e.srv.Serve(ln) })
	return e, nil
}

// Close stops the server and returns once every request has ended; a slow
// flow in flight ends as its connection closes.
func (e *echoWorkspace) Close() {
	_ = e.srv.Close()
	e.serving.Wait()
}

func (e *echoWorkspace) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.serving.Add(1)
		defer e.serving.Done()
		if r.Header.Get("Authorization") != "Bearer "+devToken {
			writeAPIError(w, http.StatusUnauthorized, "invalid or missing API token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (e *echoWorkspace) createSession(w http.ResponseWriter, r *http.Request) {
	id := uuid.NewString()
	e.mu.Lock()
	e.turns[id] = 0
	e.mu.Unlock()
	writeAPIJSON(w, map[string]any{"result": map[string]string{"session_uuid": id}})
}

func (e *echoWorkspace) chat(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Message *string `json:"message"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil || body.Message == nil {
		writeAPIError(w, http.StatusBadRequest, `body must be a JSON object with a "message" string`)
		return
	}
	id := r.PathValue("session")
	e.mu.Lock()
	turn, ok := e.turns[id]
	if ok {
		turn++
		e.turns[id] = turn
	}
	e.mu.Unlock()
	if !ok {
		writeAPIError(w, http.StatusNotFound, "session not found")
		return
	}
	writeAPIJSON(w, map[string]any{
		"meta":   map[string]any{"agent_uuid": devAgentUUID, "message": "Message sent", "status": "SUBMITTED", "start_at": time.Now().UnixNano()},
		"result": map[string]string{"output": fmt.Sprintf("[turn %d] You said: %s", turn, *body.Message)},
	})
}

func (e *echoWorkspace) runFlow(w http.ResponseWriter, r *http.Request) {
	timeout := 60 * time.Second
	if v := r.URL.Query().Get("timeout"); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs < 0 {
			writeAPIError(w, http.StatusBadRequest, "timeout must be a whole number of seconds")
			return
		}
		timeout = time.Duration(secs) * time.Second
	}
	params := map[string]string{}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&params); err != nil && !errors.Is(err, io.EOF) {
		writeAPIError(w, http.StatusBadRequest, "body must be a JSON object of strings")
		return
	}
	var output any
	switch r.PathValue("flow") {
	case devFlowHC:
		what := "all services are"
		if params["service"] != "" {
			what = "service `" + params["service"] + "` is"
		}
		output = map[string]string{"response": "Health check of **" + params["host"] + "**: " + what + " up, 3 of 3 probes passed."}
	case devFlowJSON:
		output = map[string]any{
			"hosts": []map[string]any{{"name": "web1", "load": 0.42}, {"name": "web2", "load": 1.7}}, "healthy": true,
		}
	case devFlowSlow:
		// Never finishes: the API answers 408 once the run's timeout passes.
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-t.C:
			writeAPIError(w, http.StatusRequestTimeout, fmt.Sprintf("flow did not finish within %d seconds", timeout/time.Second))
		case <-r.Context().Done():
		}
		return
	default:
		writeAPIError(w, http.StatusNotFound, "flow not found")
		return
	}
	writeAPIJSON(w, map[string]any{"meta": map[string]string{"status": "SUCCESS"}, "result": map[string]any{"output": output}})
}

// devSession is a session as saveSessions writes it.
type devSession struct {
	UUID  string `json:"uuid"`
	Agent string `json:"agent"`
	Turns int    `json:"turns"`
}

// saveSessions writes the sessions and their turns as JSON, so that a later
// run (dev -store) continues the conversations its store maps.
func (e *echoWorkspace) saveSessions(w io.Writer) error {
	e.mu.Lock()
	out := make([]devSession, 0, len(e.turns))
	for id, turns := range e.turns {
		out = append(out, devSession{UUID: id, Agent: devAgentUUID, Turns: turns})
	}
	e.mu.Unlock()
	return json.NewEncoder(w).Encode(out)
}

// loadSessions adds the sessions saveSessions wrote.
func (e *echoWorkspace) loadSessions(r io.Reader) error {
	var in []devSession
	if err := json.NewDecoder(r).Decode(&in); err != nil {
		return fmt.Errorf("load sessions: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range in {
		if s.UUID != "" && s.Agent == devAgentUUID {
			e.turns[s.UUID] = s.Turns
		}
	}
	return nil
}

func writeAPIJSON(w http.ResponseWriter, v any) {
	data, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

func writeAPIError(w http.ResponseWriter, status int, message string) {
	data, _ := json.Marshal(map[string]string{"error": message})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}
