package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Scheduled is a flow run on a schedule ([[schedules]]), as the core runs
// it and shows it to admins in /flow help.
type Scheduled struct {
	Name   string
	Flow   string
	Params map[string]string
	// Cron is the schedule's expression, Timezone the zone it is read in
	// ("" for the process's local zone).
	Cron, Timezone string
	// Platform and Channel are where the result is posted.
	Platform, Channel string
}

// User is who a scheduled run is audited as: "schedule:<name>".
func (s Scheduled) User() User {
	return User{ID: "schedule:" + s.Name, Name: "schedule " + s.Name}
}

// ErrUnknownFlow is returned by RunScheduled for a flow the catalog no
// longer has.
var ErrUnknownFlow = errors.New("no such flow")

// SetSchedules replaces the schedules /flow help lists for admins.
func (b *Bridge) SetSchedules(list []Scheduled) {
	list = slices.Clone(list)
	b.set.schedules.Store(&list)
}

// ErrScheduleBusy is returned by RunScheduled for a run that found every
// scheduled slot taken until it had to give up.
var ErrScheduleBusy = errors.New("every scheduled slot stayed taken")

// ScheduledRun is a run of a schedule that the scheduler claimed
// (store.Schedules.ClaimRun), as it hands it to the core.
type ScheduledRun struct {
	Scheduled
	// At is the time the run was due; with the schedule's name it names
	// the run's inbox entry (ScheduleKey).
	At time.Time
	// Conversation is the channel's conversation key, and Route the
	// platform's route that answers in the channel (schedule.Target).
	Conversation string
	Route        json.RawMessage
	// GiveUp is when the run stops waiting for a scheduled slot; zero
	// waits as long as the bridge runs.
	GiveUp time.Time
}

// scheduledAt is when the run of the schedule key (ScheduleKey) was due;
// zero for a key not of that form.
func scheduledAt(key string) time.Time {
	i := strings.LastIndexByte(key, '/')
	n, err := strconv.ParseInt(key[i+1:], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// scheduleTime is t in the time zone of the schedule name as configured,
// UTC when it names none or is configured no longer.
func (b *Bridge) scheduleTime(name string, t time.Time) time.Time {
	if p := b.set.schedules.Load(); p != nil {
		for _, s := range *p {
			if s.Name != name || s.Timezone == "" {
				continue
			}
			if loc, err := time.LoadLocation(s.Timezone); err == nil {
				return t.In(loc)
			}
		}
	}
	return t.UTC()
}

// ScheduleKey is the inbox key of the run of the schedule name due at at:
// the same on every replica and after a restart, so that the inbox holds a
// run once however often it is handed in.
func ScheduleKey(name string, at time.Time) string {
	return fmt.Sprintf("schedule/%s/%d", name, at.UnixNano())
}

// scheduledEvent is the event of a scheduled run: the core's own, which
// no platform can hand in (Receive refuses KindScheduled).
func scheduledEvent(run ScheduledRun) Event {
	ev := Event{
		Kind: KindScheduled, Platform: run.Platform, Conversation: run.Conversation, Channel: run.Channel,
		User: run.User(), Flow: run.Flow, Params: maps.Clone(run.Params), Key: ScheduleKey(run.Name, run.At),
		Route: run.Route, schedule: run.Name,
	}
	if !run.GiveUp.IsZero() {
		ev.giveUp = run.GiveUp.UnixNano()
	}
	return ev
}

// RunScheduled hands the core a run of a schedule the scheduler claimed,
// and waits until this process is done with it (or ctx ends). The run
// takes the one path of every event: it is recorded in the inbox under its
// ScheduleKey, runs under its entry's lease (runSchedule), is marked sent
// before the flow is called, and its result is kept in the outbox before
// it is posted in the channel, once. So a crash neither loses it nor runs
// it twice: a run not yet sent runs on the next start (or another
// replica), one sent is told in the channel, an answer kept is posted.
// A run whose platform has not attached yet (its adapter still
// connecting) is recorded, and runs once it attaches.
//
// It returns why the run did not happen (ErrUnknownFlow, ErrScheduleBusy,
// parameters that no longer fit the flow; the channel is told each), or
// the error that kept it from the inbox; nil once it ran, or was left to
// another process or the next start.
func (b *Bridge) RunScheduled(ctx context.Context, run ScheduledRun) error {
	rec := b.receive(scheduledEvent(run))
	if err := rec.Wait(ctx); err != nil && !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("schedule %s: %w", run.Name, err)
	}
	select {
	case <-rec.Finished():
		return rec.outcome
	case <-ctx.Done():
		return nil // the bridge's to finish, or the next start's
	}
}

// runSchedule runs a scheduled run's flow with the schedule's fixed
// parameters, and posts the result publicly, as runs by the schedule are
// for the channel. Access rules, rate limits and confirmation are for
// people and do not apply: the operator who wrote the schedule chose the
// flow. It is audited as run by the schedule's user.
//
// Scheduled runs have their own capacity (ScheduledInFlight), apart from
// chat's, so that no load of people can refuse them. A run that finds it
// full waits for a slot until its giveUp (the scheduler passes a moment
// before the schedule's next run); if none frees by then, the channel
// hears that the run did not happen and why: a scheduled run is never
// dropped in silence. It returns what RunScheduled returns.
func (b *Bridge) runSchedule(ctx context.Context, log *zap.Logger, ev Event) error {
	if ev.missed {
		b.tell(ctx, log.With(zap.String("schedule", ev.schedule), zap.String("channel", ev.Channel)), ev, Reply{Kind: ReplyInfo, Text: ev.Text})
		return nil
	}
	f, ok := b.set.cat.Load().flows[strings.ToLower(ev.Flow)]
	log = log.With(zap.String("schedule", ev.schedule), zap.String("flow", ev.Flow), zap.String("channel", ev.Channel))
	if !ok {
		log.Error("scheduled flow is not configured")
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: fmt.Sprintf(msgScheduleNoFlow, ev.schedule, ev.Flow)})
		return fmt.Errorf("schedule %s: flow %s: %w", ev.schedule, ev.Flow, ErrUnknownFlow)
	}
	params := maps.Clone(ev.Params)
	if msg := b.checkParams(f, params); msg != "" {
		entry := b.auditEntry(ev, f.Name, params)
		entry.Outcome, entry.Detail = OutcomeInvalid, msg
		b.audit(ctx, log, entry)
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: fmt.Sprintf(msgScheduleInvalid, ev.schedule, msg)})
		return fmt.Errorf("schedule %s: %s", ev.schedule, msg)
	}
	var giveUp time.Time
	if ev.giveUp != 0 {
		giveUp = time.Unix(0, ev.giveUp)
	}
	if !giveUp.IsZero() && !b.cfg.Now().Before(giveUp) {
		// Taken up after its next run was due (flowbridge was down past
		// it; a restart within the period runs it): made now, it would
		// run out of its time, or beside the next. A missed run is
		// reported, not run late (ReportMissed), and this one is too.
		entry := b.auditEntry(ev, f.Name, params)
		entry.Outcome, entry.Detail = OutcomeRefused, "taken up after its next run was due"
		b.audit(ctx, log, entry)
		log.Warn("scheduled run taken up after its next run was due; not run late", zap.Time("give_up", giveUp))
		b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Text: fmt.Sprintf(msgScheduleLate, ev.schedule, b.scheduleTime(ev.schedule, scheduledAt(ev.Key)).Format("2006-01-02 15:04 MST"))})
		return nil
	}
	if !b.acquireScheduled(ctx, giveUp) {
		if by, stopped := stoppedBy(ctx); stopped {
			b.endStopped(ctx, log, ev, "", false, by)
			return nil
		}
		if ctx.Err() != nil {
			// The shutdown grace ended while it waited: like any work
			// not started, it stays received, for the next start.
			if ev.entry != nil {
				ev.entry.done = true
			}
			log.Warn("scheduled run not started before the shutdown; left for the next start")
			return fmt.Errorf("schedule %s: %w", ev.schedule, ctx.Err())
		}
		entry := b.auditEntry(ev, f.Name, params)
		entry.Outcome, entry.Detail = OutcomeRefused, "scheduled in-flight limit"
		b.audit(ctx, log, entry)
		log.Warn("scheduled run not started: every scheduled slot stayed taken", zap.Int("scheduled_in_flight", cap(b.slots.scheduled)))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: fmt.Sprintf(msgScheduleBusy, ev.schedule, cap(b.slots.scheduled))})
		return fmt.Errorf("schedule %s: %w", ev.schedule, ErrScheduleBusy)
	}
	defer b.releaseScheduled()
	b.runFlowHeld(ctx, log, ev, f, params, "")
	return nil
}

// acquireScheduled takes a scheduled slot, waiting for one until giveUp
// (zero: until ctx ends).
func (b *Bridge) acquireScheduled(ctx context.Context, giveUp time.Time) bool {
	select {
	case b.slots.scheduled <- struct{}{}:
		b.metrics.inflight(1)
		return true
	default:
	}
	var expired <-chan time.Time
	if !giveUp.IsZero() {
		t := time.NewTimer(giveUp.Sub(b.cfg.Now()))
		defer t.Stop()
		expired = t.C
	}
	select {
	case b.slots.scheduled <- struct{}{}:
		b.metrics.inflight(1)
		return true
	case <-expired:
	case <-ctx.Done():
	}
	b.metrics.refused("scheduled_in_flight_limit")
	return false
}

func (b *Bridge) releaseScheduled() {
	<-b.slots.scheduled
	b.metrics.inflight(-1)
}

// MissedRuns is the report of a schedule's runs missed while no flowbridge
// process was up, as the scheduler claimed it (the latest of them, Claimed,
// by store.Schedules.ClaimRun) and hands it to the core.
type MissedRuns struct {
	Scheduled
	// First is the first run missed, More how many were missed after it,
	// Claimed the latest (the one claimed), and Next the next run due.
	First   time.Time
	More    int
	Claimed time.Time
	Next    time.Time
	// Conversation and Route are the channel's, as for a ScheduledRun.
	Conversation string
	Route        json.RawMessage
}

// ReportMissed posts m in the schedule's channel, once: like a run, the
// report is an inbox entry (keyed by the schedule and the run claimed),
// and its text is kept in the outbox before it is posted, so a crash
// between the claim and the post neither loses it nor posts it twice. It
// returns once this process is done with it (or ctx ends), or the error
// that kept it from the inbox.
func (b *Bridge) ReportMissed(ctx context.Context, m MissedRuns) error {
	extra := ""
	if m.More > 0 {
		extra = fmt.Sprintf(" (and %d later run(s) until now)", m.More)
	}
	layout := "2006-01-02 15:04 MST"
	ev := Event{
		Kind: KindScheduled, Platform: m.Platform, Conversation: m.Conversation, Channel: m.Channel,
		User: m.User(), Key: fmt.Sprintf("schedule/%s/missed/%d", m.Name, m.Claimed.UnixNano()), Route: m.Route,
		Text:     fmt.Sprintf(msgScheduleMissed, m.Name, m.First.Format(layout), extra, m.Next.Format(layout)),
		schedule: m.Name, missed: true,
	}
	rec := b.receive(ev)
	if err := rec.Wait(ctx); err != nil && !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("schedule %s: missed runs: %w", m.Name, err)
	}
	select {
	case <-rec.Finished():
	case <-ctx.Done():
	}
	return nil
}

// scheduleHelp lists the schedules for an admin's /flow help.
func (b *Bridge) scheduleHelp(cat *catalog, ev Event) string {
	p := b.set.schedules.Load()
	if p == nil || len(*p) == 0 || !cat.isAdmin(ev.User) {
		return ""
	}
	var s strings.Builder
	s.WriteString("\n\n*Schedules* (shown to admins)\n")
	for _, sc := range *p {
		fmt.Fprintf(&s, "\n• `%s`: `%s` at `%s`", sc.Name, sc.Flow, sc.Cron)
		if sc.Timezone != "" {
			fmt.Fprintf(&s, " (%s)", sc.Timezone)
		}
		fmt.Fprintf(&s, " → %s channel `%s`", sc.Platform, sc.Channel)
		for _, k := range slices.Sorted(maps.Keys(sc.Params)) {
			fmt.Fprintf(&s, " `%s=%s`", k, sc.Params[k])
		}
	}
	return s.String()
}
