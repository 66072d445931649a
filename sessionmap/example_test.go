package sessionmap_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/sessionmap"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sessionmap-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sessionmap.Open(filepath.Join(dir, "flowbridge.db"), sessionmap.Options{Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// The first message of a conversation stores its session.
	key := "slack/T0123/C0456/1716212345.000100"
	now := time.Now()
	err = s.PutSession(ctx, sessionmap.Session{Key: key, Agent: "helper", SessionUUID: "0190f5a2-7c1e-7abc-8def-0123456789ab", Created: now, LastUsed: now})
	if err != nil {
		log.Fatal(err)
	}
	// Later messages find it.
	rec, ok, err := s.Session(ctx, key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ok, rec.Agent, rec.SessionUUID)

	// Each platform event enters the inbox before the platform is
	// acknowledged; a platform retry of it is recognised.
	ev := store.InboxEntry{Key: "slack/msg/C0456/1716212345.000200", Conversation: key, Event: []byte(`{"text":"hi"}`), Received: now}
	first, _ := s.Receive(ctx, ev)
	again, _ := s.Receive(ctx, ev)
	fmt.Println(first, again)

	// Its request leaves, and its answer comes back with the turn.
	_ = s.MarkSent(ctx, ev.Key, now)
	rec.LastUsed = now.Add(time.Second)
	_ = s.Finish(ctx, ev.Key, "msg-ref", &sessionmap.Turn{Session: rec, Reply: "all good"}, now.Add(time.Second))
	pending, _ := s.Pending(ctx)
	reply, _, _ := s.LastReply(ctx, key)
	fmt.Println(len(pending), reply)
	// Output:
	// true helper 0190f5a2-7c1e-7abc-8def-0123456789ab
	// true false
	// 0 all good
}
