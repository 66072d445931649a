package discordtest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// ExampleServer shows the wiring an adapter needs: the session's HTTP client goes to the
// fake, and the fake's GET /gateway answer brings the websocket along.
func ExampleServer() {
	fake := discordtest.NewServer(discordtest.Options{BotUsername: "bridge"})
	defer fake.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	s, _ := discordgo.New("Bot " + fake.Token())
	s.Client = fake.Client()
	s.LogLevel = -1
	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages
	got := make(chan string, 1)
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageCreate) {
		if m.Author.ID == s.State.User.ID {
			return // the fake echoes the bot's own messages, as Discord does
		}
		s.ChannelMessageSendComplex(m.ChannelID, &discordgo.MessageSend{
			Content:         "hello " + m.Author.Username,
			Reference:       m.Reference(),
			AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}},
		})
		got <- m.Content
	})
	if err := s.Open(); err != nil { // guard with a timeout in real tests
		fmt.Println("open:", err)
		return
	}
	defer func() {
		// Under the lock: discordgo's listen goroutine reads the flag when the fake echoes
		// Close's close frame, and must not reconnect then.
		s.Lock()
		s.ShouldReconnectOnError = false
		s.Unlock()
		s.Close()
	}()

	fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "20", Author: discordgo.User{ID: "42", Username: "alice"}, Content: "hi"})
	fmt.Println("received:", <-got)
	reply, err := fake.WaitMessage(ctx, func(m discordtest.Message) bool { return m.ChannelID == "20" })
	fmt.Println("replied:", reply.Content, reply.Pings, err)
	// Output:
	// received: hi
	// replied: hello alice [] <nil>
}
