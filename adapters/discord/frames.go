package discord

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
)

// MaxGatewayMessageBytes bounds one gateway message (all its frames) as it
// arrives. A GUILD_CREATE of a large guild, the largest event the bridge's
// intents bring, holds far less, and discordgo asks for compressed frames.
const MaxGatewayMessageBytes = 8 << 20

// errMessageTooLarge ends a gateway connection whose message is over the limit.
var errMessageTooLarge = errors.New("gateway message over the size limit")

// frameLimit reads a WebSocket connection's server-to-client bytes (after
// the HTTP response to the upgrade) and follows its frame headers, failing the read that brings the header of a
// message over limit, before any of its payload passes: discordgo keeps its
// *websocket.Conn to itself, so gorilla's SetReadLimit is out of reach, and
// this is the same check one layer down. The read error ends the connection
// like any other, and the shard reconnects.
type frameLimit struct {
	net.Conn
	limit     int64
	oversize  func()
	upgraded  bool   // the HTTP response to the upgrade has passed
	tail      uint32 // its last four bytes, to find its end
	hdr       []byte // the header being read
	remaining int64  // payload bytes left in the current frame
	message   int64  // payload bytes of the current data message so far
	failed    bool
}

func (c *frameLimit) Read(p []byte) (int, error) {
	if c.failed {
		return 0, errMessageTooLarge
	}
	n, err := c.Conn.Read(p)
	for i := 0; i < n; {
		if !c.upgraded { // the frames start after the response's blank line
			c.tail = c.tail<<8 | uint32(p[i])
			c.upgraded = c.tail == 0x0d0a0d0a
			i++
			continue
		}
		if c.remaining > 0 {
			k := min(int64(n-i), c.remaining)
			c.remaining -= k
			i += int(k)
			continue
		}
		c.hdr = append(c.hdr, p[i])
		i++
		if len(c.hdr) < headerLen(c.hdr) {
			continue
		}
		length := payloadLen(c.hdr)
		if opcode := c.hdr[0] & 0x0f; opcode < 8 { // a data frame; control frames stand alone
			if opcode != 0 { // not a continuation: a new message
				c.message = 0
			}
			c.message += length
			if c.message > c.limit || length < 0 {
				c.failed = true
				c.oversize()
				_ = c.Conn.Close()
				return 0, fmt.Errorf("%w: more than %d bytes", errMessageTooLarge, c.limit)
			}
		}
		c.remaining = length
		c.hdr = c.hdr[:0]
	}
	return n, err
}

// headerLen is the length of a frame header given its first bytes
// (RFC 6455 5.2): two, then the extended length, then the mask key.
func headerLen(h []byte) int {
	if len(h) < 2 {
		return 2
	}
	n := 2
	switch h[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if h[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// payloadLen is a complete header's payload length; negative when a 64-bit
// length has its top bit set, which RFC 6455 forbids.
func payloadLen(h []byte) int64 {
	switch l := int64(h[1] & 0x7f); l {
	case 126:
		return int64(h[2])<<8 | int64(h[3])
	case 127:
		var v int64
		for _, b := range h[2:10] {
			v = v<<8 | int64(b)
		}
		return v
	default:
		return l
	}
}

// dialTLS is the gateway's dial for wss: TCP (through the environment's
// HTTP proxy, with CONNECT, when it names one for the host), TLS, then the
// frame limit on the plain bytes. gorilla does no TLS of its own over a
// connection from NetDialTLSContext, so the limit can sit above TLS.
func (g *gatewayConn) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	raw, err := g.dialTCP(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, RootCAs: g.roots})
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	return g.track(tc), nil
}

// dialTCP connects to addr, through the environment's HTTP proxy for it if
// there is one.
func (g *gatewayConn) dialTCP(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: g.timeout}
	proxy, err := http.ProxyFromEnvironment(&http.Request{URL: &url.URL{Scheme: "https", Host: addr}})
	if err != nil || proxy == nil {
		return d.DialContext(ctx, network, addr)
	}
	if proxy.Scheme != "http" {
		return nil, fmt.Errorf("proxy %s: only http proxies are supported for the gateway", proxy.Redacted())
	}
	paddr := proxy.Host
	if proxy.Port() == "" {
		paddr = net.JoinHostPort(proxy.Hostname(), "80")
	}
	c, err := d.DialContext(ctx, network, paddr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
		defer c.SetDeadline(noDeadline)
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: http.Header{}}
	if u := proxy.User; u != nil {
		pass, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pass)))
	}
	if err := req.Write(c); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("proxy %s: %w", proxy.Redacted(), err)
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 1), req)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("proxy %s: %w", proxy.Redacted(), err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_ = c.Close()
		return nil, fmt.Errorf("proxy %s answered CONNECT with %s", proxy.Redacted(), resp.Status)
	}
	return c, nil
}
