package bridge

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// FormFlows returns the flows the event's user may run there (the same
// rules as /flow help), sorted by name, for a form that offers them.
func (b *Bridge) FormFlows(ev Event) []Flow {
	allowed := b.allowedFlows(b.set.cat.Load(), ev)
	out := make([]Flow, len(allowed))
	for i, f := range allowed {
		out[i] = *f
	}
	return out
}

// CheckFlowForm says what is wrong with a flow form's submission before it
// is taken: a sentence per parameter name, and under "" what concerns the
// form as a whole (no such flow, not allowed to run it, too many values).
// It returns nil when the submission may run; the run checks it once more.
func (b *Bridge) CheckFlowForm(ev Event, name string, params map[string]string) map[string]string {
	cat := b.set.cat.Load()
	f, ok := cat.flows[strings.ToLower(sanitize(name))]
	if !ok {
		if name == "" {
			return map[string]string{"": "Choose a flow."}
		}
		return map[string]string{"": unknownFlowText(name, b.allowedFlows(cat, ev))}
	}
	if rule, allowed := admits(f, ev); !allowed {
		return map[string]string{"": refusalText(f, rule)}
	}
	lim := b.limitsNow()
	if len(params) > lim.MaxParams {
		return map[string]string{"": fmt.Sprintf("Too many parameters (%d; at most %d).", len(params), lim.MaxParams)}
	}
	problems := map[string]string{}
	known := map[string]bool{}
	for _, p := range f.Params {
		known[p.Name] = true
		v := sanitize(params[p.Name])
		switch {
		case strings.TrimSpace(v) == "" && p.Required:
			problems[p.Name] = "Required."
		case len(v) > lim.MaxValueBytes:
			problems[p.Name] = fmt.Sprintf("Too long (%d bytes; at most %d).", len(v), lim.MaxValueBytes)
		case v != "" && len(p.Choices) > 0 && !slices.Contains(p.Choices, v):
			problems[p.Name] = fmt.Sprintf("Choose one of: %s.", strings.Join(p.Choices, ", "))
		}
	}
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		problems[""] = fmt.Sprintf("The flow *%s* has no parameter %s.", f.Name, joinQuoted(unknown))
	}
	if len(problems) == 0 {
		return nil
	}
	return problems
}
