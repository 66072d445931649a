// Package schedule runs flows on cron expressions ([[schedules]]), once among replicas, and reports the runs missed while no flowbridge process was up.
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
)

// Spec is a parsed cron expression in its time zone.
type Spec struct{ s cron.Schedule }

// Next returns the first run after t.
func (s Spec) Next(t time.Time) time.Time { return s.s.Next(t) }

// Parse reads a standard five-field cron expression ("30 6 * * 1-5") or a
// descriptor ("@daily", "@every 1h"), in the time zone tz (an IANA name;
// "" for the process's local zone).
func Parse(expr, tz string) (Spec, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return Spec{}, errors.New("empty cron expression")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return Spec{}, errors.New("give the time zone in timezone, not in the expression")
	}
	if tz != "" {
		if _, err := time.LoadLocation(tz); err != nil {
			return Spec{}, fmt.Errorf("time zone %q: %w", tz, err)
		}
		expr = "CRON_TZ=" + tz + " " + expr
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return Spec{}, err
	}
	return Spec{s}, nil
}

// Core is what the scheduler asks of the bridge; *bridge.Bridge implements it.
type Core interface {
	// RunScheduled takes a claimed run into the inbox and runs it there,
	// as every event runs, and returns once this process is done with it.
	RunScheduled(ctx context.Context, run bridge.ScheduledRun) error
	ReportMissed(ctx context.Context, m bridge.MissedRuns) error
}

// Target is a platform a schedule posts to; the Slack and Discord adapters
// implement it.
type Target interface {
	// ChannelRoute returns the conversation key of channel, and the route
	// from which the platform's bridge.Platform.Responder answers in it:
	// a scheduled run, or the report of runs missed, is an event of the
	// platform's like any other, kept in the inbox with its route.
	ChannelRoute(ctx context.Context, channel string) (conversation string, route json.RawMessage, err error)
}

type entry struct {
	bridge.Scheduled
	spec    Spec
	next    time.Time
	running bool
}

// Scheduler runs the schedules until its context ends.
type Scheduler struct {
	core    Core
	state   store.Schedules
	targets map[string]Target
	log     *zap.Logger
	entries []*entry

	mu sync.Mutex // guards entry.running
	wg sync.WaitGroup
}

// New checks every schedule (its expression, time zone and platform) and
// returns a Scheduler; it starts nothing.
func New(list []bridge.Scheduled, core Core, state store.Schedules, targets map[string]Target, log *zap.Logger) (*Scheduler, error) {
	s := &Scheduler{core: core, state: state, targets: targets, log: log}
	var errs []error
	for _, sc := range list {
		spec, err := Parse(sc.Cron, sc.Timezone)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", sc.Name, err))
			continue
		}
		if targets[sc.Platform] == nil {
			errs = append(errs, fmt.Errorf("schedule %s: platform %q is not enabled", sc.Name, sc.Platform))
			continue
		}
		s.entries = append(s.entries, &entry{Scheduled: sc, spec: spec})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Run reports the runs missed since the last process, then runs each
// schedule at its times until ctx ends, and waits for the runs under way.
// A run is claimed in the store first, so that of replicas sharing it one
// runs it.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.wg.Wait()
	if len(s.entries) == 0 {
		<-ctx.Done()
		return nil
	}
	now := time.Now()
	for _, e := range s.entries {
		s.catchUp(ctx, e, now)
		e.next = e.spec.Next(now)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		first := s.entries[0].next
		for _, e := range s.entries[1:] {
			if e.next.Before(first) {
				first = e.next
			}
		}
		timer.Reset(time.Until(first))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		now := time.Now()
		for _, e := range s.entries {
			for !e.next.After(now) {
				at := e.next
				e.next = e.spec.Next(at)
				s.fire(ctx, e, at)
			}
		}
	}
}

// catchUp reports, once among replicas, the runs of e missed between its
// last run and now; a schedule never run before starts its record now.
func (s *Scheduler) catchUp(ctx context.Context, e *entry, now time.Time) {
	log := s.log.With(zap.String("schedule", e.Name))
	last, ok, err := s.state.LastRun(ctx, e.Name)
	if err != nil {
		log.Error("last run not read; missed runs cannot be reported", zap.Error(err))
		return
	}
	if !ok {
		if _, err := s.state.ClaimRun(ctx, e.Name, now); err != nil {
			log.Error("schedule start not recorded", zap.Error(err))
		}
		return
	}
	first := e.spec.Next(last)
	if first.After(now) {
		return
	}
	missed, more := first, 0
	for t := e.spec.Next(first); !t.After(now); t = e.spec.Next(t) {
		missed = t
		more++
		if more > 100000 {
			break // an "@every 1s" down for a week: the count is only a report
		}
	}
	claimed, err := s.state.ClaimRun(ctx, e.Name, missed)
	if err != nil {
		log.Error("missed runs not recorded", zap.Error(err))
		return
	}
	if !claimed {
		return // another replica reports them
	}
	next := e.spec.Next(now)
	log.Warn(fmt.Sprintf("missed run at %s while flowbridge was down", first.Format(time.RFC3339)),
		zap.Time("first_missed", first), zap.Int("more_missed", more), zap.Time("next", next))
	conv, route, err := s.targets[e.Platform].ChannelRoute(ctx, e.Channel)
	if err == nil {
		err = s.core.ReportMissed(ctx, bridge.MissedRuns{Scheduled: e.Scheduled, First: first, More: more, Claimed: missed, Next: next, Conversation: conv, Route: route})
	}
	if err != nil {
		log.Error("missed runs not posted", zap.Error(err))
	}
}

// giveUpBefore is when a run due at at stops waiting for the capacity of
// scheduled runs: a tenth of its period, at most a second, before its next
// run at next, so that it has ended (run or reported) when the next fires.
func giveUpBefore(at, next time.Time) time.Time {
	return next.Add(-min(next.Sub(at)/10, time.Second))
}

// fire claims the run of e at at and, when this process won it, hands it
// to the core in the background: from then on it is an inbox entry, which
// a crash does not lose (RunScheduled). A run still under way from the
// time before is not doubled.
func (s *Scheduler) fire(ctx context.Context, e *entry, at time.Time) {
	log := s.log.With(zap.String("schedule", e.Name), zap.Time("run_at", at))
	claimed, err := s.state.ClaimRun(ctx, e.Name, at)
	if err != nil {
		log.Error("run not claimed; not run", zap.Error(err))
		return
	}
	if !claimed {
		log.Debug("run claimed by another process")
		return
	}
	s.mu.Lock()
	busy := e.running
	e.running = true
	s.mu.Unlock()
	if busy {
		log.Warn("previous run still under way; this one is skipped")
		return
	}
	giveUp := giveUpBefore(at, e.next)
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			e.running = false
			s.mu.Unlock()
		}()
		conv, route, err := s.targets[e.Platform].ChannelRoute(ctx, e.Channel)
		if err != nil {
			log.Error("schedule target not reachable", zap.Error(err))
			return
		}
		log.Info("scheduled run")
		run := bridge.ScheduledRun{Scheduled: e.Scheduled, At: at, Conversation: conv, Route: route, GiveUp: giveUp}
		if err := s.core.RunScheduled(ctx, run); err != nil {
			log.Error("scheduled run not started", zap.Error(err))
		}
	})
}
