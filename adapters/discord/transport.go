package discord

import (
	"context"
	"crypto/x509"
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
	// limit bounds one gateway message (frameLimit); oversize is told of
	// each refused.
	limit    int64
	oversize func()
	// roots, when set, are the CAs trusted for wss (tests); nil: the system's.
	roots *x509.CertPool
	// handshake, when set, gates each handshake discordgo writes
	// (identifyConn); halt is closed when the adapter stops, ending its
	// waits. Both are set before the first dial.
	handshake func(op int, again bool, closed <-chan struct{}) error
	halt      <-chan struct{}
	// openTimer cuts an Open that takes too long (open); an IDENTIFY's
	// wait pauses it.
	openTimer *time.Timer
}

// armOpen starts the open timeout: the connection is cut after d unless
// disarmed first (the returned func).
func (g *gatewayConn) armOpen(d time.Duration) (disarm func() bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := time.AfterFunc(d, g.cut)
	g.openTimer = t
	return func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.openTimer = nil
		return t.Stop()
	}
}

// pauseOpen stops the open timeout while an IDENTIFY waits its turn (the
// wait is ours, not Discord's) and returns what starts it again, afresh.
func (g *gatewayConn) pauseOpen() (resume func()) {
	g.mu.Lock()
	t := g.openTimer
	stopped := t != nil && t.Stop()
	g.mu.Unlock()
	return func() {
		if !stopped {
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.openTimer == t {
			t.Reset(g.timeout)
		}
	}
}

// dial is the gateway's dial for ws:// (a local gateway, the tests' fake).
func (g *gatewayConn) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := g.dialTCP(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return g.track(c), nil
}

// track wraps the connection under the gateway's websocket in the frame
// limit and remembers it.
func (g *gatewayConn) track(c net.Conn) net.Conn {
	var tc net.Conn = &trackedConn{Conn: c, last: &g.lastRead}
	if g.limit > 0 {
		tc = &frameLimit{Conn: tc, limit: g.limit, oversize: g.oversize}
	}
	if g.handshake != nil {
		tc = newIdentifyConn(tc, g.handshake)
	}
	g.mu.Lock()
	g.conn = tc
	g.mu.Unlock()
	return tc
}

var noDeadline time.Time

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
