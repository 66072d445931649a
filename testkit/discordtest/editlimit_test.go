package discordtest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestEditLimitPerChannel: past MaxEditsPerChannel edits in EditWindow, an
// edit in the channel is answered 429 with retry_after; discordgo sleeps it
// and tries again, and the edit passes once the window has moved on.
// Another channel has a bucket of its own.
func TestEditLimitPerChannel(t *testing.T) {
	t.Parallel()
	clock := discordtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	fake := newFake(t, discordtest.Options{Now: clock.Now})
	for _, id := range []string{"3000", "3001"} {
		if err := fake.AddChannel(t.Context(), discordgo.Channel{ID: id, GuildID: "1", Type: discordgo.ChannelTypeGuildText, Name: "c" + id}); err != nil {
			t.Fatal(err)
		}
	}
	s := newSession(t, fake, 0)
	send := func(channel string) *discordgo.Message {
		t.Helper()
		m, err := s.ChannelMessageSendComplex(channel, &discordgo.MessageSend{Content: "first", AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}}, discordgo.WithContext(t.Context()))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	edit := func(channel, id, content string) error {
		_, err := s.ChannelMessageEditComplex(&discordgo.MessageEdit{Channel: channel, ID: id, Content: &content,
			AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}}, discordgo.WithContext(t.Context()))
		return err
	}
	m := send("3000")
	for i := range discordtest.MaxEditsPerChannel {
		if err := edit("3000", m.ID, fmt.Sprint("edit ", i)); err != nil {
			t.Fatalf("edit %d = %v", i, err)
		}
	}
	// Another channel is not held back.
	other := send("3001")
	if err := edit("3001", other.ID, "elsewhere"); err != nil {
		t.Fatalf("edit in another channel = %v", err)
	}

	// 0.2 s before the window of the first edit ends, the sixth is refused
	// with the time left; the clock then moves on while discordgo waits.
	clock.Advance(discordtest.EditWindow - 200*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		done <- edit("3000", m.ID, "sixth")
	}()
	refused, err := fake.WaitRequest(t.Context(), func(r discordtest.Request) bool {
		return r.Route == discordtest.RouteEditMessage && r.Status == http.StatusTooManyRequests
	})
	if err != nil {
		t.Fatal(err)
	}
	if refused.Error != "rate limited (edits per channel)" {
		t.Errorf("refusal = %q, want the edit limit's", refused.Error)
	}
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("sixth edit after the wait = %v", err)
	}
	if got, _ := fake.Message(m.ID); got.Content != "sixth" {
		t.Errorf("content = %q, want the sixth edit", got.Content)
	}
}
