package discordtest_test

import (
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
)

// flowCommand is a /flow command shaped like the bridge's.
var flowCommand = &discordgo.ApplicationCommand{
	Name: "flow", Description: "Run a flow",
	Options: []*discordgo.ApplicationCommandOption{{
		Type: discordgo.ApplicationCommandOptionSubCommand, Name: "healthcheck", Description: "Check a service",
		Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionString, Name: "host", Description: "Host", Required: true, Autocomplete: true},
			{Type: discordgo.ApplicationCommandOptionString, Name: "service", Description: "Service", Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "nginx", Value: "nginx"}, {Name: "db", Value: "db"}}},
		},
	}},
}

func healthcheck(host, service string) discordgo.ApplicationCommandInteractionData {
	opts := []*discordgo.ApplicationCommandInteractionDataOption{{Name: "host", Value: host}}
	if service != "" {
		opts = append(opts, &discordgo.ApplicationCommandInteractionDataOption{Name: "service", Value: service})
	}
	return discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{{Name: "healthcheck", Options: opts}}}
}

// interactionFake is a fake on a settable clock, with /flow registered in guild 1 and an
// open session.
func interactionFake(t *testing.T) (*discordtest.Server, *discordgo.Session, *discordtest.Clock) {
	t.Helper()
	clock := discordtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	fake := newFake(t, discordtest.Options{Now: clock.Now})
	if err := fake.AddChannel(t.Context(), discordgo.Channel{ID: "3000", GuildID: "1", Type: discordgo.ChannelTypeGuildText}); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, fake, bridgeIntents)
	open(t, s)
	if _, err := s.ApplicationCommandBulkOverwrite(fake.ApplicationID(), "1", []*discordgo.ApplicationCommand{flowCommand}); err != nil {
		t.Fatalf("ApplicationCommandBulkOverwrite: %v", err)
	}
	return fake, s, clock
}

func TestDeferThenEditOriginal(t *testing.T) {
	t.Parallel()
	fake, s, _ := interactionFake(t)
	created := events[*discordgo.InteractionCreate](s)
	sent, err := fake.SendInteraction(ctx(t), discordtest.Interaction{GuildID: "1", ChannelID: "3000", User: alice, Roles: []string{"77"}, Data: healthcheck("web1", "nginx")})
	if err != nil {
		t.Fatalf("SendInteraction: %v", err)
	}
	ic := receive(t, created, "INTERACTION_CREATE")
	data := ic.ApplicationCommandData()
	sub := data.Options[0]
	if ic.ID != sent.ID || ic.Member == nil || ic.Member.User.ID != "42" || ic.Member.Roles[0] != "77" ||
		sub.Name != "healthcheck" || sub.GetOption("host").StringValue() != "web1" || data.ID == "" {
		t.Fatalf("INTERACTION_CREATE = %+v, data %+v; want /flow healthcheck host web1 by member 42", ic.Interaction, data)
	}

	err = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral},
	})
	if err != nil {
		t.Fatalf("InteractionRespond: %v", err)
	}
	if orig, ok := fake.OriginalResponse(sent.ID); !ok || !orig.Loading() || !orig.Ephemeral() {
		t.Errorf("original after defer = %+v, want an ephemeral loading message", orig)
	}
	content := "Checked web1 nginx"
	if _, err := s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{Content: &content, AllowedMentions: noMentions}); err != nil {
		t.Fatalf("InteractionResponseEdit: %v", err)
	}
	m, err := fake.WaitMessage(ctx(t), func(m discordtest.Message) bool { return m.InteractionID == sent.ID && m.Content == content })
	if err != nil {
		t.Fatal(err)
	}
	if m.Loading() || !m.Ephemeral() || m.Edits != 1 || m.Source != discordtest.SourceInteraction {
		t.Errorf("original after edit = %+v, want ephemeral, not loading, 1 edit", m)
	}
	r, err := fake.WaitInteractionResponse(ctx(t), sent.ID)
	if err != nil || r.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || r.Data.Flags != discordgo.MessageFlagsEphemeral {
		t.Errorf("WaitInteractionResponse = %+v, %v; want type 5 ephemeral", r, err)
	}
}

func TestInteractionDeadlines(t *testing.T) {
	t.Parallel()
	deferred := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}
	fake, s, clock := interactionFake(t)
	send := func(t *testing.T) *discordgo.Interaction {
		t.Helper()
		sent, err := fake.SendInteraction(ctx(t), discordtest.Interaction{GuildID: "1", ChannelID: "3000", User: alice, Data: healthcheck("web1", "")})
		if err != nil {
			t.Fatalf("SendInteraction: %v", err)
		}
		return &discordgo.Interaction{ID: sent.ID, Token: sent.Token, AppID: fake.ApplicationID()}
	}

	t.Run("second acknowledgement", func(t *testing.T) {
		i := send(t)
		if err := s.InteractionRespond(i, deferred); err != nil {
			t.Fatalf("first InteractionRespond: %v", err)
		}
		err := s.InteractionRespond(i, deferred)
		if restCode(err) != discordtest.CodeAlreadyAcknowledged || restStatus(err) != 400 {
			t.Fatalf("second InteractionRespond = %v, want 400 code 40060", err)
		}
		rs := fake.InteractionResponses(i.ID)
		if len(rs) != 2 || rs[0].Code != 0 || rs[1].Code != discordtest.CodeAlreadyAcknowledged {
			t.Errorf("InteractionResponses = %+v, want accepted then 40060", rs)
		}
	})
	t.Run("late acknowledgement", func(t *testing.T) {
		i := send(t)
		clock.Advance(3*time.Second + time.Millisecond)
		err := s.InteractionRespond(i, deferred)
		if restCode(err) != discordtest.CodeUnknownInteraction || restStatus(err) != 404 {
			t.Fatalf("late InteractionRespond = %v, want 404 code 10062", err)
		}
	})
	t.Run("edit after token expiry", func(t *testing.T) {
		i := send(t)
		if err := s.InteractionRespond(i, deferred); err != nil {
			t.Fatal(err)
		}
		content := "late"
		clock.Advance(14 * time.Minute)
		if _, err := s.InteractionResponseEdit(i, &discordgo.WebhookEdit{Content: &content, AllowedMentions: noMentions}); err != nil {
			t.Fatalf("edit at 14 minutes: %v", err)
		}
		clock.Advance(time.Minute + time.Millisecond)
		_, err := s.InteractionResponseEdit(i, &discordgo.WebhookEdit{Content: &content, AllowedMentions: noMentions})
		if restCode(err) != discordtest.CodeInvalidWebhookToken || restStatus(err) != 401 {
			t.Errorf("edit after 15 minutes = %v, want 401 code 50027", err)
		}
		_, err = s.FollowupMessageCreate(i, true, &discordgo.WebhookParams{Content: content, AllowedMentions: noMentions})
		if restCode(err) != discordtest.CodeInvalidWebhookToken {
			t.Errorf("follow-up after 15 minutes = %v, want code 50027", err)
		}
	})
	t.Run("edit before acknowledgement", func(t *testing.T) {
		i := send(t)
		content := "x"
		if _, err := s.InteractionResponseEdit(i, &discordgo.WebhookEdit{Content: &content, AllowedMentions: noMentions}); restCode(err) != discordtest.CodeUnknownMessage {
			t.Errorf("edit before ack = %v, want code 10008", err)
		}
		if _, err := s.FollowupMessageCreate(i, true, &discordgo.WebhookParams{Content: content, AllowedMentions: noMentions}); restCode(err) != discordtest.CodeUnknownWebhook {
			t.Errorf("follow-up before ack = %v, want code 10015", err)
		}
	})
	t.Run("wrong callback type", func(t *testing.T) {
		i := send(t)
		err := s.InteractionRespond(i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate})
		if restCode(err) != discordtest.CodeInvalidFormBody {
			t.Errorf("type 6 for a command = %v, want code 50035", err)
		}
		if err := s.InteractionRespond(i, deferred); err != nil {
			t.Errorf("type 5 after a refused callback: %v", err)
		}
	})
}

func TestFollowupsAndShareButton(t *testing.T) {
	t.Parallel()
	fake, s, _ := interactionFake(t)
	created := events[*discordgo.InteractionCreate](s)
	messages := events[*discordgo.MessageCreate](s)
	sent, err := fake.SendInteraction(ctx(t), discordtest.Interaction{GuildID: "1", ChannelID: "3000", User: alice, Data: healthcheck("web1", "db")})
	if err != nil {
		t.Fatal(err)
	}
	ic := receive(t, created, "command")
	if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral},
	}); err != nil {
		t.Fatal(err)
	}
	share := discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.Button{Label: "Share with channel", Style: discordgo.SecondaryButton, CustomID: "share:abc"}}}
	// The first follow-up after a deferral fills the "thinking" message.
	first, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "result", AllowedMentions: noMentions, Components: []discordgo.MessageComponent{share}})
	if err != nil {
		t.Fatalf("FollowupMessageCreate: %v", err)
	}
	orig, _ := fake.OriginalResponse(sent.ID)
	if first.ID != orig.ID || orig.Content != "result" || !orig.Ephemeral() || len(orig.Buttons()) != 1 {
		t.Fatalf("first follow-up %s, original %+v; want the ephemeral original filled with a button", first.ID, orig)
	}
	second, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "more", AllowedMentions: noMentions})
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == orig.ID {
		t.Errorf("second follow-up edited the original, want a new message")
	}
	if fm, _ := fake.Message(second.ID); fm.Source != discordtest.SourceFollowup || fm.Ephemeral() {
		t.Errorf("second follow-up = %+v, want a public follow-up", fm)
	}
	if echo := receive(t, messages, "follow-up echo"); echo.ID != second.ID {
		t.Errorf("echo %s, want the public follow-up %s (ephemeral messages are not echoed)", echo.ID, second.ID)
	}

	press, err := fake.SendInteraction(ctx(t), discordtest.Interaction{GuildID: "1", ChannelID: "3000", User: alice, MessageID: orig.ID, Data: discordgo.MessageComponentInteractionData{CustomID: "share:abc"}})
	if err != nil {
		t.Fatalf("SendInteraction(button): %v", err)
	}
	bc := receive(t, created, "button")
	if bc.Type != discordgo.InteractionMessageComponent || bc.MessageComponentData().CustomID != "share:abc" || bc.Message == nil || bc.Message.ID != orig.ID || len(bc.Message.Components) != 1 {
		t.Fatalf("button interaction = %+v, want share:abc on %s", bc.Interaction, orig.ID)
	}
	if err := s.InteractionRespond(bc.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}); err != nil {
		t.Fatalf("type 6: %v", err)
	}
	if err := s.InteractionResponseDelete(bc.Interaction); err != nil {
		t.Fatalf("InteractionResponseDelete: %v", err)
	}
	if m, _ := fake.Message(orig.ID); !m.Deleted {
		t.Errorf("ephemeral result not deleted after dismiss")
	}
	if _, err := fake.SendInteraction(ctx(t), discordtest.Interaction{GuildID: "1", ChannelID: "3000", User: alice, MessageID: orig.ID, Data: discordgo.MessageComponentInteractionData{CustomID: "nope"}}); err == nil {
		t.Errorf("SendInteraction with an unknown custom_id succeeded")
	}
	if rs := fake.InteractionResponses(press.ID); len(rs) != 1 {
		t.Errorf("button responses = %+v, want one", rs)
	}
}

func TestAutocompleteAndUpdate(t *testing.T) {
	t.Parallel()
	fake, s, _ := interactionFake(t)
	created := events[*discordgo.InteractionCreate](s)
	data := healthcheck("we", "")
	data.Options[0].Options[0].Focused = true
	if _, err := fake.SendInteraction(ctx(t), discordtest.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, ChannelID: "4000", User: alice, Data: data}); err == nil {
		t.Errorf("autocomplete of a guild command in a DM succeeded, want refused")
	}
	if _, err := fake.SendInteraction(ctx(t), discordtest.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, GuildID: "1", ChannelID: "3000", User: alice, Data: data}); err != nil {
		t.Fatal(err)
	}
	ac := receive(t, created, "autocomplete")
	focused := ac.ApplicationCommandData().Options[0].Options[0]
	if !focused.Focused || focused.Value != "we" {
		t.Fatalf("focused option = %+v, want host we", focused)
	}
	choices := make([]*discordgo.ApplicationCommandOptionChoice, 26)
	for i := range choices {
		choices[i] = &discordgo.ApplicationCommandOptionChoice{Name: "web", Value: "web"}
	}
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionApplicationCommandAutocompleteResult, Data: &discordgo.InteractionResponseData{Choices: choices}}
	if err := s.InteractionRespond(ac.Interaction, resp); restCode(err) != discordtest.CodeInvalidFormBody {
		t.Errorf("26 choices = %v, want code 50035", err)
	}
	resp.Data.Choices = choices[:1]
	if err := s.InteractionRespond(ac.Interaction, resp); err != nil {
		t.Errorf("one choice: %v", err)
	}

	for _, bad := range []discordgo.ApplicationCommandInteractionData{
		healthcheck("web1", "redis"), // not a registered choice
		{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{{Name: "healthcheck"}}}, // required host missing
		{Name: "nope"},
	} {
		if _, err := fake.SendInteraction(ctx(t), discordtest.Interaction{GuildID: "1", ChannelID: "3000", User: alice, Data: bad}); err == nil {
			t.Errorf("SendInteraction(%+v) succeeded, want refused as Discord's client would", bad)
		}
	}

	// A button answered with type 7 updates its message in place.
	m, err := s.ChannelMessageSendComplex("3000", &discordgo.MessageSend{Content: "confirm?", AllowedMentions: noMentions, Components: []discordgo.MessageComponent{
		discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.Button{Label: "OK", Style: discordgo.PrimaryButton, CustomID: "confirm"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.SendInteraction(ctx(t), discordtest.Interaction{GuildID: "1", ChannelID: "3000", User: alice, MessageID: m.ID, Data: discordgo.MessageComponentInteractionData{CustomID: "confirm"}}); err != nil {
		t.Fatal(err)
	}
	bc := receive(t, created, "button")
	err = s.InteractionRespond(bc.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage, Data: &discordgo.InteractionResponseData{
		Content: "confirmed", AllowedMentions: noMentions, Components: []discordgo.MessageComponent{},
	}})
	if err != nil {
		t.Fatalf("type 7: %v", err)
	}
	if got, _ := fake.Message(m.ID); got.Content != "confirmed" || len(got.Components) != 0 || got.Edits != 1 {
		t.Errorf("message after type 7 = %+v, want confirmed without buttons", got)
	}
}
