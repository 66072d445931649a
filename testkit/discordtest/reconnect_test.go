package discordtest_test

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

func TestReconnects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// cause makes discordgo reconnect; a message sent right after it must arrive.
		cause func(*discordtest.Server) error
		// want is the handshake that follows, on connection conn.
		conn    int
		op      int
		resumed bool
	}{
		{"op 7 reconnect", func(f *discordtest.Server) error { return f.Reconnect(t.Context()) }, 2, 6, true},
		{"dropped connection", func(f *discordtest.Server) error { return f.DropConnection(t.Context()) }, 2, 6, true},
		{"resumable close 4000", func(f *discordtest.Server) error { return f.CloseConnection(t.Context(), 4000, "Unknown error.") }, 2, 6, true},
		{"op 9 not resumable", func(f *discordtest.Server) error { return f.InvalidateSession(t.Context(), false) }, 1, 2, false},
		{"session timeout close 4009", func(f *discordtest.Server) error { return f.CloseConnection(t.Context(), 4009, "Session timed out.") }, 2, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake, s := connected(t, bridgeIntents)
			created := events[*discordgo.MessageCreate](s)
			if err := tt.cause(fake); err != nil {
				t.Fatalf("cause: %v", err)
			}
			var h discordtest.Handshake
			var err error
			if tt.resumed {
				// Sent while discordgo is away: RESUME replays it.
				if _, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: alice, Content: "while away"}); err != nil {
					t.Fatalf("SendMessage while away: %v", err)
				}
				h, err = fake.WaitHandshake(ctx(t), func(h discordtest.Handshake) bool { return h.Conn == tt.conn && h.Op == tt.op })
			} else {
				h, err = fake.WaitHandshake(ctx(t), func(h discordtest.Handshake) bool {
					return h.Conn == tt.conn && h.Op == tt.op && h.SessionID != "fake-session-1"
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Resumed != tt.resumed {
				t.Errorf("handshake = %+v, want resumed %v", h, tt.resumed)
			}
			if tt.resumed && h.Replayed != 1 {
				t.Errorf("RESUME replayed %d events, want 1", h.Replayed)
			}
			if !tt.resumed {
				if _, err := fake.WaitReady(ctx(t)); err != nil {
					t.Fatal(err)
				}
				if _, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: alice, Content: "while away"}); err != nil {
					t.Fatalf("SendMessage after re-identify: %v", err)
				}
			}
			if m := receive(t, created, "MESSAGE_CREATE after reconnect"); m.Content != "while away" {
				t.Errorf("content = %q, want %q", m.Content, "while away")
			}
		})
	}
}

func TestResumeAfterCloseIsRefused(t *testing.T) {
	t.Parallel()
	fake, s := connected(t, bridgeIntents)
	closeSession(s) // close code 1000 ends the session, as on Discord
	if _, err := fake.WaitConnection(ctx(t), func(c discordtest.Connection) bool { return c.Closed }); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: alice, Content: "x"}); !errors.Is(err, discordtest.ErrNoSession) {
		t.Errorf("SendMessage after close = %v, want ErrNoSession", err)
	}
	// discordgo keeps session id and sequence, so it tries to RESUME. Reconnecting stays
	// off: discordgo's listen goroutine may still be about to check that flag.
	open(t, s)
	if _, err := fake.WaitHandshake(ctx(t), func(h discordtest.Handshake) bool { return h.Conn == 2 && h.Op == 2 }); err != nil {
		t.Fatal(err)
	}
	hs := fake.Handshakes()
	if len(hs) != 3 || hs[1].Op != 6 || hs[1].Resumed || hs[2].Op != 2 {
		t.Errorf("Handshakes() = %+v, want IDENTIFY, refused RESUME, IDENTIFY", hs)
	}
}

func TestRateLimitWaitedOut(t *testing.T) {
	t.Parallel()
	fake, s := connected(t, bridgeIntents)
	limited := events[*discordgo.RateLimit](s)
	const wait = 50 * time.Millisecond
	fake.RateLimit(discordtest.RouteCreateMessage, discordtest.RateLimit{Count: 2, RetryAfter: wait})
	start := time.Now()
	if _, err := s.ChannelMessageSendComplex("3000", &discordgo.MessageSend{Content: "x", AllowedMentions: noMentions}); err != nil {
		t.Fatalf("send through two 429s: %v", err)
	}
	if took := time.Since(start); took < 2*wait {
		t.Errorf("send took %v, want at least %v of waiting", took, 2*wait)
	}
	for range 2 {
		if ev := receive(t, limited, "RateLimit event"); ev.RetryAfter != wait {
			t.Errorf("RateLimit.RetryAfter = %v, want %v", ev.RetryAfter, wait)
		}
	}
	var statuses []int
	for _, r := range fake.Requests() {
		if r.Route == discordtest.RouteCreateMessage {
			statuses = append(statuses, r.Status)
		}
	}
	if len(statuses) != 3 || statuses[0] != 429 || statuses[1] != 429 || statuses[2] != 200 {
		t.Errorf("statuses = %v, want [429 429 200]", statuses)
	}

	fake.RateLimit(discordtest.RouteCreateMessage, discordtest.RateLimit{RetryAfter: wait})
	_, err := s.ChannelMessageSendComplex("3000", &discordgo.MessageSend{Content: "x", AllowedMentions: noMentions}, discordgo.WithRetryOnRatelimit(false))
	if rl, ok := errors.AsType[*discordgo.RateLimitError](err); !ok || rl.RetryAfter != wait {
		t.Errorf("send without retry = %v, want RateLimitError after %v", err, wait)
	}
}

func TestRateLimitHeaders(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{})
	fake.RateLimit(discordtest.RouteGateway, discordtest.RateLimit{RetryAfter: 1500 * time.Millisecond, Global: true})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://discord.com/api/v9/gateway", nil)
	req.Header.Set("Authorization", "Bot "+fake.Token())
	resp, err := fake.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 429 || h.Get("Retry-After") != "2" || h.Get("X-RateLimit-Reset-After") != "1.500" ||
		h.Get("X-RateLimit-Global") != "true" || h.Get("X-RateLimit-Scope") != "global" || h.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("429 headers = %v", h)
	}
	if _, err := strconv.ParseFloat(h.Get("X-RateLimit-Reset"), 64); err != nil {
		t.Errorf("X-RateLimit-Reset %q: %v", h.Get("X-RateLimit-Reset"), err)
	}
	if !strings.Contains(string(body), `"retry_after":1.5`) || !strings.Contains(string(body), `"global":true`) {
		t.Errorf("429 body = %s", body)
	}
}
