//go:build unix

package main

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// answersSurviveRateLimitAndRestart (a subtest of TestProcess, which
// builds the binary) is the outbox's promise end to end, on real processes: Slack over HTTP refuses every reply of 20
// conversations with 429 and Retry-After 5 s; SIGTERM with a 1 s grace
// comes while the replies wait; the next process on the same store posts
// every answer once, without asking the agent again.
func answersSurviveRateLimitAndRestart(t *testing.T, bin string) {
	o := stackOptions{slack: true, grace: "1s", slackListen: freePort(t)}
	s := newStack(t, o)
	s.slack.RateLimit("chat.postMessage", -1, 5) // until ClearFaults
	ctx := waitCtx(t)

	first := startProcess(t, bin, s.env, "run", "-config", s.path)
	first.errOut.waitFor(t, `"path":"/slack/events"`, first.done) // listening
	const n = 20
	channel := func(i int) string { return fmt.Sprintf("D0OUTBOX%02d", i) }
	for i := range n {
		body, _, err := s.slack.MessageEventBody(slacktest.MessageEvent{Channel: channel(i), ChannelType: "im",
			User: fmt.Sprintf("U0USER%02d", i), Text: fmt.Sprintf("question %02d", i)})
		if err != nil {
			t.Fatal(err)
		}
		req, err := slacktest.NewSignedRequest(ctx, "http://"+o.slackListen+"/slack/events", slacktest.ContentTypeJSON, body, secretSigning, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("event %d: status %d, want 200", i, res.StatusCode)
		}
	}
	// Every conversation's answer has been refused at least once, and
	// waits out its Retry-After.
	refused := map[string]bool{}
	if _, err := s.slack.WaitCall(ctx, func(c slacktest.Call) bool {
		if c.Method == "chat.postMessage" && c.Status == http.StatusTooManyRequests && strings.HasPrefix(c.Params.Get("channel"), "D0OUTBOX") {
			refused[c.Params.Get("channel")] = true
		}
		return len(refused) == n
	}); err != nil {
		t.Fatalf("%d of %d answers refused: %v\nstderr:\n%s", len(refused), n, err, first.errOut)
	}
	first.signal(t, syscall.SIGTERM)
	if err := first.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit: %v, want status 0\nstderr:\n%s", err, first.errOut)
	}
	if got := strings.Count(first.errOut.String(), "kept for the next start"); got != n {
		t.Errorf("%d answers kept for the next start, want %d\nstderr:\n%s", got, n, first.errOut)
	}
	for _, m := range s.slack.Messages() {
		if strings.HasPrefix(m.Channel, "D0OUTBOX") {
			t.Fatalf("a reply was posted before the restart (%+v): the test proves nothing", m)
		}
	}

	s.slack.ClearFaults()
	next := startProcess(t, bin, s.env, "run", "-config", s.path)
	next.errOut.waitFor(t, `"path":"/slack/events"`, next.done)
	for i := range n {
		if _, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
			return m.Channel == channel(i) && strings.Contains(m.Text, fmt.Sprintf("You said: question %02d", i))
		}); err != nil {
			t.Fatalf("conversation %d not answered after the restart: %v\nstderr:\n%s", i, err, next.errOut)
		}
	}
	next.signal(t, syscall.SIGTERM)
	if err := next.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit: %v, want status 0\nstderr:\n%s", err, next.errOut)
	}
	posted := map[string]int{}
	for _, m := range s.slack.Messages() {
		if strings.HasPrefix(m.Channel, "D0OUTBOX") && m.Op == "chat.postMessage" {
			posted[m.Channel]++
		}
	}
	asked := 0
	for _, sess := range s.ws.Sessions(stackAgentUUID) {
		asked += len(s.ws.Messages(sess))
	}
	for i := range n {
		if posted[channel(i)] != 1 {
			t.Errorf("%s: %d replies posted, want 1", channel(i), posted[channel(i)])
		}
	}
	if asked != n {
		t.Errorf("the agent was asked %d times, want %d (once each)", asked, n)
	}
}
