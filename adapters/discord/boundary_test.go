package discord

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestInvalidIDsRefused: an event whose guild, channel, message or user ID
// is not a Discord ID is refused by itself, logged and counted, before the
// core or the workspace sees it; the events around it are answered.
func TestInvalidIDsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.start(t)
	ctx := testCtx(t)
	bot := e.fake.BotUser().ID
	bad := []discordtest.MessageCreate{
		{ChannelID: "abc", Author: alice, Content: "channel"},
		{ChannelID: "123456789012345678901", Author: alice, Content: "21 digits"},
		{ChannelID: "92", Author: discordgo.User{ID: "42/../7", Username: "mallory"}, Content: "user"},
		{GuildID: "g1", ChannelID: "93", Author: alice, Content: mention(bot, "guild")},
		{ID: "-5", ChannelID: "94", Author: alice, Content: "message"},
	}
	for _, m := range bad {
		if _, err := e.fake.SendMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.fake.SendInteraction(ctx, discordtest.Interaction{GuildID: guildID, ChannelID: channelID, User: discordgo.User{ID: "u-1", Username: "mallory"},
		Data: flowCommand("healthcheck", [2]string{"host", "web1"})}); err != nil {
		t.Fatal(err)
	}
	e.marker(t, "95")
	r.stop(t)

	if got, want := r.a.Refused(), uint64(len(bad)+1); got != want {
		t.Errorf("Refused() = %d, want %d", got, want)
	}
	for _, req := range e.ws.Requests() {
		if strings.Contains(string(req.Body), "web1") || (strings.HasSuffix(req.Path, "/chat") && !strings.Contains(string(req.Body), "marker")) {
			t.Errorf("workspace request %s %s for a refused event", req.Method, req.Path)
		}
	}
	for _, req := range e.fake.Requests() {
		if req.Route == discordtest.RouteInteractionCallback || (req.Route == discordtest.RouteTyping && !strings.Contains(req.Path, "/95/")) {
			t.Errorf("Discord request %s %s for a refused event", req.Method, req.Path)
		}
	}
}

// TestValidToken: an interaction token goes into URL paths called with the
// bot's token, so one that could change the path is refused.
func TestValidToken(t *testing.T) {
	tests := []struct {
		token string
		want  bool
	}{
		{"aW50ZXJhY3Rpb246MTIzNDU2Nzg5MDEyMzQ1Njc4OTpxd2VydHk", true},
		{"fake-interaction-token-1_2.3", true},
		{"", false},
		{"../../channels/1/messages", false},
		{"a?b", false},
		{"a#b", false},
		{"a%2Fb", false},
		{"a b", false},
		{"tök", false},
		{strings.Repeat("a", maxToken+1), false},
	}
	for _, tt := range tests {
		if got := validToken(tt.token); got != tt.want {
			t.Errorf("validToken(%q) = %v, want %v", tt.token, got, tt.want)
		}
	}
}

// observed returns a test logger whose entries at info and above can also be read.
func observed(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core)), logs
}

// TestStartsWhileDiscordUnreachable: with Discord unreachable at start, Run
// does not return: it retries with backoff, logs, and Ready says why it is
// not ready; first while the API is down, then while only the gateway is;
// once Discord answers, it connects and takes events.
func TestStartsWhileDiscordUnreachable(t *testing.T) {
	t.Parallel()
	down := newFaults(func(*http.Request) error { return errUnreachable })
	e := newEnv(t, func(e *env) { e.discordRT = down.wrap })
	log, logs := observed(t)
	r := e.build(t)
	r.a.log = log.Named("discord")
	r.run(t)
	ctx := testCtx(t)

	for range 3 {
		receive(t, ctx, down.failed)
	}
	if err := r.a.Ready(); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("Ready() = %v while the API is down, want an error saying it is unreachable", err)
	}
	if n := logs.FilterMessage("discord API unreachable; retrying").Len(); n == 0 {
		t.Errorf("no log of the API being unreachable")
	}

	// The API answers; the gateway's address (GET /gateway) does not.
	down.set(func(r *http.Request) error {
		if strings.HasSuffix(r.URL.Path, "/gateway") {
			return errUnreachable
		}
		return nil
	})
	for range 3 {
		for receive(t, ctx, down.failed) != "/api/v9/gateway" {
		}
	}
	if err := r.a.Ready(); err == nil {
		t.Errorf("Ready() = nil while the gateway is unreachable")
	}
	if n := logs.FilterMessageSnippet("gateway").FilterLevelExact(zapcore.WarnLevel).Len(); n == 0 {
		t.Errorf("no warning of the gateway being unreachable")
	}

	down.set(nil)
	if _, err := e.fake.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	e.marker(t, "96")
	if err := r.a.Ready(); err != nil {
		t.Errorf("Ready() = %v once connected, want nil", err)
	}
	select {
	case err := <-r.done:
		t.Fatalf("Run() returned %v while Discord was unreachable", err)
	default:
	}
}

// TestRefusedTokenIsFatal: a token Discord refuses ends Run with an error
// naming discord.token, at once, whichever door refuses it.
func TestRefusedTokenIsFatal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(e *env)
	}{
		{"401 on /users/@me", func(e *env) { e.cfg.Token = "wrong-token" }},
		{"401 on /gateway", func(e *env) {
			e.discordRT = func(next http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if strings.HasSuffix(r.URL.Path, "/gateway") {
						r = r.Clone(r.Context())
						r.Header.Set("Authorization", "Bot wrong-token")
					}
					return next.RoundTrip(r)
				})
			}
		}},
		{"close 4004 at IDENTIFY", func(e *env) {
			// REST takes the right token; the gateway gets the configured one.
			right := "Bot " + e.cfg.Token.Value()
			e.cfg.Token = "wrong-token"
			e.discordRT = func(next http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(r *http.Request) (*http.Response, error) {
					r = r.Clone(r.Context())
					r.Header.Set("Authorization", right)
					return next.RoundTrip(r)
				})
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.change)
			r := e.build(t)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			err := r.a.Run(ctx)
			if ctx.Err() != nil {
				t.Fatalf("Run() retried a refused token until the test's deadline")
			}
			if err == nil || !strings.Contains(err.Error(), "discord.token") {
				t.Errorf("Run() = %v, want an error naming discord.token", err)
			}
			if r.a.Ready() == nil {
				t.Errorf("Ready() = nil after a refused token")
			}
			r.core.Shutdown(t.Context())
			r.store.Close()
		})
	}
}
