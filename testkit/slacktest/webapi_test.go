package slacktest_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func newServer(t *testing.T, opts slacktest.Options) *slacktest.Server {
	t.Helper()
	srv := slacktest.NewServer(opts)
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, srv *slacktest.Server, token string) *slack.Client {
	t.Helper()
	return slack.New(token, slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken(srv.AppToken()), slack.OptionHTTPClient(srv.Client()))
}

func TestAuthTest(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	tests := []struct {
		name    string
		token   string
		wantErr string
	}{
		{name: "bot token", token: srv.BotToken()},
		{name: "wrong token", token: "xoxb-wrong", wantErr: "invalid_auth"},
		{name: "app token", token: srv.AppToken(), wantErr: "not_allowed_token_type"},
		{name: "no token", token: "", wantErr: "not_authed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := newClient(t, srv, tt.token).AuthTestContext(t.Context())
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("AuthTest() error = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("AuthTest() error = %v", err)
			}
			if res.UserID != srv.BotUserID() || res.BotID != srv.BotID() || res.TeamID != srv.TeamID() {
				t.Errorf("AuthTest() = %+v, want user %s bot %s team %s", res, srv.BotUserID(), srv.BotID(), srv.TeamID())
			}
		})
	}
}

func TestPostMessageRecorded(t *testing.T) {
	srv := newServer(t, slacktest.Options{Channels: []slacktest.Channel{{ID: "C1", Name: "general"}}})
	api := newClient(t, srv, srv.BotToken())
	blocks := slack.MsgOptionBlocks(slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*hi*", false, false), nil, nil))
	ch, ts, err := api.PostMessageContext(t.Context(), "C1", slack.MsgOptionText("hi", false), blocks,
		slack.MsgOptionTS("1700000000.000100"), slack.MsgOptionDisableLinkUnfurl())
	if err != nil {
		t.Fatalf("PostMessage() error = %v", err)
	}
	if ch != "C1" || !validTS(ts) {
		t.Fatalf("PostMessage() = %q, %q, want C1 and a Slack ts", ch, ts)
	}
	m, err := srv.WaitMessage(t.Context(), func(m slacktest.Message) bool { return m.TS == ts })
	if err != nil {
		t.Fatal(err)
	}
	if m.Channel != "C1" || m.Text != "hi" || m.ThreadTS != "1700000000.000100" || m.UnfurlLinks == nil || *m.UnfurlLinks ||
		!strings.Contains(string(m.Blocks), `"*hi*"`) || m.BotID != srv.BotID() || m.Op != "chat.postMessage" {
		t.Errorf("recorded %+v", m)
	}

	_, ts2, _, err := api.UpdateMessageContext(t.Context(), "C1", ts, slack.MsgOptionText("bye", false))
	if err != nil || ts2 != ts {
		t.Fatalf("UpdateMessage() = %q, %v, want %q", ts2, err, ts)
	}
	if err := api.AddReactionContext(t.Context(), "eyes", slack.NewRefToMessage("C1", ts)); err != nil {
		t.Fatalf("AddReaction() error = %v", err)
	}
	if err := api.AddReactionContext(t.Context(), "eyes", slack.NewRefToMessage("C1", ts)); err == nil || err.Error() != "already_reacted" {
		t.Errorf("AddReaction() twice error = %v, want already_reacted", err)
	}
	if _, _, err := api.DeleteMessageContext(t.Context(), "C1", ts); err != nil {
		t.Fatalf("DeleteMessage() error = %v", err)
	}
	got, _ := srv.Message("C1", ts)
	if got.Text != "bye" || !got.Deleted || got.Edits != 1 || len(got.Reactions) != 1 {
		t.Errorf("Message(C1, %s) = %+v, want text bye, deleted, 1 edit, 1 reaction", ts, got)
	}
	var ops []string
	for _, v := range srv.MessageLog() {
		ops = append(ops, v.Op)
	}
	if want := "chat.postMessage chat.update reactions.add chat.delete"; strings.Join(ops, " ") != want {
		t.Errorf("MessageLog() ops = %v, want %s", ops, want)
	}
}

func validTS(ts string) bool {
	sec, frac, ok := strings.Cut(ts, ".")
	return ok && len(sec) == 10 && len(frac) == 6
}

func TestTimestampsMonotonic(t *testing.T) {
	fixed := time.Date(2024, 5, 20, 13, 39, 5, 0, time.UTC)
	srv := newServer(t, slacktest.Options{Now: func() time.Time { return fixed }, Channels: []slacktest.Channel{{ID: "C1"}}})
	api := newClient(t, srv, srv.BotToken())
	var last string
	for i := range 3 {
		_, ts, err := api.PostMessageContext(t.Context(), "C1", slack.MsgOptionText("x", false))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"1716212345.000000", "1716212345.000001", "1716212345.000002"}[i]
		if ts != want || ts <= last {
			t.Errorf("post %d ts = %q, want %q", i, ts, want)
		}
		last = ts
	}
}

func section(text string) slack.Block {
	return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil)
}

func blocks(bs ...slack.Block) []slack.MsgOption {
	return []slack.MsgOption{slack.MsgOptionBlocks(bs...)}
}

// table is a table block of rows × cols raw_text cells holding text.
func table(rows, cols int, text string) *slack.TableBlock {
	t := slack.NewTableBlock("")
	for range rows {
		cells := make([]slack.TableCell, cols)
		for c := range cells {
			cells[c] = slack.NewTableRawTextCell(text)
		}
		t.AddRow(cells...)
	}
	return t
}

func TestPostMessageRules(t *testing.T) {
	t.Parallel()
	// Every case posts into C1 at once: the rules are checked, not the
	// channel's limit of a message a second.
	srv := newServer(t, slacktest.Options{Channels: []slacktest.Channel{{ID: "C1"}}, PostBurst: -1})
	api := newClient(t, srv, srv.BotToken())
	many := make([]slack.Block, 51)
	for i := range many {
		many[i] = section("x")
	}
	tests := []struct {
		name    string
		channel string
		opts    []slack.MsgOption
		want    string
	}{
		{name: "empty", channel: "C1", want: "no_text"},
		{name: "unknown channel", channel: "C404", opts: []slack.MsgOption{slack.MsgOptionText("x", false)}, want: "channel_not_found"},
		{name: "text too long", channel: "C1", opts: []slack.MsgOption{slack.MsgOptionText(strings.Repeat("a", 40001), false)}, want: "msg_too_long"},
		{name: "text at limit", channel: "C1", opts: []slack.MsgOption{slack.MsgOptionText(strings.Repeat("é", 40000), false)}},
		{name: "51 blocks", channel: "C1", opts: []slack.MsgOption{slack.MsgOptionBlocks(many...)}, want: "invalid_blocks"},
		{name: "50 blocks", channel: "C1", opts: []slack.MsgOption{slack.MsgOptionBlocks(many[:50]...)}},
		{name: "section 3001", channel: "C1", opts: []slack.MsgOption{slack.MsgOptionBlocks(section(strings.Repeat("a", 3001)))}, want: "invalid_blocks"},
		{name: "section 3000", channel: "C1", opts: []slack.MsgOption{slack.MsgOptionBlocks(section(strings.Repeat("a", 3000)))}},
		{name: "markdown 12001", channel: "C1", opts: []slack.MsgOption{slack.MsgOptionBlocks(
			slack.NewMarkdownBlock("", strings.Repeat("a", 6000)), slack.NewMarkdownBlock("", strings.Repeat("a", 6001)))}, want: "invalid_blocks"},
		{name: "markdown 12000", channel: "C1", opts: []slack.MsgOption{slack.MsgOptionBlocks(
			slack.NewMarkdownBlock("", strings.Repeat("a", 6000)), slack.NewMarkdownBlock("", strings.Repeat("a", 6000)))}},
		{name: "table", channel: "C1", opts: blocks(table(100, 20, "x"))},
		{name: "table 101 rows", channel: "C1", opts: blocks(table(101, 1, "x")), want: "invalid_blocks"},
		{name: "table 21 columns", channel: "C1", opts: blocks(table(1, 21, "x")), want: "invalid_blocks"},
		{name: "table 10000 characters", channel: "C1", opts: blocks(table(100, 1, strings.Repeat("é", 100)))},
		{name: "table 10001 characters", channel: "C1", opts: blocks(table(99, 1, strings.Repeat("é", 100)).AddRow(slack.NewTableRawTextCell(strings.Repeat("é", 101)))), want: "invalid_blocks"},
		{name: "table empty cell", channel: "C1", opts: blocks(table(1, 2, "")), want: "invalid_blocks"},
		{name: "table no rows", channel: "C1", opts: blocks(slack.NewTableBlock("")), want: "invalid_blocks"},
		{name: "table empty row", channel: "C1", opts: blocks(slack.NewTableBlock("").AddRow()), want: "invalid_blocks"},
		{name: "table null cell", channel: "C1", opts: blocks(slack.NewTableBlock("").AddRow(nil)), want: "invalid_blocks"},
		{name: "table rich cell without elements", channel: "C1", opts: blocks(slack.NewTableBlock("").AddRow(slack.NewTableRichTextCell())), want: "invalid_blocks"},
		{name: "table bad alignment", channel: "C1", opts: blocks(table(1, 1, "x").WithColumnSettings(slack.ColumnSetting{Align: "middle"})), want: "invalid_blocks"},
		{name: "two tables", channel: "C1", opts: blocks(table(1, 1, "x"), table(1, 1, "y")), want: "invalid_blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := api.PostMessageContext(t.Context(), tt.channel, tt.opts...)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("PostMessage() error = %v, want nil", err)
				}
				return
			}
			var se slack.SlackErrorResponse
			if !errors.As(err, &se) || se.Err != tt.want {
				t.Fatalf("PostMessage() error = %#v, want SlackErrorResponse %s", err, tt.want)
			}
		})
	}
}

func TestRateLimit(t *testing.T) {
	srv := newServer(t, slacktest.Options{Channels: []slacktest.Channel{{ID: "C1"}}})
	api := newClient(t, srv, srv.BotToken())
	srv.RateLimit("chat.postMessage", 2, 7)
	for i := range 2 {
		_, _, err := api.PostMessageContext(t.Context(), "C1", slack.MsgOptionText("x", false))
		rl, ok := errors.AsType[*slack.RateLimitedError](err)
		if !ok || rl.RetryAfter != 7*time.Second {
			t.Fatalf("PostMessage() #%d error = %#v, want *slack.RateLimitedError{7s}", i, err)
		}
		if !rl.Retryable() {
			t.Errorf("RateLimitedError.Retryable() = false")
		}
	}
	if _, _, err := api.PostMessageContext(t.Context(), "C1", slack.MsgOptionText("x", false)); err != nil {
		t.Fatalf("PostMessage() after the limit error = %v", err)
	}
	calls := srv.Calls()
	if len(calls) != 3 || calls[0].Status != http.StatusTooManyRequests || calls[0].Error != "ratelimited" || calls[2].Error != "" {
		t.Errorf("Calls() = %+v, want two 429s then a success", calls)
	}
	if n := len(srv.Messages()); n != 1 {
		t.Errorf("Messages() has %d messages, want 1", n)
	}
}

func TestFailNext(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	api := newClient(t, srv, srv.BotToken())
	srv.FailNext("auth.test", 1, "account_inactive")
	if _, err := api.AuthTestContext(t.Context()); err == nil || err.Error() != "account_inactive" {
		t.Fatalf("AuthTest() error = %v, want account_inactive", err)
	}
	if _, err := api.AuthTestContext(t.Context()); err != nil {
		t.Fatalf("AuthTest() after the fault error = %v", err)
	}
	srv.InjectFault("auth.test", -1, slacktest.Fault{Status: http.StatusInternalServerError})
	for range 2 {
		_, err := api.AuthTestContext(t.Context())
		if sce, ok := errors.AsType[slack.StatusCodeError](err); !ok || sce.Code != http.StatusInternalServerError {
			t.Fatalf("AuthTest() error = %#v, want StatusCodeError 500", err)
		}
	}
	srv.ClearFaults()
	if _, err := api.AuthTestContext(t.Context()); err != nil {
		t.Fatalf("AuthTest() after ClearFaults error = %v", err)
	}
}
