package slacktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// socketApp runs a real socketmode client against srv. Every event goes to
// handle (in the draining goroutine) and then to seen.
type socketApp struct {
	sm   *socketmode.Client
	seen chan socketmode.Event
}

func runSocketApp(t *testing.T, srv *slacktest.Server, handle func(socketmode.Event, *socketmode.Client), opts ...socketmode.Option) *socketApp {
	t.Helper()
	api := newClient(t, srv, srv.BotToken())
	app := &socketApp{sm: socketmode.New(api, opts...), seen: make(chan socketmode.Event, 256)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	runErr := make(chan error, 1)
	wg.Go(func() { runErr <- app.sm.RunContext(ctx) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case evt := <-app.sm.Events:
				if handle != nil {
					handle(evt, app.sm)
				}
				select {
				case app.seen <- evt:
				default:
					t.Errorf("seen buffer full, dropped %s", evt.Type)
				}
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := <-runErr; !errors.Is(err, context.Canceled) {
			t.Errorf("RunContext() = %v, want context.Canceled", err)
		}
	})
	return app
}

// next returns the next event the app saw of type typ, skipping others.
func (a *socketApp) next(t *testing.T, ctx context.Context, typ socketmode.EventType) socketmode.Event {
	t.Helper()
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", typ, ctx.Err())
		case evt := <-a.seen:
			if evt.Type == typ {
				return evt
			}
		}
	}
}

// ackAll acknowledges every request, as an app should.
func ackAll(evt socketmode.Event, c *socketmode.Client) {
	if evt.Request != nil && evt.Request.EnvelopeID != "" {
		_ = c.Ack(*evt.Request)
	}
}

func timeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSocketHelloEventAndAck(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	app := runSocketApp(t, srv, ackAll)
	ctx := timeout(t)

	hello := app.next(t, ctx, socketmode.EventTypeHello)
	if hello.Request.NumConnections != 1 || hello.Request.ConnectionInfo.AppID != srv.AppID() || hello.Request.DebugInfo.ApproximateConnectionTime == 0 {
		t.Errorf("hello = %+v", hello.Request)
	}
	d, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "D1", User: "U1", Text: "hello bot"})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := srv.WaitAck(ctx, d.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Type != slacktest.TypeEventsAPI || ack.Payload != nil || ack.Conn != 1 || ack.Delay <= 0 {
		t.Errorf("ack = %+v, want an events_api ack without payload on socket 1", ack)
	}
	evt := app.next(t, ctx, socketmode.EventTypeEventsAPI)
	outer := evt.Data.(slackevents.EventsAPIEvent)
	cb := outer.Data.(*slackevents.EventsAPICallbackEvent)
	msg, ok := outer.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || cb.EventID != d.EventID || msg.Channel != "D1" || msg.User != "U1" || msg.Text != "hello bot" ||
		msg.TimeStamp != d.TS || !msg.IsIM() || evt.Request.RetryAttempt != 0 {
		t.Errorf("event = %+v, inner %+v", cb, outer.InnerEvent.Data)
	}
	if !srv.Acked(d.EnvelopeID) {
		t.Errorf("Acked(%s) = false", d.EnvelopeID)
	}
}

func TestSocketAppMentionAndBoth(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	app := runSocketApp(t, srv, ackAll)
	ctx := timeout(t)

	mention, message, err := srv.SendBoth(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "status?"})
	if err != nil {
		t.Fatal(err)
	}
	if mention.TS != message.TS || mention.EventID == message.EventID {
		t.Errorf("SendBoth() = %+v, %+v, want one ts and two event IDs", mention, message)
	}
	for _, d := range []slacktest.Delivery{mention, message} {
		if _, err := srv.WaitAck(ctx, d.EnvelopeID); err != nil {
			t.Fatal(err)
		}
	}
	evt := app.next(t, ctx, socketmode.EventTypeEventsAPI)
	am, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppMentionEvent)
	if !ok || am.Text != "<@"+srv.BotUserID()+"> status?" || am.TimeStamp != mention.TS {
		t.Errorf("first event = %+v, want the app_mention", evt.Data)
	}
	evt = app.next(t, ctx, socketmode.EventTypeEventsAPI)
	if m, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent); !ok || m.TimeStamp != mention.TS || m.ChannelType != "channel" {
		t.Errorf("second event = %+v, want the message", evt.Data)
	}
}

func TestSocketMessageSubtypes(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	app := runSocketApp(t, srv, ackAll)
	ctx := timeout(t)

	orig, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	app.next(t, ctx, socketmode.EventTypeEventsAPI)
	tests := []struct {
		name  string
		event slacktest.MessageEvent
		check func(*slackevents.MessageEvent) bool
	}{
		{"changed", slacktest.MessageEvent{Channel: "C1", User: "U1", TS: orig.TS, Text: "v2", PreviousText: "v1", Subtype: "message_changed"},
			func(m *slackevents.MessageEvent) bool {
				return m.SubType == "message_changed" && m.Message != nil && m.Message.Text == "v2" && m.Message.Timestamp == orig.TS && m.Text == ""
			}},
		{"bot", slacktest.MessageEvent{Channel: "C1", User: "U9", BotID: "B9", Text: "beep"},
			func(m *slackevents.MessageEvent) bool { return m.BotID == "B9" && m.SubType == "" }},
		{"join", slacktest.MessageEvent{Channel: "C1", User: "U2", Subtype: "channel_join", Text: "<@U2> has joined the channel"},
			func(m *slackevents.MessageEvent) bool { return m.SubType == "channel_join" }},
		{"deleted", slacktest.MessageEvent{Channel: "C1", TS: orig.TS, Subtype: "message_deleted", PreviousText: "v2"},
			func(m *slackevents.MessageEvent) bool {
				return m.SubType == "message_deleted" && m.DeletedTimeStamp == orig.TS
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := srv.SendMessage(ctx, tt.event)
			if err != nil {
				t.Fatal(err)
			}
			evt := app.next(t, ctx, socketmode.EventTypeEventsAPI)
			m, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
			if !ok || !tt.check(m) || evt.Request.EnvelopeID != d.EnvelopeID {
				t.Errorf("event = %+v", evt.Data)
			}
		})
	}
}

func TestSocketRedeliver(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	// Like a slow app: the first delivery is never acked.
	app := runSocketApp(t, srv, func(evt socketmode.Event, c *socketmode.Client) {
		if evt.Request != nil && evt.Request.RetryAttempt > 0 {
			ackAll(evt, c)
		}
	})
	ctx := timeout(t)

	first, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	app.next(t, ctx, socketmode.EventTypeEventsAPI)
	retry, err := srv.Redeliver(ctx, first.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if retry.EnvelopeID == first.EnvelopeID || retry.EventID != first.EventID {
		t.Errorf("Redeliver() = %+v, want a new envelope for event %s", retry, first.EventID)
	}
	evt := app.next(t, ctx, socketmode.EventTypeEventsAPI)
	if evt.Request.RetryAttempt != 1 || evt.Request.RetryReason != "timeout" {
		t.Errorf("retry request = %+v, want retry_attempt 1, retry_reason timeout", evt.Request)
	}
	if _, err := srv.WaitAck(ctx, retry.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	if srv.Acked(first.EnvelopeID) {
		t.Errorf("Acked(first) = true, want false")
	}
}

// TestSocketUnknownEventType documents a slack-go v0.35 pitfall: an inner
// event type it does not know never reaches the handler as events_api, only
// as error_bad_message, so the app must dig the envelope ID out to ack it.
func TestSocketUnknownEventType(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	app := runSocketApp(t, srv, func(evt socketmode.Event, c *socketmode.Client) {
		if bad, ok := evt.Data.(*socketmode.ErrorBadMessage); ok {
			var req struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if json.Unmarshal(bad.Message, &req) == nil {
				_ = c.AckCtx(context.Background(), req.EnvelopeID, nil)
			}
		}
	})
	ctx := timeout(t)

	d, err := srv.SendEvent(ctx, map[string]any{"type": "totally_new_event", "user": "U1"})
	if err != nil {
		t.Fatal(err)
	}
	app.next(t, ctx, socketmode.EventTypeErrorBadMessage)
	if _, err := srv.WaitAck(ctx, d.EnvelopeID); err != nil {
		t.Fatal(err)
	}
}

// TestSocketReconnect shows slack-go v0.35 reconnecting after each way a
// socket ends. Observed event sequences: a disconnect (any reason) is never
// surfaced as an event; the client closes the socket itself (incoming_error
// "use of closed network connection"), calls apps.connections.open again and
// emits connecting, connected, hello. A dropped socket (close 1006) produces
// no error event, only connecting, connected. Missing PINGs produce the same
// incoming_error one ping interval later. Envelopes sent meanwhile wait for
// the new socket, as Slack queues them.
func TestSocketReconnect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cut  func(*slacktest.Server) error
	}{
		{"disconnect refresh_requested", func(s *slacktest.Server) error { return s.Disconnect("refresh_requested") }},
		{"disconnect warning", func(s *slacktest.Server) error { return s.Disconnect("warning") }},
		{"dropped connection", (*slacktest.Server).DropConnection},
		{"missing pings", func(s *slacktest.Server) error { s.SetPings(false); return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, slacktest.Options{})
			app := runSocketApp(t, srv, ackAll, socketmode.OptionPingInterval(time.Second))
			ctx := timeout(t)
			if err := srv.WaitConnections(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := tt.cut(srv); err != nil {
				t.Fatal(err)
			}
			if err := srv.WaitConnections(ctx, 2); err != nil {
				t.Fatal(err)
			}
			srv.SetPings(true)
			// The app left the old socket before it opened the new one, but
			// the fake may not know yet (see WaitSoleConnection).
			if err := srv.WaitSoleConnection(ctx); err != nil {
				t.Fatal(err)
			}
			d, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "after"})
			if err != nil {
				t.Fatal(err)
			}
			ack, err := srv.WaitAck(ctx, d.EnvelopeID)
			if err != nil {
				t.Fatal(err)
			}
			if ack.Conn < 2 {
				t.Errorf("ack on socket %d, want a new socket", ack.Conn)
			}
			if n := srv.CallCount("apps.connections.open"); n < 2 {
				t.Errorf("apps.connections.open called %d times, want ≥ 2", n)
			}
			app.next(t, ctx, socketmode.EventTypeEventsAPI)
		})
	}
}

func TestSocketInvalidAppToken(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	api := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken("xapp-wrong"), slack.OptionHTTPClient(srv.Client()))
	sm := socketmode.New(api)
	ctx := timeout(t)
	var wg sync.WaitGroup
	drainCtx, stop := context.WithCancel(ctx)
	wg.Go(func() {
		for {
			select {
			case <-drainCtx.Done():
				return
			case <-sm.Events:
			}
		}
	})
	err := sm.RunContext(ctx)
	stop()
	wg.Wait()
	if err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("RunContext() = %v, want invalid_auth", err)
	}
	if n := srv.Connections(); n != 0 {
		t.Errorf("Connections() = %d, want 0", n)
	}
}

// TestSocketNoRecord checks that a load run's fake forgets acknowledged
// events and users' messages, yet still keeps slash-command acks.
func TestSocketNoRecord(t *testing.T) {
	srv := newServer(t, slacktest.Options{NoRecord: true})
	runSocketApp(t, srv, ackAll)
	ctx := timeout(t)

	var sent []slacktest.Delivery
	for i := range 3 {
		d, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: fmt.Sprint("load ", i)})
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, d)
	}
	cmd, err := srv.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "x", UserID: "U1", ChannelID: "C1"})
	if err != nil {
		t.Fatal(err)
	}
	// The app acks in order on one socket, so the messages' acks are read first.
	ack, err := srv.WaitAck(ctx, cmd.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Type != slacktest.TypeSlashCommands || ack.Delay <= 0 {
		t.Errorf("slash-command ack = %+v", ack)
	}
	if got := srv.Acks(); len(got) != 1 || got[0].EnvelopeID != cmd.EnvelopeID {
		t.Errorf("Acks() = %+v, want only the slash command's", got)
	}
	for _, d := range sent {
		if _, err := srv.Redeliver(ctx, d.EnvelopeID); err == nil {
			t.Errorf("Redeliver(%s) succeeded, want the acked envelope forgotten", d.EnvelopeID)
		}
	}
	api := newClient(t, srv, srv.BotToken())
	if _, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: sent[0].TS}); err == nil {
		t.Errorf("conversations.replies found a user message the fake should not have kept")
	}
}

// TestSocketFrameOverReadLimitIsNotWrittenAgain: an app refuses a message
// over its read limit on the frame header and closes the socket while the
// rest is still being written. The envelope counts as delivered on that
// socket, as with Slack, and is not written again on the next one; the
// next envelope goes to the new socket and is acked. The frame is larger
// than loopback's socket buffers can hold, so the write always fails part way.
func TestSocketFrameOverReadLimitIsNotWrittenAgain(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{})
	app := runSocketApp(t, srv, ackAll, socketmode.OptionReadLimit(1<<10))
	ctx := timeout(t)
	if err := srv.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`"` + strings.Repeat("a", 8<<20) + `"`)
	id, err := srv.Send(ctx, slacktest.Envelope{Type: slacktest.TypeEventsAPI, Payload: big})
	if err != nil {
		t.Fatal(err)
	}
	var got []slacktest.Delivery
	for _, d := range srv.Deliveries() {
		if d.EnvelopeID == id {
			got = append(got, d)
		}
	}
	if len(got) != 1 || got[0].Conn != 1 {
		t.Errorf("deliveries of the oversized envelope = %+v, want one, on socket 1", got)
	}
	app.next(t, ctx, socketmode.EventTypeIncomingError)
	if err := srv.WaitConnections(ctx, 2); err != nil {
		t.Fatal(err)
	}
	d, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "after"})
	if err != nil {
		t.Fatal(err)
	}
	ack, err := srv.WaitAck(ctx, d.EnvelopeID)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Conn != 2 {
		t.Errorf("ack on socket %d, want 2", ack.Conn)
	}
	if n := srv.Connections(); n != 2 {
		t.Errorf("connections = %d, want 2: one refusal, one reconnect", n)
	}
}
