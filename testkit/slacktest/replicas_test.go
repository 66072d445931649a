package slacktest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// replicas connects one socketmode app per handler, in order, so the first
// handler's app holds socket 1, the second's socket 2 and so on.
func replicas(t *testing.T, srv *slacktest.Server, handlers ...func(socketmode.Event, *socketmode.Client)) []*socketApp {
	t.Helper()
	var apps []*socketApp
	for i, h := range handlers {
		apps = append(apps, runSocketApp(t, srv, h))
		if err := srv.WaitConnections(timeout(t), i+1); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.WaitLiveConnections(timeout(t), len(handlers)); err != nil {
		t.Fatal(err)
	}
	return apps
}

// ignoreEvents acks everything but events_api envelopes, like a replica that
// stalls on events.
func ignoreEvents(evt socketmode.Event, c *socketmode.Client) {
	if evt.Type != socketmode.EventTypeEventsAPI {
		ackAll(evt, c)
	}
}

func conns(ds []slacktest.Delivery) []int {
	var out []int
	for _, d := range ds {
		out = append(out, d.Conn)
	}
	return out
}

func TestSocketDeliveryPolicy(t *testing.T) {
	tests := []struct {
		name   string
		policy slacktest.DeliveryPolicy
		want   []int
	}{
		{"round robin by default", slacktest.DeliverRoundRobin, []int{1, 2, 3, 1, 2, 3}},
		{"newest", slacktest.DeliverNewest, []int{3, 3, 3, 3, 3, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, slacktest.Options{Delivery: tt.policy})
			replicas(t, srv, ackAll, ackAll, ackAll)
			ctx := timeout(t)
			var sent []slacktest.Delivery
			for i := range len(tt.want) {
				d, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: fmt.Sprint("m", i)})
				if err != nil {
					t.Fatal(err)
				}
				ack, err := srv.WaitAck(ctx, d.EnvelopeID)
				if err != nil {
					t.Fatal(err)
				}
				if ack.Conn != d.Conn {
					t.Errorf("envelope %d acked on socket %d, delivered on %d", i, ack.Conn, d.Conn)
				}
				sent = append(sent, d)
			}
			if got := conns(sent); !slices.Equal(got, tt.want) {
				t.Errorf("sockets delivered to = %v, want %v", got, tt.want)
			}
			if got := conns(srv.Deliveries()); !slices.Equal(got, tt.want) {
				t.Errorf("Deliveries() sockets = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSocketRedeliveredOnAnotherConnection: an envelope the first replica
// never acks comes back after the ack timeout, as retry 1, on the next
// replica; once that one acks it, it is not sent again.
func TestSocketRedeliveredOnAnotherConnection(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{Redeliver: true, AckTimeout: time.Second})
	apps := replicas(t, srv, ignoreEvents, ackAll)
	ctx := timeout(t)

	first, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	retry, err := srv.WaitDelivery(ctx, func(d slacktest.Delivery) bool { return d.Original == first.EnvelopeID })
	if err != nil {
		t.Fatal(err)
	}
	if first.Conn != 1 || retry.Conn != 2 || retry.RetryAttempt != 1 || retry.RetryReason != "timeout" ||
		retry.EventID != first.EventID || retry.EnvelopeID == first.EnvelopeID || retry.TS != first.TS {
		t.Errorf("first %+v, retry %+v: want the same event again, retry 1 for timeout, socket 1 then 2", first, retry)
	}
	ack, err := srv.WaitAck(ctx, retry.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Conn != 2 || srv.Acked(first.EnvelopeID) {
		t.Errorf("ack %+v, first acked %v: want the retry acked on socket 2 only", ack, srv.Acked(first.EnvelopeID))
	}
	evt := apps[1].next(t, ctx, socketmode.EventTypeEventsAPI)
	if evt.Request.RetryAttempt != 1 || evt.Request.RetryReason != "timeout" {
		t.Errorf("replica 2 got %+v, want retry_attempt 1, retry_reason timeout", evt.Request)
	}

	// A later event's retry comes after the first event's next deadline would
	// have passed: the acked event was not sent a third time.
	later, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "later"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitDelivery(ctx, func(d slacktest.Delivery) bool { return d.Original == later.EnvelopeID }); err != nil {
		t.Fatal(err)
	}
	for _, d := range srv.Deliveries() {
		if d.EventID == first.EventID && d.RetryAttempt > 1 {
			t.Errorf("delivery %+v after the event was acked", d)
		}
	}
}

// TestSocketDropOneReplica: dropping one replica's socket leaves the other's
// alone; the event written to the dropped socket and never acked comes back
// on the other replica's, and the dropped replica reconnects on a new socket.
func TestSocketDropOneReplica(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{Redeliver: true, AckTimeout: 300 * time.Millisecond})
	apps := replicas(t, srv, ignoreEvents, ackAll)
	ctx := timeout(t)
	if got := srv.LiveConnectionIDs(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("LiveConnectionIDs() = %v, want [1 2]", got)
	}

	first, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Conn != 1 {
		t.Fatalf("first delivery on socket %d, want 1", first.Conn)
	}
	apps[0].next(t, ctx, socketmode.EventTypeEventsAPI)
	if err := srv.DropConnectionID(1); err != nil {
		t.Fatal(err)
	}
	if err := srv.DropConnectionID(1); !errors.Is(err, slacktest.ErrNoConnection) {
		t.Errorf("DropConnectionID(1) again = %v, want ErrNoConnection", err)
	}
	retry, err := srv.WaitDelivery(ctx, func(d slacktest.Delivery) bool { return d.Original == first.EnvelopeID })
	if err != nil {
		t.Fatal(err)
	}
	if retry.Conn != 2 || retry.RetryAttempt != 1 || retry.EventID != first.EventID {
		t.Errorf("retry %+v: want the event again on socket 2, retry 1", retry)
	}
	if _, err := srv.WaitAck(ctx, retry.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitConnections(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitLiveConnections(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := srv.LiveConnectionIDs(); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("LiveConnectionIDs() after the drop = %v, want [2 3]: socket 1 gone, its replica back on 3", got)
	}
}

// TestSocketRedeliveryGivesUp: Slack retries an unacknowledged event three
// times, and never retries a slash command (the user sees an error instead).
func TestSocketRedeliveryGivesUp(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{Redeliver: true, AckTimeout: 50 * time.Millisecond})
	app := replicas(t, srv, func(socketmode.Event, *socketmode.Client) {})[0]
	ctx := timeout(t)

	cmd, err := srv.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", UserID: "U1", ChannelID: "C1"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitDelivery(ctx, func(d slacktest.Delivery) bool {
		return d.Original == first.EnvelopeID && d.RetryAttempt == slacktest.MaxRetries
	}); err != nil {
		t.Fatal(err)
	}
	later, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "later"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitDelivery(ctx, func(d slacktest.Delivery) bool { return d.Original == later.EnvelopeID }); err != nil {
		t.Fatal(err)
	}
	var attempts []int
	for _, d := range srv.Deliveries() {
		switch {
		case d.EventID == first.EventID:
			attempts = append(attempts, d.RetryAttempt)
		case d.Type == slacktest.TypeSlashCommands && d.EnvelopeID != cmd.EnvelopeID:
			t.Errorf("slash command redelivered: %+v", d)
		}
	}
	if want := []int{0, 1, 2, 3}; !slices.Equal(attempts, want) {
		t.Errorf("deliveries of the event: retry attempts %v, want %v", attempts, want)
	}
	var seen []int
	for len(seen) < 4 {
		evt := app.next(t, ctx, socketmode.EventTypeEventsAPI)
		cb := evt.Data.(slackevents.EventsAPIEvent).Data.(*slackevents.EventsAPICallbackEvent)
		if cb.EventID == first.EventID {
			seen = append(seen, evt.Request.RetryAttempt)
			if evt.Request.RetryAttempt > 0 && evt.Request.RetryReason != "timeout" {
				t.Errorf("retry %d has retry_reason %q, want timeout", evt.Request.RetryAttempt, evt.Request.RetryReason)
			}
		}
	}
	if want := []int{0, 1, 2, 3}; !slices.Equal(seen, want) {
		t.Errorf("app saw retry attempts %v, want %v", seen, want)
	}
}

// rawSocket opens a Socket Mode connection by hand, as a client would.
func rawSocket(t *testing.T, api *slack.Client) *websocket.Conn {
	t.Helper()
	_, wsURL, err := api.StartSocketModeContext(timeout(t))
	if err != nil {
		t.Fatalf("apps.connections.open: %v", err)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(timeout(t), wsURL, http.Header{"Origin": {"https://api.slack.com"}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func readType(t *testing.T, ws *websocket.Conn) (string, map[string]any) {
	t.Helper()
	var f map[string]any
	if err := ws.ReadJSON(&f); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	typ, _ := f["type"].(string)
	return typ, f
}

// TestSocketConnectionCap: Slack keeps ten sockets per app; an eleventh gets a
// disconnect with reason too_many_websockets instead of hello, and is closed.
// Once one of the ten goes, a new one is accepted.
func TestSocketConnectionCap(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	api := newClient(t, srv, srv.BotToken())
	var open []*websocket.Conn
	for i := range slacktest.MaxSocketConnections {
		ws := rawSocket(t, api)
		if typ, f := readType(t, ws); typ != "hello" || f["num_connections"] != float64(i+1) {
			t.Fatalf("socket %d: first frame %v, want hello with num_connections %d", i+1, f, i+1)
		}
		open = append(open, ws)
	}

	extra := rawSocket(t, api)
	typ, f := readType(t, extra)
	if typ != "disconnect" || f["reason"] != "too_many_websockets" {
		t.Fatalf("eleventh socket: first frame %v, want disconnect too_many_websockets", f)
	}
	if _, _, err := extra.ReadMessage(); err == nil {
		t.Fatal("eleventh socket still open after the disconnect")
	}
	if n := srv.RefusedConnections(); n != 1 {
		t.Errorf("RefusedConnections() = %d, want 1", n)
	}
	if err := srv.WaitLiveConnections(timeout(t), slacktest.MaxSocketConnections); err != nil {
		t.Fatal(err)
	}

	open[0].Close()
	if err := srv.WaitLiveConnections(timeout(t), slacktest.MaxSocketConnections-1); err != nil {
		t.Fatal(err)
	}
	if typ, f := readType(t, rawSocket(t, api)); typ != "hello" {
		t.Errorf("socket after one closed: first frame %v, want hello", f)
	}
}

func TestSocketConnectionCapOption(t *testing.T) {
	tests := []struct {
		max, accepted int
	}{
		{1, 1},
		{-1, slacktest.MaxSocketConnections + 2}, // no cap
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.max), func(t *testing.T) {
			srv := newServer(t, slacktest.Options{MaxConnections: tt.max})
			api := newClient(t, srv, srv.BotToken())
			for i := range tt.accepted {
				if typ, f := readType(t, rawSocket(t, api)); typ != "hello" {
					t.Fatalf("socket %d: %v, want hello", i+1, f)
				}
			}
			if tt.max > 0 {
				if typ, f := readType(t, rawSocket(t, api)); typ != "disconnect" {
					t.Errorf("socket %d: %v, want disconnect", tt.accepted+1, f)
				}
			}
		})
	}
}

// TestPostEventRetry checks the HTTP-mode retry: the same body, signed, with
// Slack's retry headers, and slack-go's verifier accepting it.
func TestPostEventRetry(t *testing.T) {
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	fake := newServer(t, slacktest.Options{})
	body, _, err := fake.MessageEventBody(slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "again"})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		num, reason, ctype string
		body               []byte
		verr               error
	}
	seen := make(chan got, 1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		sv, err := slack.NewSecretsVerifier(r.Header, secret)
		if err == nil {
			sv.Write(raw)
			err = sv.Ensure()
		}
		seen <- got{r.Header.Get("X-Slack-Retry-Num"), r.Header.Get("X-Slack-Retry-Reason"), r.Header.Get("Content-Type"), raw, err}
	}))
	defer app.Close()

	resp, err := slacktest.PostEventRetry(t.Context(), app.Client(), app.URL, body, secret, time.Now(), 2, "http_timeout")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	g := <-seen
	if g.num != "2" || g.reason != "http_timeout" || g.ctype != slacktest.ContentTypeJSON || !bytes.Equal(g.body, body) || g.verr != nil {
		t.Errorf("app saw retry %q reason %q type %q verify %v, body equal %v", g.num, g.reason, g.ctype, g.verr, bytes.Equal(g.body, body))
	}
	var cb struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(g.body, &cb); cb.EventID == "" {
		t.Errorf("retried body %s has no event_id", g.body)
	}
	for _, num := range []int{0, slacktest.MaxRetries + 1} {
		if _, err := slacktest.PostEventRetry(t.Context(), app.Client(), app.URL, body, secret, time.Now(), num, "http_timeout"); err == nil {
			t.Errorf("PostEventRetry(num %d) succeeded, want an error", num)
		}
	}
	if _, err := slacktest.PostEventRetry(t.Context(), app.Client(), "http://127.0.0.1:1/", body, secret, time.Now(), 1, "http_error"); err == nil {
		t.Error("PostEventRetry to a closed port succeeded, want an error")
	}
}
