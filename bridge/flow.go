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

	"github.com/flowbridge/flowbridge/bridge/markdown"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// flow handles "/flow ARGS" and "!flow ARGS".
func (b *Bridge) flow(ctx context.Context, log *zap.Logger, ev Event, args string) {
	var (
		name   string
		params map[string]string
		err    error
	)
	if ev.Flow != "" {
		// Typed by the platform: nothing to parse.
		name, params = strings.ToLower(sanitize(ev.Flow)), make(map[string]string, len(ev.Params))
		for k, v := range ev.Params {
			params[sanitize(k)] = sanitize(v)
		}
	} else {
		args = sanitize(args)
		if len(args) > b.limitsNow().MaxMessageBytes {
			b.metrics.refused("message_too_long")
			b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: fmt.Sprintf(msgTooLong, len(args), b.limitsNow().MaxMessageBytes)})
			return
		}
		name, params, err = ParseFlowArgs(args)
	}
	cat := b.set.cat.Load()
	if err != nil && name == "" {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: err.Error() + " Type `/flow help` for the flows and their parameters."})
		return
	}
	if name == "" || (name == "help" && len(params) == 0 && cat.flows["help"] == nil) {
		b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Ephemeral: true, Text: b.flowHelp(cat, ev)})
		return
	}
	f, ok := cat.flows[name]
	if !ok {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: unknownFlowText(name, b.allowedFlows(cat, ev))})
		return
	}
	log = log.WithLazy(zap.String("flow", f.Name))
	entry := b.auditEntry(ev, f.Name, params)
	if rule, allowed := admits(f, ev); !allowed {
		b.metrics.refused("flow_access")
		entry.Outcome, entry.Detail = OutcomeRefused, rule
		b.audit(ctx, log, entry)
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: refusalText(f, rule)})
		return
	}
	if ok, wait := b.set.limits.Load().allowFlow(ev.Platform, ev.User.ID); !ok {
		b.metrics.refused("flow_rate")
		entry.Outcome, entry.Detail = OutcomeRefused, "rate limit"
		b.audit(ctx, log, entry)
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: fmt.Sprintf(msgFlowRate, humanWait(wait))})
		return
	}
	if err != nil {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: err.Error() + "\n\n" + usage(f)})
		return
	}
	if msg := b.checkParams(f, params); msg != "" {
		entry.Outcome, entry.Detail = OutcomeInvalid, msg
		b.audit(ctx, log, entry)
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msg + "\n\n" + usage(f)})
		return
	}
	if f.Confirm && len(f.Approvers) > 0 {
		b.askApproval(ctx, log, ev, f, params)
		return
	}
	if f.Confirm {
		b.askConfirmation(ctx, log, ev, f, params)
		return
	}
	b.runFlow(ctx, log, ev, f, params, "")
}

// runFlow runs a checked flow: it acknowledges, calls the API, and replaces the
// acknowledgement with the result. A flow is never retried once sent: it may
// have side effects.
//
// note, when not empty, leads the progress reply (who confirmed the run);
// the first reply to a button press replaces the question it was on.
func (b *Bridge) runFlow(ctx context.Context, log *zap.Logger, ev Event, f *Flow, params map[string]string, note string) {
	if !b.acquire() {
		entry := b.auditEntry(ev, f.Name, params)
		entry.Outcome, entry.Detail = OutcomeRefused, "in-flight limit"
		b.audit(ctx, log, entry)
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgInFlight})
		return
	}
	defer b.release()
	b.runFlowHeld(ctx, log, ev, f, params, note)
}

// runFlowHeld is runFlow once the run holds its in-flight slot.
func (b *Bridge) runFlowHeld(ctx context.Context, log *zap.Logger, ev Event, f *Flow, params map[string]string, note string) {
	entry := b.auditEntry(ev, f.Name, params)
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = b.cfg.DefaultFlowTimeout
	}
	if ev.MaxFlowTimeout > 0 && timeout > ev.MaxFlowTimeout {
		timeout = ev.MaxFlowTimeout
	}
	if !b.markSent(ctx, log, ev) {
		return
	}
	b.sessionStatus(ctx, ev, SessionProcessing)
	defer b.sessionStatus(ctx, ev, SessionActive)
	// Audited before it is sent, so a run cut short by a crash leaves a trace.
	started := entry
	started.Outcome = OutcomeStarted
	b.audit(ctx, log, started)
	// A scheduled run is for the channel: there is no user to see a
	// private reply, to press "Share with channel", or to stop it.
	public, stopKey := f.Public, ev.Key
	if ev.Kind == KindScheduled {
		public, stopKey = true, ""
	}
	first := withStop(stopKey, flowProgress(note, f, public, 0))
	first.Replace = note != ""
	ref := b.send(ctx, ev, first)

	start := b.cfg.Now()
	stopProgress := b.progress(ctx, log, ev.reply, ref, func(elapsed time.Duration) Reply {
		return withStop(stopKey, flowProgress(note, f, public, elapsed))
	})
	run, err := b.ws.RunFlowSync(ctx, f.UUID, params, timeout)
	stopProgress()
	elapsed := b.cfg.Now().Sub(start)
	entry.Time = b.cfg.Now()
	entry.Duration = elapsed
	footer := fmt.Sprintf("%s · run by %s · %s", f.Name, displayName(ev.User), humanElapsed(elapsed))
	if err != nil {
		entry.Outcome, entry.Detail = outcomeOf(ctx, err), truncate.Bytes(err.Error(), 1000)
		if by, ok := stoppedBy(ctx); ok {
			entry.Detail = "stopped by " + by
		}
		b.audit(ctx, log, entry)
		b.metrics.flowRun(f.Name, entry.Outcome)
		log.Warn("flow failed", zap.Error(err), zap.Duration("duration", elapsed))
		b.deliver(ctx, log, ev, ref, Reply{Kind: ReplyError, Ephemeral: !public, Text: flowErrorText(ctx, err, f.Name, timeout), Footer: footer}, nil)
		return
	}
	entry.Outcome = OutcomeOK
	b.audit(ctx, log, entry)
	b.metrics.flowRun(f.Name, OutcomeOK)
	log.Info("flow finished", zap.Duration("duration", elapsed))
	r := Reply{Kind: ReplyFlow, Ephemeral: !public, Text: renderFlowOutput(run), Footer: footer}
	if r.Ephemeral {
		if id, ok := b.putShare(ctx, log, share{text: r.Text, footer: footer, owner: ev.User.ID}); ok {
			r.Buttons = []Button{{Action: Action{ID: ActionShare, Value: id}, Label: "Share with channel", Style: "primary"}}
		}
	}
	b.deliver(ctx, log, ev, ref, b.asFile(ev, r, fileBase(f.Name), jsonResult(run)), nil)
}

func outcomeOf(ctx context.Context, err error) string {
	if _, ok := stoppedBy(ctx); ok {
		return OutcomeStopped
	}
	switch {
	case ctx.Err() != nil:
		return OutcomeCutOff
	case errors.Is(err, workspace.ErrTimeout):
		return OutcomeTimeout
	case errors.Is(err, workspace.ErrFlowFailed):
		return OutcomeFailed
	}
	return OutcomeError
}

// renderFlowOutput shows result.output.response as the message and any other
// output shape as pretty JSON.
func renderFlowOutput(run *workspace.FlowRun) string {
	if s, ok := run.Response(); ok {
		if strings.TrimSpace(s) == "" {
			return "_The flow returned an empty response._"
		}
		return s
	}
	if len(run.Output) == 0 || string(run.Output) == "null" {
		return "_The flow finished without output._"
	}
	return markdown.CodeBlock("json", markdown.PrettyJSON(run.Output))
}

// checkParams validates parameters against the flow's placeholders and returns
// a sentence naming what is wrong, or "".
func (b *Bridge) checkParams(f *Flow, params map[string]string) string {
	lim := b.limitsNow()
	if len(params) > lim.MaxParams {
		return fmt.Sprintf("Too many parameters (%d; at most %d).", len(params), lim.MaxParams)
	}
	known := make(map[string]*Param, len(f.Params))
	for i := range f.Params {
		known[f.Params[i].Name] = &f.Params[i]
	}
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		p, ok := known[k]
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		v := params[k]
		if len(v) > lim.MaxValueBytes {
			return fmt.Sprintf("The value of %s is too long (%d bytes; at most %d).", k, len(v), lim.MaxValueBytes)
		}
		if len(p.Choices) > 0 && !slices.Contains(p.Choices, v) {
			return fmt.Sprintf("%q is not a valid %s. Choose one of: %s.", v, k, strings.Join(p.Choices, ", "))
		}
	}
	if len(unknown) > 0 {
		return fmt.Sprintf("The flow *%s* has no parameter %s. Valid parameters: %s.", f.Name, joinQuoted(unknown), paramNames(f))
	}
	var missing []string
	for _, p := range f.Params {
		if v, ok := params[p.Name]; p.Required && (!ok || v == "") {
			missing = append(missing, p.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("The flow *%s* needs %s.", f.Name, joinQuoted(missing))
	}
	return ""
}

func joinQuoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	return strings.Join(q, ", ")
}

func paramNames(f *Flow) string {
	if len(f.Params) == 0 {
		return "none"
	}
	names := make([]string, len(f.Params))
	for i, p := range f.Params {
		names[i] = p.Name
	}
	return joinQuoted(names)
}

// usage is one line showing how to call a flow.
func usage(f *Flow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: `/flow %s", f.Name)
	for _, p := range f.Params {
		if p.Required {
			fmt.Fprintf(&b, " %s=…", p.Name)
		} else {
			fmt.Fprintf(&b, " [%s=…]", p.Name)
		}
	}
	b.WriteString("`")
	return b.String()
}

func unknownFlowText(name string, allowed []*Flow) string {
	if len(allowed) == 0 {
		return fmt.Sprintf("There is no flow *%s*, and no flows are available to you.", name)
	}
	names := make([]string, len(allowed))
	for i, f := range allowed {
		names[i] = f.Name
	}
	return fmt.Sprintf("There is no flow *%s*. Available flows: %s. Type `/flow help` for their parameters.", name, joinQuoted(names))
}

// flowHelp lists the flows the caller may run, with their parameters.
func (b *Bridge) flowHelp(cat *catalog, ev Event) string {
	flows := b.allowedFlows(cat, ev)
	if len(flows) == 0 {
		return "No flows are available to you here."
	}
	var s strings.Builder
	s.WriteString("*Flows you can run*\n")
	for _, f := range flows {
		fmt.Fprintf(&s, "\n• `%s`", f.Name)
		if f.Description != "" {
			fmt.Fprintf(&s, ": %s", f.Description)
		}
		for _, p := range f.Params {
			req := "optional"
			if p.Required {
				req = "required"
			}
			fmt.Fprintf(&s, "\n    `%s` (%s)", p.Name, req)
			if p.Description != "" {
				fmt.Fprintf(&s, ": %s", p.Description)
			}
			if len(p.Choices) > 0 {
				fmt.Fprintf(&s, " — one of %s", strings.Join(p.Choices, ", "))
			}
		}
	}
	s.WriteString("\n\nRun one with `/flow NAME key=value …`; quote values with spaces: `service=\"nginx proxy\"`.")
	s.WriteString(b.scheduleHelp(cat, ev))
	return s.String()
}

func (b *Bridge) allowedFlows(cat *catalog, ev Event) []*Flow {
	var out []*Flow
	for _, n := range cat.flowNames {
		if _, ok := admits(cat.flows[n], ev); ok {
			out = append(out, cat.flows[n])
		}
	}
	return out
}

func (b *Bridge) auditEntry(ev Event, flow string, params map[string]string) AuditEntry {
	return AuditEntry{
		Time: b.cfg.Now(), Platform: ev.Platform, User: ev.User.ID, UserName: ev.User.Name,
		Channel: ev.Channel, Conversation: ev.Conversation, Flow: flow, Params: b.auditParams(params), Approver: ev.approver,
	}
}

// auditParams bounds what a request writes to the audit log: refused requests
// are user input too, and must not grow the store without limit.
func (b *Bridge) auditParams(params map[string]string) map[string]string {
	lim := b.limitsNow()
	if len(params) > lim.MaxParams {
		return map[string]string{"…": fmt.Sprintf("%d parameters, not recorded", len(params))}
	}
	out, cloned := params, false
	for k, v := range params {
		if len(v) > lim.MaxValueBytes || len(k) > lim.MaxValueBytes {
			if !cloned {
				out, cloned = maps.Clone(params), true
			}
			delete(out, k)
			out[truncate.Bytes(k, 64)] = truncate.Bytes(v, 256) + fmt.Sprintf(" (%d bytes)", len(v))
		}
	}
	return out
}

func (b *Bridge) audit(ctx context.Context, log *zap.Logger, e AuditEntry) {
	if err := b.store.AppendAudit(recordCtx(ctx), e); err != nil {
		log.Error("audit entry not written", zap.Error(err))
	}
}

func displayName(u User) string {
	if u.Name != "" {
		return u.Name
	}
	return u.ID
}

func humanElapsed(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// Ephemeral reports whether the core answers a command to its user only, so
// that an adapter can acknowledge it the same way (a Discord deferred
// response fixes the visibility of the answer that replaces it). The core
// decides; adapters ask. Flows follow their public setting, and a flow
// with approvers is posted for them to answer; /agent share, reset and use
// are posted for the conversation; the rest is private.
func (b *Bridge) Ephemeral(ev Event) bool {
	j := classify(ev)
	switch j.command {
	case CommandFlow:
		name := ev.Flow
		if name == "" {
			name, _, _ = ParseFlowArgs(sanitize(j.args))
		}
		if f, ok := b.set.cat.Load().flows[strings.ToLower(name)]; ok {
			return !f.Public && !(f.Confirm && len(f.Approvers) > 0)
		}
	case CommandAgent:
		sub, _, _ := strings.Cut(strings.TrimSpace(j.args), " ")
		switch strings.ToLower(sub) {
		case "share", "reset", "use":
			return false
		}
	}
	return true
}
