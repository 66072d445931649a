package slacktest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/testkit/docshape"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// socketTap is a raw Socket Mode connection that keeps every frame as sent and acks every
// tapSocket opens a raw Socket Mode connection that keeps every frame as
// sent and acks every envelope.
func tapSocket(t *testing.T, api *slack.Client) *docshape.Tap {
	t.Helper()
	_, wsURL, err := api.StartSocketModeContext(timeout(t))
	if err != nil {
		t.Fatalf("apps.connections.open: %v", err)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(timeout(t), wsURL, http.Header{"Origin": {"https://api.slack.com"}})
	if err != nil {
		t.Fatalf("dial %s: %v", wsURL, err)
	}
	return docshape.NewTap(t, ws, func(ws *websocket.Conn, data []byte) error {
		var env struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(data, &env) == nil && env.EnvelopeID != "" {
			return ws.WriteJSON(env)
		}
		return nil
	})
}

// frameType matches a frame of type typ.
func frameType(typ string) func([]byte) bool {
	return func(f []byte) bool {
		var fr struct {
			Type string `json:"type"`
		}
		return json.Unmarshal(f, &fr) == nil && fr.Type == typ
	}
}

// payloadShape says which shape an envelope's (or HTTP request's) payload must have.
func payloadShape(envelopeType string, payload map[string]any) string {
	switch envelopeType {
	case slacktest.TypeEventsAPI:
		return "event_callback"
	case slacktest.TypeSlashCommands:
		return "slash_command"
	case slacktest.TypeInteractive:
		switch payload["type"] {
		case "block_actions":
			if c, _ := payload["container"].(map[string]any); c["type"] == "view" {
				return "view_block_actions"
			}
			return "block_actions"
		case "view_submission", "message_action":
			return payload["type"].(string)
		}
	}
	return ""
}

// TestPayloadsAsDocumented runs a representative session against the fake (Socket Mode
// read raw, the Web API through slack-go, the HTTP-mode bodies as built) and checks every
// frame, envelope, body and Web API answer against slackShapes: documented fields present,
// arrays and objects never null.
func TestPayloadsAsDocumented(t *testing.T) {
	srv := newServer(t, slacktest.Options{
		Channels: []slacktest.Channel{{ID: "C1", Name: "general"}, {ID: "G1", Name: "private"}, {ID: "D1", IsIM: true}},
		UserGroups: []slacktest.UserGroup{
			{ID: "S1", Handle: "oncall", Name: "On call", Users: []string{"U1", "U2"}},
			{ID: "S2", Handle: "empty", Name: "Nobody"},
		},
	})
	ctx := timeout(t)
	rec := docshape.NewRecorder(srv.Client().Transport)
	api := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionAppLevelToken(srv.AppToken()),
		slack.OptionHTTPClient(&http.Client{Transport: rec, Timeout: 10 * time.Second}))
	tap := tapSocket(t, api)
	tap.Wait(t, "hello frame", frameType("hello"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	sent := func(d slacktest.Delivery, err error) slacktest.Delivery {
		t.Helper()
		must(err)
		return d
	}

	// Events: users' messages in each kind of conversation, a thread, edits, bots, joins.
	root := sent(srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "hello"}))
	sent(srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U2", Text: "reply", ThreadTS: root.TS}))
	sent(srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "D1", User: "U1", Text: "dm"}))
	sent(srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "G1", User: "U1", Text: "private"}))
	sent(srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", TS: root.TS, Text: "hello!", PreviousText: "hello", Subtype: "message_changed"}))
	sent(srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U9", BotID: "B9", Subtype: "bot_message", Text: "beep"}))
	sent(srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U3", Subtype: "channel_join", Text: "<@U3> has joined the channel"}))
	sent(srv.SendAppMention(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "status?"}))
	_, _, err := srv.SendBoth(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "both"})
	must(err)
	sent(srv.SendEvent(ctx, map[string]any{"type": "reaction_added", "user": "U1", "reaction": "eyes",
		"item": map[string]any{"type": "message", "channel": "C1", "ts": root.TS}, "item_user": "U1"}))
	sent(srv.Redeliver(ctx, root.EnvelopeID))
	thread := sent(srv.SendAssistantThreadStarted(ctx, slacktest.AssistantThreadEvent{User: "U1", Channel: "D1", ContextChannel: "C1"}))
	sent(srv.SendAssistantThreadContextChanged(ctx, slacktest.AssistantThreadEvent{User: "U1", Channel: "D1", ThreadTS: thread.TS}))
	sent(srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "D1", User: "U1", Text: "in the assistant thread", ThreadTS: thread.TS}))

	// The app's messages, and what users do with them.
	blocks := slack.MsgOptionBlocks(
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*answer*", false, false), nil, nil),
		slack.NewActionBlock("share_actions", slack.NewButtonBlockElement("share", "result-1", slack.NewTextBlockObject(slack.PlainTextType, "Share", false, false))),
	)
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("answer", false), slack.MsgOptionTS(root.TS), blocks)
	must(err)
	posted, ok := srv.Message("C1", ts)
	if !ok {
		t.Fatalf("Message(C1, %s) not found", ts)
	}
	sent(srv.SendEcho(ctx, posted))
	sent(srv.PressButton(ctx, posted, "share", "U1"))
	_, err = api.PostEphemeralContext(ctx, "C1", "U1", slack.MsgOptionText("only you", false), blocks)
	must(err)
	msgs := srv.Messages()
	ephemeral := msgs[len(msgs)-1]
	press := sent(srv.PressButton(ctx, ephemeral, "share", "U1"))
	_, _, err = api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(press.ResponseURL, slack.ResponseTypeInChannel), slack.MsgOptionText("shared", false))
	must(err)
	cmd := sent(srv.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "run", UserID: "U1", ChannelID: "C1"}))
	_, _, err = api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cmd.ResponseURL, slack.ResponseTypeEphemeral), slack.MsgOptionText("done", false))
	must(err)
	// A modal: opened with the command's trigger, updated, chosen in, submitted; a message shortcut.
	modalView := slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject(slack.PlainTextType, "Run a flow", false, false),
		Submit: slack.NewTextBlockObject(slack.PlainTextType, "Run", false, false), CallbackID: "flow_form",
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock("flow", slack.NewTextBlockObject(slack.PlainTextType, "Flow", false, false), nil,
			slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, nil, "flow",
				slack.NewOptionBlockObject("healthcheck", slack.NewTextBlockObject(slack.PlainTextType, "healthcheck", false, false), nil)))}}}
	view, err := api.OpenViewContext(ctx, cmd.TriggerID, modalView)
	must(err)
	view, err = api.UpdateViewContext(ctx, modalView, "", view.Hash, view.ID)
	must(err)
	sent(srv.SelectInView(ctx, view.ID, "U1", "flow", "flow", "healthcheck"))
	submissionBody, err := srv.ViewSubmissionBody(slacktest.ViewSubmission{ViewID: view.ID, UserID: "U1", Values: map[string]map[string]string{"flow": {"flow": "healthcheck"}}})
	must(err)
	sent(srv.SubmitView(ctx, slacktest.ViewSubmission{ViewID: view.ID, UserID: "U1", Values: map[string]map[string]string{"flow": {"flow": "healthcheck"}}}))
	sent(srv.SendMessageShortcut(ctx, slacktest.MessageShortcut{CallbackID: "run_flow", UserID: "U1", ChannelID: "C1", MessageTS: root.TS, Text: "hello"}))

	// The Web API the bridge uses, refusals included.
	_, err = api.AuthTestContext(ctx)
	must(err)
	_, _, _, err = api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("answer, edited", false))
	must(err)
	_, _, _, err = api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root.TS})
	must(err)
	for _, ch := range []string{"C1", "G1", "D1"} {
		_, err = api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: ch})
		must(err)
	}
	_, err = api.GetUserInfoContext(ctx, "U1")
	must(err)
	_, err = api.GetUserGroupsContext(ctx, slack.GetUserGroupsOptionIncludeUsers(true))
	must(err)
	_, err = api.GetUserGroupMembersContext(ctx, "S1")
	must(err)
	must(api.AddReactionContext(ctx, "eyes", slack.NewRefToMessage("C1", root.TS)))
	must(api.RemoveReactionContext(ctx, "eyes", slack.NewRefToMessage("C1", root.TS)))
	if _, _, err := api.PostMessageContext(ctx, "C404", slack.MsgOptionText("lost", false)); err == nil {
		t.Fatal("PostMessage to an unknown channel succeeded")
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionBlocks(slack.NewSectionBlock(
		slack.NewTextBlockObject(slack.MarkdownType, strings.Repeat("x", slacktest.MaxSectionText+1), false, false), nil, nil))); err == nil {
		t.Fatal("PostMessage with an oversized section succeeded")
	}
	srv.RateLimit("chat.postMessage", 1, 1)
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("later", false)); err == nil {
		t.Fatal("PostMessage under a scripted rate limit succeeded")
	}
	_, _, err = api.DeleteMessageContext(ctx, "C1", ts)
	must(err)
	must(api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "D1", ThreadTS: thread.TS, Status: "is thinking…"}))
	must(api.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{ChannelID: "D1", ThreadTS: thread.TS, Title: "A question"}))
	must(api.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: "D1", ThreadTS: thread.TS,
		Prompts: []slack.AssistantThreadsPrompt{{Title: "Status", Message: "What is the status?"}}}))
	if err := api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "D1", ThreadTS: thread.TS,
		Status: strings.Repeat("s", slacktest.MaxStatusLength+1)}); err == nil {
		t.Fatal("setStatus with an oversized status succeeded")
	}

	// Frames on one socket arrive in order: once the disconnect is in, all are.
	must(srv.Disconnect("refresh_requested"))
	tap.Wait(t, "disconnect frame", frameType("disconnect"))

	check := docshape.New(slackShapes)
	types := map[string]int{}
	for i, raw := range tap.All() {
		where := fmt.Sprintf("frame %d", i)
		f, _ := docshape.DecodeJSON(t, where, raw).(map[string]any)
		typ, _ := f["type"].(string)
		types[typ]++
		switch typ {
		case "hello":
			check.Check(where, f, "hello")
		case "disconnect":
			check.Check(where, f, "disconnect")
		default:
			check.Check(where, f, "envelope")
			payload, _ := f["payload"].(map[string]any)
			shape := payloadShape(typ, payload)
			if shape == "" {
				check.Fail("%s: envelope %s has no shape in the table", where, typ)
				continue
			}
			check.Check(where+" "+typ+" payload", payload, shape)
		}
	}

	// HTTP mode: what Slack POSTs to the app's request URLs.
	body, _, err := srv.MessageEventBody(slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "over http"})
	must(err)
	check.Check("HTTP message event", docshape.DecodeJSON(t, "HTTP message event", body), "event_callback")
	body, _, err = srv.AppMentionBody(slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "over http"})
	must(err)
	check.Check("HTTP app_mention", docshape.DecodeJSON(t, "HTTP app_mention", body), "event_callback")
	body, _, err = srv.AssistantThreadBody(slacktest.AssistantThreadEvent{User: "U1", Channel: "D1", ContextChannel: "C1"})
	must(err)
	check.Check("HTTP assistant_thread_started", docshape.DecodeJSON(t, "HTTP assistant_thread_started", body), "event_callback")
	check.Check("HTTP url_verification", docshape.DecodeJSON(t, "HTTP url_verification", slacktest.URLVerificationBody("c")), "url_verification")
	form, _ := srv.SlashCommandBody(slacktest.SlashCommand{Command: "/flow", Text: "x", UserID: "U1", ChannelID: "C1"})
	values, err := url.ParseQuery(string(form))
	must(err)
	fields := map[string]any{}
	for k := range values {
		fields[k] = values.Get(k)
	}
	check.Check("HTTP slash command", fields, "slash_command")
	form, _, err = srv.PressButtonBody(posted, "share", "U1")
	must(err)
	values, err = url.ParseQuery(string(form))
	must(err)
	check.Check("HTTP block_actions", docshape.DecodeJSON(t, "HTTP block_actions", []byte(values.Get("payload"))), "block_actions")
	values, err = url.ParseQuery(string(submissionBody))
	must(err)
	check.Check("HTTP view_submission", docshape.DecodeJSON(t, "HTTP view_submission", []byte(values.Get("payload"))), "view_submission")

	methods := map[string]int{}
	for i, e := range rec.Exchanges() {
		where := fmt.Sprintf("answer %d %s %d", i, e.Path, e.Status)
		v := docshape.DecodeJSON(t, where, e.Body)
		shapes := []string{"api"}
		if method, ok := strings.CutPrefix(e.Path, "/api/"); ok {
			methods[method]++
			if obj, _ := v.(map[string]any); obj["ok"] == true {
				if _, known := slackShapes[method]; known {
					shapes = append(shapes, method)
				} else if method != "reactions.add" && method != "reactions.remove" {
					check.Fail("%s: %s has no shape in the table", where, method)
				}
			}
		}
		check.Check(where, v, shapes...)
	}
	for _, typ := range []string{"hello", slacktest.TypeEventsAPI, slacktest.TypeSlashCommands, slacktest.TypeInteractive, "disconnect"} {
		if types[typ] == 0 {
			t.Errorf("the scenario sent no %s frame", typ)
		}
	}
	for _, e := range check.Errs() {
		t.Error(e)
	}
	t.Logf("checked %d socket frames (%v), 8 HTTP-mode bodies and %d answers (%v); shapes used: %v", len(tap.All()), types, len(rec.Exchanges()), methods, check.Seen())
}
