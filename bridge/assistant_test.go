package bridge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// titleRecorder is a recorder whose conversation can carry a title.
type titleRecorder struct {
	*recorder
	mu     sync.Mutex
	titles []string
}

func (r *titleRecorder) Title(_ context.Context, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.titles = append(r.titles, text)
	return nil
}

func (r *titleRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.titles)
}

func TestOpenGreetsWithTheAgentsPrompts(t *testing.T) {
	t.Parallel()
	prompts := []bridge.Prompt{{Title: "Status", Message: "What is the status of prod?"}, {Title: "Help", Message: "What can you do?"}}
	cfg := defaultConfig()
	cfg.Agents[0].SuggestedPrompts = prompts
	cfg.Agents[1].Greeting = "Other here."
	h := newHarness(t, cfg, nil)

	rec := newRecorder()
	if err := h.do(event("t/1", bridge.KindOpen, "", rec)); err != nil {
		t.Fatal(err)
	}
	r := rec.last(t)
	if r.Kind != bridge.ReplyInfo || !slices.Equal(r.Prompts, prompts) {
		t.Errorf("greeting = %+v, want an info reply with the default agent's prompts %v", r, prompts)
	}
	wantContains(t, "greeting", r.Text, "*helper*")

	// A thread whose channel chose another agent is greeted by that agent.
	if err := h.store.SetConversationAgent(t.Context(), "dm/1", "other"); err != nil {
		t.Fatal(err)
	}
	rec = newRecorder()
	ev := event("dm/1/t/2", bridge.KindOpen, "", rec)
	ev.Parent = "dm/1"
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	if r := rec.last(t); r.Text != "Other here." || len(r.Prompts) != 0 {
		t.Errorf("greeting in the other agent's channel = %+v, want its own greeting and no prompts", r)
	}
}

func TestContextReachesTheAgentOncePerChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaultConfig(), nil)
	conv := "t/ctx"
	rec := newRecorder()
	if err := h.do(event(conv, bridge.KindOpen, "The user is viewing <#C1>.", rec)); err != nil {
		t.Fatal(err)
	}
	h.ask(conv, "one")
	h.ask(conv, "two")
	// An unchanged context is not told again; a new one is.
	for _, text := range []string{"The user is viewing <#C1>.", "The user is viewing <#C2>."} {
		if err := h.do(event(conv, bridge.KindContext, text, newRecorder())); err != nil {
			t.Fatal(err)
		}
	}
	h.ask(conv, "three")
	// Nothing in view any more: forgotten.
	if err := h.do(event(conv, bridge.KindContext, "", newRecorder())); err != nil {
		t.Fatal(err)
	}
	h.ask(conv, "four")

	sessions := h.fake.Sessions(agentUUID)
	if len(sessions) != 1 {
		t.Fatalf("agent has %d sessions, want 1", len(sessions))
	}
	want := []string{"[Context: The user is viewing <#C1>.]\n\none", "two", "[Context: The user is viewing <#C2>.]\n\nthree", "four"}
	if got := h.fake.Messages(sessions[0]); !slices.Equal(got, want) {
		t.Errorf("agent received %q, want %q", got, want)
	}
}

func TestContextEventsSendNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaultConfig(), nil)
	rec := newRecorder()
	if err := h.do(event("t/quiet", bridge.KindContext, "The user is viewing <#C9>.", rec)); err != nil {
		t.Fatal(err)
	}
	if got := rec.all(); len(got) != 0 {
		t.Errorf("a context change was answered with %+v, want nothing", got)
	}
	if len(h.fake.Sessions(agentUUID)) != 0 {
		t.Error("a context change created an agent session")
	}
}

func TestFirstMessageNamesTheConversation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaultConfig(), nil)
	rec := &titleRecorder{recorder: newRecorder()}
	say := func(text string) {
		t.Helper()
		ev := event("t/title", bridge.KindMessage, text, rec.recorder)
		ev = via(ev, rec)
		if err := h.do(ev); err != nil {
			t.Fatal(err)
		}
	}
	say("How do I restart nginx?")
	say("and apache?")
	if got := rec.got(); !slices.Equal(got, []string{"How do I restart nginx?"}) {
		t.Errorf("titles = %q, want the first message only", got)
	}
	// After /agent reset the next message starts a new session: it names the conversation anew.
	h.command("t/title", bridge.CommandAgent, "reset")
	say("new topic")
	if got := rec.got(); !slices.Equal(got, []string{"How do I restart nginx?", "new topic"}) {
		t.Errorf("titles after reset = %q", got)
	}
}

func TestThreadHearsTheContextItsParentReceivedBefore(t *testing.T) {
	// Slack's agent view: what the user views is the DM's, and each
	// message starts a thread of the DM, a conversation of its own. The
	// user changes what they view, then asks at once: the DM's context
	// event, acknowledged, is held before it runs (its Prepare), and the
	// thread's message must not be answered about the view before it.
	synctest.Test(t, func(t *testing.T) {
		b, fake := newBubbleBridge(t, defaultConfig(), workspacetest.Agent{})
		const dm = "dm/ctx"
		open := keyed(dm, "test/open/1", "The user is viewing <#C1>.", newRecorder())
		open.Kind = bridge.KindOpen
		if err := receive(b, open).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // greeted, the view kept

		held := make(chan struct{})
		change := keyed(dm, "test/ctx/2", "The user is viewing the canvas F1.", newRecorder())
		change.Kind = bridge.KindContext
		change = withPrepare(change, func(context.Context, *bridge.Event) bool {
			<-held
			return true
		})
		if err := receive(b, change).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		ask := keyed(dm+"/t/1", "test/msg/1", "what is this?", rec)
		ask.Parent = dm
		answered := make(chan struct{})
		ask = onDone(ask, func() { close(answered) })
		if err := receive(b, ask).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the message waits for the context event, or was answered before it
		close(held)
		<-answered

		sessions := fake.Sessions(agentUUID)
		if len(sessions) != 1 {
			t.Fatalf("agent has %d sessions, want 1", len(sessions))
		}
		want := []string{"[Context: The user is viewing the canvas F1.]\n\nwhat is this?"}
		if got := fake.Messages(sessions[0]); !slices.Equal(got, want) {
			t.Errorf("agent received %q, want %q", got, want)
		}
		if n := len(rec.all()); n != 1 {
			t.Errorf("%d replies to the message, want 1", n)
		}
	})
}

func TestThreadDoesNotWaitForItsParentsGreeting(t *testing.T) {
	// The DM is opened for the first time and greeted; its thread's
	// message waits for the view to be kept, not for the greeting to be
	// posted.
	synctest.Test(t, func(t *testing.T) {
		b, fake := newBubbleBridge(t, defaultConfig(), workspacetest.Agent{})
		const dm = "dm/greet"
		posted := make(chan struct{})
		defer close(posted)
		open := keyed(dm, "test/open/1", "The user is viewing <#C1>.", gatedResponder{newRecorder(), posted})
		open.Kind = bridge.KindOpen
		if err := receive(b, open).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		ask := keyed(dm+"/t/1", "test/msg/1", "what is this?", newRecorder())
		ask.Parent = dm
		answered := make(chan struct{})
		ask = onDone(ask, func() { close(answered) })
		if err := receive(b, ask).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-answered // a deadlock of the bubble if it waited for the greeting
		sessions := fake.Sessions(agentUUID)
		want := []string{"[Context: The user is viewing <#C1>.]\n\nwhat is this?"}
		if len(sessions) != 1 || !slices.Equal(fake.Messages(sessions[0]), want) {
			t.Errorf("agent sessions %q, want one that received %q", sessions, want)
		}
	})
}

func TestContextChangedWhileTheAgentAnswersIsToldNext(t *testing.T) {
	// The user asks in a thread of the DM, and while the agent answers
	// views something else: the answer must not mark the new view told.
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		b, fake := newBubbleBridge(t, defaultConfig(), workspacetest.Agent{Reply: func(_ int, msg string) string {
			if strings.HasSuffix(msg, "one") {
				<-release
			}
			return "answer"
		}})
		const dm = "dm/during"
		do := func(ev bridge.Event, hold func()) {
			t.Helper()
			done := make(chan struct{})
			ev = onDone(ev, func() { close(done) })
			if err := receive(b, ev).Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if hold != nil {
				hold()
			}
			<-done
		}
		open := keyed(dm, "test/open/1", "The user is viewing <#C1>.", newRecorder())
		open.Kind = bridge.KindOpen
		do(open, nil)
		one := keyed(dm+"/t/1", "test/msg/1", "one", newRecorder())
		one.Parent = dm
		do(one, func() {
			synctest.Wait() // with the agent
			change := keyed(dm, "test/ctx/2", "The user is viewing <#C2>.", newRecorder())
			change.Kind = bridge.KindContext
			do(change, nil)
			close(release)
		})
		two := keyed(dm+"/t/1", "test/msg/2", "two", newRecorder())
		two.Parent = dm
		do(two, nil)

		sessions := fake.Sessions(agentUUID)
		want := []string{"[Context: The user is viewing <#C1>.]\n\none", "[Context: The user is viewing <#C2>.]\n\ntwo"}
		if len(sessions) != 1 || !slices.Equal(fake.Messages(sessions[0]), want) {
			var got [][]string
			for _, s := range sessions {
				got = append(got, fake.Messages(s))
			}
			t.Errorf("agent received %q, want %q", got, want)
		}
	})
}

func TestThreadUsesTheAgentItsChannelChoseBefore(t *testing.T) {
	// "/agent use" in a channel, then at once a mention that starts a
	// thread there: the thread talks to the agent the channel chose.
	synctest.Test(t, func(t *testing.T) {
		b, fake := newBubbleBridge(t, defaultConfig(), workspacetest.Agent{})
		fake.AddAgent(workspacetest.Agent{UUID: agent2UUID})
		held := make(chan struct{})
		use := keyed("c/use", "test/cmd/1", "use other", newRecorder())
		use.Kind, use.Command, use.User.ID = bridge.KindCommand, bridge.CommandAgent, "U-admin"
		use = withPrepare(use, func(context.Context, *bridge.Event) bool {
			<-held
			return true
		})
		if err := receive(b, use).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		ask := keyed("c/use/t/1", "test/msg/1", "hello", newRecorder())
		ask.Parent = "c/use"
		answered := make(chan struct{})
		ask = onDone(ask, func() { close(answered) })
		if err := receive(b, ask).Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the message waits for the command, or was answered before it
		close(held)
		<-answered
		if n, m := len(fake.Sessions(agentUUID)), len(fake.Sessions(agent2UUID)); n != 0 || m != 1 {
			t.Errorf("sessions: %d of the default agent, %d of the chosen one; want 0 and 1", n, m)
		}
	})
}

// TestOpenedWithNothingInViewGreetsOnce: Slack's agent view opens the
// Messages tab with nothing in view, often; the user is greeted once,
// however often it is opened and whatever context changes come between.
// On 32a4bef the empty context deleted the record that remembered the
// greeting, and every opening greeted again (10 openings, 10 greetings).
func TestOpenedWithNothingInViewGreetsOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, defaultConfig(), nil)
	rec := newRecorder()
	for i := range 10 {
		if err := h.do(event("dm/g", bridge.KindOpen, "", rec)); err != nil {
			t.Fatal(err)
		}
		text := ""
		if i%2 == 0 {
			text = "The user is viewing <#C1>."
		}
		if err := h.do(event("dm/g", bridge.KindContext, text, rec)); err != nil {
			t.Fatal(err)
		}
	}
	greetings := 0
	for _, r := range rec.all() {
		if strings.Contains(r.Text, "*helper*") {
			greetings++
		}
	}
	if greetings != 1 {
		t.Errorf("%d greetings in 10 openings, want 1", greetings)
	}
}

// TestOpeningStormTellsNobodyBusy: a storm of openings of an agent_view
// DM while its conversation is busy answering: the user, who sent
// nothing, is neither greeted again nor told that messages were not taken
// (on 32a4bef a storm of 2,000 gave 38 greetings and a "16 waiting"
// notice).
func TestOpeningStormTellsNobodyBusy(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	cfg := defaultConfig()
	cfg.QueueSize = 2
	h := newHarness(t, cfg, func(s *workspacetest.Server) {
		s.AddAgent(workspacetest.Agent{UUID: agentUUID, Reply: func(_ int, msg string) string {
			<-release
			return "answer to " + msg
		}})
	})
	rec := newRecorder()
	if err := h.do(event("dm/s", bridge.KindOpen, "", rec)); err != nil {
		t.Fatal(err)
	}
	if err := handle(h.b, event("dm/s", bridge.KindMessage, "work", rec)); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		switch err := handle(h.b, event("dm/s", bridge.KindOpen, "", rec)); {
		case err == nil, errors.Is(err, bridge.ErrBusy):
		default:
			t.Fatal(err)
		}
	}
	close(release)
	rec.waitReplies(t, 1, "answer to work")
	if err := h.b.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, r := range rec.all() {
		if strings.Contains(r.Text, "still working") {
			t.Errorf("a busy notice for openings nobody sent: %q", r.Text)
		}
	}
	greetings := 0
	for _, r := range rec.all() {
		if strings.Contains(r.Text, "*helper*") {
			greetings++
		}
	}
	if greetings != 1 {
		t.Errorf("%d greetings, want 1", greetings)
	}
}
