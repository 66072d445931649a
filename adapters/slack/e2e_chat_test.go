package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// agentMessages returns what the agent's single session received; it fails
// when the conversation did not keep one session.
func (e *e2e) agentMessages() []string {
	e.t.Helper()
	sessions := e.ws.Sessions(e2eAgent)
	if len(sessions) != 1 {
		e.t.Fatalf("agent has %d sessions, want 1", len(sessions))
	}
	return e.ws.Messages(sessions[0])
}

func TestE2EDMKeepsSessionAcrossRestart(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)
	for _, text := range []string{"one", "two"} {
		e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: text})))
		m := e.reply(ctx, e2eDM, "You said: "+text)
		if m.ThreadTS != "" {
			t.Errorf("DM reply thread_ts = %q, want an inline reply", m.ThreadTS)
		}
	}
	e = e.restart(nil)
	e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "three"})))
	e.reply(ctx, e2eDM, "[turn 3] You said: three")
	if got := e.agentMessages(); strings.Join(got, ",") != "one,two,three" {
		t.Errorf("agent session got %q, want one,two,three", got)
	}
}

func TestE2EThreadKeepsSessionAcrossRestart(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)
	bot := "<@" + e.slack.BotUserID() + "> "
	d := e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: bot + "start"}))
	e.reply(ctx, e2eChannel, "You said: start")
	root := d.TS

	// A reply in the bot's thread reaches the agent without a mention.
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, ThreadTS: root, Text: "follow-up"}))
	if m := e.reply(ctx, e2eChannel, "[turn 2] You said: follow-up"); m.ThreadTS != root {
		t.Errorf("thread reply went to thread %q, want %q", m.ThreadTS, root)
	}
	// A message in some other thread does not.
	other := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "unrelated root"}))
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, ThreadTS: other.TS, Text: "not for the bot"}))

	// After a restart the bot still knows its thread (from conversations.replies).
	e = e.restart(nil)
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, ThreadTS: root, Text: "after restart"}))
	e.reply(ctx, e2eChannel, "[turn 3] You said: after restart")
	if got := e.agentMessages(); strings.Join(got, ",") != "start,follow-up,after restart" {
		t.Errorf("agent session got %q, want start,follow-up,after restart", got)
	}
}

func TestE2EIgnoredMessagesCauseNoAPICall(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)
	bot := e.slack.BotUserID()
	ignored := []slacktest.MessageEvent{
		{Channel: e2eDM, User: bot, Text: "my own words"},
		{Channel: e2eDM, User: "U0OTHERBOT", BotID: e.slack.BotID(), Text: "my own bot id"},
		{Channel: e2eDM, User: "U0OTHERBOT", BotID: "B0OTHER", Text: "another bot"},
		{Channel: e2eDM, Subtype: "bot_message", BotID: "B0OTHER", Text: "a bot_message"},
		{Channel: e2eDM, User: e2eUser, Subtype: "message_changed", Text: "edited", PreviousText: "original"},
		{Channel: e2eDM, User: e2eUser, Subtype: "message_deleted", PreviousText: "gone"},
		{Channel: e2eChannel, User: e2eUser, Subtype: "channel_join", Text: "joined"},
		{Channel: e2eChannel, User: e2eUser, Text: "a channel message without mention"},
	}
	for _, m := range ignored {
		e.ack(ctx, e.sent(e.slack.SendMessage(ctx, m)))
	}
	edited := e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "edit",
		Extra: map[string]any{"edited": map[string]any{"user": e2eUser, "ts": "1.1"}}}))
	e.ack(ctx, edited)
	// Events are handled in order, so once this one is answered the others were dropped.
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "real"}))
	e.reply(ctx, e2eDM, "You said: real")
	if got := e.agentMessages(); len(got) != 1 || got[0] != "real" {
		t.Errorf("agent got %q, want only \"real\"", got)
	}
	chats := 0
	for _, r := range e.ws.Requests() {
		if strings.HasSuffix(r.Path, "/chat") || strings.Contains(r.Path, "/chat") {
			chats++
		}
	}
	if chats != 1 {
		t.Errorf("workspace saw %d chat requests, want 1: %+v", chats, e.ws.Requests())
	}
}

func TestE2EDuplicatesAnsweredOnce(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)

	// A redelivered event (same event_id, retry_attempt 1) is acked and dropped.
	d := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "once"}))
	e.ack(ctx, d)
	e.reply(ctx, e2eDM, "You said: once")
	retry := e.sent(e.slack.Redeliver(ctx, d.EnvelopeID))
	e.ack(ctx, retry)

	// One mention arrives as app_mention and as message; one answer.
	mention, message, err := e.slack.SendBoth(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "<@" + e.slack.BotUserID() + "> both"})
	if err != nil {
		t.Fatal(err)
	}
	e.ack(ctx, mention)
	e.ack(ctx, message)
	e.reply(ctx, e2eChannel, "You said: both")

	// Later messages of both conversations flush anything still queued.
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "after"}))
	e.reply(ctx, e2eDM, "You said: after")
	e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, ThreadTS: mention.TS, Text: "after2"}))
	e.reply(ctx, e2eChannel, "You said: after2")

	sessions := e.ws.Sessions(e2eAgent)
	var all []string
	for _, s := range sessions {
		all = append(all, e.ws.Messages(s)...)
	}
	if strings.Join(all, ",") != "once,after,both,after2" && strings.Join(all, ",") != "both,after2,once,after" {
		t.Errorf("agent sessions got %q, want each message once", all)
	}
}

func TestE2ERepliesAreEscapedAndSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		reply      string
		noMarkdown bool
		wantMsgs   int // 0: more than one
		minBlocks  int // in the first message
	}{
		{name: "mentions", reply: "<!channel> @here **x** [a](http://b) <@U0BOSS>", wantMsgs: 1},
		{name: "mentions as mrkdwn", reply: "<!channel> @here **x** [a](http://b) <@U0BOSS>", noMarkdown: true, wantMsgs: 1},
		{name: "10000 chars", reply: longReply(10_000), wantMsgs: 1},
		{name: "10000 chars as mrkdwn", reply: longReply(10_000), noMarkdown: true, wantMsgs: 1, minBlocks: 4},
		{name: "40000 chars", reply: longReply(40_000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := startE2E(t, e2eOptions{
				reply: func(_ int, msg string) string {
					if msg == "done?" {
						return "END"
					}
					return tt.reply
				},
				cfg: func(c *Config) { c.DisableMarkdownBlock = tt.noMarkdown },
				// The parts of a long reply are checked, not how they
				// wait out Slack's message a second per channel.
				postBurst: -1,
			})
			ctx := waitCtx(t)
			d := e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "talk"}))
			e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, ThreadTS: d.TS, Text: "done?"}))
			// Answers come in order, so once END is there the reply is complete.
			e.reply(ctx, e2eChannel, "END")
			for _, c := range e.slack.Calls() {
				if c.Error != "" {
					t.Errorf("%s failed: %s", c.Method, c.Error)
				}
			}
			var parts []slacktest.Message
			for _, m := range e.slack.Messages() {
				if m.ThreadTS == d.TS && m.BotID != "" && !strings.Contains(m.Text, "Thinking") && !strings.Contains(m.Text, "END") {
					parts = append(parts, m)
				}
			}
			if tt.wantMsgs != 0 && len(parts) != tt.wantMsgs {
				t.Errorf("reply came in %d messages, want %d", len(parts), tt.wantMsgs)
			}
			if tt.wantMsgs == 0 && len(parts) < 2 {
				t.Errorf("reply came in %d messages, want it split", len(parts))
			}
			if len(parts) > 0 && tt.minBlocks > 0 {
				var blocks []json.RawMessage
				if err := json.Unmarshal(parts[0].Blocks, &blocks); err != nil || len(blocks) < tt.minBlocks {
					t.Errorf("first message has %d blocks (%v), want at least %d sections", len(blocks), err, tt.minBlocks)
				}
			}
			for _, m := range parts {
				for _, text := range append(blockTexts(t, m.Blocks), m.Text) {
					if pinging.MatchString(text) {
						t.Errorf("message %s can ping: %.200q", m.TS, text)
					}
				}
			}
		})
	}
}

// blockTexts returns every string in a message's blocks JSON.
func blockTexts(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("blocks are not JSON: %v", err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

// TestE2EAgentShareInChannelFindsThreadAnswer: Slack sends no thread with a
// slash command, so /agent share typed in the channel shares the caller's
// latest answer from the channel's threads (thread events carry the
// channel's conversation as their Parent).
func TestE2EAgentShareInChannelFindsThreadAnswer(t *testing.T) {
	t.Parallel()
	recorded := make(chan string, 1)
	e := startE2E(t, e2eOptions{store: func(st *sessionmap.Store) bridge.Store { return turnsRecorded{Store: st, keys: recorded} }})
	ctx := waitCtx(t)
	bot := "<@" + e.slack.BotUserID() + "> "
	e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: bot + "the deploy plan"}))
	e.reply(ctx, e2eChannel, "You said: the deploy plan")
	// The core records the turn with the answer (before it posts it, or
	// just after, without an outbox); a share sent before that would
	// rightly find nothing.
	select {
	case <-recorded:
	case <-ctx.Done():
		t.Fatal("the answer's turn was not recorded")
	}
	d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/agent", Text: "share", UserID: e2eUser, ChannelID: e2eChannel}))
	p := e.response(ctx, d.ResponseURL, "You said: the deploy plan")
	if p.ResponseType != "in_channel" {
		t.Errorf("share response_type = %q, want in_channel", p.ResponseType)
	}
}

// turnsRecorded is the store, telling keys (when it has room) the key of
// every inbox entry closed with a turn, once closed.
type turnsRecorded struct {
	*sessionmap.Store
	keys chan<- string
}

// PutReply records the turn with the answer, before the answer is posted
// (the outbox).
func (r turnsRecorded) PutReply(ctx context.Context, key string, reply []byte, turn *store.Turn, now time.Time) error {
	err := r.Store.PutReply(ctx, key, reply, turn, now)
	if turn != nil {
		select {
		case r.keys <- key:
		default:
		}
	}
	return err
}

func (r turnsRecorded) Finish(ctx context.Context, key, reply string, turn *store.Turn, now time.Time) error {
	err := r.Store.Finish(ctx, key, reply, turn, now)
	if turn != nil {
		select {
		case r.keys <- key:
		default:
		}
	}
	return err
}

// fullDisk is the store on a disk that has filled up: every write fails.
// Each inbox write refused is reported on refused, when set.
type fullDisk struct {
	*sessionmap.Store
	full    *atomic.Bool
	refused chan string
}

var errNoSpace = errors.New("write inbox: no space left on device")

func (d fullDisk) Receive(ctx context.Context, e store.InboxEntry) (bool, error) {
	if d.full.Load() {
		d.refuse(e.Key)
		return false, errNoSpace
	}
	return d.Store.Receive(ctx, e)
}

func (d fullDisk) refuse(key string) {
	if d.refused != nil {
		d.refused <- key
	}
}

// Ping is the bridge's probe of the store: on a full disk it fails like any
// other write, so the probe does not call the store ready while it is not.
func (d fullDisk) Ping(ctx context.Context) error {
	if d.full.Load() {
		return errNoSpace
	}
	return d.Store.Ping(ctx)
}

func (d fullDisk) PutSession(ctx context.Context, s store.Session) error {
	if d.full.Load() {
		return errNoSpace
	}
	return d.Store.PutSession(ctx, s)
}

// TestE2EFullDiskIsNotAcknowledged: with the store unable to write, an
// event is not acknowledged (Socket Mode: no ack; HTTP: 503), so Slack
// sends it again; its user is told nothing untrue, no workspace session is
// created for it, and the core reports not ready. Once the disk has room,
// Slack's retry is answered, once.
func TestE2EFullDiskIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	const secret = "full-secret"
	for _, mode := range []string{"socket", "http"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var full atomic.Bool
			full.Store(true)
			refused := make(chan string, 10)
			var cfg func(*Config)
			if mode == "http" {
				cfg = httpMode(secret)
			}
			e := startE2E(t, e2eOptions{cfg: cfg, store: func(st *sessionmap.Store) bridge.Store { return fullDisk{Store: st, full: &full, refused: refused} }})
			ctx := waitCtx(t)
			const dm = "D0FULL1"
			msg := slacktest.MessageEvent{Channel: dm, ChannelType: "im", User: e2eUser, Text: "hello while full"}
			var retry func()
			if mode == "socket" {
				d := e.sent(e.slack.SendMessage(ctx, msg))
				<-refused
				// The store's refusal is not yet the bridge's: Receive has
				// not returned, and the fault may not be recorded. Socket
				// Mode refuses by not acknowledging, which shows only as
				// the acker moving on: it acknowledges in arrival order,
				// so once an event sent after this one (one the bridge
				// ignores, acknowledged without the store) is acknowledged,
				// the bridge has decided on this one.
				e.ack(ctx, e.sent(e.slack.SendEvent(ctx, map[string]any{"type": "reaction_added", "user": e2eUser, "reaction": "eyes"})))
				retry = func() { e.ack(ctx, e.sent(e.slack.Redeliver(ctx, d.EnvelopeID))) }
				defer func() {
					for _, a := range e.slack.Acks() {
						if a.EnvelopeID == d.EnvelopeID {
							t.Errorf("the delivery the store refused was acknowledged: Slack will not send it again")
						}
					}
				}()
			} else {
				body, _, err := e.slack.MessageEventBody(msg)
				if err != nil {
					t.Fatal(err)
				}
				if status, _ := e.post(t, ctx, slacktest.ContentTypeJSON, body, secret, time.Now(), nil); status != http.StatusServiceUnavailable {
					t.Fatalf("status of an event the store refused = %d, want 503", status)
				}
				<-refused
				retry = func() {
					r := func(r *http.Request) { slacktest.SetRetry(r, 1, "http_error") }
					if status, _ := e.post(t, ctx, slacktest.ContentTypeJSON, body, secret, time.Now(), r); status != http.StatusOK {
						t.Fatalf("retry status = %d, want 200", status)
					}
				}
			}
			if err := e.core.StoreReady(); err == nil {
				t.Error("StoreReady() = nil while every write fails, want the error (/readyz is 503)")
			}
			if n := len(e.ws.Sessions(e2eAgent)); n != 0 {
				t.Errorf("workspace sessions created while the disk was full = %d, want 0", n)
			}
			full.Store(false)
			retry()
			e.reply(ctx, dm, "You said: hello while full")
			if err := e.core.StoreReady(); err != nil {
				t.Errorf("StoreReady() = %v after writes succeed again, want nil", err)
			}
			for _, m := range e.slack.Messages() {
				if strings.Contains(m.Text, "cannot save") {
					t.Errorf("user told %q, though the retry was answered", m.Text)
				}
			}
		})
	}
}
