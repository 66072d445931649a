package discordtest_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// connected returns a fake with a guild text channel "3000" in guild "1" and an open
// session with the bridge's intents.
func connected(t *testing.T, intents discordgo.Intent) (*discordtest.Server, *discordgo.Session) {
	t.Helper()
	fake := newFake(t, discordtest.Options{})
	if err := fake.AddChannel(t.Context(), discordgo.Channel{ID: "3000", GuildID: "1", Type: discordgo.ChannelTypeGuildText, Name: "general"}); err != nil {
		t.Fatalf("AddChannel: %v", err)
	}
	s := newSession(t, fake, intents)
	open(t, s)
	return fake, s
}

var alice = discordgo.User{ID: "42", Username: "alice"}

func restCode(err error) int {
	if re, ok := errors.AsType[*discordgo.RESTError](err); ok && re.Message != nil {
		return re.Message.Code
	}
	return -1
}

func restStatus(err error) int {
	if re, ok := errors.AsType[*discordgo.RESTError](err); ok {
		return re.Response.StatusCode
	}
	return -1
}

func TestSendMessageRecordedAndEchoed(t *testing.T) {
	t.Parallel()
	fake, s := connected(t, bridgeIntents)
	created := events[*discordgo.MessageCreate](s)
	user, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: alice, Content: "<@" + fake.BotUser().ID + "> hi", Roles: []string{"77"}})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	got := receive(t, created, "user MESSAGE_CREATE")
	if got.ID != user.ID || got.Author.ID != "42" || got.Content != user.Content || len(got.Mentions) != 1 || got.Mentions[0].ID != fake.BotUser().ID {
		t.Fatalf("user MESSAGE_CREATE = %+v, want id %s from 42 mentioning the bot", got.Message, user.ID)
	}
	if got.Member == nil || !slices.Equal(got.Member.Roles, []string{"77"}) {
		t.Errorf("member = %+v, want roles [77]", got.Member)
	}

	sent, err := s.ChannelMessageSendComplex("3000", &discordgo.MessageSend{
		Content: "reply @everyone <@&123> <@42>", AllowedMentions: noMentions, Reference: got.Reference(),
	})
	if err != nil {
		t.Fatalf("ChannelMessageSendComplex: %v", err)
	}
	m, err := fake.WaitMessage(ctx(t), func(m discordtest.Message) bool { return m.ID == sent.ID })
	if err != nil {
		t.Fatal(err)
	}
	if m.AllowedMentions == nil || m.AllowedMentions.Parse == nil || len(m.Pings) != 0 || m.Reference == nil || m.Reference.MessageID != user.ID {
		t.Errorf("stored message = %+v, want allowed_mentions parse [] , no pings, reply to %s", m, user.ID)
	}
	echo := receive(t, created, "echo MESSAGE_CREATE")
	if echo.ID != sent.ID || echo.Author.ID != s.State.User.ID || !echo.Author.Bot {
		t.Errorf("echo = %+v, want the bot's message %s", echo.Message, sent.ID)
	}
	if echo.ReferencedMessage == nil || echo.ReferencedMessage.ID != user.ID {
		t.Errorf("echo referenced_message = %+v, want %s", echo.ReferencedMessage, user.ID)
	}
}

func TestMessageRules(t *testing.T) {
	t.Parallel()
	fake, s := connected(t, bridgeIntents)
	tests := []struct {
		name    string
		channel string
		send    *discordgo.MessageSend
		status  int
		code    int
		pings   []string
	}{
		{"no allowed_mentions", "3000", &discordgo.MessageSend{Content: "hi"}, 400, 50035, nil},
		{"zero allowed_mentions pings nobody", "3000", &discordgo.MessageSend{Content: "@everyone", AllowedMentions: &discordgo.MessageAllowedMentions{}}, 200, 0, nil},
		{"parse everyone", "3000", &discordgo.MessageSend{Content: "@everyone <@&5>", AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{"everyone"}}}, 200, 0, []string{"everyone"}},
		{"explicit user", "3000", &discordgo.MessageSend{Content: "<@42> <@43>", AllowedMentions: &discordgo.MessageAllowedMentions{Users: []string{"42"}}}, 200, 0, []string{"user:42"}},
		{"users in parse and list", "3000", &discordgo.MessageSend{Content: "x", AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{"users"}, Users: []string{"42"}}}, 400, 50035, nil},
		{"2000 characters", "3000", &discordgo.MessageSend{Content: strings.Repeat("é", 2000), AllowedMentions: noMentions}, 200, 0, nil},
		{"2001 characters", "3000", &discordgo.MessageSend{Content: strings.Repeat("a", 2001), AllowedMentions: noMentions}, 400, 50035, nil},
		{"empty", "3000", &discordgo.MessageSend{AllowedMentions: noMentions}, 400, 50006, nil},
		{"ephemeral flag", "3000", &discordgo.MessageSend{Content: "x", AllowedMentions: noMentions, Flags: discordgo.MessageFlagsEphemeral}, 400, 50035, nil},
		{"unknown channel", "999", &discordgo.MessageSend{Content: "x", AllowedMentions: noMentions}, 404, 10003, nil},
		{"reply to unknown message", "3000", &discordgo.MessageSend{Content: "x", AllowedMentions: noMentions, Reference: &discordgo.MessageReference{MessageID: "1"}}, 400, 50035, nil},
		{"embed description too long", "3000", &discordgo.MessageSend{AllowedMentions: noMentions, Embeds: []*discordgo.MessageEmbed{{Description: strings.Repeat("a", 4097)}}}, 400, 50035, nil},
		{"embeds over 6000 in total", "3000", &discordgo.MessageSend{AllowedMentions: noMentions, Embeds: []*discordgo.MessageEmbed{{Description: strings.Repeat("a", 4000)}, {Description: strings.Repeat("a", 2001)}}}, 400, 50035, nil},
		{"embed without allowed_mentions", "3000", &discordgo.MessageSend{Embeds: []*discordgo.MessageEmbed{{Description: "x"}}}, 400, 50035, nil},
		{"button without custom_id", "3000", &discordgo.MessageSend{Content: "x", AllowedMentions: noMentions, Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.Button{Label: "Share", Style: discordgo.PrimaryButton}}}}}, 400, 50035, nil},
		{"button", "3000", &discordgo.MessageSend{Content: "x", AllowedMentions: noMentions, Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.Button{Label: "Share", Style: discordgo.PrimaryButton, CustomID: "share:1"}}}}}, 200, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := s.ChannelMessageSendComplex(tt.channel, tt.send)
			if tt.status != 200 {
				if restStatus(err) != tt.status || restCode(err) != tt.code {
					t.Fatalf("send = %v, want HTTP %d code %d", err, tt.status, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("send: %v", err)
			}
			stored, ok := fake.Message(m.ID)
			if !ok || !slices.Equal(stored.Pings, tt.pings) {
				t.Errorf("Pings = %q, want %q", stored.Pings, tt.pings)
			}
		})
	}
}

func TestEditMessage(t *testing.T) {
	t.Parallel()
	fake, s := connected(t, bridgeIntents)
	updates := events[*discordgo.MessageUpdate](s)
	m, err := s.ChannelMessageSendComplex("3000", &discordgo.MessageSend{Content: "…", AllowedMentions: noMentions})
	if err != nil {
		t.Fatal(err)
	}
	content := "done"
	if _, err := s.ChannelMessageEditComplex(&discordgo.MessageEdit{Channel: "3000", ID: m.ID, Content: &content}); restCode(err) != 50035 {
		t.Errorf("edit without allowed_mentions = %v, want code 50035", err)
	}
	if _, err := s.ChannelMessageEditComplex(&discordgo.MessageEdit{Channel: "3000", ID: m.ID, Content: &content, AllowedMentions: noMentions}); err != nil {
		t.Fatalf("edit: %v", err)
	}
	if got, _ := fake.Message(m.ID); got.Content != "done" || got.Edits != 1 {
		t.Errorf("after edit: %+v, want content done, 1 edit", got)
	}
	if u := receive(t, updates, "MESSAGE_UPDATE"); u.ID != m.ID || u.Content != "done" {
		t.Errorf("MESSAGE_UPDATE = %+v, want %s with done", u.Message, m.ID)
	}
	user, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: alice, Content: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ChannelMessageEditComplex(&discordgo.MessageEdit{Channel: "3000", ID: user.ID, Content: &content, AllowedMentions: noMentions}); restCode(err) != 50005 {
		t.Errorf("editing a user's message = %v, want code 50005", err)
	}
}

func TestMessageContentIntent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		intents discordgo.Intent
		guild   string
		channel string
		content string
		want    string
	}{
		{"guild message with intent", bridgeIntents, "1", "3000", "hello", "hello"},
		{"guild message without intent", bridgeIntents &^ discordgo.IntentMessageContent, "1", "3000", "hello", ""},
		{"mention without intent", bridgeIntents &^ discordgo.IntentMessageContent, "1", "3000", "<@" + discordtest.DefaultApplicationID + "> hello", "<@" + discordtest.DefaultApplicationID + "> hello"},
		{"DM without intent", bridgeIntents &^ discordgo.IntentMessageContent, "", "4000", "hello", "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake, s := connected(t, tt.intents)
			created := events[*discordgo.MessageCreate](s)
			if _, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: tt.channel, GuildID: tt.guild, Author: alice, Content: tt.content}); err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			if got := receive(t, created, "MESSAGE_CREATE"); got.Content != tt.want {
				t.Errorf("content = %q, want %q", got.Content, tt.want)
			}
		})
	}
}

func TestSendMessageNeedsIntent(t *testing.T) {
	t.Parallel()
	fake, _ := connected(t, discordgo.IntentsGuilds|discordgo.IntentsGuildMessages)
	_, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: "4000", Author: alice, Content: "dm"})
	if ie, ok := errors.AsType[*discordtest.IntentError](err); !ok || ie.Need != discordgo.IntentsDirectMessages {
		t.Errorf("SendMessage(DM) = %v, want an IntentError for DIRECT_MESSAGES", err)
	}
}

func TestTypingAndThreads(t *testing.T) {
	t.Parallel()
	fake, s := connected(t, bridgeIntents)
	threads := events[*discordgo.ThreadCreate](s)
	if err := s.ChannelTyping("3000"); err != nil {
		t.Fatalf("ChannelTyping: %v", err)
	}
	if n := fake.Typing("3000"); n != 1 {
		t.Errorf("Typing = %d, want 1", n)
	}
	user, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: alice, Content: "start"})
	if err != nil {
		t.Fatal(err)
	}
	th, err := s.MessageThreadStartComplex("3000", user.ID, &discordgo.ThreadStart{Name: "agent chat", AutoArchiveDuration: 1440})
	if err != nil {
		t.Fatalf("MessageThreadStartComplex: %v", err)
	}
	if th.ID != user.ID || th.ParentID != "3000" || th.Type != discordgo.ChannelTypeGuildPublicThread {
		t.Errorf("thread = %+v, want id %s, parent 3000, public", th, user.ID)
	}
	if ev := receive(t, threads, "THREAD_CREATE"); ev.ID != th.ID {
		t.Errorf("THREAD_CREATE %s, want %s", ev.ID, th.ID)
	}
	if ch, err := s.State.Channel(th.ID); err != nil || !ch.IsThread() || ch.ParentID != "3000" {
		t.Errorf("State.Channel(%s) = %+v, %v; want a thread of 3000", th.ID, ch, err)
	}
	if _, err := s.MessageThreadStartComplex("3000", user.ID, &discordgo.ThreadStart{Name: "again"}); restCode(err) != 160004 {
		t.Errorf("second thread = %v, want code 160004", err)
	}
	if _, err := s.ChannelMessageSendComplex(th.ID, &discordgo.MessageSend{Content: "in thread", AllowedMentions: noMentions}); err != nil {
		t.Errorf("send in thread: %v", err)
	}
	// A thread made by a user shows in state too.
	other, err := fake.SendThreadCreate(ctx(t), discordtest.Thread{GuildID: "1", ParentID: "3000", Name: "user thread", OwnerID: "42"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := receive(t, threads, "THREAD_CREATE"); ev.ID != other.ID || !ev.NewlyCreated {
		t.Errorf("THREAD_CREATE = %+v, want newly created %s", ev.Channel, other.ID)
	}
}

func TestAuthorization(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{})
	for _, token := range []string{"wrong", discordtest.DefaultToken} {
		s, _ := discordgo.New(token) // the second lacks "Bot "
		s.Client = fake.Client()
		if _, err := s.Gateway(); restStatus(err) != http.StatusUnauthorized {
			t.Errorf("Gateway() with %q = %v, want 401", token, err)
		}
	}
	if _, err := fake.Client().Get("https://example.com/"); err == nil {
		t.Error("Client().Get(example.com) succeeded, want refused")
	}
}

// TestSendAfterDeadlineKeepsConnection checks that a send whose context has
// ended fails alone: the gateway connection still carries the next event.
func TestSendAfterDeadlineKeepsConnection(t *testing.T) {
	t.Parallel()
	fake, s := connected(t, bridgeIntents)
	created := events[*discordgo.MessageCreate](s)
	expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := fake.SendMessage(expired, discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: alice, Content: "too late"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("SendMessage(expired context) = %v, want context.DeadlineExceeded", err)
	}
	if _, err := fake.SendMessage(ctx(t), discordtest.MessageCreate{ChannelID: "3000", GuildID: "1", Author: alice, Content: "in time"}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	if got := receive(t, created, "MESSAGE_CREATE after a failed send"); got.Content != "in time" {
		t.Errorf("MESSAGE_CREATE content %q, want \"in time\"", got.Content)
	}
}
