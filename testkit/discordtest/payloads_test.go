package discordtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/docshape"
)

// tapGateway opens a raw gateway connection, identifies, and keeps every frame as sent.
func tapGateway(t *testing.T, fake *discordtest.Server, identify map[string]any) *docshape.Tap {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.DialContext(ctx(t), fake.GatewayURL()+"/?v=9&encoding=json", nil)
	if err != nil {
		t.Fatalf("dial gateway: %v", err)
	}
	tap := docshape.NewTap(t, ws, nil)
	if err := ws.WriteJSON(map[string]any{"op": 2, "d": identify}); err != nil {
		t.Fatalf("identify: %v", err)
	}
	return tap
}

// dispatch matches a dispatch of type typ whose data contains marker.
func dispatch(typ, marker string) func([]byte) bool {
	return func(f []byte) bool {
		var fr gwFrame
		return json.Unmarshal(f, &fr) == nil && fr.T == typ && bytes.Contains(fr.D, []byte(marker))
	}
}

// frameShapes says which shapes a dispatch's data must have.
func frameShapes(typ string, d map[string]any) []string {
	switch typ {
	case "READY":
		return []string{"ready"}
	case "GUILD_CREATE":
		return []string{"guild", "guild_create"}
	case "CHANNEL_CREATE", "CHANNEL_UPDATE":
		return []string{"channel"}
	case "THREAD_CREATE":
		return []string{"channel", "thread_create"}
	case "MESSAGE_CREATE", "MESSAGE_UPDATE":
		out := []string{"message", "message_event"}
		_, guild := d["guild_id"]
		_, webhook := d["webhook_id"]
		if guild && !webhook {
			out = append(out, "message_event_guild")
		}
		return out
	case "MESSAGE_DELETE":
		return []string{"message_delete"}
	case "INTERACTION_CREATE":
		return []string{"interaction"}
	}
	return nil
}

// restRoutes says which shape each REST answer must have; "[]name" is an array of them.
var restRoutes = []struct {
	method string
	path   *regexp.Regexp
	shape  string
}{
	{"GET", regexp.MustCompile(`^/api/v9/gateway$`), "gateway"},
	{"GET", regexp.MustCompile(`^/api/v9/gateway/bot$`), "gateway_bot"},
	{"GET", regexp.MustCompile(`^/api/v9/users/@me$`), "user"},
	{"POST", regexp.MustCompile(`^/api/v9/users/@me/channels$`), "channel"},
	{"GET", regexp.MustCompile(`^/api/v9/channels/\d+$`), "channel"},
	{"POST", regexp.MustCompile(`^/api/v9/channels/\d+/messages$`), "message"},
	{"GET|PATCH", regexp.MustCompile(`^/api/v9/channels/\d+/messages/\d+$`), "message"},
	{"POST", regexp.MustCompile(`^/api/v9/channels/\d+/(messages/\d+/)?threads$`), "channel"},
	{"POST", regexp.MustCompile(`^/api/v9/webhooks/\d+/[^/]+$`), "message"},
	{"GET|PATCH", regexp.MustCompile(`^/api/v9/webhooks/\d+/[^/]+/messages/(@original|\d+)$`), "message"},
	{"GET|PUT", regexp.MustCompile(`^/api/v9/applications/\d+(/guilds/\d+)?/commands$`), "[]command"},
}

func restShape(e docshape.Exchange) (string, bool) {
	switch {
	case e.Status == http.StatusTooManyRequests:
		return "rate_limited", true
	case e.Status >= 400:
		return "error", true
	}
	for _, r := range restRoutes {
		if slices.Contains(strings.Split(r.method, "|"), e.Method) && r.path.MatchString(e.Path) {
			return r.shape, true
		}
	}
	return "", false
}

// TestPayloadsAsDocumented runs a representative session against the fake (the gateway read
// raw, REST through discordgo) and checks every frame the gateway sent and every REST answer
// against discordShapes: documented fields present, arrays and objects never null.
func TestPayloadsAsDocumented(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{})
	c := ctx(t)
	const guild, channel, dmUser = "1000000000000000001", "1000000000000000010", "42"
	if err := fake.AddChannel(c, discordgo.Channel{ID: channel, GuildID: guild, Type: discordgo.ChannelTypeGuildText, Name: "general"}); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.SendThreadCreate(c, discordtest.Thread{ID: "1000000000000000011", GuildID: guild, ParentID: channel, Name: "before"}); err != nil {
		t.Fatal(err)
	}
	tap := tapGateway(t, fake, map[string]any{"token": "Bot " + fake.Token(), "intents": bridgeIntents, "properties": map[string]string{}})
	tap.Wait(t, "GUILD_CREATE of the guild", dispatch("GUILD_CREATE", guild))
	if err := tap.WriteJSON(map[string]any{"op": 1, "d": 2}); err != nil {
		t.Fatal(err)
	}

	rec := docshape.NewRecorder(fake.Transport())
	s := newSession(t, fake, bridgeIntents)
	s.Client = &http.Client{Transport: rec, Timeout: 10 * time.Second}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	app := fake.ApplicationID()

	_, err := s.Gateway()
	must(err)
	_, err = s.GatewayBot()
	must(err)
	_, err = s.User("@me")
	must(err)
	must(fake.AddChannel(c, discordgo.Channel{ID: "1000000000000000012", GuildID: guild, Type: discordgo.ChannelTypeGuildText, Name: "later"}))
	must(fake.AddGuild(c, "2000000000000000001"))

	// Users' messages: a guild mention, a DM, a webhook's.
	mention, err := fake.SendMessage(c, discordtest.MessageCreate{ChannelID: channel, GuildID: guild, Author: alice, Content: "<@" + fake.BotUser().ID + "> hi", Roles: []string{"77"}})
	must(err)
	dm, err := fake.SendMessage(c, discordtest.MessageCreate{ChannelID: "1000000000000000020", Author: discordgo.User{ID: dmUser, Username: "alice"}, Content: "in a dm"})
	must(err)
	_, err = fake.SendMessage(c, discordtest.MessageCreate{ChannelID: channel, GuildID: guild, Author: discordgo.User{ID: "43", Username: "hook", Bot: true}, Content: "hooked", WebhookID: "44"})
	must(err)

	// The bot's messages: a reply with a button, a DM, an edit, a thread, typing.
	reply, err := s.ChannelMessageSendComplex(channel, &discordgo.MessageSend{
		Content: "reply", Reference: &discordgo.MessageReference{MessageID: mention.ID}, AllowedMentions: noMentions,
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Retry", Style: discordgo.PrimaryButton, CustomID: "retry:1"}}}},
	})
	must(err)
	_, err = s.ChannelMessageSendComplex(dm.ChannelID, &discordgo.MessageSend{Content: "dm reply", AllowedMentions: noMentions})
	must(err)
	_, err = s.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: reply.ID, Channel: channel, Content: ptr("edited"), AllowedMentions: noMentions})
	must(err)
	_, err = s.ChannelMessage(channel, reply.ID)
	must(err)
	must(s.ChannelTyping(channel))
	_, err = s.MessageThreadStartComplex(channel, mention.ID, &discordgo.ThreadStart{Name: "from message", AutoArchiveDuration: 1440})
	must(err)
	_, err = s.ThreadStartComplex(channel, &discordgo.ThreadStart{Name: "bare", Type: discordgo.ChannelTypeGuildPublicThread, AutoArchiveDuration: 60})
	must(err)
	for _, id := range []string{channel, dm.ChannelID, mention.ID} {
		_, err = s.Channel(id)
		must(err)
	}
	_, err = s.UserChannelCreate("45")
	must(err)

	// Commands and interactions.
	min := 1.0
	cmds := []*discordgo.ApplicationCommand{
		{Name: "run", Description: "Run a flow", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionString, Name: "flow", Description: "flow", Required: true, Autocomplete: true},
			{Type: discordgo.ApplicationCommandOptionInteger, Name: "count", Description: "count", MinValue: &min,
				Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "one", Value: 1}, {Name: "two", Value: 2}}},
		}},
		{Name: "ping", Description: "Ping"},
	}
	_, err = s.ApplicationCommandBulkOverwrite(app, guild, cmds)
	must(err)
	_, err = s.ApplicationCommandBulkOverwrite(app, "", cmds)
	must(err)
	_, err = s.ApplicationCommands(app, guild)
	must(err)

	cmd, err := fake.SendInteraction(c, discordtest.Interaction{GuildID: guild, ChannelID: channel, User: alice, Roles: []string{"77"},
		Data: discordgo.ApplicationCommandInteractionData{Name: "run", Options: []*discordgo.ApplicationCommandInteractionDataOption{
			{Name: "flow", Value: "summarize"}, {Name: "count", Value: 2.0}}}})
	must(err)
	in := &discordgo.Interaction{ID: cmd.ID, Token: cmd.Token, AppID: app, Type: discordgo.InteractionApplicationCommand}
	must(s.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}))
	_, err = s.InteractionResponseEdit(in, &discordgo.WebhookEdit{Content: ptr("done"), AllowedMentions: noMentions})
	must(err)
	_, err = s.InteractionResponse(in)
	must(err)
	follow, err := s.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: "more", AllowedMentions: noMentions})
	must(err)
	_, err = s.FollowupMessageEdit(in, follow.ID, &discordgo.WebhookEdit{Content: ptr("more, edited"), AllowedMentions: noMentions})
	must(err)
	must(s.FollowupMessageDelete(in, follow.ID))

	dmCmd, err := fake.SendInteraction(c, discordtest.Interaction{ChannelID: dm.ChannelID, User: discordgo.User{ID: dmUser, Username: "alice"},
		Data: discordgo.ApplicationCommandInteractionData{Name: "ping"}})
	must(err)
	must(s.InteractionRespond(&discordgo.Interaction{ID: dmCmd.ID, Token: dmCmd.Token, AppID: app, Type: discordgo.InteractionApplicationCommand},
		&discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource, Data: &discordgo.InteractionResponseData{Content: "pong", AllowedMentions: noMentions}}))
	auto, err := fake.SendInteraction(c, discordtest.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, GuildID: guild, ChannelID: channel, User: alice,
		Data: discordgo.ApplicationCommandInteractionData{Name: "run", Options: []*discordgo.ApplicationCommandInteractionDataOption{{Name: "flow", Value: "su", Focused: true}}}})
	must(err)
	must(s.InteractionRespond(&discordgo.Interaction{ID: auto.ID, Token: auto.Token, AppID: app, Type: discordgo.InteractionApplicationCommandAutocomplete},
		&discordgo.InteractionResponse{Type: discordgo.InteractionApplicationCommandAutocompleteResult, Data: &discordgo.InteractionResponseData{
			Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "summarize", Value: "summarize"}}}}))
	press, err := fake.SendInteraction(c, discordtest.Interaction{GuildID: guild, ChannelID: channel, User: alice, MessageID: reply.ID,
		Data: discordgo.MessageComponentInteractionData{CustomID: "retry:1"}})
	must(err)
	must(s.InteractionRespond(&discordgo.Interaction{ID: press.ID, Token: press.Token, AppID: app, Type: discordgo.InteractionMessageComponent},
		&discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage, Data: &discordgo.InteractionResponseData{Content: "retrying", AllowedMentions: noMentions}}))

	// Refusals: an unknown channel, a scripted rate limit.
	if _, err := s.Channel("9"); restStatus(err) != http.StatusNotFound {
		t.Fatalf("Channel(9) = %v, want 404", err)
	}
	fake.RateLimit(discordtest.RouteTyping, discordtest.RateLimit{RetryAfter: 100 * time.Millisecond})
	if err := s.ChannelTyping(channel, discordgo.WithRetryOnRatelimit(false)); err == nil {
		t.Fatal("ChannelTyping under a scripted rate limit succeeded")
	}
	must(s.ChannelMessageDelete(channel, reply.ID))

	// Frames on one connection arrive in order: once this one is in, all are.
	_, err = fake.SendMessage(c, discordtest.MessageCreate{ChannelID: channel, GuildID: guild, Author: alice, Content: "<@" + fake.BotUser().ID + "> the end"})
	must(err)
	tap.Wait(t, "MESSAGE_CREATE of the end", dispatch("MESSAGE_CREATE", "the end"))

	check := docshape.New(discordShapes)
	types := map[string]int{}
	for i, raw := range tap.All() {
		where := fmt.Sprintf("frame %d", i)
		f, _ := docshape.DecodeJSON(t, where, raw).(map[string]any)
		check.Check(where, f, "frame")
		op, _ := f["op"].(float64)
		switch op {
		case 10:
			check.Check(where+" HELLO", f["d"], "hello")
		case 11:
			if f["d"] != nil {
				check.Fail("%s: HEARTBEAT_ACK d = %v, want null", where, f["d"])
			}
		case 0:
			typ, _ := f["t"].(string)
			types[typ]++
			d, _ := f["d"].(map[string]any)
			shapes := frameShapes(typ, d)
			if shapes == nil {
				check.Fail("%s: dispatch %s has no shapes in the table", where, typ)
			}
			check.Check(where+" "+typ, d, shapes...)
			if typ == "MESSAGE_CREATE" {
				want := 0.0
				if _, ok := d["guild_id"]; !ok {
					want = 1
				}
				if got, _ := d["channel_type"].(float64); got != want {
					check.Fail("%s: channel_type %v, want %v", where, d["channel_type"], want)
				}
			}
			if typ == "INTERACTION_CREATE" {
				owners, _ := d["authorizing_integration_owners"].(map[string]any)
				want := "0"
				if g, ok := d["guild_id"].(string); ok {
					want = g
				}
				if owners["0"] != want {
					check.Fail("%s: authorizing_integration_owners %v, want {\"0\": %q}", where, owners, want)
				}
			}
		}
	}
	routes := 0
	for i, e := range rec.Exchanges() {
		where := fmt.Sprintf("REST %d %s %s %d", i, e.Method, e.Path, e.Status)
		if e.Status == http.StatusNoContent {
			if len(e.Body) != 0 {
				check.Fail("%s: body %q, want none", where, e.Body)
			}
			continue
		}
		shape, ok := restShape(e)
		if !ok {
			check.Fail("%s: no shape in the table", where)
			continue
		}
		routes++
		check.Check(where, docshape.DecodeJSON(t, where, e.Body), shape)
	}
	for _, typ := range []string{"READY", "GUILD_CREATE", "CHANNEL_CREATE", "THREAD_CREATE", "MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_DELETE", "INTERACTION_CREATE"} {
		if types[typ] == 0 {
			t.Errorf("the scenario sent no %s", typ)
		}
	}
	for _, e := range check.Errs() {
		t.Error(e)
	}
	t.Logf("checked %d gateway frames (%v) and %d REST answers; shapes used: %v", len(tap.All()), types, routes, check.Seen())
}

func ptr[T any](v T) *T { return &v }
