package discord

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"
)

// TestFrameLimitOverTLS: over wss the limit sits above TLS (dialTLS): a
// message within it is read whole, one over it fails the read at its header
// and is reported once.
func TestFrameLimitOverTLS(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		ws.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("a", limit)))
		ws.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("b", limit+1)))
		ws.ReadMessage() // until the client goes
	}))
	t.Cleanup(srv.Close)
	var refused atomic.Int32
	gw := &gatewayConn{limit: limit, oversize: func() { refused.Add(1) }, roots: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	d := websocket.Dialer{NetDialContext: gw.dial, NetDialTLSContext: gw.dialTLS}
	ws, _, err := d.DialContext(t.Context(), "wss"+strings.TrimPrefix(srv.URL, "https"), nil)
	if err != nil {
		t.Fatalf("dial over TLS: %v", err)
	}
	defer ws.Close()
	if _, m, err := ws.ReadMessage(); err != nil || len(m) != limit {
		t.Fatalf("message at the limit: %d bytes, %v; want it whole", len(m), err)
	}
	if _, m, err := ws.ReadMessage(); !errors.Is(err, errMessageTooLarge) {
		t.Errorf("message over the limit: %d bytes, %v; want errMessageTooLarge", len(m), err)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("refusals = %d, want 1", n)
	}
}
