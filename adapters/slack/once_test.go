package slack

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// TestReplyPostedOnce: a reply the core names (Reply.Once) carries the name
// in each part's metadata; sent again with Again (after a restart), by a
// new responder, it is found through conversations.replies or .history and
// not posted twice, and one that was never posted is posted.
func TestReplyPostedOnce(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	s, a, rootTS := withThread(t, ctx)
	// Posts Slack took: a part held back by chat.postMessage's limit of a
	// message a second per channel is posted once its Retry-After passed.
	posted := func() int {
		n := 0
		for _, c := range s.Calls() {
			if c.Method == "chat.postMessage" && c.Error == "" {
				n++
			}
		}
		return n
	}
	long := strings.Repeat("a long answer in several parts. ", 700)
	for _, tt := range []struct {
		name string
		rt   route
	}{
		{"DM", route{Kind: kindChat, Channel: e2eDM}},
		{"thread", route{Kind: kindChat, Channel: e2eChannel, Thread: rootTS}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := bridge.Reply{Kind: bridge.ReplyAgent, Text: long, Once: "slack/msg/" + tt.name + "/1.000001"}
			before := posted()
			first, err := a.newResponder(tt.rt).Send(ctx, rep)
			if err != nil {
				t.Fatal(err)
			}
			parts := posted() - before
			if parts < 2 {
				t.Fatalf("the reply went out in %d part(s); the test needs several", parts)
			}
			rep.Again = true
			again, err := a.newResponder(tt.rt).Send(ctx, rep)
			if err != nil {
				t.Fatal(err)
			}
			if n := posted() - before; n != parts || again != first {
				t.Errorf("sent again: %d posts in all, ref %q; want %d (none more) and the first's ref %q", n, again, parts, first)
			}
			rep.Once = "slack/msg/" + tt.name + "/2.000002"
			if _, err := a.newResponder(tt.rt).Send(ctx, rep); err != nil {
				t.Fatal(err)
			}
			if n := posted() - before; n != 2*parts {
				t.Errorf("a reply never posted, sent with Again: %d posts in all, want %d", n, 2*parts)
			}
		})
	}
	var looked []string
	for _, c := range s.Calls() {
		if strings.HasPrefix(c.Method, "conversations.") {
			looked = append(looked, c.Method+" include_all_metadata="+c.Params.Get("include_all_metadata"))
		}
	}
	if len(looked) != 4 || looked[0] != "conversations.history include_all_metadata=1" || looked[2] != "conversations.replies include_all_metadata=1" {
		t.Errorf("lookups = %q, want history for the DM, replies for the thread, each asking for metadata", looked)
	}
}

// TestAnswerDoesNotWaitForUpdateTier: when chat.update answers 429 (its
// tier is 50 a minute, a Retry-After up to a minute), the answer meant to
// replace the placeholder is posted anew at once and the placeholder
// deleted; until the Retry-After has passed no placeholder is posted.
func TestAnswerDoesNotWaitForUpdateTier(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	s, _ := newFakes(t, nil)
	s.AddChannel(slacktest.Channel{ID: e2eDM, IsIM: true, User: e2eUser})
	cfg := e2eConfig(s)
	cfg.WorkingIndicator = IndicatorPlaceholder
	a, err := New(cfg, idleCore{t}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	r := a.newResponder(route{Kind: kindChat, Channel: e2eDM})
	r.Typing(ctx)() // posts the placeholder and waits for it
	placeholder := r.placeholder
	if placeholder == "" {
		t.Fatal("no placeholder posted")
	}
	s.RateLimit("chat.update", 1, 55)
	ref, err := r.Send(ctx, bridge.Reply{Kind: bridge.ReplyAgent, Text: "the answer", Once: "slack/msg/D/1.000001"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(string(ref), placeholder) {
		t.Errorf("answer ref %q is the placeholder's, want a new message", ref)
	}
	var deleted bool
	for _, m := range s.Messages() {
		if m.TS == placeholder && m.Deleted {
			deleted = true
		}
	}
	if !deleted {
		t.Error("the placeholder was not deleted")
	}
	before := s.CallCount("chat.postMessage")
	a.newResponder(route{Kind: kindChat, Channel: e2eDM}).Typing(ctx)()
	if n := s.CallCount("chat.postMessage"); n != before {
		t.Errorf("a placeholder was posted while chat.update's Retry-After runs (%d posts, want %d)", n, before)
	}
}

// TestReplyPostedOnceThreadGone: a reply sent again after a restart into a
// thread whose first message is gone (conversations.replies answers
// thread_not_found) cannot have been posted there before: it is posted, not
// retried until the retry budget tells the user it failed.
func TestReplyPostedOnceThreadGone(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	s, _ := newFakes(t, nil)
	s.AddChannel(slacktest.Channel{ID: e2eChannel, Name: "general"})
	a, err := New(e2eConfig(s), idleCore{t}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	rt := route{Kind: kindChat, Channel: e2eChannel, Thread: "1600000000.000001"}
	rep := bridge.Reply{Kind: bridge.ReplyAgent, Text: "the answer", Once: "slack/msg/gone/1.000001", Again: true}
	if _, err := a.newResponder(rt).Send(ctx, rep); err != nil {
		t.Fatalf("Send into a thread that is gone = %v, want it posted", err)
	}
	if n := s.CallCount("chat.postMessage"); n != 1 {
		t.Errorf("chat.postMessage called %d times, want 1", n)
	}
	if n := s.CallCount("conversations.replies"); n != 1 {
		t.Errorf("conversations.replies called %d times, want 1 (thread_not_found is not retried)", n)
	}
}

// TestNoticePostedOnce: a notice the core names once (Reply.Once), sent
// again after a restart (Again, by a new responder), is shown once: in a
// chat thread or DM the core sends it as a regular message, marked with its
// name and found by the second send; through a slash command's
// response_url, where it stays ephemeral, the second send replaces the
// first (replace_original) instead of adding a message. An ephemeral reply
// named once in chat (a private flow result) stays ephemeral: private is
// kept private, at the cost of being shown twice after a crash.
func TestNoticePostedOnce(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	s, a, rootTS := withThread(t, ctx)
	for _, tt := range []struct {
		name      string
		rt        route
		ephemeral bool // as the core sends it
		shown     int  // messages the user sees after two sends
	}{
		{"DM", route{Kind: kindChat, Channel: e2eDM, User: e2eUser}, false, 1},
		{"thread", route{Kind: kindChat, Channel: e2eChannel, Thread: rootTS, User: e2eUser}, false, 1},
		{"command", route{Kind: kindCommand, Channel: e2eChannel, User: e2eUser, ResponseURL: s.NewResponseURL(e2eChannel, e2eUser)}, true, 1},
		{"private in a thread", route{Kind: kindChat, Channel: e2eChannel, Thread: rootTS, User: e2eUser}, true, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := "flowbridge restarted while answering, in the " + tt.name
			rep := bridge.Reply{Kind: bridge.ReplyError, Ephemeral: tt.ephemeral, Text: text, Once: "slack/msg/" + tt.name + "/1.000001"}
			if _, err := a.newResponder(tt.rt).Send(ctx, rep); err != nil {
				t.Fatal(err)
			}
			rep.Again = true
			if _, err := a.newResponder(tt.rt).Send(ctx, rep); err != nil {
				t.Fatal(err)
			}
			var shown []string
			for _, m := range s.Messages() {
				if strings.Contains(m.Text, text) && !m.Deleted {
					if m.Ephemeral != tt.ephemeral {
						t.Errorf("%s: ephemeral %v, want %v as sent", m.Op, m.Ephemeral, tt.ephemeral)
					}
					shown = append(shown, fmt.Sprintf("%s ephemeral=%v", m.Op, m.Ephemeral))
				}
			}
			if len(shown) != tt.shown {
				t.Errorf("the notice sent twice is shown %d times (%q), want %d", len(shown), shown, tt.shown)
			}
		})
	}
}

// TestPressReplyLeavesThePressedMessage: a reply to a button press named
// once and sent again (Again) goes through the press's response_url as a
// new message: its replace_original would replace the message the button
// is on (an agent's answer under a vote), not an earlier send of the reply.
func TestPressReplyLeavesThePressedMessage(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	s, _ := newFakes(t, nil)
	s.AddChannel(slacktest.Channel{ID: e2eChannel, Name: "general"})
	a, err := New(e2eConfig(s), idleCore{t}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	answer, err := a.newResponder(route{Kind: kindChat, Channel: e2eChannel}).Send(ctx, bridge.Reply{Kind: bridge.ReplyAgent, Text: "the agent's answer"})
	if err != nil {
		t.Fatal(err)
	}
	_, answerTS, _ := strings.Cut(strings.TrimPrefix(string(answer), refMessage), ":")
	_, d, err := s.BlockActionBody(slacktest.BlockAction{UserID: e2eUser, ChannelID: e2eChannel, MessageTS: answerTS, ActionID: bridge.ActionVoteUp})
	if err != nil {
		t.Fatal(err)
	}
	rt := route{Kind: kindAction, Channel: e2eChannel, User: e2eUser, ResponseURL: d.ResponseURL}
	rep := bridge.Reply{Kind: bridge.ReplyInfo, Ephemeral: true, Text: "Thanks for the vote", Once: "slack/act/1", Again: true}
	if _, err := a.newResponder(rt).Send(ctx, rep); err != nil {
		t.Fatal(err)
	}
	for _, m := range s.Messages() {
		if m.TS == answerTS && (m.Text != "the agent's answer" || m.Deleted) {
			t.Errorf("the pressed message became %q (deleted %v), want the agent's answer left as it was", m.Text, m.Deleted)
		}
	}
}

// withThread is the setup the once tests share: the fakes with a channel
// and a DM, an adapter on them, and a thread opened in the channel (its
// root's ts returned) for the replies and notices sent in it.
func withThread(t *testing.T, ctx context.Context) (*slacktest.Server, *Adapter, string) {
	t.Helper()
	s, _ := newFakes(t, nil)
	s.AddChannel(slacktest.Channel{ID: e2eChannel, Name: "general"})
	s.AddChannel(slacktest.Channel{ID: e2eDM, IsIM: true, User: e2eUser})
	a, err := New(e2eConfig(s), idleCore{t}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	root, err := a.newResponder(route{Kind: kindChat, Channel: e2eChannel}).Send(ctx, bridge.Reply{Kind: bridge.ReplyInfo, Text: "a thread"})
	if err != nil {
		t.Fatal(err)
	}
	_, rootTS, _ := strings.Cut(strings.TrimPrefix(string(root), refMessage), ":")
	return s, a, rootTS
}
