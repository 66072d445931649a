package discordtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/goleak"

	"github.com/flowbridge/flowbridge/adapters/discord/discordtest"
)

// TestMain checks that neither the fake nor discordgo sessions closed as newSession does
// leave goroutines behind. discordgo's listen goroutine and event handlers may outlive
// Session.Close by a moment; goleak retries until they are gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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
	t.Cleanup(fake.Close)
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
	return s
}

// open opens s within openTimeout and closes it at the end of the test.
func open(t *testing.T, s *discordgo.Session) {
	t.Helper()
	if err := openErr(t, s); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { closeSession(s) })
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
	if s.ShouldReconnectOnError {
		s.Lock()
		s.ShouldReconnectOnError = false
		s.Unlock()
	}
	s.Close()
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
