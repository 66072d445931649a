package main

import (
	"github.com/flowbridge/flowbridge/internal/netlimit"

	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
)

// holdConn dials addr and, when req is not empty, sends it and reads its
// response, then leaves the connection open as a client that holds it.
func holdConn(t *testing.T, addr, req string) (net.Conn, int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if req == "" {
		return c, 0
	}
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", req, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return &bufConn{Conn: c, r: br}, resp.StatusCode
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// closedByServer reports whether the server closes c within d: a read
// returns EOF (or a reset) rather than time out.
func closedByServer(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestAdminDropsHeldConnections: connections that send nothing, keep-alive
// connections left idle after a request, and connections kept after a 401
// are closed by the admin listener, which never has more than maxConns open
// at once; /healthz is answered meanwhile. (Before, idle keep-alive
// connections and 401s were kept for ever: 5,000 held took the process's
// memory from 35 to 118 MB, two holders of 9,990 its file descriptors.)
func TestAdminDropsHeldConnections(t *testing.T) {
	t.Parallel()
	lim := adminLimits{maxConns: 4, readHeader: 300 * time.Millisecond, read: time.Second, idle: 300 * time.Millisecond, write: 5 * time.Second}
	admin, err := startAdminLimited(AdminConfig{Listen: "127.0.0.1:0", Token: bridge.Secret("s3cret")}, lim, func() string { return "starting" }, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.shutdown)

	var held []net.Conn
	for range 3 * lim.maxConns {
		c, _ := holdConn(t, admin.addr, "")
		held = append(held, c)
	}
	// Each of these waits for a slot, so they are answered only once the
	// silent ones are dropped.
	for range lim.maxConns {
		c, code := holdConn(t, admin.addr, "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")
		if code != http.StatusOK {
			t.Fatalf("/healthz behind held connections = %d, want 200", code)
		}
		held = append(held, c)
	}
	for i, c := range held {
		if !closedByServer(c, 5*time.Second) {
			t.Errorf("held connection %d is still open after 5 s, want it closed within the header or idle timeout", i)
		}
	}

	// Without the token a 401 keeps no connection, whatever the timeouts.
	slow := adminLimits{maxConns: 4, readHeader: time.Minute, read: time.Minute, idle: time.Minute, write: time.Minute}
	locked, err := startAdminLimited(AdminConfig{Listen: "127.0.0.1:0", Token: bridge.Secret("s3cret")}, slow, func() string { return "starting" }, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(locked.shutdown)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.Handle("/", requireToken("s3cret", http.NotFoundHandler())) // as adminHandler guards the API
	locked.setHandler(mux)
	for i := range 2 * slow.maxConns {
		c, code := holdConn(t, locked.addr, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n")
		if code != http.StatusUnauthorized {
			t.Fatalf("/metrics without the token = %d, want 401", code)
		}
		if !closedByServer(c, 5*time.Second) {
			t.Fatalf("connection %d is still open after its 401, want it closed", i)
		}
	}
	c, code := holdConn(t, locked.addr, "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n")
	if code != http.StatusOK {
		t.Errorf("/healthz after %d 401s = %d, want 200", 2*slow.maxConns, code)
	}
	_ = c.Close()
}

// TestLimitListenerBounds: the admin listener's limit holds back the
// connection past maxConns until one closes.
func TestLimitListenerBounds(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := netlimit.Listen(inner, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case c := <-accepted:
		c.Close()
		t.Fatal("a third connection was accepted while two were open")
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	third := <-accepted
	third.Close()
	second.Close()
}
