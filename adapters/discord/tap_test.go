package discord

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// tap sits between discordgo and the fake's gateway, on loopback. It passes
// every frame both ways as it is, keeps the dispatches the fake sent, and
// can deliver some of them once more right after the next READY or RESUMED:
// what Discord does when it replays events, and what a restarted process
// would see if a replay reached it.
type tap struct {
	t      *testing.T
	target string // the fake's gateway, ws://127.0.0.1:PORT
	srv    *httptest.Server
	up     websocket.Upgrader
	wg     sync.WaitGroup

	mu       sync.Mutex
	seen     map[string][]byte // dispatch frames by "TYPE/id"
	pending  [][]byte          // frames to deliver again after the next handshake
	replayed chan string       // the "TYPE/id" of each frame delivered again
	conns    []*websocket.Conn
	closed   bool
}

func newTap(t *testing.T, fake *discordtest.Server) *tap {
	t.Helper()
	tp := &tap{t: t, target: strings.TrimSuffix(fake.GatewayURL(), "/gw"), seen: make(map[string][]byte), replayed: make(chan string, 16)}
	tp.up = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	tp.srv = httptest.NewServer(http.HandlerFunc(tp.serve))
	t.Cleanup(tp.close)
	return tp
}

// route makes an adapter dial the tap for the gateway connections of all
// its shards; REST still goes to the fake.
func (tp *tap) route(a *Adapter) {
	addr := tp.srv.Listener.Addr().String()
	for _, sh := range a.shards {
		d := *sh.session.Dialer
		d.NetDialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return sh.gw.dial(ctx, network, addr)
		}
		sh.session.Dialer = &d
	}
}

// replay arms the frame of an event seen earlier ("INTERACTION_CREATE" and
// its id) to be delivered again after the next READY or RESUMED.
func (tp *tap) replay(event, id string) {
	tp.t.Helper()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	f, ok := tp.seen[event+"/"+id]
	if !ok {
		tp.t.Fatalf("tap: no %s %s seen", event, id)
	}
	tp.pending = append(tp.pending, f)
}

// waitReplayed waits until the frame of event id has been delivered again.
func (tp *tap) waitReplayed(ctx context.Context, event, id string) {
	tp.t.Helper()
	for {
		select {
		case got := <-tp.replayed:
			if got == event+"/"+id {
				return
			}
		case <-ctx.Done():
			tp.t.Fatalf("tap: %s %s not replayed: %v", event, id, ctx.Err())
		}
	}
}

func (tp *tap) serve(w http.ResponseWriter, r *http.Request) {
	tp.wg.Add(1)
	defer tp.wg.Done()
	down, err := tp.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	up, _, err := websocket.DefaultDialer.Dial(tp.target+r.URL.RequestURI(), nil)
	if err != nil {
		down.Close()
		return
	}
	tp.mu.Lock()
	closed := tp.closed
	tp.conns = append(tp.conns, down, up)
	tp.mu.Unlock()
	if closed {
		down.Close()
		up.Close()
		return
	}
	var pumps sync.WaitGroup
	pumps.Go(func() { tp.pump(up, down, true) })
	tp.pump(down, up, false)
	pumps.Wait()
}

// pump copies frames from src to dst until either ends, then ends both.
// Frames from the fake (fromFake) are kept and may be followed by replays.
func (tp *tap) pump(src, dst *websocket.Conn, fromFake bool) {
	defer func() {
		src.NetConn().Close()
		dst.NetConn().Close()
	}()
	for {
		typ, data, err := src.ReadMessage()
		if err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				dst.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(ce.Code, ce.Text))
			}
			return
		}
		if err := dst.WriteMessage(typ, data); err != nil {
			return
		}
		if !fromFake {
			continue
		}
		for _, f := range tp.after(data) {
			if err := dst.WriteMessage(websocket.TextMessage, f.frame); err != nil {
				return
			}
			tp.replayed <- f.name
		}
	}
}

type replayFrame struct {
	name  string
	frame []byte
}

// after keeps a dispatch, and returns the frames to deliver after it: the
// armed replays when it is READY or RESUMED, numbered as it is so that the
// client's sequence does not go back.
func (tp *tap) after(data []byte) []replayFrame {
	var f struct {
		Op int             `json:"op"`
		S  int64           `json:"s"`
		T  string          `json:"t"`
		D  json.RawMessage `json:"d"`
	}
	if json.Unmarshal(data, &f) != nil || f.Op != 0 {
		return nil
	}
	var d struct {
		ID string `json:"id"`
	}
	json.Unmarshal(f.D, &d)
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if d.ID != "" {
		tp.seen[f.T+"/"+d.ID] = data
	}
	if f.T != "READY" && f.T != "RESUMED" {
		return nil
	}
	var out []replayFrame
	for _, p := range tp.pending {
		var g map[string]json.RawMessage
		json.Unmarshal(p, &g)
		g["s"], _ = json.Marshal(f.S)
		b, _ := json.Marshal(g)
		var name struct {
			T string `json:"t"`
			D struct {
				ID string `json:"id"`
			} `json:"d"`
		}
		json.Unmarshal(p, &name)
		out = append(out, replayFrame{name: name.T + "/" + name.D.ID, frame: b})
	}
	tp.pending = nil
	return out
}

func (tp *tap) close() {
	tp.mu.Lock()
	tp.closed = true
	for _, c := range tp.conns {
		c.NetConn().Close()
	}
	tp.mu.Unlock()
	tp.srv.Close()
	tp.wg.Wait()
}
