package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// killable is the store of a process that, once killed is set, is killed
// after it posted a reply and before it closed the reply's inbox entry:
// Finish no longer reaches the store.
type killable struct {
	bridge.Store
	killed *atomic.Bool
}

func (s killable) Finish(ctx context.Context, key, reply string, turn *store.Turn, now time.Time) error {
	if s.killed.Load() {
		return errors.New("killed before the entry was closed")
	}
	return s.Store.Finish(ctx, key, reply, turn, now)
}

// cutOffResponder is a platform that accepts no reply before the shutdown
// grace ends: each Send waits for its context and fails.
type cutOffResponder struct{ sent chan bridge.Reply }

func (r cutOffResponder) Send(ctx context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	r.sent <- rep
	<-ctx.Done()
	return "", fmt.Errorf("cut off: %w", ctx.Err())
}

// refusal is a message the bridge refuses before it reaches the agent.
type refusal struct {
	name  string
	cfg   func(*bridge.Config)
	first string // a message of the same user answered before, if any
	text  string
	files []bridge.Attachment
	press string // a button press of this action ID instead of a message
	want  string // in the refusal
}

// event is r's refused event, key, through p.
func (r refusal) event(p *chatPlatform, key string) bridge.Event {
	ev := p.event("c/1", key, r.text)
	ev.Files = r.files
	if r.press != "" {
		ev.Kind, ev.Text, ev.Action = bridge.KindAction, "", bridge.Action{ID: r.press}
	}
	return ev
}

var refusals = []refusal{
	{name: "too long", cfg: func(c *bridge.Config) { c.Limits.MaxMessageBytes = 20 },
		text: "a message much longer than twenty bytes", want: "too long"},
	{name: "rate limit", cfg: func(c *bridge.Config) { c.Limits.ChatPerMinute, c.Limits.Burst = 1, 1 },
		first: "first", text: "second", want: "faster than I can take them"},
	{name: "files skipped", cfg: func(*bridge.Config) {},
		files: []bridge.Attachment{{Name: "photo.png", URL: "u/png", Size: 10, MIME: "image/png"}}, want: "was not sent to the agent"},
	{name: "button gone", cfg: func(*bridge.Config) {}, press: "gone", want: "no longer supported"},
}

// refusalBridge starts a bridge with r's configuration on st.
func refusalBridge(t *testing.T, r refusal, fake *workspacetest.Server, st bridge.Store, name string) *bridge.Bridge {
	t.Helper()
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	r.cfg(&cfg)
	b, err := bridge.New(cfg, ws, st, zaptest.NewLogger(t).Named(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b
}

// TestRefusalToldOnceAfterCrash: a process killed after it posted a
// refusal ("too long", "slow down", files not read) and before it closed
// the entry leaves the refusal in the outbox: the next start posts it again
// named by the event's key and marked Again, so the platform shows it once
// (the adapters look for it, Reply.Once), and never runs the message it
// refused (the rate limit of a new process would let it through).
func TestRefusalToldOnceAfterCrash(t *testing.T) {
	t.Parallel()
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			fake := newReplicaFake(t, workspacetest.Agent{})
			st, _ := openStore(t)
			p := newChatPlatform()
			var killed atomic.Bool
			first := refusalBridge(t, r, fake, killable{st, &killed}, "first")
			attach(t, first, p)
			h := &harness{t: t, b: first}
			if r.first != "" {
				if err := h.receive(p.event("c/1", "test/msg/0", r.first)); err != nil {
					t.Fatal(err)
				}
			}
			// The kill: the refusal is posted, its entry never closed.
			killed.Store(true)
			ev := r.event(p, "test/msg/1")
			if err := h.receive(ev); err != nil {
				t.Fatal(err)
			}
			first.Shutdown(t.Context())

			next := refusalBridge(t, r, fake, st, "next")
			if _, _, err := next.Attach("test", p); err != nil {
				t.Fatal(err)
			}
			if err := next.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			got := p.sendsTo("test/msg/1")
			if len(got) != 2 || !strings.Contains(got[0].Text, r.want) || got[1].Text != got[0].Text {
				t.Fatalf("sends = %+v, want the refusal, then the same re-posted after the restart", got)
			}
			if shown := p.repliesTo("test/msg/1"); r.press == "" && len(shown) != 1 {
				t.Errorf("the platform shows %d refusals, want 1", len(shown))
			}
			for i, rep := range got {
				if rep.Once != "test/msg/1" || rep.Again != (i == 1) {
					t.Errorf("send %d: Once %q, Again %v; want named by its key, the re-post marked Again (so the platform shows it once)", i, rep.Once, rep.Again)
				}
				// A chat message's refusal stands in for its public answer,
				// posted where it can be found again (a Slack ephemeral
				// cannot be); a press's stays with its user.
				if rep.Ephemeral != (r.press != "") {
					t.Errorf("send %d: ephemeral %v, want %v", i, rep.Ephemeral, r.press != "")
				}
			}
			if msgs := convMessages(t, fake); len(msgs[r.text]) != 0 {
				t.Errorf("agent got %q: a refused message reached it after the restart", msgs[r.text])
			}
			if pending, err := st.Pending(t.Context()); err != nil || len(pending) != 0 {
				t.Errorf("Pending() = %d entries, %v; want the refused entry closed", len(pending), err)
			}
		})
	}
}

// TestRefusalKeptAcrossShutdown: a refusal the platform has not accepted
// when the shutdown grace ends is kept with its entry and posted by the
// next start, instead of being lost with the entry closed as answered.
func TestRefusalKeptAcrossShutdown(t *testing.T) {
	t.Parallel()
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			fake := newReplicaFake(t, workspacetest.Agent{})
			st, _ := openStore(t)
			p := newChatPlatform()
			first := refusalBridge(t, r, fake, st, "first")
			attach(t, first, p)
			if r.first != "" {
				h := &harness{t: t, b: first}
				if err := h.receive(p.event("c/1", "test/msg/0", r.first)); err != nil {
					t.Fatal(err)
				}
			}
			stuck := cutOffResponder{sent: make(chan bridge.Reply, 1)}
			ev := r.event(p, "test/msg/1")
			ev = via(ev, stuck)
			var done sync.WaitGroup
			done.Add(1)
			ev = onDone(ev, done.Done)
			if err := receive(first, ev).Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			<-stuck.sent // the refusal is being posted
			over, cancel := context.WithCancel(context.Background())
			cancel() // SIGTERM, and the grace is over at once
			first.Shutdown(over)
			done.Wait()
			first.Close()

			next := refusalBridge(t, r, fake, st, "next")
			if _, _, err := next.Attach("test", p); err != nil {
				t.Fatal(err)
			}
			p.waitReplies(t, "test/msg/1")
			if err := next.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			got := p.repliesTo("test/msg/1")
			if len(got) != 1 || !strings.Contains(got[0].Text, r.want) || got[0].Once != "test/msg/1" {
				t.Errorf("replies after the restart = %+v, want the kept refusal once, named by its key", got)
			}
			if msgs := convMessages(t, fake); len(msgs[r.text]) != 0 {
				t.Errorf("agent got %q: a refused message reached it after the restart", msgs[r.text])
			}
		})
	}
}

// dmResponder is one DM on a platform that can rewrite a message in place
// (Progresser): every event of the DM answers through it, before and after
// a restart (Restore).
type dmResponder struct {
	testPlatform
	mu      sync.Mutex
	sends   []bridge.Reply
	rewrite []string
	changed chan struct{} // closed and replaced at each send
}

func (d *dmResponder) Send(_ context.Context, r bridge.Reply) (bridge.MessageRef, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sends = append(d.sends, r)
	if d.changed != nil {
		close(d.changed)
	}
	d.changed = make(chan struct{})
	return bridge.MessageRef(fmt.Sprint(len(d.sends))), nil
}

// waitFor returns once d has sent at least notices busy notices and
// answers answers: what a test must see before it shuts a bridge down,
// since a shutdown starts nothing new.
func (d *dmResponder) waitFor(t *testing.T, notices, answers int) {
	t.Helper()
	for {
		n, a := d.busyNotices()
		if len(n) >= notices && len(a) >= answers {
			return
		}
		d.mu.Lock()
		if d.changed == nil {
			d.changed = make(chan struct{})
		}
		ch := d.changed
		d.mu.Unlock()
		select {
		case <-ch:
		case <-t.Context().Done():
			t.Fatalf("%d busy notices and %d answers, want %d and %d", len(n), len(a), notices, answers)
		}
	}
}

func (d *dmResponder) Progress(_ context.Context, _ bridge.MessageRef, r bridge.Reply) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rewrite = append(d.rewrite, r.Text)
	return nil
}

// Responder answers every event of the DM through d, as its platform.
func (d *dmResponder) Responder(bridge.Event) (bridge.Responder, error) { return d, nil }

// busyNotices returns the busy notices sent, and the answers.
func (d *dmResponder) busyNotices() (notices, answers []bridge.Reply) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.sends {
		if strings.Contains(r.Text, "still working") {
			notices = append(notices, r)
		} else {
			answers = append(answers, r)
		}
	}
	return notices, answers
}

// flood sends n keyed messages into one DM at once and returns how many
// were refused busy.
func flood(t *testing.T, b *bridge.Bridge, d *dmResponder, n int) int {
	t.Helper()
	receipts := make([]*bridge.Receipt, n)
	for i := range n {
		ev := keyed("dm/flood", fmt.Sprintf("test/msg/%d", i), fmt.Sprint("m", i), d)
		receipts[i] = receive(b, ev)
	}
	refused := 0
	for i, r := range receipts {
		switch err := r.Wait(t.Context()); {
		case errors.Is(err, bridge.ErrBusy):
			refused++
		case err != nil:
			t.Fatalf("message %d: %v", i, err)
		}
	}
	return refused
}

// floodBridge is a bridge on st whose agent holds every answer until
// release is closed, with a conversation queue of 2.
func floodBridge(t *testing.T, st bridge.Store, release chan struct{}, log *zap.Logger) (*bridge.Bridge, *workspacetest.Server) {
	t.Helper()
	fake := newReplicaFake(t, workspacetest.Agent{Reply: func(_ int, msg string) string {
		<-release
		return "answer to " + msg
	}})
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.QueueSize = 2
	b, err := bridge.New(cfg, ws, st, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	attachTest(t, b)
	return b, fake
}

// TestFloodOfFiveThousandGetsAFewNotices: 5,000 messages flood one DM,
// each recorded in the inbox, while the agent works on the first: the ones
// the queue cannot take are told by one busy notice, rewritten in place,
// not by a notice each; each is closed, and none reaches the agent.
func TestFloodOfFiveThousandGetsAFewNotices(t *testing.T) {
	t.Parallel()
	st := openNoSync(t)
	release := make(chan struct{})
	b, fake := floodBridge(t, st, release, zaptest.NewLogger(t))
	d := &dmResponder{}
	const n = 5000
	refused := flood(t, b, d, n)
	if refused < n-3 {
		t.Fatalf("%d of %d refused, want all but the running one and the queue's", refused, n)
	}
	close(release)
	d.waitFor(t, 1, n-refused)
	if err := b.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	notices, answers := d.busyNotices()
	if len(notices) > 3 || len(notices) == 0 {
		t.Errorf("%d messages refused, told by %d busy notices; want a handful (one per conversation, rewritten)", refused, len(notices))
	}
	d.mu.Lock()
	rewrites := slices.Clone(d.rewrite)
	d.mu.Unlock()
	if want := fmt.Sprintf("did not take the %d you sent", refused); len(rewrites) == 0 || !strings.Contains(rewrites[len(rewrites)-1], want) {
		t.Errorf("the notice's rewrites = %d, the last %q; want it brought up to date in place (%q)", len(rewrites), rewrites, want)
	}
	if len(answers) != n-refused {
		t.Errorf("%d answers, want one for each of the %d messages taken", len(answers), n-refused)
	}
	if got := convMessages(t, fake)["m0"]; len(got) != n-refused {
		t.Errorf("agent got %d messages, want the %d taken", len(got), n-refused)
	}
	if pending, err := st.Pending(t.Context()); err != nil || len(pending) != 0 {
		t.Errorf("Pending() = %d entries, %v; want every refused message closed", len(pending), err)
	}
}

// TestFloodKilledMidwayToldOnceMore: a process killed during a flood,
// after it told the busy messages and before it closed their entries,
// leaves them in the outbox as busy refusals: the next start tells them
// through one busy notice more for the conversation, not one each, and
// never runs a message its user was told was not taken.
func TestFloodKilledMidwayToldOnceMore(t *testing.T) {
	t.Parallel()
	st := openNoSync(t)
	release := make(chan struct{})
	var killed atomic.Bool
	killed.Store(true)
	// What the killed process logs of its failed writes (a thousand
	// entries not closed) does not concern the test.
	first, fake := floodBridge(t, killable{st, &killed}, release, zap.NewNop())
	d := &dmResponder{}
	const n = 1000
	refused := flood(t, first, d, n)
	before, _ := d.busyNotices()
	close(release)
	first.Shutdown(t.Context())
	_, answered := d.busyNotices()

	next, err := bridge.New(defaultConfig(), mustWorkspace(t, fake), st, zaptest.NewLogger(t).Named("next"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := next.Attach("test", d); err != nil {
		t.Fatal(err)
	}
	// The kept refusals told; the taken answered: those the first process
	// answered (their entries left open) posted again from the outbox, the
	// others (left received by the shutdown) run here.
	d.waitFor(t, len(before)+1, len(answered)+n-refused)
	if err := next.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	after, _ := d.busyNotices()
	if more := len(after) - len(before); more > 1 {
		t.Errorf("%d busy messages kept at the kill were told by %d notices after the restart, want at most one", refused, more)
	}
	if got := convMessages(t, fake)["m0"]; len(got) != n-refused {
		t.Errorf("agent got %d messages, want only the %d taken before the kill", len(got), n-refused)
	}
	if pending, err := st.Pending(t.Context()); err != nil || len(pending) != 0 {
		t.Errorf("Pending() after the restart = %d entries, %v; want none", len(pending), err)
	}
}

// openNoSync opens a bbolt store without fsync in the test's directory:
// thousands of commits in a test, durability not under test.
func openNoSync(t *testing.T) *sessionmap.Store {
	t.Helper()
	st, err := sessionmap.Open(filepath.Join(t.TempDir(), "store.db"), sessionmap.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func mustWorkspace(t *testing.T, fake *workspacetest.Server) *workspace.Client {
	t.Helper()
	ws, err := workspace.New(workspace.Config{BaseURL: fake.URL, WorkspaceUUID: "ws-test", Token: "test-token"})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// pendingKeys returns the keys of st's unanswered entries, and whether each
// keeps an answer in the outbox.
func pendingKeys(t *testing.T, st bridge.Store) map[string]bool {
	t.Helper()
	pending, err := st.Pending(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	keys := make(map[string]bool, len(pending))
	for _, e := range pending {
		keys[e.Key] = e.Outbox != nil
	}
	return keys
}

// TestBusyNoticeNotDeliveredKeptForNextStart: a message refused busy whose
// notice the platform does not take (a 429 beyond the adapter's budget, an
// error) was neither answered nor told, so its entry is not closed: it
// stays kept as refused, and the next start tells its user, once, without
// running it.
func TestBusyNoticeNotDeliveredKeptForNextStart(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	asked, release := make(chan string, 3), make(chan struct{})
	fake := newReplicaFake(t, workspacetest.Agent{Reply: func(_ int, msg string) string {
		asked <- msg
		<-release
		return "answer to " + msg
	}})
	cfg := defaultConfig()
	cfg.QueueSize = 1
	first, err := bridge.New(cfg, mustWorkspace(t, fake), st, zaptest.NewLogger(t).Named("first"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Shutdown(context.Background()) })
	attachTest(t, first)
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the Shutdown above, when the test fails early
	d := &dmResponder{}
	if err := receive(first, keyed("dm/1", "test/msg/0", "m0", d)).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-asked // m0 runs; m1 fills the queue
	if err := receive(first, keyed("dm/1", "test/msg/1", "m1", d)).Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	down := &refusingResponder{down: true}
	refused := keyed("dm/1", "test/msg/2", "m2", down)
	done := make(chan struct{})
	refused = onDone(refused, func() { close(done) })
	if err := receive(first, refused).Wait(t.Context()); !errors.Is(err, bridge.ErrBusy) {
		t.Fatalf("Receive beyond the queue = %v, want ErrBusy", err)
	}
	<-done
	if kept, open := pendingKeys(t, st)["test/msg/2"]; !open || !kept {
		t.Fatalf("the refused message's entry: open %v, kept %v; want it open with its refusal kept: its user was not told", open, kept)
	}
	releaseOnce()
	d.waitFor(t, 0, 2) // m0 and m1 answered
	if err := first.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	first.Close()

	next, err := bridge.New(cfg, mustWorkspace(t, fake), st, zaptest.NewLogger(t).Named("next"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := next.Attach("test", d); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, 1, 2) // the refused message told
	if err := next.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	notices, answers := d.busyNotices()
	if len(notices) != 1 || len(answers) != 2 {
		t.Errorf("after the restart: %d busy notices, %d answers; want the refused message told once, the two taken answered", len(notices), len(answers))
	}
	if got := convMessages(t, fake)["m0"]; !slices.Equal(got, []string{"m0", "m1"}) {
		t.Errorf("agent got %q, want only the two taken", got)
	}
	if pending := pendingKeys(t, st); len(pending) != 0 {
		t.Errorf("pending after the restart: %v, want none", pending)
	}
}

// heldNotice is a platform whose busy notice is under way until open is
// closed, then accepted or refused (ok); it counts the sends.
type heldNotice struct {
	open  chan struct{}
	ok    bool
	sends atomic.Int32
}

func (h *heldNotice) Send(ctx context.Context, _ bridge.Reply) (bridge.MessageRef, error) {
	h.sends.Add(1)
	select {
	case <-h.open:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if !h.ok {
		return "", fmt.Errorf("%w: rate limited beyond the budget", bridge.ErrNotPosted)
	}
	return "notice", nil
}

// TestBusyRefusalsWaitForTheNoticeUnderWay: two messages refused busy while
// the one notice of their conversation and user is being sent are closed
// only once it is delivered (both, by that one notice); when it is not,
// neither is closed as told: both stay kept for the next start.
func TestBusyRefusalsWaitForTheNoticeUnderWay(t *testing.T) {
	for _, delivered := range []bool{true, false} {
		name := "delivered"
		if !delivered {
			name = "refused"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				cfg := defaultConfig()
				cfg.QueueSize = 1
				b, _, st := newBubbleBridgeStore(t, cfg, workspacetest.Agent{Reply: func(_ int, msg string) string {
					<-release
					return "answer to " + msg
				}})
				defer close(release)
				d := &dmResponder{}
				if err := receive(b, keyed("dm/1", "test/msg/0", "m0", d)).Wait(t.Context()); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // m0 is with the agent; m1 fills the queue
				if err := receive(b, keyed("dm/1", "test/msg/1", "m1", d)).Wait(t.Context()); err != nil {
					t.Fatal(err)
				}
				held := &heldNotice{open: make(chan struct{}), ok: delivered}
				var done sync.WaitGroup
				refuse := func(key string) {
					t.Helper()
					ev := keyed("dm/1", key, key, held)
					done.Add(1)
					ev = onDone(ev, done.Done)
					if err := receive(b, ev).Wait(t.Context()); !errors.Is(err, bridge.ErrBusy) {
						t.Fatalf("Receive beyond the queue = %v, want ErrBusy", err)
					}
					synctest.Wait()
				}
				refuse("test/msg/2") // its notice is under way
				refuse("test/msg/3") // refused while it is
				pending := pendingKeys(t, st)
				if !pending["test/msg/2"] || !pending["test/msg/3"] {
					t.Errorf("while the notice is under way, pending %v; want both refused entries open and kept: neither user is told yet", pending)
				}
				close(held.open)
				done.Wait()
				if n := held.sends.Load(); n != 1 {
					t.Errorf("%d busy notices sent, want one for both", n)
				}
				pending = pendingKeys(t, st)
				for _, key := range []string{"test/msg/2", "test/msg/3"} {
					kept, open := pending[key]
					if delivered && open {
						t.Errorf("%s still open after its notice was delivered", key)
					}
					if !delivered && (!open || !kept) {
						t.Errorf("%s: open %v, kept %v after its notice was refused; want it open and kept for the next start", key, open, kept)
					}
				}
			})
		})
	}
}
