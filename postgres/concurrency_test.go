package postgres

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

func TestReceiveConcurrent(t *testing.T) {
	// 64 goroutines on four replicas deliver the same keys, each in its own
	// order: every key is accepted exactly once, and batches of different
	// replicas meeting the same keys never deadlock.
	t.Parallel()
	s1, dsn := openEmpty(t, Options{})
	s2 := openDSN(t, dsn, Options{MaxConns: 8})
	replicas := []*Store{s1, s2, openDSN(t, dsn, Options{MaxConns: 2}), openDSN(t, dsn, Options{})}
	const goroutines, keys = 64, 200
	var accepted [keys]atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		s := replicas[g%len(replicas)]
		wg.Go(func() {
			for _, i := range rand.Perm(keys) {
				ok, err := s.Receive(t.Context(), store.InboxEntry{
					Key: fmt.Sprintf("slack/ev/%d", i), Conversation: fmt.Sprintf("slack/T/C/%d", i%7),
					Event:    fmt.Appendf(nil, "from %d", g),
					Received: time.Now(),
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
	p, err := s2.Pending(t.Context())
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
	t.Parallel()
	s1, dsn := openEmpty(t, Options{})
	s2 := openDSN(t, dsn, Options{})
	sess := store.Session{Key: "c", Agent: "a", SessionUUID: "s", Created: at(0), LastUsed: at(0)}
	if err := s1.PutSession(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Receive(t.Context(), store.InboxEntry{Key: "k", Conversation: "c", Received: time.Now()}); err != nil {
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
			err := s.Finish(t.Context(), "k", fmt.Sprint(i), &store.Turn{Session: next, Reply: fmt.Sprint(i)}, at(10+i))
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
	reply, _, err := s1.LastReply(t.Context(), "c")
	got, _, err2 := s1.Session(t.Context(), "c")
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

func TestInsertBatch(t *testing.T) {
	// One batch: entries inserted in its order, the first of a key wins,
	// a key held already is not new.
	t.Parallel()
	s, _ := openEmpty(t, Options{})
	if ok, err := s.Receive(t.Context(), store.InboxEntry{Key: "held", Conversation: "c", Received: time.Now()}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	var batch []*receiveReq
	for _, k := range []string{"b", "a", "held", "b", "c", "a"} {
		batch = append(batch, &receiveReq{e: store.InboxEntry{Key: k, Conversation: "c", Event: []byte("#" + fmt.Sprint(len(batch))), Received: at(len(batch))}})
	}
	s.insertBatch(batch)
	var got []bool
	for _, r := range batch {
		if r.err != nil {
			t.Fatalf("insertBatch: %v", r.err)
		}
		got = append(got, r.isNew)
	}
	if want := []bool{true, true, false, false, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("new = %v, want %v", got, want)
	}
	p, err := s.Pending(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var keys, events []string
	for _, e := range p {
		keys, events = append(keys, e.Key), append(events, string(e.Event))
	}
	if fmt.Sprint(keys) != "[held b a c]" || fmt.Sprint(events) != "[ #0 #1 #4]" {
		t.Errorf("Pending() = %q with events %q, want [held b a c] with [\"\" #0 #1 #4]: batch order, first copy", keys, events)
	}
}

func TestBatchLen(t *testing.T) {
	t.Parallel()
	req := func(size int) *receiveReq { return &receiveReq{e: store.InboxEntry{Event: make([]byte, size)}} }
	many := make([]*receiveReq, 1000)
	for i := range many {
		many[i] = req(10)
	}
	tests := []struct {
		name  string
		queue []*receiveReq
		want  int
	}{
		{"empty", nil, 0},
		{"few", many[:3], 3},
		{"capped by count", many, maxBatch - 1},
		{"capped by bytes", []*receiveReq{req(maxBatchBytes / 2), req(maxBatchBytes / 2), req(1)}, 2},
		{"one too large waits", []*receiveReq{req(maxBatchBytes + 1), req(1)}, 0},
	}
	for _, tt := range tests {
		if got := batchLen(tt.queue); got != tt.want {
			t.Errorf("batchLen(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestReceiveBatchFails(t *testing.T) {
	// A batch whose statement fails answers every member with the error,
	// and the next batches run as before.
	t.Parallel()
	s, dsn := openTest(t, Options{})
	exec(t, dsn, `ALTER TABLE inbox RENAME TO inbox_away`)
	var failed atomic.Int32
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			if _, err := s.Receive(t.Context(), store.InboxEntry{Key: fmt.Sprint(i), Received: time.Now()}); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 32 {
		t.Errorf("%d of 32 Receives failed without their table, want all", failed.Load())
	}
	exec(t, dsn, `ALTER TABLE inbox_away RENAME TO inbox`)
	if ok, err := s.Receive(t.Context(), store.InboxEntry{Key: "after", Received: time.Now()}); err != nil || !ok {
		t.Errorf("Receive after the table is back = %v, %v, want true, nil", ok, err)
	}
}

func TestReceiveRefusalAlone(t *testing.T) {
	// Refused entries among concurrent ones fail alone.
	t.Parallel()
	s, _ := openEmpty(t, Options{})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			key := fmt.Sprint("k/", i)
			if i%4 == 0 {
				key = strings.Repeat("x", MaxKeyLen+1+i)
			}
			ok, err := s.Receive(t.Context(), store.InboxEntry{Key: key, Conversation: "c", Received: time.Now()})
			if (err == nil) != (i%4 != 0) || err == nil && !ok {
				t.Errorf("Receive #%d = %v, %v", i, ok, err)
			}
		})
	}
	wg.Wait()
	if p, err := s.Pending(t.Context()); err != nil || len(p) != 48 {
		t.Errorf("Pending() = %d entries, %v, want 48", len(p), err)
	}
}
