package discordtest_test

import (
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// TestRESTContentNeedsIntent: reading messages over REST, an app without the
// message content intent sees others' guild messages blank, unless they
// mention it; with the intent it sees them whole.
func TestRESTContentNeedsIntent(t *testing.T) {
	t.Parallel()
	base := discordgo.IntentsGuilds | discordgo.IntentsGuildMessages
	for _, tt := range []struct {
		name    string
		intents discordgo.Intent
		want    string
	}{
		{"without the intent", base, ""},
		{"with the intent", base | discordgo.IntentMessageContent, "secret plans"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake, s := connected(t, tt.intents)
			c := ctx(t)
			ann := discordgo.User{ID: "42", Username: "ann"}
			plain, err := fake.SendMessage(c, discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: ann, Content: "secret plans"})
			if err != nil {
				t.Fatal(err)
			}
			pinged, err := fake.SendMessage(c, discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: ann, Content: "<@" + fake.BotUser().ID + "> hi"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.ChannelMessage("3000", plain.ID, discordgo.WithContext(c))
			if err != nil || got.Content != tt.want {
				t.Errorf("GET message = %q, %v; want %q", got.Content, err, tt.want)
			}
			list, err := s.ChannelMessages("3000", 10, "", "", "", discordgo.WithContext(c))
			if err != nil || len(list) != 2 || list[1].Content != tt.want || list[0].Content == "" {
				t.Errorf("history = %d messages, %v; want the plain one %q and the mention whole", len(list), err, tt.want)
			}
			if m, _ := s.ChannelMessage("3000", pinged.ID, discordgo.WithContext(c)); m == nil || m.Content == "" {
				t.Error("a message mentioning the app came back blank")
			}
		})
	}
}
