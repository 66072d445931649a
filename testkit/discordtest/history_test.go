package discordtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestHistory: discordgo reads a channel's history as Discord serves it:
// after an ID, at most limit (1 to 100) messages, newest first; a limit out
// of range is refused; past MaxHistoryPerChannel reads in HistoryWindow the
// channel's bucket answers 429, which discordgo waits out.
func TestHistory(t *testing.T) {
	t.Parallel()
	clock := discordtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	fake := newFake(t, discordtest.Options{Now: clock.Now})
	if err := fake.AddChannel(t.Context(), discordgo.Channel{ID: "3000", GuildID: "1", Type: discordgo.ChannelTypeGuildText, Name: "c"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 120 {
		id := strconv.Itoa(5000 + i)
		if _, err := fake.SendMessage(t.Context(), discordtest.MessageCreate{ID: id, ChannelID: "3000", GuildID: "1", Author: discordgo.User{ID: "42", Username: "ann"}, Content: fmt.Sprint("m", i)}); err != nil && !errors.Is(err, discordtest.ErrNoSession) {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	s := newSession(t, fake, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got, err := s.ChannelMessages("3000", 100, "", ids[9], "", discordgo.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 || got[0].ID != ids[109] || got[99].ID != ids[10] {
		t.Fatalf("100 after %s: %d messages, first %s, last %s; want %s down to %s", ids[9], len(got), got[0].ID, got[len(got)-1].ID, ids[109], ids[10])
	}
	if got, err := s.ChannelMessages("3000", 0, "", ids[115], "", discordgo.WithContext(ctx)); err != nil || len(got) != 4 || got[0].ID != ids[119] {
		t.Fatalf("after %s = %d messages, %v; want the 4 newest", ids[115], len(got), err)
	}
	if _, err := s.ChannelMessages("3000", 101, "", "", "", discordgo.WithContext(ctx)); err == nil {
		t.Fatal("limit 101 accepted")
	}
	// Three reads so far counted (the refused one too): two more pass, the
	// sixth waits for the bucket.
	for range 2 {
		if _, err := s.ChannelMessages("3000", 1, "", "", "", discordgo.WithContext(ctx)); err != nil {
			t.Fatal(err)
		}
	}
	// 0.2 s before the first read's window ends, the sixth is refused with
	// the time left; the clock then moves on while discordgo waits.
	clock.Advance(discordtest.HistoryWindow - 200*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := s.ChannelMessages("3000", 1, "", "", "", discordgo.WithContext(ctx))
		done <- err
	}()
	refused, err := fake.WaitRequest(ctx, func(r discordtest.Request) bool {
		return r.Route == discordtest.RouteListMessages && r.Status == http.StatusTooManyRequests
	})
	if err != nil {
		t.Fatal(err)
	}
	if refused.Error != "rate limited (history reads per channel)" {
		t.Errorf("refusal = %q, want the history limit's", refused.Error)
	}
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("read after the wait = %v", err)
	}
}

// TestHistoryAnchorsAndGuildCreate: before and around read as Discord does
// (before: the newest limit below the ID; around: limit centred on it,
// the ID included), newest first; and GUILD_CREATE gives each channel its
// last_message_id, and joined_at is when the bot joined the guild, not
// when the session started: what a catch-up after downtime starts from.
func TestHistoryAnchorsAndGuildCreate(t *testing.T) {
	t.Parallel()
	joined := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := discordtest.NewClock(joined)
	fake := newFake(t, discordtest.Options{Now: clock.Now})
	if err := fake.AddChannel(t.Context(), discordgo.Channel{ID: "3000", GuildID: "1", Type: discordgo.ChannelTypeGuildText, Name: "c"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	for i := range 10 {
		if _, err := fake.SendMessage(t.Context(), discordtest.MessageCreate{ID: strconv.Itoa(5000 + i), ChannelID: "3000", GuildID: "1", Author: discordgo.User{ID: "42", Username: "ann"}, Content: fmt.Sprint("m", i)}); err != nil && !errors.Is(err, discordtest.ErrNoSession) {
			t.Fatal(err)
		}
	}
	s := newSession(t, fake, bridgeIntents)
	ids := func(msgs []*discordgo.Message) string {
		var out []string
		for _, m := range msgs {
			out = append(out, m.ID)
		}
		return fmt.Sprint(out)
	}
	for _, tt := range []struct {
		before, around string
		want           string
	}{
		{before: "5005", want: "[5004 5003 5002]"},
		{before: "5001", want: "[5000]"},
		{around: "5005", want: "[5006 5005 5004]"},
	} {
		got, err := s.ChannelMessages("3000", 3, tt.before, "", tt.around, discordgo.WithContext(ctx(t)))
		if err != nil || ids(got) != tt.want {
			t.Errorf("ChannelMessages(limit 3, before %q, around %q) = %s, %v; want %s", tt.before, tt.around, ids(got), err, tt.want)
		}
	}
	guilds := events[*discordgo.GuildCreate](s)
	open(t, s)
	g := receive(t, guilds, "GUILD_CREATE")
	if !g.JoinedAt.Equal(joined) {
		t.Errorf("joined_at = %v, want %v (when the guild was added)", g.JoinedAt, joined)
	}
	if len(g.Channels) != 1 || g.Channels[0].LastMessageID != "5009" {
		t.Errorf("GUILD_CREATE channels = %+v, want 3000 with last_message_id 5009", g.Channels)
	}
}
