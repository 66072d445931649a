package discordtest_test

import (
	"encoding/json"
	"testing"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// gwFrame is a gateway frame as a raw client sees it.
type gwFrame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  int64           `json:"s"`
	T  string          `json:"t"`
}

// rawClient speaks the gateway by hand, so a test controls exactly which
// sequence number each heartbeat and RESUME carries.
type rawClient struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialGateway(t *testing.T, fake *discordtest.Server) *rawClient {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.DialContext(ctx(t), fake.GatewayURL()+"?v=10&encoding=json", nil)
	if err != nil {
		t.Fatalf("dial gateway: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	c := &rawClient{t: t, ws: ws}
	if f := c.read(); f.Op != 10 {
		t.Fatalf("first frame op %d, want HELLO", f.Op)
	}
	return c
}

func (c *rawClient) send(op int, d any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
		c.t.Fatalf("send op %d: %v", op, err)
	}
}

func (c *rawClient) read() gwFrame {
	c.t.Helper()
	var f gwFrame
	if err := c.ws.ReadJSON(&f); err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	return f
}

// until reads frames up to and including the first of op and type t.
func (c *rawClient) until(op int, t string) gwFrame {
	c.t.Helper()
	for {
		if f := c.read(); f.Op == op && f.T == t {
			return f
		}
	}
}

// TestNoRecordTrimsReplayLogByHeartbeat checks that a load run's fake drops
// the dispatches a heartbeat confirmed, keeps the rest for RESUME, and does
// not keep users' messages.
func TestNoRecordTrimsReplayLogByHeartbeat(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{NoRecord: true})
	c := dialGateway(t, fake)
	c.send(2, map[string]any{"token": "Bot " + fake.Token(), "intents": bridgeIntents, "properties": map[string]string{}})
	var ready struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(c.until(0, "READY").D, &ready); err != nil {
		t.Fatal(err)
	}

	var seqs []int64
	var ids []string
	for _, text := range []string{"one", "two", "three"} {
		m, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: "5000", Author: alice, Content: text})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
		seqs = append(seqs, c.until(0, "MESSAGE_CREATE").S)
	}
	// The fake acknowledges a heartbeat after handling it.
	c.send(1, seqs[1])
	if f := c.read(); f.Op != 11 {
		t.Fatalf("answer to heartbeat op %d, want 11", f.Op)
	}
	var kept []int64
	for _, d := range fake.Dispatches() {
		kept = append(kept, d.Seq)
	}
	if len(kept) != 1 || kept[0] != seqs[2] {
		t.Errorf("dispatches kept after heartbeat %d: seqs %v, want only %d", seqs[1], kept, seqs[2])
	}
	for _, id := range ids {
		if m, ok := fake.Message(id); ok {
			t.Errorf("Message(%s) = %q, want users' messages not kept", id, m.Content)
		}
	}

	// A RESUME from the confirmed point still gets what followed it.
	c.ws.Close()
	r := dialGateway(t, fake)
	r.send(6, map[string]any{"token": "Bot " + fake.Token(), "session_id": ready.SessionID, "seq": seqs[1]})
	replayed := r.until(0, "MESSAGE_CREATE")
	var m discordgo.Message
	if err := json.Unmarshal(replayed.D, &m); err != nil {
		t.Fatal(err)
	}
	if replayed.S != seqs[2] || m.Content != "three" {
		t.Errorf("replayed seq %d %q, want seq %d \"three\"", replayed.S, m.Content, seqs[2])
	}
	r.until(0, "RESUMED")
}
