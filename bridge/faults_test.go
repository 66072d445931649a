package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/testaddr"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// newHarnessWith is newHarness with the workspace client's config in the
// test's hands (deadlines, transport), for fault injection.
func newHarnessWith(t *testing.T, cfg bridge.Config, wcfg workspace.Config, setup func(*workspacetest.Server)) *harness {
	t.Helper()
	fake := workspacetest.NewServer(workspacetest.Options{})
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: agentUUID})
	fake.AddAgent(workspacetest.Agent{UUID: agent2UUID, Reply: func(turn int, msg string) string { return fmt.Sprintf("other agent, turn %d: %s", turn, msg) }})
	fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "checked {host} {service}"})
	if setup != nil {
		setup(fake)
	}
	wcfg.BaseURL, wcfg.WorkspaceUUID, wcfg.Token = fake.URL, "ws-test", "test-token"
	ws, err := workspace.New(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	st, path := openStore(t)
	b, err := bridge.New(cfg, ws, st, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	attachTest(t, b)
	return &harness{t: t, b: b, fake: fake, store: st, path: path}
}

// countRequests counts the fake's requests whose path ends with suffix.
func countRequests(fake *workspacetest.Server, suffix string) int {
	n := 0
	for _, r := range fake.Requests() {
		if strings.HasSuffix(r.Path, suffix) {
			n++
		}
	}
	return n
}

// checkFaultReply checks that a reply to a fault is a short error sentence
// that shows nothing of what the API sent.
func checkFaultReply(t *testing.T, r bridge.Reply, want string, leaks ...string) {
	t.Helper()
	if r.Kind != bridge.ReplyError {
		t.Errorf("reply kind = %v, want error (text %q)", r.Kind, r.Text)
	}
	if !strings.Contains(r.Text, want) {
		t.Errorf("reply = %q, want it to contain %q", r.Text, want)
	}
	if len(r.Text) > 300 {
		t.Errorf("reply is %d bytes, want a short sentence: %.200q…", len(r.Text), r.Text)
	}
	for _, l := range append(leaks, "<html", "<body", "{\"", "xxxxxxxx") {
		if strings.Contains(r.Text, l) {
			t.Errorf("reply = %q, shows %q of the API's answer", r.Text, l)
		}
	}
}

// switchTransport sends requests to a closed port (a refused dial) while down
// is set, and to the fake otherwise.
type switchTransport struct {
	down    atomic.Bool
	dead    string // host:port nothing listens on
	fake    http.RoundTripper
	real    http.RoundTripper
	refused atomic.Int32
}

func (s *switchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !s.down.Load() {
		return s.fake.RoundTrip(req)
	}
	s.refused.Add(1)
	r := req.Clone(req.Context())
	r.URL.Host = s.dead
	return s.real.RoundTrip(r)
}

// TestAPIRefusingConnections: while the API refuses connections, chats and
// flows get a clear sentence; once it is back, the next conversation is served.
func TestAPIRefusingConnections(t *testing.T) {
	t.Parallel()
	tr := &switchTransport{dead: testaddr.Refusing(t), real: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(tr.real.(*http.Transport).CloseIdleConnections)
	h := newHarnessWith(t, defaultConfig(), workspace.Config{MaxRetries: 1, HTTPClient: &http.Client{Transport: tr}}, func(s *workspacetest.Server) {
		tr.fake = s.Transport()
	})
	tr.down.Store(true)

	checkFaultReply(t, h.ask("c/down", "hello"), "could not be reached")
	_, r := h.command("c/down", bridge.CommandFlow, "healthcheck host=a")
	checkFaultReply(t, r, "could not be reached")
	if n := tr.refused.Load(); n == 0 || n > 4 {
		// A refused dial provably never reached the API, so it may be retried,
		// but only MaxRetries times per call.
		t.Errorf("%d dials while down, want 1 to 4 (two calls, one retry each)", n)
	}
	if n := len(h.fake.Requests()); n != 0 {
		t.Errorf("the API received %d requests while refusing connections", n)
	}

	tr.down.Store(false)
	wantContains(t, "after recovery", h.ask("c/up", "hello again").Text, "[turn 1] You said: hello again")
	_, r = h.command("c/up", bridge.CommandFlow, "healthcheck host=b")
	wantContains(t, "flow after recovery", r.Text, "checked b")
}

// slowQuery makes the fake wait its default 60 s instead of the flow's
// timeout, so that it hangs past the client's own deadline rather than
// answering 408 in time.
type slowQuery struct{ next http.RoundTripper }

func (s slowQuery) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	q := r.URL.Query()
	q.Del("timeout")
	r.URL.RawQuery = q.Encode()
	return s.next.RoundTrip(r)
}

// TestAPIHangingPastDeadline: a chat or flow the API never answers ends at the
// client's deadline with a clear sentence, is not sent again (it may have
// run), and the bridge serves the next conversation.
func TestAPIHangingPastDeadline(t *testing.T) {
	t.Parallel()
	t.Run("chat", func(t *testing.T) {
		t.Parallel()
		h := newHarnessWith(t, defaultConfig(), workspace.Config{ChatTimeout: 300 * time.Millisecond, MaxRetries: 2}, func(s *workspacetest.Server) {
			s.AddAgent(workspacetest.Agent{UUID: agentUUID, Delay: time.Hour})
		})
		checkFaultReply(t, h.ask("c/hang", "are you there?"), "did not answer in time")
		if n := countRequests(h.fake, "/chat"); n != 1 {
			t.Errorf("%d chat requests, want 1: a message that may have arrived is never resent", n)
		}
		h.fake.AddAgent(workspacetest.Agent{UUID: agentUUID})
		wantContains(t, "next conversation", h.ask("c/next", "hello").Text, "You said: hello")
	})
	t.Run("flow", func(t *testing.T) {
		t.Parallel()
		var fake *workspacetest.Server
		cfg := defaultConfig()
		cfg.Flows[0].Timeout = time.Second
		h := newHarnessWith(t, cfg, workspace.Config{FlowMargin: 200 * time.Millisecond, MaxRetries: 2, HTTPClient: &http.Client{Transport: slowQuery{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return fake.Transport().RoundTrip(r)
		})}}}, func(s *workspacetest.Server) {
			fake = s
			s.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "late {host}", Delay: time.Hour})
		})
		start := time.Now()
		_, r := h.command("c/hang", bridge.CommandFlow, "healthcheck host=a")
		checkFaultReply(t, r, "did not finish within 1 second", "late a")
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("the flow was answered after %s, want about its 1.2 s deadline", d)
		}
		if n := countRequests(h.fake, "/run/sync"); n != 1 {
			t.Errorf("%d flow runs, want 1: a flow that may have run is never retried", n)
		}
		h.fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "checked {host}"})
		_, r = h.command("c/next", bridge.CommandFlow, "healthcheck host=b")
		wantContains(t, "next flow", r.Text, "checked b")
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAPIBadAnswers: a 500, an HTML page, truncated JSON and a 20 MB body each
// give a short sentence without the body, no retry, and the next conversation
// is served normally.
func TestAPIBadAnswers(t *testing.T) {
	t.Parallel()
	huge := `{"result":{"output":"` + strings.Repeat("x", 20<<20) + `"}}`
	cases := []struct {
		name   string
		status int
		body   string
		want   string // in the chat reply
		leak   string // what must not be shown
	}{
		{"500", http.StatusInternalServerError, `{"error":"database password is hunter2"}`, "HTTP 500", "hunter2"},
		{"html", http.StatusOK, "<html><body><h1>502 Bad Gateway</h1>nginx</body></html>", "could not read", "nginx"},
		{"truncated json", http.StatusOK, `{"result":{"output":"half an ans`, "could not read", "half an ans"},
		{"20 MB", http.StatusOK, huge, "could not read", "xxxx"},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/chat", func(t *testing.T) {
			h := newHarnessWith(t, defaultConfig(), workspace.Config{MaxRetries: 2}, func(s *workspacetest.Server) {
				s.AddAgent(workspacetest.Agent{UUID: agentUUID, Status: tc.status, Body: tc.body, StatusCount: 1})
			})
			checkFaultReply(t, h.ask("c/bad", "hello"), tc.want, tc.leak)
			if n := countRequests(h.fake, "/chat"); n != 1 {
				t.Errorf("%d chat requests, want 1 (no retry)", n)
			}
			wantContains(t, "next conversation", h.ask("c/next", "hello").Text, "You said: hello")
		})
		t.Run(tc.name+"/flow", func(t *testing.T) {
			h := newHarnessWith(t, defaultConfig(), workspace.Config{MaxRetries: 2}, func(s *workspacetest.Server) {
				s.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "checked {host}", Status: tc.status, Body: tc.body, StatusCount: 1})
			})
			_, r := h.command("c/bad", bridge.CommandFlow, "healthcheck host=a")
			checkFaultReply(t, r, tc.want, tc.leak)
			if n := countRequests(h.fake, "/run/sync"); n != 1 {
				t.Errorf("%d flow runs, want 1: a flow that may have run is never retried", n)
			}
			_, r = h.command("c/next", bridge.CommandFlow, "healthcheck host=b")
			wantContains(t, "next flow", r.Text, "checked b")
		})
	}
}

// sessionMessages returns what the fake's only session of the default agent accepted.
func sessionMessages(t *testing.T, fake *workspacetest.Server) []string {
	t.Helper()
	sessions := fake.Sessions(agentUUID)
	if len(sessions) != 1 {
		t.Fatalf("agent has %d sessions, want 1", len(sessions))
	}
	return fake.Messages(sessions[0])
}

// lastRunParams decodes the parameters of the fake's last flow run.
func lastRunParams(t *testing.T, fake *workspacetest.Server) map[string]string {
	t.Helper()
	var last *workspacetest.Request
	for _, r := range fake.Requests() {
		if strings.HasSuffix(r.Path, "/run/sync") {
			last = &r
		}
	}
	if last == nil {
		t.Fatal("no flow run reached the API")
	}
	var params map[string]string
	if err := json.Unmarshal(last.Body, &params); err != nil {
		t.Fatalf("flow run body %q: %v", last.Body, err)
	}
	return params
}

func TestBadInput(t *testing.T) {
	t.Run("invalid utf-8 and control characters", func(t *testing.T) {
		h := newHarness(t, defaultConfig(), nil)
		r := h.ask("c/1", "caf\xe9 \x1b[31mred\x1b[0m\x00 bell\x07 tab\tnew\nline\x7f end")
		if r.Kind != bridge.ReplyAgent {
			t.Fatalf("reply = %v %q, want the agent's answer", r.Kind, r.Text)
		}
		const want = "caf\uFFFD [31mred[0m bell tab\tnew\nline end"
		if got := sessionMessages(t, h.fake); len(got) != 1 || got[0] != want {
			t.Errorf("the API received %q, want [%q]", got, want)
		}
		_, r = h.command("c/1", bridge.CommandFlow, "healthcheck host=we\xffb\x01\x1b1")
		wantContains(t, "flow", r.Text, "checked we\uFFFDb1")
		if got := lastRunParams(t, h.fake)["host"]; got != "we\uFFFDb1" || !utf8.ValidString(got) {
			t.Errorf("the API received host %q, want %q", got, "we\uFFFDb1")
		}
	})
	t.Run("100 KB message", func(t *testing.T) {
		h := newHarness(t, defaultConfig(), nil)
		r := h.ask("c/1", strings.Repeat("word ", 20<<10))
		checkFaultReply(t, r, "too long")
		wantContains(t, "refusal", r.Text, "102400 bytes", "16000")
		if n := countRequests(h.fake, "/chat"); n != 0 {
			t.Errorf("%d chat requests for a refused message, want 0", n)
		}
		wantContains(t, "next message", h.ask("c/1", "short").Text, "You said: short")
	})
	t.Run("10,000 parameters", func(t *testing.T) {
		var args strings.Builder
		args.WriteString("healthcheck host=a")
		for i := range 10000 {
			fmt.Fprintf(&args, " p%d=v", i)
		}
		// With the default limits the line itself is refused as too long,
		// before it is even parsed.
		h := newHarness(t, defaultConfig(), nil)
		_, r := h.command("c/1", bridge.CommandFlow, args.String())
		checkFaultReply(t, r, "too long")
		// With room for the line, the parameter count is what refuses it.
		cfg := defaultConfig()
		cfg.Limits.MaxMessageBytes = 1 << 20
		h = newHarness(t, cfg, nil)
		_, r = h.command("c/1", bridge.CommandFlow, args.String())
		checkFaultReply(t, r, "Too many parameters (10001; at most 32)")
		if n := countRequests(h.fake, "/run/sync"); n != 0 {
			t.Errorf("%d flow runs for refused parameters, want 0", n)
		}
		entries, err := h.store.Audit(t.Context(), sessionmap.AuditFilter{Flow: "healthcheck"})
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Outcome != bridge.OutcomeInvalid {
			t.Errorf("audit = %+v, want one invalid entry", entries)
		}
	})
	t.Run("quotes newlines and equals", func(t *testing.T) {
		cases := []struct {
			args string
			want map[string]string
		}{
			{`healthcheck host="a \"quoted\" name" service='it''s'`, map[string]string{"host": `a "quoted" name`, "service": "its"}},
			{"healthcheck host='two\nlines' service=\"x\ny\"", map[string]string{"host": "two\nlines", "service": "x\ny"}},
			{`healthcheck host=a=b=c service="k=v; j=w"`, map[string]string{"host": "a=b=c", "service": "k=v; j=w"}},
			{`healthcheck host=“curly quotes” service='single "double" inside'`, map[string]string{"host": "curly quotes", "service": `single "double" inside`}},
			{`healthcheck host=back\ slash\\ service=`, map[string]string{"host": `back slash\`, "service": ""}},
		}
		for _, tc := range cases {
			h := newHarness(t, defaultConfig(), nil)
			_, r := h.command("c/1", bridge.CommandFlow, tc.args)
			if r.Kind != bridge.ReplyFlow {
				t.Errorf("/flow %s = %v %q, want the flow's result", tc.args, r.Kind, r.Text)
				continue
			}
			got := lastRunParams(t, h.fake)
			if len(got) != len(tc.want) {
				t.Errorf("/flow %s sent %q, want %q", tc.args, got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("/flow %s sent %s=%q, want %q", tc.args, k, got[k], v)
				}
			}
		}
	})
}

func TestRefusedRequestsWriteBoundedAudit(t *testing.T) {
	cfg := defaultConfig()
	cfg.Limits = bridge.Limits{MaxParams: 4, MaxValueBytes: 100}
	h := newHarness(t, cfg, nil)
	var many strings.Builder
	many.WriteString("healthcheck")
	for i := range 50 {
		fmt.Fprintf(&many, " p%d=v", i)
	}
	h.command("c/1", bridge.CommandFlow, many.String())
	h.command("c/1", bridge.CommandFlow, "healthcheck host="+strings.Repeat("x", 5000))
	entries, err := h.store.Audit(t.Context(), auditAll())
	if err != nil || len(entries) != 2 {
		t.Fatalf("audit = %d entries, %v; want 2", len(entries), err)
	}
	for _, e := range entries {
		size := 0
		for k, v := range e.Params {
			size += len(k) + len(v)
		}
		if len(e.Params) > 4 || size > 400 {
			t.Errorf("audit entry keeps %d parameters, %d bytes: %v", len(e.Params), size, e.Params)
		}
	}
}
