package bridge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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

// RunScheduled runs s's flow with its fixed parameters and posts the
// result through r, publicly, as runs by the schedule are for the channel.
// Access rules, rate limits and confirmation are for people and do not
// apply: the operator who wrote the schedule chose the flow. It is audited
// as run by s.User(). conversation keys the channel for the audit.
//
// Scheduled runs have their own capacity (ScheduledInFlight), apart from
// chat's, so that no load of people can refuse them. A run that finds it
// full waits for a slot until giveUp (the scheduler passes a moment before
// the schedule's next run; zero waits as long as ctx); if none frees by
// then, the channel hears that the run did not happen and why: a scheduled
// run is never dropped in silence.
func (b *Bridge) RunScheduled(ctx context.Context, s Scheduled, conversation string, r Responder, giveUp time.Time) error {
	f, ok := b.set.cat.Load().flows[strings.ToLower(s.Flow)]
	log := b.log.With(zap.String("schedule", s.Name), zap.String("flow", s.Flow), zap.String("platform", s.Platform), zap.String("channel", s.Channel))
	ev := Event{
		Kind: KindCommand, Platform: s.Platform, Conversation: conversation, Channel: s.Channel,
		User: s.User(), Flow: s.Flow, Params: s.Params, reply: publicOnly{r},
	}
	if !ok {
		log.Error("scheduled flow is not configured")
		b.send(ctx, ev, Reply{Kind: ReplyError, Text: fmt.Sprintf(msgScheduleNoFlow, s.Name, s.Flow)})
		return fmt.Errorf("schedule %s: flow %s: %w", s.Name, s.Flow, ErrUnknownFlow)
	}
	params := maps.Clone(s.Params)
	if msg := b.checkParams(f, params); msg != "" {
		entry := b.auditEntry(ev, f.Name, params)
		entry.Outcome, entry.Detail = OutcomeInvalid, msg
		b.audit(ctx, log, entry)
		b.send(ctx, ev, Reply{Kind: ReplyError, Text: fmt.Sprintf(msgScheduleInvalid, s.Name, msg)})
		return fmt.Errorf("schedule %s: %s", s.Name, msg)
	}
	if !b.acquireScheduled(ctx, giveUp) {
		entry := b.auditEntry(ev, f.Name, params)
		entry.Outcome, entry.Detail = OutcomeRefused, "scheduled in-flight limit"
		b.audit(ctx, log, entry)
		if ctx.Err() != nil {
			return fmt.Errorf("schedule %s: %w", s.Name, ctx.Err())
		}
		log.Warn("scheduled run not started: every scheduled slot stayed taken", zap.Int("scheduled_in_flight", cap(b.slots.scheduled)))
		b.send(ctx, ev, Reply{Kind: ReplyError, Text: fmt.Sprintf(msgScheduleBusy, s.Name, cap(b.slots.scheduled))})
		return fmt.Errorf("schedule %s: %w", s.Name, ErrScheduleBusy)
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

// ReportMissed tells s's channel, through r, that runs of s were missed
// while no flowbridge process was up: the first at first, and more after
// it; the next run is at next. Missed runs are not run late (a report at
// 9:00 run at noon misleads), and not skipped in silence.
func (b *Bridge) ReportMissed(ctx context.Context, s Scheduled, r Responder, first time.Time, more int, next time.Time) error {
	extra := ""
	if more > 0 {
		extra = fmt.Sprintf(" (and %d later run(s) until now)", more)
	}
	layout := "2006-01-02 15:04 MST"
	_, err := r.Send(ctx, Reply{Kind: ReplyInfo, Text: fmt.Sprintf(msgScheduleMissed, s.Name, first.Format(layout), extra, next.Format(layout))})
	return err
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

// publicOnly posts every reply of a scheduled run for the channel: there is
// no user to see a private one, and no one to press "Share with channel".
type publicOnly struct{ r Responder }

func public(rep Reply) Reply {
	rep.Ephemeral = false
	rep.Buttons = slices.DeleteFunc(slices.Clone(rep.Buttons), func(b Button) bool { return b.Action.ID == ActionShare })
	return rep
}

func (p publicOnly) Send(ctx context.Context, rep Reply) (MessageRef, error) {
	return p.r.Send(ctx, public(rep))
}

// Update replaces in place where the responder can, and sends otherwise.
func (p publicOnly) Update(ctx context.Context, ref MessageRef, rep Reply) error {
	if u, ok := p.r.(Updater); ok {
		return u.Update(ctx, ref, public(rep))
	}
	_, err := p.r.Send(ctx, public(rep))
	return err
}

// Progress rewrites in place where the responder can.
func (p publicOnly) Progress(ctx context.Context, ref MessageRef, rep Reply) error {
	if pr, ok := p.r.(Progresser); ok {
		return pr.Progress(ctx, ref, public(rep))
	}
	return errors.New("progress cannot be shown in place")
}
