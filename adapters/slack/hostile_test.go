package slack

import (
	"github.com/flowbridge/flowbridge/internal/netlimit"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/testaddr"
)

// flood is many concurrent POSTs whose senders hold their bodies back:
// each sends a little of its body, then the rest once release is called.
type flood struct {
	statuses chan int // one per post, 0 when it got no answer
	release  func()
	wg       sync.WaitGroup
}

// startFlood posts n requests with bodies of size bytes to url, with the
// headers sign sets.
func startFlood(t *testing.T, url string, n, size int, sign func(http.Header)) *flood {
	t.Helper()
	open := make(chan struct{})
	f := &flood{statuses: make(chan int, n), release: sync.OnceFunc(func() { close(open) })}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	ctx := waitCtx(t)
	t.Cleanup(func() {
		f.release()
		f.wg.Wait()
		client.CloseIdleConnections()
	})
	for range n {
		f.wg.Go(func() {
			const head = 4 << 10
			status := 0
			defer func() { f.statuses <- status }()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &gatedBody{head: make([]byte, head), rest: size - head, open: open})
			if err != nil {
				t.Error(err)
				return
			}
			req.ContentLength = int64(size)
			req.Header.Set("Content-Type", slacktest.ContentTypeJSON)
			if sign != nil {
				sign(req.Header)
			}
			if res, err := client.Do(req); err == nil {
				status = res.StatusCode
				res.Body.Close()
			}
		})
	}
	return f
}

// answers collects n statuses.
func (f *flood) answers(n int, got map[int]int) {
	for range n {
		got[<-f.statuses]++
	}
}

// gatedBody sends a little of a body, then waits for open before it sends
// the rest: a slow sender, holding any server that reads it.
type gatedBody struct {
	head []byte
	rest int
	open <-chan struct{}
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	<-b.open
	if b.rest == 0 {
		return 0, io.EOF
	}
	n := min(len(p), b.rest)
	clear(p[:n])
	b.rest -= n
	return n, nil
}

// TestHTTPUnsignedFloodReadsNoBody: a few hundred concurrent unsigned POSTs
// of 1 MB are refused on their headers while their senders still hold most
// of each body back: no body is read, nor room made for one. (It is not
// parallel: it measures the process's allocations.)
func TestHTTPUnsignedFloodReadsNoBody(t *testing.T) {
	const (
		posts = 300
		size  = 1 << 20
	)
	e := startE2E(t, e2eOptions{cfg: httpMode("flood-secret")})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc

	f := startFlood(t, "http://"+e.a.Addr()+EventsPath, posts, size, nil)
	// Every answer arrives while the bodies are held back: the server did
	// not wait for one.
	got := map[int]int{}
	f.answers(posts, got)
	runtime.ReadMemStats(&ms)
	allocated := ms.TotalAlloc - before

	t.Logf("%d unsigned posts of %d bytes: %d MiB allocated by the process, statuses %v", posts, size, allocated>>20, got)
	if got[http.StatusUnauthorized] != posts {
		t.Errorf("statuses = %v, want every post refused with 401", got)
	}
	// Buffers for the bodies would be at least posts*size (300 MiB); the
	// connections themselves take about 100 KiB each under the race detector.
	if limit := uint64(posts * size / 4); allocated > limit {
		t.Errorf("process allocated %d MiB for %d unsigned posts, want under %d MiB", allocated>>20, posts, limit>>20)
	}
	if peak := e.a.bodies.maxUsed(); peak != 0 {
		t.Errorf("%d body bytes were reserved for unsigned requests, want none", peak)
	}
	if n := e.core.refusals("unsigned_request"); n != posts {
		t.Errorf("%d refusals counted as unsigned_request, want %d", n, posts)
	}
}

// TestHTTPForgedFloodIsCappedInFlight: requests with well-formed signature
// headers and a wrong signature must be read to be found out; the bytes read
// at once stay within the budget, and the requests beyond it are refused
// with 503 at once instead of being buffered.
func TestHTTPForgedFloodIsCappedInFlight(t *testing.T) {
	t.Parallel()
	const (
		posts  = 20
		size   = 1 << 20
		budget = 2 * size
		held   = budget / size
	)
	e := startE2E(t, e2eOptions{cfg: httpMode("forged-secret"), adapter: func(a *Adapter) { a.bodies = newByteBudget(budget) }})
	f := startFlood(t, "http://"+e.a.Addr()+EventsPath, posts, size, func(h http.Header) {
		h.Set(headerTimestamp, strconv.FormatInt(time.Now().Unix(), 10))
		h.Set(headerSignature, "v0="+strings.Repeat("0", 64))
	})
	// The requests the budget holds wait for their bodies; the others are
	// answered meanwhile. Then the held ones may finish.
	got := map[int]int{}
	f.answers(posts-held, got)
	f.release()
	f.answers(held, got)
	if got[http.StatusServiceUnavailable] != posts-held || got[http.StatusUnauthorized] != held {
		t.Errorf("statuses = %v, want %d × 503 and %d × 401", got, posts-held, held)
	}
	if peak := e.a.bodies.maxUsed(); peak > budget {
		t.Errorf("%d body bytes read at once, want at most %d", peak, budget)
	}
	if n := e.core.refusals("request_bytes"); n != posts-held {
		t.Errorf("%d refusals counted as request_bytes, want %d", n, posts-held)
	}
}

func TestLimitListenerCapsConnections(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := netlimit.Listen(inner, 2)
	defer ln.Close()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); err != nil {
		t.Fatal(err)
	}
	third := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			third <- c
		}
		close(third)
	}()
	select {
	case <-third:
		t.Fatal("a third connection was accepted while two are open")
	default:
	}
	first.Close()
	first.Close() // a second Close frees nothing more
	if c, ok := <-third; !ok {
		t.Fatal("the third connection was not accepted once the first closed")
	} else {
		c.Close()
	}
	if n := ln.Open(); n != 1 {
		t.Errorf("%d slots taken with one connection open, want 1", n)
	}
}

// TestE2EHTTPOversizedIDsAreRefusedAlone: signed events whose team, channel,
// user, ts or thread ID is tens of kilobytes long, sent together with valid
// ones, are acknowledged and refused each alone, before any workspace call;
// the valid ones are answered.
func TestE2EHTTPOversizedIDsAreRefusedAlone(t *testing.T) {
	t.Parallel()
	const secret = "ids-secret"
	e := startE2E(t, e2eOptions{cfg: httpMode(secret)})
	ctx := waitCtx(t)
	huge := func(n int) string { return strings.Repeat("A", n) }
	hugeTS := strings.Repeat("1", 40_000) + ".1"
	body := func(ev slacktest.MessageEvent, edit func(map[string]any)) []byte {
		t.Helper()
		b, _, err := e.slack.MessageEventBody(ev)
		if err != nil {
			t.Fatal(err)
		}
		if edit == nil {
			return b
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		if b, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		return b
	}
	hostile := [][]byte{
		body(slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "team"}, func(m map[string]any) { m["team_id"] = huge(70_000) }),
		body(slacktest.MessageEvent{Channel: "D" + huge(40_000), User: e2eUser, Text: "channel"}, nil),
		body(slacktest.MessageEvent{Channel: e2eDM, User: "U" + huge(40_000), Text: "user"}, nil),
		body(slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, TS: hugeTS, Text: "ts"}, nil),
		body(slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, ThreadTS: hugeTS, Text: "thread"}, nil),
		body(slacktest.MessageEvent{Channel: "d0lower", ChannelType: "im", User: e2eUser, Text: "form"}, nil),
	}
	const valid = 4
	var bodies [][]byte
	for i := range valid {
		bodies = append(bodies, body(slacktest.MessageEvent{Channel: fmt.Sprintf("D0VALID%d", i), User: e2eUser, Text: fmt.Sprintf("valid %d", i)}, nil))
	}
	bodies = append(bodies, hostile...)
	var wg sync.WaitGroup
	for _, b := range bodies {
		wg.Go(func() {
			if status, _ := e.post(t, ctx, slacktest.ContentTypeJSON, b, secret, time.Now(), nil); status != http.StatusOK {
				t.Errorf("status = %d, want 200: refused events are still acknowledged", status)
			}
		})
	}
	wg.Wait()
	for i := range valid {
		e.reply(ctx, fmt.Sprintf("D0VALID%d", i), fmt.Sprintf("You said: valid %d", i))
	}
	if n := len(e.ws.Sessions(e2eAgent)); n != valid {
		t.Errorf("workspace has %d sessions, want %d: one per valid conversation", n, valid)
	}
	if n := e.core.refusals("invalid_id"); n != len(hostile) {
		t.Errorf("%d events refused as invalid_id, want %d", n, len(hostile))
	}
}

func TestCheckFields(t *testing.T) {
	tests := []struct {
		name  string
		valid func(string) bool
		ok    []string
		bad   []string
	}{
		{"id", isID, []string{"T0123ABCD", "C1", "U0ALICE", "W012ABC", strings.Repeat("A", maxIDLen)},
			[]string{"", "c0123", "C 1", "C-1", "C\u00c91", strings.Repeat("A", maxIDLen+1)}},
		{"ts", isTS, []string{"1716212345.000100", "1.1"},
			[]string{"", "1716212345", ".1", "1.", "1.2.3", "a.1", strings.Repeat("1", maxTSLen) + ".1"}},
		{"trigger", isTrigger, []string{"398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c", "1.2.abc"},
			[]string{"", "1 2", "1/2", strings.Repeat("1", maxTriggerLen+1)}},
		{"response url", isResponseURL, []string{"https://hooks.slack.com/commands/T1/1/x", "http://127.0.0.1:1/r"},
			[]string{"", "hooks.slack.com/x", "ftp://h/x", "https://", "https://h/" + strings.Repeat("x", maxURLLen)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range tt.ok {
				if !tt.valid(s) {
					t.Errorf("%s(%.40q) = false, want true", tt.name, s)
				}
			}
			for _, s := range tt.bad {
				if tt.valid(s) {
					t.Errorf("%s(%.40q) = true, want false", tt.name, s)
				}
			}
		})
	}
	err := checkFields(field{"channel", "C1", isID}, field{"ts", strings.Repeat("9", 40_000), isTS})
	if fe, ok := errors.AsType[*invalidFieldError](err); !ok || fe.field != "ts" || len(err.Error()) > 100 {
		t.Errorf("checkFields() = %v, want a short error naming ts", err)
	}
}

// proxy forwards the TCP connections ln accepts to target until the test
// ends, when it closes them all.
func proxy(t *testing.T, ln net.Listener, target string) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				track(up)
				defer up.Close()
				var pipe sync.WaitGroup
				pipe.Go(func() {
					_, _ = io.Copy(up, c)
					up.Close()
				})
				_, _ = io.Copy(c, up)
				c.Close()
				pipe.Wait()
			})
		}
	})
}

// TestE2ESlackUnreachableAtStartIsRetried: Slack cannot be reached when the
// adapter starts (connection refused). The adapter does not stop: it
// retries with backoff, logs it and reports not ready, and connects once
// Slack answers.
func TestE2ESlackUnreachableAtStartIsRetried(t *testing.T) {
	t.Parallel()
	s, ws := newFakes(t, nil)
	// An address nothing listens on, until the proxy to the fake opens there.
	addr, release := testaddr.Reserve(t)

	retries := make(chan struct{}, 100)
	log := zaptest.NewLogger(t, zaptest.WrapOptions(zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == "Slack not reachable; retrying" {
			retries <- struct{}{}
		}
		return nil
	})))
	cfg := e2eConfig(s)
	cfg.APIURL = "http://" + addr + "/api/"
	core := newTestCore(t, ws, "", zaptest.NewLogger(t).Named("core"))
	a, err := New(cfg, core, log)
	if err != nil {
		t.Fatal(err)
	}
	a.firstRetry = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	e := &e2e{t: t, slack: s, ws: ws, a: a, err: make(chan error, 1)}
	go func() { e.err <- a.Run(ctx) }()
	e.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-e.err; err != nil {
			t.Errorf("Run() = %v, want nil after cancel", err)
		}
		core.close(t)
	})
	t.Cleanup(e.stop)

	wctx := waitCtx(t)
	for range 2 {
		select {
		case <-retries:
		case err := <-e.err:
			t.Fatalf("Run() = %v with Slack unreachable, want it to retry", err)
		case <-wctx.Done():
			t.Fatal("no retry logged")
		}
	}
	if err := a.Ready(); err == nil || !strings.Contains(err.Error(), "connection refused") || strings.HasPrefix(err.Error(), "slack:") {
		t.Errorf("Ready() = %v while Slack is unreachable, want not ready, naming the refusal, without a \"slack:\" prefix", err)
	}
	release()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("reopen %s: %v", addr, err)
	}
	proxy(t, ln, strings.TrimPrefix(s.URL(), "http://"))
	// The bridge stops before the proxy closes (cleanups run last first):
	// a reply still being edited when the test ends would otherwise meet
	// a closed proxy and be retried until the core gives it up, 12 s on.
	t.Cleanup(e.stop)
	e.waitReady()
	d := e.sent(s.SendMessage(wctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "hello"}))
	e.ack(wctx, d)
	e.reply(wctx, e2eDM, "You said: hello")
}

// TestE2EOversizedSocketFrameIsRefused: a Socket Mode message over
// MaxFrameBytes is refused before its payload is read (gorilla checks the
// frame header against the read limit), counted, and the socket opened
// again; the next event is answered.
func TestE2EOversizedSocketFrameIsRefused(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)
	big := json.RawMessage(`{"filler":"` + strings.Repeat("a", MaxFrameBytes) + `"}`)
	if _, err := e.slack.Send(ctx, slacktest.Envelope{Type: "events_api", Payload: big}); err != nil {
		t.Fatal(err)
	}
	if err := e.slack.WaitConnections(ctx, 2); err != nil {
		t.Fatalf("the socket was not opened again after the oversized frame: %v", err)
	}
	e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "still there?"})))
	e.reply(ctx, e2eDM, "You said: still there?")
	if n := e.core.refusals("frame_too_large"); n != 1 {
		t.Errorf("frame_too_large refusals = %d, want 1", n)
	}
}
