package discord

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// rewriteTransport sends every REST request to the configured API host.
// discordgo computes its endpoint URLs from package variables once, at
// start-up; rewriting here keeps those variables untouched, so several
// adapters (and parallel tests) can each talk to their own server.
type rewriteTransport struct {
	base *url.URL // nil: leave requests as discordgo built them
	next http.RoundTripper
}

func (t *rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.base == nil {
		return t.next.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	r2.URL.Scheme = t.base.Scheme
	r2.URL.Host = t.base.Host
	r2.Host = t.base.Host
	return t.next.RoundTrip(r2)
}

// gatewayConn remembers the network connection under the current gateway
// websocket, so an Open that hangs waiting for Hello or READY can be cut by
// closing it, and so readiness can see when the gateway last said anything
// (heartbeat acks arrive every ~41 s and are not events).
type gatewayConn struct {
	mu       sync.Mutex
	conn     net.Conn
	lastRead atomic.Int64 // unix nanoseconds
	timeout  time.Duration
}

func (g *gatewayConn) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: g.timeout}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, last: &g.lastRead}
	g.mu.Lock()
	g.conn = tc
	g.mu.Unlock()
	return tc, nil
}

// cut closes the current connection; a blocked read in discordgo then fails.
func (g *gatewayConn) cut() {
	g.mu.Lock()
	c := g.conn
	g.mu.Unlock()
	if c != nil {
		_ = c.Close() // the read it unblocks reports the outcome
	}
}

func (g *gatewayConn) lastActivity() time.Time {
	n := g.lastRead.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

type trackedConn struct {
	net.Conn
	last *atomic.Int64
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.last.Store(time.Now().UnixNano())
	}
	return n, err
}
