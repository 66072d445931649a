package postgres

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func TestReceiveConcurrent(t *testing.T) {
	// 64 goroutines on two replicas deliver the same keys, each in its own
	// order: every key is accepted exactly once.
	s1, dsn := openTest(t, Options{})
	s2 := openDSN(t, dsn, Options{MaxConns: 8})
	const goroutines, keys = 64, 200
	var accepted [keys]atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		s := []*Store{s1, s2}[g%2]
		wg.Go(func() {
			for _, i := range rand.Perm(keys) {
				ok, err := s.Receive(store.InboxEntry{
					Key: fmt.Sprintf("slack/ev/%d", i), Conversation: fmt.Sprintf("slack/T/C/%d", i%7),
					Event: fmt.Appendf(nil, "from %d", g),
				})
				if err != nil {
					t.Errorf("Receive = %v", err)
					return
				}
				if ok {
					accepted[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for i := range accepted {
		if n := accepted[i].Load(); n != 1 {
			t.Errorf("key %d accepted %d times, want once", i, n)
		}
	}
	p, err := s2.Pending()
	if err != nil || len(p) != keys {
		t.Fatalf("Pending() = %d entries, %v, want %d", len(p), err, keys)
	}
	seen := make(map[uint64]bool)
	for _, e := range p {
		if seen[e.Seq] {
			t.Errorf("Seq %d given twice", e.Seq)
		}
		seen[e.Seq] = true
	}
}

func TestFinishRace(t *testing.T) {
	// Replicas finishing one entry at once: exactly one succeeds, the
	// others are told it is answered, and the turn is applied once.
	s1, dsn := openTest(t, Options{})
	s2 := openDSN(t, dsn, Options{})
	sess := store.Session{Key: "c", Agent: "a", SessionUUID: "s", Created: at(0), LastUsed: at(0)}
	if err := s1.PutSession(sess); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Receive(store.InboxEntry{Key: "k", Conversation: "c"}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		s := []*Store{s1, s2}[i%2]
		wg.Go(func() {
			next := sess
			next.LastUsed = at(10 + i)
			err := s.Finish("k", fmt.Sprint(i), &store.Turn{Session: next, Reply: fmt.Sprint(i)}, at(10+i))
			switch {
			case err == nil:
				ok.Add(1)
			case !errorsIsAnswered(err):
				t.Errorf("Finish #%d = %v, want nil or answered already", i, err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 {
		t.Fatalf("%d Finishes succeeded, want 1", ok.Load())
	}
	reply, _, err := s1.LastReply("c")
	got, _, err2 := s1.Session("c")
	if err != nil || err2 != nil || got.LastUsed.Sub(at(10)).Microseconds() != mustAtoi(t, reply) {
		t.Errorf("after the race: reply %q, session %+v (%v, %v): want the winner's turn, whole", reply, got, err, err2)
	}
}

func errorsIsAnswered(err error) bool { return errors.Is(err, errAnswered) }

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("reply %q is not a number", s)
	}
	return n
}
