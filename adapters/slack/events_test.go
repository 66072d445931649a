package slack

import (
	"testing"

	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap/zaptest"
)

func testAdapter(t *testing.T, edit func(*Config)) *Adapter {
	t.Helper()
	c := validSocket()
	if edit != nil {
		edit(&c)
	}
	a, err := New(c, idleCore{t}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	a.self.Store(&identity{userID: "UBOT", botID: "BBOT", teamID: "T1"})
	return a
}

func TestFromMention(t *testing.T) {
	tests := []struct {
		name       string
		cfg        func(*Config)
		ev         slackevents.AppMentionEvent
		wantKey    string // "" means ignored
		wantThread string
		wantText   string
	}{
		{name: "channel mention starts a thread",
			ev:      slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "10.1", Text: "<@UBOT> hi"},
			wantKey: "slack/T1/C1/10.1", wantThread: "10.1", wantText: "hi"},
		{name: "mention inside a thread stays in it",
			ev:      slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "12.1", ThreadTimeStamp: "10.1", Text: "<@UBOT> more"},
			wantKey: "slack/T1/C1/10.1", wantThread: "10.1", wantText: "more"},
		{name: "channel scope answers in the channel",
			cfg:     func(c *Config) { c.SessionScope = ScopeChannel },
			ev:      slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "10.1", Text: "<@UBOT> hi"},
			wantKey: "slack/T1/C1", wantThread: "", wantText: "hi"},
		{name: "channel scope in a thread answers in the thread",
			cfg:     func(c *Config) { c.SessionScope = ScopeChannel },
			ev:      slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "12.1", ThreadTimeStamp: "10.1", Text: "<@UBOT> hi"},
			wantKey: "slack/T1/C1", wantThread: "10.1", wantText: "hi"},
		{name: "own mention", ev: slackevents.AppMentionEvent{User: "UBOT", Channel: "C1", TimeStamp: "1.1"}},
		{name: "own bot id", ev: slackevents.AppMentionEvent{BotID: "BBOT", Channel: "C1", TimeStamp: "1.1"}},
		{name: "other bot", ev: slackevents.AppMentionEvent{User: "U2", BotID: "B2", Channel: "C1", TimeStamp: "1.1"}},
		{name: "other bot allowed", cfg: func(c *Config) { c.AllowBots = true },
			ev:      slackevents.AppMentionEvent{User: "U2", BotID: "B2", Channel: "C1", TimeStamp: "1.1", Text: "<@UBOT> ping"},
			wantKey: "slack/T1/C1/1.1", wantThread: "1.1", wantText: "ping"},
		{name: "own bot even when bots are allowed", cfg: func(c *Config) { c.AllowBots = true },
			ev: slackevents.AppMentionEvent{BotID: "BBOT", Channel: "C1", TimeStamp: "1.1"}},
		{name: "edited", ev: slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "1.1", Edited: &slackevents.Edited{User: "U1", TimeStamp: "2.2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testAdapter(t, tt.cfg)
			in, err := a.fromMention("T1", &tt.ev)
			if err != nil {
				t.Fatalf("fromMention() = %v", err)
			}
			checkIncoming(t, in, tt.wantKey, tt.wantThread, tt.wantText)
		})
	}
}

func TestFromMessage(t *testing.T) {
	tests := []struct {
		name       string
		cfg        func(*Config)
		ev         slackevents.MessageEvent
		wantKey    string
		wantThread string
		wantText   string
		wantCheck  bool
	}{
		{name: "dm", ev: slackevents.MessageEvent{User: "U1", Channel: "D1", ChannelType: "im", TimeStamp: "5.1", Text: "hello &amp; bye"},
			wantKey: "slack/T1/D1", wantText: "hello & bye"},
		{name: "dm with a mention is still the dm", ev: slackevents.MessageEvent{User: "U1", Channel: "D1", ChannelType: "im", TimeStamp: "5.1", Text: "<@UBOT> hi"},
			wantKey: "slack/T1/D1", wantText: "hi"},
		{name: "dm thread reply goes to the thread, same conversation",
			ev:      slackevents.MessageEvent{User: "U1", Channel: "D1", ChannelType: "im", TimeStamp: "6.1", ThreadTimeStamp: "5.1", Text: "x"},
			wantKey: "slack/T1/D1", wantThread: "5.1", wantText: "x"},
		{name: "thread reply needs the thread check",
			ev:      slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "6.1", ThreadTimeStamp: "5.1", Text: "x"},
			wantKey: "slack/T1/C1/5.1", wantThread: "5.1", wantText: "x", wantCheck: true},
		{name: "thread reply, channel scope",
			cfg:     func(c *Config) { c.SessionScope = ScopeChannel },
			ev:      slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "6.1", ThreadTimeStamp: "5.1", Text: "x"},
			wantKey: "slack/T1/C1", wantThread: "5.1", wantText: "x", wantCheck: true},
		{name: "thread reply when mentions are required",
			cfg: func(c *Config) { c.ThreadRepliesNeedMention = true },
			ev:  slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "6.1", ThreadTimeStamp: "5.1", Text: "x"}},
		{name: "channel message without mention", ev: slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "6.1", Text: "x"}},
		{name: "channel message with mention is app_mention's", ev: slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "6.1", ThreadTimeStamp: "5.1", Text: "<@UBOT> x"}},
		{name: "own message", ev: slackevents.MessageEvent{User: "UBOT", Channel: "D1", ChannelType: "im", TimeStamp: "6.1", Text: "x"}},
		{name: "own bot id", ev: slackevents.MessageEvent{BotID: "BBOT", Channel: "D1", ChannelType: "im", TimeStamp: "6.1", Text: "x"}},
		{name: "other bot", ev: slackevents.MessageEvent{User: "U2", BotID: "B2", Channel: "D1", ChannelType: "im", TimeStamp: "6.1", Text: "x"}},
		{name: "bot_message subtype", ev: slackevents.MessageEvent{SubType: "bot_message", BotID: "B2", Channel: "D1", ChannelType: "im", TimeStamp: "6.1", Text: "x"}},
		{name: "bot_message allowed", cfg: func(c *Config) { c.AllowBots = true },
			ev:      slackevents.MessageEvent{SubType: "bot_message", BotID: "B2", Channel: "D1", ChannelType: "im", TimeStamp: "6.1", Text: "x"},
			wantKey: "slack/T1/D1", wantText: "x"},
		{name: "edited", ev: slackevents.MessageEvent{SubType: "message_changed", Channel: "D1", ChannelType: "im", TimeStamp: "6.1"}},
		{name: "deleted", ev: slackevents.MessageEvent{SubType: "message_deleted", Channel: "D1", ChannelType: "im", TimeStamp: "6.1"}},
		{name: "join", ev: slackevents.MessageEvent{SubType: "channel_join", User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "6.1", ThreadTimeStamp: "5.1"}},
		{name: "file share is a message", ev: slackevents.MessageEvent{SubType: "file_share", User: "U1", Channel: "D1", ChannelType: "im", TimeStamp: "6.1", Text: "look"},
			wantKey: "slack/T1/D1", wantText: "look"},
		{name: "thread broadcast is a message",
			ev:      slackevents.MessageEvent{SubType: "thread_broadcast", User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "6.1", ThreadTimeStamp: "5.1", Text: "y"},
			wantKey: "slack/T1/C1/5.1", wantThread: "5.1", wantText: "y", wantCheck: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testAdapter(t, tt.cfg)
			in, err := a.fromMessage("T1", &tt.ev)
			if err != nil {
				t.Fatalf("fromMessage() = %v", err)
			}
			checkIncoming(t, in, tt.wantKey, tt.wantThread, tt.wantText)
			if in != nil && in.rt.CheckThread != tt.wantCheck {
				t.Errorf("CheckThread = %v, want %v", in.rt.CheckThread, tt.wantCheck)
			}
		})
	}
}

func checkIncoming(t *testing.T, in *incoming, key, thread, text string) {
	t.Helper()
	if key == "" {
		if in != nil {
			t.Fatalf("event accepted as %+v, want it ignored", *in)
		}
		return
	}
	if in == nil {
		t.Fatalf("event ignored, want key %q", key)
	}
	if in.key != key || in.rt.Thread != thread || in.text != text {
		t.Errorf("got key %q thread %q text %q, want %q %q %q", in.key, in.rt.Thread, in.text, key, thread, text)
	}
}
