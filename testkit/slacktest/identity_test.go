package slacktest_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func TestIdentityMethods(t *testing.T) {
	srv := newServer(t, slacktest.Options{
		Channels:   []slacktest.Channel{{ID: "C1", Name: "general"}, {ID: "D1", IsIM: true}},
		UserGroups: []slacktest.UserGroup{{ID: "S1", Handle: "oncall", Name: "On call", Users: []string{"U1", "U2"}}},
	})
	api := newClient(t, srv, srv.BotToken())
	ctx := t.Context()

	members, err := api.GetUserGroupMembersContext(ctx, "S1")
	if err != nil || !slices.Equal(members, []string{"U1", "U2"}) {
		t.Errorf("GetUserGroupMembers(S1) = %v, %v", members, err)
	}
	if _, err := api.GetUserGroupMembersContext(ctx, "S404"); err == nil || err.Error() != "no_such_subteam" {
		t.Errorf("GetUserGroupMembers(S404) error = %v, want no_such_subteam", err)
	}
	srv.AddUserGroup(slacktest.UserGroup{ID: "S2", Handle: "admins", Users: []string{"U3"}})
	groups, err := api.GetUserGroupsContext(ctx, slack.GetUserGroupsOptionIncludeUsers(true))
	if err != nil || len(groups) != 2 || groups[0].Handle != "oncall" || !slices.Equal(groups[1].Users, []string{"U3"}) {
		t.Errorf("GetUserGroups() = %+v, %v", groups, err)
	}
	u, err := api.GetUserInfoContext(ctx, "U1")
	if err != nil || u.ID != "U1" || u.IsBot || u.TeamID != srv.TeamID() {
		t.Errorf("GetUserInfo(U1) = %+v, %v", u, err)
	}
	if _, err := api.GetUserInfoContext(ctx, "nobody"); err == nil || err.Error() != "user_not_found" {
		t.Errorf("GetUserInfo(nobody) error = %v, want user_not_found", err)
	}
	tests := []struct {
		id      string
		wantIM  bool
		wantErr string
	}{
		{id: "C1"},
		{id: "D1", wantIM: true},
		{id: "C404", wantErr: "channel_not_found"},
	}
	for _, tt := range tests {
		ch, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: tt.id})
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("GetConversationInfo(%s) error = %v, want %s", tt.id, err, tt.wantErr)
			}
			continue
		}
		if err != nil || ch.ID != tt.id || ch.IsIM != tt.wantIM {
			t.Errorf("GetConversationInfo(%s) = %+v, %v", tt.id, ch, err)
		}
	}
}

func TestThreadReplies(t *testing.T) {
	srv := newServer(t, slacktest.Options{})
	app := runSocketApp(t, srv, ackAll)
	api := newClient(t, srv, srv.BotToken())
	ctx := timeout(t)

	root, err := srv.SendAppMention(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "question"})
	if err != nil {
		t.Fatal(err)
	}
	// The channel was learnt from the event, so the app may post there.
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("answer", false), slack.MsgOptionTS(root.TS))
	if err != nil {
		t.Fatalf("PostMessage() error = %v", err)
	}
	if err := api.AddReactionContext(ctx, "eyes", slack.NewRefToMessage("C1", root.TS)); err != nil {
		t.Fatalf("AddReaction(user message) error = %v", err)
	}
	if _, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "follow-up", ThreadTS: root.TS}); err != nil {
		t.Fatal(err)
	}
	msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root.TS})
	if err != nil {
		t.Fatalf("GetConversationReplies() error = %v", err)
	}
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Text)
	}
	if len(msgs) != 3 || msgs[0].ReplyCount != 2 || msgs[1].Timestamp != ts || msgs[1].BotID != srv.BotID() || msgs[2].User != "U1" {
		t.Errorf("GetConversationReplies() texts %q, messages %+v", texts, msgs)
	}
	if got := srv.MessageReactions("C1", root.TS); !slices.Equal(got, []string{"eyes"}) {
		t.Errorf("MessageReactions() = %v, want [eyes]", got)
	}
	if r := srv.Reactions(); len(r) != 1 || r[0].TS != root.TS || r[0].Op != "reactions.add" {
		t.Errorf("Reactions() = %+v", r)
	}
	// Slack echoes the app's own message back to it.
	m, _ := srv.Message("C1", ts)
	if _, err := srv.SendEcho(ctx, m); err != nil {
		t.Fatal(err)
	}
	for {
		evt := app.next(t, ctx, socketmode.EventTypeEventsAPI)
		me, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
		if ok && me.TimeStamp == ts {
			if me.BotID != srv.BotID() || me.User != srv.BotUserID() || me.ThreadTimeStamp != root.TS {
				t.Errorf("echo = %+v", me)
			}
			break
		}
	}
}

func TestCloseEndsWaitsAndSockets(t *testing.T) {
	srv := slacktest.NewServer(slacktest.Options{})
	runSocketApp(t, srv, ackAll)
	ctx := timeout(t)
	if err := srv.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() {
		_, err := srv.WaitAck(context.Background(), "never")
		waitErr <- err
	}()
	srv.Close()
	if err := <-waitErr; !errors.Is(err, slacktest.ErrClosed) {
		t.Errorf("WaitAck() after Close = %v, want ErrClosed", err)
	}
	if _, err := srv.SendMessage(ctx, slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "x"}); !errors.Is(err, slacktest.ErrClosed) {
		t.Errorf("SendMessage() after Close = %v, want ErrClosed", err)
	}
	if n := srv.LiveConnections(); n != 0 {
		t.Errorf("LiveConnections() after Close = %d, want 0", n)
	}
	srv.Close() // idempotent
}
