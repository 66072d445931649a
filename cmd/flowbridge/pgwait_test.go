package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/testkit/testaddr"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// proxy forwards connections from ln to target, until closed.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func startProxy(t *testing.T, addr, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s, free a moment ago: %v", addr, err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(up, c); up.Close() })
		p.wg.Go(func() { io.Copy(c, up); c.Close() })
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// setAdminListen sets a config file's admin.listen.
func setAdminListen(t *testing.T, path, addr string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), `listen = "127.0.0.1:0"`, `listen = "`+addr+`"`, 1))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunWaitsForPostgres: with the database not listening at start, run
// does not exit: it says it is waiting, /readyz is 503 with the reason, and
// once the database listens it starts and is ready.
func TestRunWaitsForPostgres(t *testing.T) {
	t.Parallel()
	dsn := testSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	real := u.Host
	later, release := testaddr.Reserve(t) // nothing listens here until the proxy does
	u.Host = later
	fake := workspacetest.NewServer(workspacetest.Options{Token: "secret-token-123"})
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: "agent-1"})
	path := writeConfig(t, fake.URL, "")
	onPostgres(t, path)
	admin := freePort(t)
	setAdminListen(t, path, admin)
	env := map[string]string{"TEST_TOKEN": "secret-token-123", "FB_DATABASE_URL": u.String()}

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	e := &environment{getenv: mapEnv(env), stdin: pr, stdout: out, stderr: errOut}
	go func() { done <- cmdRun(ctx, e, []string{"-config", path}) }()
	stop := sync.OnceFunc(func() {
		cancel()
		pw.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run = %v", err)
			}
		case <-time.After(60 * time.Second): // or a failed wait took its result
			t.Error("run did not return after cancel")
		}
	})
	t.Cleanup(stop)
	errOut.waitFor(t, "PostgreSQL not reachable; waiting for it", done)
	code, body := adminGet(t, admin, "/readyz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for PostgreSQL") || !strings.Contains(body, later) || !strings.Contains(body, "next try in") {
		t.Errorf("/readyz while waiting = %d %s, want 503 saying it waits for the database", code, body)
	}
	if strings.Contains(body, dbPassword) || strings.Contains(errOut.String(), dbPassword) {
		t.Errorf("the DSN's password is shown while waiting:\n%s\n%s", body, errOut)
	}

	release()
	startProxy(t, later, real)
	// run stops before the proxy to the database closes (cleanups run
	// last first): a shutdown that finds the database gone waits for it
	// (30 s, one run in three), which is not this test's subject.
	t.Cleanup(stop)
	errOut.waitFor(t, "flowbridge running", done)
	pw.Write([]byte("hello\n"))
	out.waitFor(t, "[turn 1] You said: hello", done)
	if code, body := adminGet(t, admin, "/readyz", ""); code != http.StatusOK || !strings.Contains(body, `"store":"ok"`) {
		t.Errorf("/readyz once connected = %d %s, want 200 with the store ok", code, body)
	}
}

// TestStopWhileWaitingForPostgres: a SIGTERM while run waits for the
// database (or while it migrates the schema) is a shutdown, not a failed
// start: run returns nil, as it does once serving.
func TestStopWhileWaitingForPostgres(t *testing.T) {
	t.Parallel()
	fake := workspacetest.NewServer(workspacetest.Options{Token: "secret-token-123"})
	t.Cleanup(fake.Close)
	path := writeConfig(t, fake.URL, "")
	onPostgres(t, path)
	setAdminListen(t, path, freePort(t))
	nowhere := "postgres://postgres@" + testaddr.Refusing(t) + "/test?sslmode=disable" // nothing listens there
	env := map[string]string{"TEST_TOKEN": "secret-token-123", "FB_DATABASE_URL": nowhere}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errOut := &syncBuffer{}
	done := make(chan error, 1)
	e := &environment{getenv: mapEnv(env), stdin: strings.NewReader(""), stdout: &syncBuffer{}, stderr: errOut}
	go func() { done <- cmdRun(ctx, e, []string{"-config", path}) }()
	errOut.waitFor(t, "PostgreSQL not reachable; waiting for it", done)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run stopped while waiting for PostgreSQL = %v, want nil", err)
	}
}
