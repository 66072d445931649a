package schedule

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/sessionmap"
)

// core records what the scheduler asks of the bridge.
type core struct {
	mu     sync.Mutex
	runs   []time.Time
	giveUp []time.Time
	users  []string
	keys   []string
	missed []string
}

func (c *core) RunScheduled(_ context.Context, run bridge.ScheduledRun) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs = append(c.runs, time.Now())
	c.giveUp = append(c.giveUp, run.GiveUp)
	c.users = append(c.users, run.User().ID+"@"+run.Conversation)
	c.keys = append(c.keys, bridge.ScheduleKey(run.Name, run.At)+" "+string(run.Route))
	return nil
}

func (c *core) ReportMissed(_ context.Context, m bridge.MissedRuns) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.missed = append(c.missed, m.First.UTC().Format("15:04")+"+"+strconv.Itoa(m.More)+"→"+m.Next.UTC().Format("15:04"))
	return nil
}

func (c *core) snapshot() ([]time.Time, []string, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.runs...), append([]string(nil), c.users...), append([]string(nil), c.missed...)
}

// target posts nowhere: the scheduler's part ends at the responder.
type target struct{}

func (target) ChannelRoute(_ context.Context, channel string) (string, json.RawMessage, error) {
	return "slack/T1/" + channel, json.RawMessage(`{"channel":"` + channel + `"}`), nil
}

func openStore(t *testing.T, path string) *sessionmap.Store {
	t.Helper()
	st, err := sessionmap.Open(path, sessionmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var every5 = bridge.Scheduled{Name: "report", Flow: "healthcheck", Cron: "*/5 * * * *", Timezone: "UTC", Platform: "slack", Channel: "C1"}

// start runs a scheduler for list on state until the test's bubble ends it.
func start(t *testing.T, c *core, state store.Schedules, list ...bridge.Scheduled) (stop func()) {
	t.Helper()
	s, err := New(list, c, state, map[string]Target{"slack": target{}}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	}
}

// TestRunsOnCron: "*/5 * * * *" runs at :05, :10 and :15 of a quarter hour,
// as the schedule's user, in its channel.
func TestRunsOnCron(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t, filepath.Join(t.TempDir(), "s.db"))
		c := &core{}
		begin := time.Now()
		stop := start(t, c, st, every5)
		time.Sleep(16 * time.Minute)
		synctest.Wait()
		stop()
		runs, users, missed := c.snapshot()
		if len(runs) != 3 || len(missed) != 0 {
			t.Fatalf("runs at %v, missed %v; want 3 runs, none missed", runs, missed)
		}
		for i, r := range runs {
			if want := begin.Add(time.Duration(i+1) * 5 * time.Minute); !r.Equal(want) {
				t.Errorf("run %d at %v, want %v", i, r, want)
			}
		}
		c.mu.Lock()
		for i, g := range c.giveUp {
			// A run waiting for capacity gives up a second before the next.
			if want := runs[i].Add(5*time.Minute - time.Second); !g.Equal(want) {
				t.Errorf("run %d gives up waiting at %v, want %v", i, g, want)
			}
		}
		for i, k := range c.keys {
			// The run's inbox key names the schedule and the time it was
			// due; its route is the target's route of the channel.
			due := begin.Add(time.Duration(i+1) * 5 * time.Minute)
			if want := "schedule/report/" + strconv.FormatInt(due.UnixNano(), 10) + ` {"channel":"C1"}`; k != want {
				t.Errorf("run %d handed in as %q, want %q", i, k, want)
			}
		}
		c.mu.Unlock()
		if users[0] != "schedule:report@slack/T1/C1" {
			t.Errorf("run as %q, want schedule:report in slack/T1/C1", users[0])
		}
		if last, ok, _ := st.LastRun(t.Context(), "report"); !ok || !last.Equal(begin.Add(15*time.Minute)) {
			t.Errorf("LastRun = %v, %v, want the 15-minute run", last, ok)
		}
	})
}

// TestReplicasRunOnce: two schedulers sharing a store run each time once.
func TestReplicasRunOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t, filepath.Join(t.TempDir(), "s.db"))
		a, b := &core{}, &core{}
		stopA := start(t, a, st, every5)
		stopB := start(t, b, st, every5)
		time.Sleep(31 * time.Minute)
		synctest.Wait()
		stopA()
		stopB()
		ra, _, _ := a.snapshot()
		rb, _, _ := b.snapshot()
		if len(ra)+len(rb) != 6 {
			t.Errorf("replica A ran %d times, B %d; want 6 runs in all, each once", len(ra), len(rb))
		}
	})
}

// TestMissedRunsReported: runs missed while no process was up are posted
// and logged once, not run late; the schedule then goes on.
func TestMissedRunsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.db")
		st := openStore(t, path)
		first := &core{}
		stop := start(t, first, st, every5)
		time.Sleep(6 * time.Minute) // ran at :05
		synctest.Wait()
		stop()
		// Down for an hour: :10 to 1:05 are missed (12 runs).
		time.Sleep(time.Hour)
		again, other := &core{}, &core{}
		stop = start(t, again, st, every5)
		stopOther := start(t, other, st, every5) // a replica starting beside it
		time.Sleep(time.Minute)
		synctest.Wait()
		stop()
		stopOther()
		_, _, missed := again.snapshot()
		_, _, missedOther := other.snapshot()
		all := append(missed, missedOther...)
		if len(all) != 1 || all[0] != "00:10+11→01:10" {
			t.Errorf("missed-run reports %q, want one: first 00:10, 11 more, next 01:10", all)
		}
		if runs, _, _ := again.snapshot(); len(runs) != 0 {
			t.Errorf("%d runs after the restart, want none run late", len(runs))
		}
	})
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		expr, tz string
		ok       bool
	}{
		{"30 6 * * 1-5", "Europe/Berlin", true},
		{"@daily", "", true},
		{"@every 90m", "UTC", true},
		{"61 * * * *", "", false},
		{"* * * *", "", false},
		{"0 6 * * *", "Mars/Olympus", false},
		{"CRON_TZ=UTC 0 6 * * *", "", false},
		{"", "", false},
	} {
		if _, err := Parse(tc.expr, tc.tz); (err == nil) != tc.ok {
			t.Errorf("Parse(%q, %q) = %v, want ok %v", tc.expr, tc.tz, err, tc.ok)
		}
	}
	s, err := Parse("0 6 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	got := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Next = %v, want 06:00 in Berlin, %v", got, want)
	}
}
