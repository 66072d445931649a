package slacktest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

const sessionThread = "1784744767.192879"

func agentServer(t *testing.T, opts slacktest.Options) (*slacktest.Server, *slack.Client) {
	t.Helper()
	opts.Agent = true
	opts.Channels = append(opts.Channels, slacktest.Channel{ID: "D1", IsIM: true, User: "U1"})
	srv := newServer(t, opts)
	return srv, newClient(t, srv, srv.BotToken())
}

func setStatus(status string) slack.AgentSessionSetStatusParameters {
	return slack.AgentSessionSetStatusParameters{Status: status, ChannelID: "D1", ThreadTS: sessionThread}
}

func TestSessionSetStatusRefusesWhatSlackRefuses(t *testing.T) {
	t.Parallel()
	withTitle := setStatus(slack.AgentSessionStatusProcessing)
	withTitle.Title = strings.Repeat("t", slacktest.MaxSessionTitle+1)
	withIcon := setStatus(slack.AgentSessionStatusProcessing)
	withIcon.IconEmoji = ":robot_face:"
	noThread := setStatus(slack.AgentSessionStatusProcessing)
	noThread.ThreadTS = ""
	elsewhere := setStatus(slack.AgentSessionStatusProcessing)
	elsewhere.ChannelID = "C404"

	tests := []struct {
		name    string
		opts    slacktest.Options
		params  slack.AgentSessionSetStatusParameters
		wantErr string
	}{
		{"app not declared an agent", slacktest.Options{}, setStatus(slack.AgentSessionStatusProcessing), "not_authorized"},
		{"free-text status", slacktest.Options{Agent: true}, setStatus("is thinking…"), "invalid_arguments"},
		{"status in another case", slacktest.Options{Agent: true}, setStatus("Processing"), "invalid_arguments"},
		{"no status", slacktest.Options{Agent: true}, setStatus(""), "invalid_arguments"},
		{"no thread", slacktest.Options{Agent: true}, noThread, "invalid_arguments"},
		{"unknown channel", slacktest.Options{Agent: true}, elsewhere, "channel_not_found"},
		{"title past 200 characters", slacktest.Options{Agent: true}, withTitle, "invalid_arguments"},
		{"no chat:write", slacktest.Options{Agent: true, Scopes: []string{"assistant:write"}}, setStatus(slack.AgentSessionStatusProcessing), "missing_scope"},
		{"icon without chat:write.customize", slacktest.Options{Agent: true, Scopes: []string{"chat:write", "assistant:write"}}, withIcon, "missing_scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.opts.Channels = []slacktest.Channel{{ID: "D1", IsIM: true, User: "U1"}}
			srv := newServer(t, tt.opts)
			api := newClient(t, srv, srv.BotToken())
			_, err := api.SetAgentSessionStatusContext(t.Context(), tt.params)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("SetAgentSessionStatus(%+v) error = %v, want %s", tt.params, err, tt.wantErr)
			}
			if got := srv.SessionStatuses(tt.params.ChannelID, tt.params.ThreadTS); got != nil {
				t.Errorf("SessionStatuses() = %q after a refused call, want none", got)
			}
			if _, ok := srv.Session(tt.params.ChannelID, tt.params.ThreadTS); ok {
				t.Error("a refused call created a session")
			}
		})
	}
}

func TestSessionSetStatusRecordsEveryStatus(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{})

	first := setStatus(slack.AgentSessionStatusProcessing)
	first.Title, first.InitiatorUserID = "Deploy the API", "U1"
	res, err := api.SetAgentSessionStatusContext(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "processing" || res.AgentStatus != "processing" || res.Title != "Deploy the API" || res.Warning != "" {
		t.Errorf("SetAgentSessionStatus() = %+v, want processing, titled, no warning", res)
	}

	// title and initiator_user_id apply only when the call creates the session.
	later := []string{"active", "processing", "suspended", "processing", "active", "closed"}
	for _, st := range later {
		p := setStatus(st)
		p.Title, p.InitiatorUserID = "Ignored", "U2"
		res, err := api.SetAgentSessionStatusContext(t.Context(), p)
		if err != nil {
			t.Fatalf("SetAgentSessionStatus(%s) error = %v", st, err)
		}
		if res.Status != st || res.Title != "Deploy the API" {
			t.Errorf("SetAgentSessionStatus(%s) = %+v, want status %s, title kept", st, res, st)
		}
	}

	want := append([]string{"processing"}, later...)
	if got := srv.SessionStatuses("D1", sessionThread); !slices.Equal(got, want) {
		t.Errorf("SessionStatuses() = %q, want %q", got, want)
	}
	a, ok := srv.Session("D1", sessionThread)
	if !ok || a.Status != "closed" || a.Title != "Deploy the API" || a.InitiatorUserID != "U1" || !slices.Equal(a.Titles, []string{"Deploy the API"}) {
		t.Errorf("Session() = %+v, %v", a, ok)
	}
	if got := srv.SessionStatuses("D1", "1784744767.000001"); got != nil {
		t.Errorf("SessionStatuses() of another thread = %q, want none", got)
	}
}

func TestSessionIconOverridesAreOneSet(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{})
	p := setStatus("processing")
	p.IconEmoji, p.Username = ":robot_face:", "Deployer"
	if _, err := api.SetAgentSessionStatusContext(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	// A call without overrides keeps them; one with any replaces all three.
	if _, err := api.SetAgentSessionStatusContext(t.Context(), setStatus("active")); err != nil {
		t.Fatal(err)
	}
	if a, _ := srv.Session("D1", sessionThread); a.IconEmoji != ":robot_face:" || a.Username != "Deployer" {
		t.Errorf("after a call without overrides: %+v, want them kept", a)
	}
	p = setStatus("processing")
	p.IconURL = "https://example.com/i.png"
	if _, err := api.SetAgentSessionStatusContext(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if a, _ := srv.Session("D1", sessionThread); a.IconEmoji != "" || a.Username != "" || a.IconURL != "https://example.com/i.png" {
		t.Errorf("after a call with icon_url only: %+v, want the set replaced", a)
	}
}

func TestSessionSetStatusWarnsWithoutStopSubscription(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{BotEvents: []string{"message.im", "app_home_opened"}})
	res, err := api.SetAgentSessionStatusContext(t.Context(), setStatus("processing"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Warning != slacktest.WarnNoStopSubscription || !slices.Equal(res.ResponseMetadata.Warnings, []string{slacktest.WarnNoStopSubscription}) {
		t.Errorf("SetAgentSessionStatus() warning = %q, metadata %q, want %s", res.Warning, res.ResponseMetadata.Warnings, slacktest.WarnNoStopSubscription)
	}
	if calls := srv.Calls(); calls[len(calls)-1].Warning != slacktest.WarnNoStopSubscription {
		t.Errorf("Call = %+v, want the warning recorded", calls[len(calls)-1])
	}
	if got := srv.SessionStatuses("D1", sessionThread); !slices.Equal(got, []string{"processing"}) {
		t.Errorf("SessionStatuses() = %q: a warning still sets the status", got)
	}

	srv.SetBotEvents([]string{"message.im", slacktest.EventSessionStopped})
	res, err = api.SetAgentSessionStatusContext(t.Context(), setStatus("active"))
	if err != nil || res.Warning != "" {
		t.Errorf("subscribed: SetAgentSessionStatus() = %+v, %v, want no warning", res, err)
	}
}

func TestSessionSetAgentDeclaresTheApp(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{Channels: []slacktest.Channel{{ID: "D1", IsIM: true}}})
	api := newClient(t, srv, srv.BotToken())
	if _, err := api.SetAgentSessionStatusContext(t.Context(), setStatus("processing")); err == nil || err.Error() != "not_authorized" {
		t.Fatalf("before SetAgent: error = %v, want not_authorized", err)
	}
	srv.SetAgent(true)
	if _, err := api.SetAgentSessionStatusContext(t.Context(), setStatus("processing")); err != nil {
		t.Fatalf("after SetAgent(true): %v", err)
	}
}

func TestSessionStatusesConcurrent(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{})
	const threads, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, threads*each)
	for i := range threads {
		ts := fmt.Sprintf("1784744767.%06d", i+1)
		wg.Go(func() {
			for j := range each {
				st := []string{"processing", "active"}[j%2]
				p := slack.AgentSessionSetStatusParameters{Status: st, ChannelID: "D1", ThreadTS: ts}
				if _, err := api.SetAgentSessionStatusContext(t.Context(), p); err != nil {
					errs <- err
					return
				}
				_ = srv.SessionStatuses("D1", ts)
				_ = srv.Sessions()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(srv.Sessions()); n != threads {
		t.Errorf("Sessions() = %d, want %d", n, threads)
	}
	for i := range threads {
		got := srv.SessionStatuses("D1", fmt.Sprintf("1784744767.%06d", i+1))
		if len(got) != each || got[0] != "processing" || got[each-1] != "active" {
			t.Errorf("thread %d: SessionStatuses() = %q", i, got)
		}
	}
}

func TestPressStopOnlyWhileProcessing(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{})
	app := runSocketApp(t, srv, ackAll)
	ctx := timeout(t)
	app.next(t, ctx, socketmode.EventTypeHello)
	press := slacktest.StopPress{Channel: "D1", ThreadTS: sessionThread, User: "U1"}

	if _, err := srv.PressStop(ctx, press); !errors.Is(err, slacktest.ErrNoStopButton) {
		t.Fatalf("PressStop() without a session: error = %v, want ErrNoStopButton", err)
	}
	for _, st := range []string{"active", "suspended", "closed"} {
		if _, err := api.SetAgentSessionStatusContext(ctx, setStatus(st)); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.PressStop(ctx, press); !errors.Is(err, slacktest.ErrNoStopButton) {
			t.Errorf("PressStop() while %s: error = %v, want ErrNoStopButton", st, err)
		}
	}

	if _, err := api.SetAgentSessionStatusContext(ctx, setStatus("processing")); err != nil {
		t.Fatal(err)
	}
	d, err := srv.PressStop(ctx, press)
	if err != nil {
		t.Fatal(err)
	}
	evt := app.next(t, ctx, socketmode.EventTypeEventsAPI)
	outer := evt.Data.(slackevents.EventsAPIEvent)
	stopped, ok := outer.InnerEvent.Data.(*slackevents.AgentSessionStoppedEvent)
	if !ok {
		t.Fatalf("inner event = %T, want *AgentSessionStoppedEvent", outer.InnerEvent.Data)
	}
	if stopped.Type != "agent_session_stopped" || stopped.Channel != "D1" || stopped.ThreadTimestamp != sessionThread || stopped.User != "U1" ||
		stopped.StreamingMessageTimestamps == nil || len(stopped.StreamingMessageTimestamps) != 0 || stopped.EventTimestamp == "" {
		t.Errorf("agent_session_stopped = %+v, want D1/%s by U1, an empty stream list and event_ts", stopped, sessionThread)
	}
	if outer.TeamID != srv.TeamID() || outer.APIAppID != srv.AppID() {
		t.Errorf("envelope team %q app %q, want %s %s", outer.TeamID, outer.APIAppID, srv.TeamID(), srv.AppID())
	}
	if _, err := srv.WaitAck(ctx, d.EnvelopeID); err != nil {
		t.Fatal(err)
	}

	// Slack does not move the status: the app must. Until it does, Stop can be pressed again.
	a, _ := srv.Session("D1", sessionThread)
	if a.Status != "processing" || !slices.Equal(a.StoppedBy, []string{"U1"}) {
		t.Errorf("after Stop: %+v, want still processing, stopped by U1", a)
	}
	press.User, press.StreamingMessageTS = "U2", []string{"1784744784.686639"}
	if _, err := srv.PressStop(ctx, press); err != nil {
		t.Fatalf("second press: %v", err)
	}
	evt = app.next(t, ctx, socketmode.EventTypeEventsAPI)
	if again := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AgentSessionStoppedEvent); !slices.Equal(again.StreamingMessageTimestamps, press.StreamingMessageTS) || again.User != "U2" {
		t.Errorf("second agent_session_stopped = %+v", again)
	}

	if _, err := api.SetAgentSessionStatusContext(ctx, setStatus("active")); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.PressStop(ctx, press); !errors.Is(err, slacktest.ErrNoStopButton) {
		t.Errorf("PressStop() once active: error = %v, want ErrNoStopButton", err)
	}
}

func TestPressStopNeedsTheSubscription(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{BotEvents: []string{"message.im"}})
	if _, err := api.SetAgentSessionStatusContext(t.Context(), setStatus("processing")); err != nil {
		t.Fatal(err)
	}
	_, _, err := srv.PressStopBody(slacktest.StopPress{Channel: "D1", ThreadTS: sessionThread, User: "U1"})
	if !errors.Is(err, slacktest.ErrNoStopButton) {
		t.Errorf("PressStopBody() unsubscribed: error = %v, want ErrNoStopButton", err)
	}
}

func TestPressStopBodyParsesWithSlackGo(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{})
	if _, err := api.SetAgentSessionStatusContext(t.Context(), setStatus("processing")); err != nil {
		t.Fatal(err)
	}
	body, d, err := srv.PressStopBody(slacktest.StopPress{Channel: "D1", ThreadTS: sessionThread, User: "U1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"streaming_message_ts":[]`) {
		t.Errorf("body %s: want an empty streaming_message_ts list, as Slack sends it", body)
	}
	ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := ev.Data.(*slackevents.EventsAPICallbackEvent)
	stopped, ok := ev.InnerEvent.Data.(*slackevents.AgentSessionStoppedEvent)
	if !ok || cb == nil || cb.EventID != d.EventID || stopped.ThreadTimestamp != sessionThread || stopped.User != "U1" {
		t.Errorf("ParseEvent() = %+v, inner %+v; want event %s stopping D1/%s", ev.Data, ev.InnerEvent.Data, d.EventID, sessionThread)
	}
}

func TestRenameSession(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{})
	app := runSocketApp(t, srv, ackAll)
	ctx := timeout(t)
	app.next(t, ctx, socketmode.EventTypeHello)
	rename := slacktest.SessionRename{Channel: "D1", ThreadTS: sessionThread, User: "U1", Title: "Fix login"}

	if _, err := srv.RenameSession(ctx, rename); !errors.Is(err, slacktest.ErrNoSession) {
		t.Fatalf("RenameSession() without a session: error = %v, want ErrNoSession", err)
	}
	if _, err := api.SetAgentSessionStatusContext(ctx, setStatus("active")); err != nil {
		t.Fatal(err)
	}

	// The session had no title: previous_title is left out.
	if _, err := srv.RenameSession(ctx, rename); err != nil {
		t.Fatal(err)
	}
	evt := app.next(t, ctx, socketmode.EventTypeEventsAPI)
	changed, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AgentSessionTitleChangedEvent)
	if !ok {
		t.Fatalf("inner event = %T, want *AgentSessionTitleChangedEvent", evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data)
	}
	want := slackevents.AgentSessionTitleChangedEvent{Type: "agent_session_title_changed", Channel: "D1", ThreadTimestamp: sessionThread,
		User: "U1", TeamID: srv.TeamID(), Title: "Fix login", EventTimestamp: changed.EventTimestamp}
	if *changed != want || changed.EventTimestamp == "" {
		t.Errorf("agent_session_title_changed = %+v, want %+v", *changed, want)
	}

	// The app renames through agents.sessions.rename, which sends no event.
	res, err := api.RenameAgentSessionContext(ctx, slack.AgentSessionRenameParameters{Title: "Fix the login page", ChannelID: "D1", ThreadTS: sessionThread})
	if err != nil || res.Title != "Fix the login page" {
		t.Fatalf("RenameAgentSession() = %+v, %v", res, err)
	}
	rename.Title = "Login"
	if _, err := srv.RenameSession(ctx, rename); err != nil {
		t.Fatal(err)
	}
	evt = app.next(t, ctx, socketmode.EventTypeEventsAPI)
	changed = evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AgentSessionTitleChangedEvent)
	if changed.Title != "Login" || changed.PreviousTitle != "Fix the login page" {
		t.Errorf("second rename = %+v, want Login after Fix the login page", changed)
	}
	a, _ := srv.Session("D1", sessionThread)
	if a.Title != "Login" || !slices.Equal(a.Titles, []string{"Fix login", "Fix the login page", "Login"}) {
		t.Errorf("Session() = %+v", a)
	}

	for _, title := range []string{"", "  ", strings.Repeat("x", slacktest.MaxSessionTitle+1)} {
		rename.Title = title
		if _, err := srv.RenameSession(ctx, rename); err == nil {
			t.Errorf("RenameSession(title %q) succeeded; Slack takes 1 to 200 characters", title)
		}
	}
}

func TestRenameSessionUnsubscribedDeliversNothing(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{BotEvents: []string{slacktest.EventSessionStopped}})
	if _, err := api.SetAgentSessionStatusContext(t.Context(), setStatus("active")); err != nil {
		t.Fatal(err)
	}
	// No socket is open: a delivery would wait for one until the context ends.
	d, err := srv.RenameSession(t.Context(), slacktest.SessionRename{Channel: "D1", ThreadTS: sessionThread, User: "U1", Title: "Fix login"})
	if err != nil || d != (slacktest.Delivery{}) {
		t.Errorf("RenameSession() = %+v, %v, want nothing delivered", d, err)
	}
	if a, _ := srv.Session("D1", sessionThread); a.Title != "Fix login" {
		t.Errorf("title = %q, want the rename kept", a.Title)
	}
	body, _, err := srv.RenameSessionBody(slacktest.SessionRename{Channel: "D1", ThreadTS: sessionThread, User: "U1", Title: "Login"})
	if err != nil || body != nil {
		t.Errorf("RenameSessionBody() = %s, %v, want no body", body, err)
	}
}

func TestRenameSessionBodyParsesWithSlackGo(t *testing.T) {
	t.Parallel()
	srv, api := agentServer(t, slacktest.Options{})
	p := setStatus("processing")
	p.Title = "Investigate login"
	if _, err := api.SetAgentSessionStatusContext(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	body, _, err := srv.RenameSessionBody(slacktest.SessionRename{Channel: "D1", ThreadTS: sessionThread, User: "U1", Title: "Fix login"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
	if err != nil {
		t.Fatal(err)
	}
	changed, ok := ev.InnerEvent.Data.(*slackevents.AgentSessionTitleChangedEvent)
	if !ok || changed.Title != "Fix login" || changed.PreviousTitle != "Investigate login" {
		t.Errorf("ParseEvent() inner = %+v, want Fix login after Investigate login", ev.InnerEvent.Data)
	}
}

func TestRenameAgentSessionRefusesWhatSlackRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		agent   bool
		params  slack.AgentSessionRenameParameters
		wantErr string
	}{
		{"app not declared an agent", false, slack.AgentSessionRenameParameters{Title: "T", ChannelID: "D1", ThreadTS: sessionThread}, "not_authorized"},
		{"empty title", true, slack.AgentSessionRenameParameters{Title: "", ChannelID: "D1", ThreadTS: sessionThread}, "invalid_arguments"},
		{"title past 200 characters", true, slack.AgentSessionRenameParameters{Title: strings.Repeat("t", 201), ChannelID: "D1", ThreadTS: sessionThread}, "invalid_arguments"},
		{"no session", true, slack.AgentSessionRenameParameters{Title: "T", ChannelID: "D1", ThreadTS: sessionThread}, "session_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, slacktest.Options{Agent: tt.agent, Channels: []slacktest.Channel{{ID: "D1", IsIM: true}}})
			api := newClient(t, srv, srv.BotToken())
			if _, err := api.RenameAgentSessionContext(t.Context(), tt.params); err == nil || err.Error() != tt.wantErr {
				t.Errorf("RenameAgentSession(%+v) error = %v, want %s", tt.params, err, tt.wantErr)
			}
		})
	}
}
