package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	slackgo "github.com/slack-go/slack"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// question names the j-th question of thread i in a burst test.
var question = regexp.MustCompile(`q\d+x\d+`)

// TestBurstIntoOneChannelWaitsOutPostLimit: many threads of one channel
// asked at once, two questions each, through the real core, store and
// slack-go client over HTTP mode, against a fake Slack that holds
// chat.postMessage to a message a second per channel after a short burst.
// Every question is answered once, in its thread's order, each 429 waited
// out for its Retry-After before the channel is posted to again, and no
// user is told of a failure. In a synctest bubble, so the waits take no
// wall time.
func TestBurstIntoOneChannelWaitsOutPostLimit(t *testing.T) {
	burstIntoOneChannel(t, 1, 8, 2)
}

// TestBurstFromThreeProcessesWaitsOutPostLimit: a larger burst (30
// threads, two questions each) answered by three processes at once, each
// with its own store and Slack client as replicas have, whose posts into
// the channel contend for its one message a second: an answer can be
// refused many times in a row, and none is given up on while Slack keeps
// saying when to try again (with three tries a call, 5 were, and the core
// retried them on its own clock).
func TestBurstFromThreeProcessesWaitsOutPostLimit(t *testing.T) {
	burstIntoOneChannel(t, 3, 30, 2)
}

// burstIntoOneChannel asks asks questions in each of threads threads of
// one channel at once, the threads spread over procs processes, and checks
// the answers and the channel's posts.
func burstIntoOneChannel(t *testing.T, procs, threads, asks int) {
	const (
		secret  = "burst-secret"
		agentIn = 2 * time.Second // long enough for a placeholder
	)
	synctest.Test(t, func(t *testing.T) {
		// In fake time: an answer that never comes fails the test rather
		// than deadlocking the bubble.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		s := slacktest.New(slacktest.Options{Channels: []slacktest.Channel{{ID: e2eChannel, Name: "general"}}})
		defer s.Close()
		ws := workspacetest.New(workspacetest.Options{})
		ws.AddAgent(workspacetest.Agent{UUID: e2eAgent, Delay: agentIn, Reply: func(_ int, msg string) string {
			// The last question in msg is the one asked (the thread's
			// earlier messages may come before it).
			qs := question.FindAllString(msg, -1)
			if len(qs) == 0 {
				return "answer to nothing"
			}
			return "answer to " + qs[len(qs)-1]
		}})
		// The core's own retries of an answer the adapter gave up on show
		// in its log: a 429 must never count as such a failure.
		seen, logs := observer.New(zap.WarnLevel)
		log := zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), seen))
		handlers := make([]http.Handler, procs)
		for p := range procs {
			wsc, err := workspace.New(workspace.Config{BaseURL: ws.URL, WorkspaceUUID: "ws-test", Token: "test-token", MaxRetries: -1, HTTPClient: ws.Client()})
			if err != nil {
				t.Fatal(err)
			}
			st, err := sessionmap.Open(filepath.Join(t.TempDir(), "s.db"), sessionmap.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			plog := log.With(zap.Int("process", p))
			core, err := bridge.New(bridge.Config{
				Agents:         []bridge.Agent{{Name: "helper", UUID: e2eAgent, Default: true}},
				IndicatorDelay: bridge.DefaultConfig().IndicatorDelay,
			}, wsc, st, plog.Named("core"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := core.Shutdown(context.Background()); err != nil {
					t.Errorf("core Shutdown() = %v", err)
				}
				core.Close()
			}()
			cfg := e2eConfig(s)
			httpMode(secret)(&cfg)
			a, err := New(cfg, core, plog)
			if err != nil {
				t.Fatal(err)
			}
			a.http.Transport = s.Transport()
			if err := a.authenticate(ctx); err != nil {
				t.Fatal(err)
			}
			if _, _, err := core.Attach(platform, a); err != nil {
				t.Fatal(err)
			}
			handlers[p] = a.handler()
		}

		start := time.Now()
		roots := make([]string, threads)
		for i := range threads {
			roots[i] = s.AddThreadMessage(slacktest.ThreadMessage{Channel: e2eChannel, User: e2eUser, Text: fmt.Sprintf("thread %d", i)})
		}
		for j := range asks {
			for i := range threads {
				body, _, err := s.AppMentionBody(slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, ThreadTS: roots[i],
					Text: fmt.Sprintf("<@%s> q%dx%d", s.BotUserID(), i, j)})
				if err != nil {
					t.Fatal(err)
				}
				req, err := slacktest.NewSignedRequest(ctx, "http://flowbridge.test"+EventsPath, slacktest.ContentTypeJSON, body, secret, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				rec := httptest.NewRecorder()
				handlers[i%procs].ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					t.Fatalf("question %d of thread %d acknowledged %d, want 200", j, i, rec.Code)
				}
			}
		}
		answer := func(i, j int) slacktest.Message {
			t.Helper()
			want := fmt.Sprintf("answer to q%dx%d", i, j)
			m, err := s.WaitMessage(ctx, func(m slacktest.Message) bool { return m.ThreadTS == roots[i] && m.Text == want })
			if err != nil {
				t.Fatalf("waiting for %q: %v\nmessages: %+v", want, err, s.MessageLog())
			}
			return m
		}
		for i := range threads {
			for j := range asks {
				answer(i, j)
			}
		}
		took := time.Since(start)

		// Once each, in order: a thread's answers by their ts.
		for i := range threads {
			var got []string
			for _, m := range s.Messages() {
				if m.ThreadTS == roots[i] && !m.Deleted && strings.HasPrefix(m.Text, "answer to ") {
					got = append(got, m.Text)
				}
			}
			want := make([]string, asks)
			for j := range asks {
				want[j] = fmt.Sprintf("answer to q%dx%d", i, j)
			}
			if !slices.Equal(got, want) {
				t.Errorf("thread %d answers = %q, want %q", i, got, want)
			}
		}
		if gaveUp := logs.FilterMessageSnippet("not delivered"); gaveUp.Len() > 0 {
			t.Errorf("%d answers were given up on by the adapter and retried by the core, e.g. %q %v; want each 429 waited out",
				gaveUp.Len(), gaveUp.All()[0].Message, gaveUp.All()[0].ContextMap())
		}
		// Nobody told of a failure, nothing ephemeral.
		for _, m := range s.MessageLog() {
			if m.Ephemeral || strings.Contains(m.Text, "could not") || strings.Contains(m.Text, "try again") {
				t.Errorf("message %+v told a user something; want only answers", m)
			}
		}
		// The limit was met, and each refused post was made again only
		// once its Retry-After (1 s) had passed. A post is its thread and
		// text: a placeholder's or an answer's.
		var posts, limited int
		refusedAt := map[[2]string]time.Time{}
		for _, c := range s.Calls() {
			if c.Method != "chat.postMessage" {
				continue
			}
			post := [2]string{c.Params.Get("thread_ts"), c.Params.Get("text")}
			if at, ok := refusedAt[post]; ok && c.At.Sub(at) < time.Second {
				t.Errorf("chat.postMessage %q made again %s after its 429, want Retry-After (1 s) waited out", post, c.At.Sub(at))
			}
			delete(refusedAt, post)
			if c.Status == http.StatusTooManyRequests {
				refusedAt[post] = c.At
			}
			switch c.Status {
			case http.StatusOK:
				posts++
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Errorf("chat.postMessage answered %d %s", c.Status, c.Error)
			}
		}
		if limited == 0 {
			t.Errorf("no chat.postMessage was rate limited in %d posts; the test needs the limit met", posts)
		}
		// Slack's pace is the floor; the core's own retries (2 s, 10 s)
		// would add to it.
		floor := time.Duration(posts-slacktest.DefaultPostBurst) * time.Second / slacktest.PostsPerSecond
		if took < floor || took > floor+time.Duration(asks)*agentIn+5*time.Second {
			t.Errorf("all answered after %s, want about %s: %d posts into one channel at Slack's pace", took, floor, posts)
		}
		t.Logf("%d questions answered in %s (fake time): %d posts, %d refused 429", threads*asks, took, posts, limited)
	})
}

// TestRateLimitWaitIsBounded: a call waits out 429 after 429, whatever
// their number, for up to maxRateWait in all; the one whose wait would go
// past it is given back to the caller.
func TestRateLimitWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := slacktest.New(slacktest.Options{Channels: []slacktest.Channel{{ID: e2eChannel, Name: "general"}}})
		defer s.Close()
		a, err := New(e2eConfig(s), idleCore{t}, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		a.http.Transport = s.Transport()
		post := func() error {
			return a.withRetry(t.Context(), "chat.postMessage", func() error {
				_, _, err := a.api.PostMessageContext(t.Context(), e2eChannel, slackgo.MsgOptionText("hi", false))
				return err
			})
		}
		// Refused 10 times a second apart: waited out.
		s.RateLimit("chat.postMessage", 10, 1)
		start := time.Now()
		if err := post(); err != nil {
			t.Fatalf("post refused 10 times with Retry-After 1 s = %v, want it posted", err)
		}
		if took := time.Since(start); took != 10*time.Second {
			t.Errorf("posted after %s, want 10 s", took)
		}
		// Refused with Retry-After 50 s until further notice: two waits
		// fit in maxRateWait, a third would not.
		s.RateLimit("chat.postMessage", -1, 50)
		start = time.Now()
		err = post()
		if _, ok := errors.AsType[*slackgo.RateLimitedError](err); !ok {
			t.Fatalf("post refused for good = %v, want the 429", err)
		}
		if took := time.Since(start); took != 100*time.Second {
			t.Errorf("given up after %s, want 100 s (two waits of 50 s within %s)", took, maxRateWait)
		}
	})
}
