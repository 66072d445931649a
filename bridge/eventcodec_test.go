package bridge

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// marshalStored is what the inbox stored before appendStoredEvent, and
// what it must still produce byte for byte.
func marshalStored(t *testing.T, ev Event) []byte {
	t.Helper()
	b, err := json.Marshal(storedEvent{
		Kind: ev.Kind, Platform: ev.Platform, Conversation: ev.Conversation, Parent: ev.Parent, Team: ev.Team, Channel: ev.Channel,
		User: ev.User, Text: ev.Text, Command: ev.Command, Action: ev.Action, Flow: ev.Flow, Params: ev.Params,
		MaxFlowTimeout: ev.MaxFlowTimeout, Route: ev.Route, Files: ev.Files, Alone: ev.alone,
		Schedule: ev.schedule, GiveUp: ev.giveUp,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkStored(t *testing.T, ev Event) {
	t.Helper()
	got, err := encodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	if want := marshalStored(t, ev); !bytes.Equal(got, want) {
		t.Fatalf("encodeEvent:\n got %s\nwant %s", got, want)
	}
	back, err := decodeEvent("k", got)
	if err != nil {
		t.Fatal(err)
	}
	ev.Key = "k"
	ev.Text = strings.ToValidUTF8(ev.Text, "\ufffd") // JSON has no other way to carry it
	if len(ev.Route) > 0 {
		// json.Marshal compacts a route; compare what it means.
		var a, b any
		if json.Unmarshal(ev.Route, &a) != nil || json.Unmarshal(back.Route, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("route %s came back as %s", ev.Route, back.Route)
		}
		ev.Route, back.Route = nil, nil
	}
	if ev.User.Groups != nil && len(ev.User.Groups) == 0 {
		back.User.Groups = []string{}
	}
	if len(ev.Params) == 0 {
		ev.Params, back.Params = nil, nil
	}
	if len(ev.Files) == 0 {
		ev.Files, back.Files = nil, nil
	}
	if !reflect.DeepEqual(back, ev) {
		t.Fatalf("decodeEvent(encodeEvent(ev)) = %+v, want %+v", back, ev)
	}
}

func TestEncodeEventMatchesJSON(t *testing.T) {
	base := Event{Kind: KindMessage, Platform: "slack", Conversation: "slack/T1/C1/1700000000.000100", Team: "T1", Channel: "C1",
		User: User{ID: "U1", Name: "ada"}, Text: "hello there", Route: json.RawMessage(`{"channel":"C1","ts":"1700000000.000100"}`)}
	cases := map[string]func(*Event){
		"plain":          func(*Event) {},
		"html and quote": func(ev *Event) { ev.Text = `a <b> & "c" \ d` },
		"unicode":        func(ev *Event) { ev.Text = "héllo — 日本 \u2028 end" },
		"control":        func(ev *Event) { ev.Text = "line\nnext\ttab\x01\x7f" },
		"invalid utf8":   func(ev *Event) { ev.Text = "bad \xff byte" },
		"groups":         func(ev *Event) { ev.User.Groups = []string{"S1", "S<2>"} },
		"empty groups":   func(ev *Event) { ev.User.Groups = []string{} },
		"action":         func(ev *Event) { ev.Kind, ev.Action = KindAction, Action{ID: "share", Value: "tok&1"} },
		"action on a message": func(ev *Event) {
			ev.Kind, ev.Action = KindAction, Action{ID: "vote_up", Value: "a.s.r", Message: "C1/1.2", Link: "https://x/p12?a=1&b=<2>"}
		},
		"flow": func(ev *Event) {
			ev.Flow, ev.Params, ev.MaxFlowTimeout = "deploy", map[string]string{"b": "2", "a": "x y"}, 14*time.Minute
		},
		"route spaces": func(ev *Event) { ev.Route = json.RawMessage("{ \"a\" : [1, 2],\n\"b\":\"x y\" }") },
		"route html":   func(ev *Event) { ev.Route = json.RawMessage(`{"a":"<x>"}`) },
		"files":        func(ev *Event) { ev.Files = []Attachment{{ID: "F1", Name: "a.txt", Size: 3, URL: "https://files/a"}} },
		"alone":        func(ev *Event) { ev.alone = true; ev.Parent = "p1"; ev.Command = "/flow" },
		"no route":     func(ev *Event) { ev.Route = nil; ev.Team = ""; ev.Channel = "" },
		"scheduled": func(ev *Event) {
			ev.Kind, ev.User, ev.Flow, ev.Params = KindScheduled, User{ID: "schedule:night<ly>", Name: "schedule night<ly>"}, "deploy", map[string]string{"env": "prod"}
			ev.schedule, ev.giveUp = "night<ly>", time.Date(2026, 11, 29, 6, 29, 59, 123, time.UTC).UnixNano()
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			ev := base
			change(&ev)
			checkStored(t, ev)
		})
	}
}

func FuzzEncodeEvent(f *testing.F) {
	f.Add("slack", "c/1", "hello", "U1", "ada", "", `{"ts":"1"}`)
	f.Add("discord", "d/<1>", "a\"b\\c\n", "U&2", "é", "deploy", `[ 1 , "x" ]`)
	f.Fuzz(func(t *testing.T, platform, conv, text, user, name, flow, route string) {
		ev := Event{Kind: KindMessage, Platform: platform, Conversation: conv, Text: text, User: User{ID: user, Name: name}, Flow: flow}
		if json.Valid([]byte(route)) {
			ev.Route = json.RawMessage(route)
		}
		got, err := encodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		if want := marshalStored(t, ev); !bytes.Equal(got, want) {
			t.Fatalf("encodeEvent:\n got %q\nwant %q", got, want)
		}
	})
}

func BenchmarkEncodeEvent(b *testing.B) {
	ev := Event{Kind: KindMessage, Platform: "slack", Conversation: "slack/T1/C1/1700000000.000100", Team: "T1", Channel: "C1",
		User: User{ID: "U1", Name: "ada"}, Text: "hello there, how are things today?", Route: json.RawMessage(`{"channel":"C1","ts":"1700000000.000100"}`)}
	for b.Loop() {
		if _, err := encodeEvent(ev); err != nil {
			b.Fatal(err)
		}
	}
}
