package discordtest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/goleak"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestMain checks that neither the fake nor discordgo sessions closed as newSession does
// leave goroutines behind, once the closes the tests left in the background are done.
// discordgo's listen goroutine and event handlers may outlive Session.Close by a moment;
// goleak retries until they are gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(afterClosing{m})
}

// afterClosing runs the tests, then waits for the closes they left in the background.
type afterClosing struct{ m *testing.M }

func (a afterClosing) Run() int {
	code := a.m.Run()
	closing.wg.Wait()
	return code
}

// closing closes the sessions and fakes of ended tests in the background. discordgo's
// Session.Close sleeps a second after sending its close frame ("TODO: Wait for Discord to
// actually close the connection"); a test ending need not wait for that. A fake still
// closes after its sessions.
var closing struct {
	wg       sync.WaitGroup
	mu       sync.Mutex
	fakeOf   map[*discordgo.Session]*discordtest.Server
	sessions map[*discordtest.Server]*sync.WaitGroup
}

// closeLater closes s in the background, before its fake. Reconnecting is turned off
// here, in the test's goroutine, as closeSession does.
func closeLater(s *discordgo.Session) {
	stopReconnecting(s)
	closing.mu.Lock()
	wg := closing.sessions[closing.fakeOf[s]]
	closing.mu.Unlock()
	if wg == nil { // not made by newSession for a fake still open
		s.Close()
		return
	}
	wg.Add(1)
	closing.wg.Go(func() {
		defer wg.Done()
		s.Close()
	})
}

// Intents a bridge needs, message content included.
const bridgeIntents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentMessageContent

// openTimeout guards Session.Open, which has no timeout of its own and can hang.
const openTimeout = 10 * time.Second

// newFake starts a fake closed at the end of the test (after the sessions, as cleanups run
// last-in first-out).
func newFake(t *testing.T, opts discordtest.Options) *discordtest.Server {
	t.Helper()
	fake := discordtest.NewServer(opts)
	sessions := new(sync.WaitGroup)
	closing.mu.Lock()
	if closing.sessions == nil {
		closing.fakeOf = make(map[*discordgo.Session]*discordtest.Server)
		closing.sessions = make(map[*discordtest.Server]*sync.WaitGroup)
	}
	closing.sessions[fake] = sessions
	closing.mu.Unlock()
	t.Cleanup(func() {
		closing.mu.Lock()
		delete(closing.sessions, fake)
		for s, f := range closing.fakeOf {
			if f == fake {
				delete(closing.fakeOf, s)
			}
		}
		closing.mu.Unlock()
		closing.wg.Go(func() {
			sessions.Wait()
			fake.Close()
		})
	})
	return fake
}

// newSession is the wiring an adapter copies: the fake's HTTP client, nothing else.
func newSession(t *testing.T, fake *discordtest.Server, intents discordgo.Intent) *discordgo.Session {
	t.Helper()
	s, err := discordgo.New("Bot " + fake.Token())
	if err != nil {
		t.Fatalf("discordgo.New: %v", err)
	}
	s.Client = fake.Client()
	s.Identify.Intents = intents
	s.LogLevel = -1 // discordgo logs through the standard logger; keep test output clean
	closing.mu.Lock()
	if closing.sessions[fake] != nil {
		closing.fakeOf[s] = fake
	}
	closing.mu.Unlock()
	return s
}

// open opens s within openTimeout and closes it when the test ends (closeLater).
func open(t *testing.T, s *discordgo.Session) {
	t.Helper()
	if err := openErr(t, s); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { closeLater(s) })
}

func openErr(t *testing.T, s *discordgo.Session) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Open() }()
	select {
	case err := <-done:
		return err
	case <-time.After(openTimeout):
		t.Fatalf("Open did not return within %v", openTimeout)
		return nil
	}
}

// closeSession stops discordgo for good. The flag is set under the session's lock so the
// race detector sees it ordered before the reconnect check that the echo of Close's close
// frame triggers in discordgo's listen goroutine; it is not written when already false,
// since discordgo reads it unsynchronised in reconnect.
func closeSession(s *discordgo.Session) {
	stopReconnecting(s)
	s.Close()
}

func stopReconnecting(s *discordgo.Session) {
	if s.ShouldReconnectOnError {
		s.Lock()
		s.ShouldReconnectOnError = false
		s.Unlock()
	}
}

// events collects discordgo events of one type on a channel.
func events[T any](s *discordgo.Session) <-chan T {
	ch := make(chan T, 64)
	s.AddHandler(func(_ *discordgo.Session, ev T) {
		select {
		case ch <- ev:
		default:
		}
	})
	return ch
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		var zero T
		return zero
	}
}

// ctx returns a context bounded well below the test timeout.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return c
}

// noMentions is the allowed_mentions a bridge sends: parse nothing.
var noMentions = &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
