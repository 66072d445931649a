package sessionmap_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/flowbridge/flowbridge/sessionmap"
)

func Example() {
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
	err = s.PutSession(sessionmap.Session{Key: key, Agent: "helper", SessionUUID: "0190f5a2-7c1e-7abc-8def-0123456789ab", Created: now, LastUsed: now})
	if err != nil {
		log.Fatal(err)
	}
	// Later messages find it.
	rec, ok, err := s.Session(key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ok, rec.Agent, rec.SessionUUID)

	// A platform retry of the same event is recognised.
	first, _ := s.MarkEvent("Ev0123", 10*time.Minute, now)
	again, _ := s.MarkEvent("Ev0123", 10*time.Minute, now.Add(time.Second))
	fmt.Println(first, again)
	// Output:
	// true helper 0190f5a2-7c1e-7abc-8def-0123456789ab
	// true false
}
