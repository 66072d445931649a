package bridge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// progresser is a recorder that can rewrite messages in place: it notes
// each rewrite with its time and the message it rewrote.
type progresser struct {
	*recorder
	mu      sync.Mutex
	at      []time.Duration // since start
	refs    []bridge.MessageRef
	texts   []string
	start   time.Time
	refuse  bool // Progress fails, as for a message nothing can edit
	sentAt  []time.Duration
	replies []bridge.Reply
}

func newProgresser() *progresser { return &progresser{recorder: newRecorder(), start: time.Now()} }

func (p *progresser) Progress(_ context.Context, ref bridge.MessageRef, r bridge.Reply) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuse {
		p.at = append(p.at, time.Since(p.start))
		return errors.New("cannot edit")
	}
	p.at = append(p.at, time.Since(p.start))
	p.refs = append(p.refs, ref)
	p.texts = append(p.texts, r.Text)
	return nil
}

func (p *progresser) Send(ctx context.Context, r bridge.Reply) (bridge.MessageRef, error) {
	p.mu.Lock()
	p.sentAt = append(p.sentAt, time.Since(p.start))
	p.mu.Unlock()
	return p.recorder.Send(ctx, r)
}

func (p *progresser) updates() ([]time.Duration, []bridge.MessageRef, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.at...), append([]bridge.MessageRef(nil), p.refs...), append([]string(nil), p.texts...)
}

// handleToEnd hands ev to b and returns once its handling is done.
func handleToEnd(t *testing.T, b *bridge.Bridge, ev bridge.Event) {
	t.Helper()
	done := make(chan struct{})
	ev = onDone(ev, func() { close(done) })
	if err := handle(b, ev); err != nil {
		t.Fatal(err)
	}
	<-done
}

// slowFlowBridge is a bridge in the test's bubble whose flow takes 50 s
// of its 2-minute timeout.
func slowFlowBridge(t *testing.T, cfg bridge.Config) *bridge.Bridge {
	t.Helper()
	cfg.Flows[0].Timeout = 2 * time.Minute
	b, fake := newBubbleBridge(t, cfg, workspacetest.Agent{})
	fake.AddFlow(workspacetest.Flow{UUID: flowUUID, Template: "Checked {host}", Delay: 50 * time.Second})
	return b
}

// TestFlowProgressEvery15s: a flow that runs 50 s has its "Running" message
// rewritten at 15, 30 and 45 s with the time elapsed and the flow's
// description, and never after its result.
func TestFlowProgressEvery15s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := defaultConfig()
		cfg.ProgressInterval = bridge.DefaultConfig().ProgressInterval
		b := slowFlowBridge(t, cfg)
		p := newProgresser()
		ev := command("c/p", bridge.CommandFlow, "healthcheck host=web1", p.recorder)
		ev = via(ev, p)
		handleToEnd(t, b, ev)
		all := p.all()
		if len(all) != 2 || all[1].Kind != bridge.ReplyFlow {
			t.Fatalf("replies = %+v, want the progress message and the result", all)
		}
		wantContains(t, "first progress message", all[0].Text, "Running *healthcheck*", "check a service")
		at, refs, texts := p.updates()
		want := []time.Duration{15 * time.Second, 30 * time.Second, 45 * time.Second}
		if len(at) != len(want) {
			t.Fatalf("progress updates at %v, want at %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] || refs[i] != "1" {
				t.Errorf("update %d at %v of %q, want at %v of the progress message %q", i, at[i], refs[i], want[i], "1")
			}
		}
		wantContains(t, "update at 15 s", texts[0], "Running *healthcheck*", "15 seconds so far", "check a service")
		wantContains(t, "update at 45 s", texts[2], "45 seconds so far")

		// Nothing rewrites the message once the result is there.
		time.Sleep(time.Minute)
		if at, _, _ := p.updates(); len(at) != len(want) {
			t.Errorf("%d updates a minute after the result, want %d", len(at), len(want))
		}
	})
}

// TestFlowProgressInterval: the interval is configurable, and a responder
// that cannot rewrite in place is asked once and then left alone.
func TestFlowProgressInterval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		refuse   bool
		want     int
	}{
		{"every 20 s", 20 * time.Second, false, 2}, // at 20 and 40 s of 50
		{"off", 0, false, 0},
		{"cannot edit", 15 * time.Second, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := defaultConfig()
				cfg.ProgressInterval = tc.interval
				b := slowFlowBridge(t, cfg)
				p := newProgresser()
				p.refuse = tc.refuse
				ev := command("c/p", bridge.CommandFlow, "healthcheck host=web1", p.recorder)
				ev = via(ev, p)
				handleToEnd(t, b, ev)
				if at, _, _ := p.updates(); len(at) != tc.want {
					t.Errorf("progress asked at %v, want %d times", at, tc.want)
				}
				if n := len(p.all()); n != 2 {
					t.Errorf("%d replies sent, want 2: progress never sends anything new", n)
				}
			})
		})
	}
}

// TestSlowAnswerProgress: a slow agent's working indicator (ref "") shows the
// time elapsed every 15 s, and stops before the answer.
func TestSlowAnswerProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := defaultConfig()
		cfg.ProgressInterval = bridge.DefaultConfig().ProgressInterval
		b, _ := newBubbleBridge(t, cfg, workspacetest.Agent{Delay: 40 * time.Second})
		p := newProgresser()
		ev := event("c/slow", bridge.KindMessage, "hello", p.recorder)
		ev = via(ev, p)
		handleToEnd(t, b, ev)
		wantContains(t, "answer", p.last(t).Text, "You said: hello")
		at, refs, texts := p.updates()
		if len(at) != 2 || at[0] != 15*time.Second || at[1] != 30*time.Second || refs[0] != "" {
			t.Fatalf("progress at %v of %q, want at 15 s and 30 s of the working indicator (\"\")", at, refs)
		}
		wantContains(t, "placeholder at 30 s", texts[1], "Thinking", "30 seconds so far")
		p.mu.Lock()
		sent := p.sentAt[len(p.sentAt)-1]
		p.mu.Unlock()
		if sent < at[1] {
			t.Errorf("answer sent at %v, before the last progress update at %v", sent, at[1])
		}
	})
}
