package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func withForms(c *Config) { c.FlowForms = true }

// formsOn gives the core the flows the form tests use: one with choices,
// one only a group may run.
func (e *e2e) formsOn() {
	e.t.Helper()
	flows := append(testFlows(),
		bridge.Flow{Name: "deploy", UUID: e2eFlow, Description: "Deploy a service", Allow: []string{"everyone"}, Params: []bridge.Param{
			{Name: "host", Required: true, Description: "Which host"},
			{Name: "service", Description: "Where to deploy", Choices: []string{"prod", "staging"}},
		}},
		bridge.Flow{Name: "locked", UUID: e2eFlow, Allow: []string{"group:S0OPS"}},
	)
	if err := e.core.SetCatalog(flows, []bridge.Agent{{Name: "helper", UUID: e2eAgent, Default: true}}, nil); err != nil {
		e.t.Fatal(err)
	}
}

// flowRuns counts the flow runs the workspace received.
func (e *e2e) flowRuns() int {
	n := 0
	for _, r := range e.ws.Requests() {
		if strings.HasSuffix(r.Path, "/run/sync") {
			n++
		}
	}
	return n
}

// view waits for the view opened with trigger.
func (e *e2e) view(ctx context.Context, trigger string) slacktest.View {
	e.t.Helper()
	v, err := e.slack.WaitView(ctx, func(v slacktest.View) bool { return v.TriggerID == trigger })
	if err != nil {
		e.t.Fatalf("no view opened with trigger %s: %v\nviews: %+v", trigger, err, e.slack.Views())
	}
	return v
}

// blockIDs lists a view's blocks as "type:block_id".
func blockIDs(t *testing.T, v slacktest.View) []string {
	t.Helper()
	var blocks []struct {
		Type    string `json:"type"`
		BlockID string `json:"block_id"`
		Element struct {
			Type    string `json:"type"`
			Options []struct {
				Value string `json:"value"`
			} `json:"options"`
		} `json:"element"`
	}
	if err := json.Unmarshal(v.Blocks, &blocks); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range blocks {
		s := b.Type + ":" + b.BlockID
		if b.Element.Type == "static_select" {
			var opts []string
			for _, o := range b.Element.Options {
				opts = append(opts, o.Value)
			}
			s += "[" + strings.Join(opts, "|") + "]"
		}
		out = append(out, s)
	}
	return out
}

func TestE2EFlowFormFromSlashCommand(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: withForms})
	e.formsOn()
	ctx := waitCtx(t)

	d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", UserID: e2eUser, ChannelID: e2eChannel}))
	if ack := e.ack(ctx, d); len(ack.Payload) != 0 {
		t.Errorf("ack payload = %s, want an empty ack (the form is the answer)", ack.Payload)
	}
	v := e.view(ctx, d.TriggerID)
	if got := strings.Join(blockIDs(t, v), " "); got != "input:flow[deploy|guarded|healthcheck|publiccheck|slow] context:choose" {
		t.Errorf("form blocks = %s, want the flows U0ALICE may run (not locked) and no parameters yet", got)
	}

	// Choosing a flow shows its parameters: a select where it has choices.
	e.sent(e.slack.SelectInView(ctx, v.ID, e2eUser, flowBlock, flowBlock, "deploy"))
	v, err := e.slack.WaitView(ctx, func(x slacktest.View) bool { return x.ID == v.ID && x.Updates == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(blockIDs(t, v), " "); got != "input:flow[deploy|guarded|healthcheck|publiccheck|slow] input:param:host input:param:service[prod|staging]" {
		t.Errorf("form blocks after choosing deploy = %s", got)
	}
	if !strings.Contains(string(v.Blocks), `"optional":true`) || !strings.Contains(string(v.Blocks), "Where to deploy") {
		t.Errorf("form = %s, want service optional with its description as a hint", v.Blocks)
	}

	// A missing required value is shown in the form; nothing runs.
	sub := e.sent(e.slack.SubmitView(ctx, slacktest.ViewSubmission{ViewID: v.ID, UserID: e2eUser,
		Values: map[string]map[string]string{flowBlock: {flowBlock: "deploy"}, "param:service": {valueAction: "prod"}}}))
	e.ack(ctx, sub)
	if v := e.slack.Views()[v.ID]; v.Closed || v.Errors["param:host"] != "Required." {
		t.Errorf("view after an incomplete submission = closed %v, errors %v; want it open with host required", v.Closed, v.Errors)
	}

	// A complete one closes the form and runs the flow like the command would.
	sub = e.sent(e.slack.SubmitView(ctx, slacktest.ViewSubmission{ViewID: v.ID, UserID: e2eUser,
		Values: map[string]map[string]string{flowBlock: {flowBlock: "deploy"}, "param:host": {valueAction: "web7"}, "param:service": {valueAction: "staging"}}}))
	e.ack(ctx, sub)
	p := e.response(ctx, d.ResponseURL, "Checked web7 staging")
	if p.ResponseType != "ephemeral" {
		t.Errorf("result response_type = %q, want ephemeral", p.ResponseType)
	}
	if v := e.slack.Views()[v.ID]; !v.Closed {
		t.Error("the form stayed open after a valid submission")
	}
	// Slack delivers the submission again: it is not run twice.
	e.ack(ctx, e.sent(e.slack.Redeliver(ctx, sub.EnvelopeID)))
	entries, err := e.core.store.Audit(ctx, store.AuditFilter{Flow: "deploy", Outcome: bridge.OutcomeOK})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].User != e2eUser || entries[0].Params["host"] != "web7" || entries[0].Channel != e2eChannel {
		t.Errorf("audit = %+v, want one ok run of deploy by %s in %s", entries, e2eUser, e2eChannel)
	}
	if n := e.flowRuns(); n != 1 {
		t.Errorf("flow runs = %d, want 1", n)
	}
}

func TestE2EFlowFormOpensForMissingParameters(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: withForms})
	e.formsOn()
	ctx := waitCtx(t)

	// A required parameter missing: the form, with the given values filled in.
	d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "deploy service=prod", UserID: e2eUser, ChannelID: e2eChannel}))
	e.ack(ctx, d)
	v := e.view(ctx, d.TriggerID)
	if got := strings.Join(blockIDs(t, v), " "); !strings.HasSuffix(got, "input:param:host input:param:service[prod|staging]") ||
		!strings.Contains(string(v.Blocks), `"initial_option":{"text":{"type":"plain_text","text":"prod"`) {
		t.Errorf("form = %s\n%s; want deploy's parameters with service=prod chosen", got, v.Blocks)
	}

	// Complete commands, help, unknown and refused flows are answered in text.
	for _, tc := range []struct{ text, want string }{
		{"healthcheck host=web1", "Checked web1"},
		{"help", "Flows you can run"},
		{"nosuch", "There is no flow nosuch"},
		{"locked", "You may not run locked"},
	} {
		d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: tc.text, UserID: e2eUser, ChannelID: e2eChannel}))
		e.ack(ctx, d)
		e.response(ctx, d.ResponseURL, tc.want)
	}
	if n := len(e.slack.Views()); n != 1 {
		t.Errorf("%d views opened, want only the one for the incomplete command", n)
	}

	// Slack refuses the trigger (it expired): the command is answered in text.
	e.slack.FailNext("views.open", 1, "expired_trigger_id")
	d = e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", UserID: e2eUser, ChannelID: e2eChannel}))
	e.ack(ctx, d)
	e.response(ctx, d.ResponseURL, "Flows you can run")
}

func TestE2EFlowFormFromShortcutAnswersInThread(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: withForms})
	e.formsOn()
	ctx := waitCtx(t)
	root := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "the database is slow"}))
	reply := e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, ThreadTS: root.TS, Text: "check it"}))

	for _, tc := range []struct {
		flow      string
		ephemeral bool
	}{{"healthcheck", true}, {"publiccheck", false}} {
		d := e.sent(e.slack.SendMessageShortcut(ctx, slacktest.MessageShortcut{CallbackID: ShortcutCallback, UserID: e2eUser,
			ChannelID: e2eChannel, MessageTS: reply.TS, ThreadTS: root.TS}))
		e.ack(ctx, d)
		v := e.view(ctx, d.TriggerID)
		e.ack(ctx, e.sent(e.slack.SubmitView(ctx, slacktest.ViewSubmission{ViewID: v.ID, UserID: e2eUser,
			Values: map[string]map[string]string{flowBlock: {flowBlock: tc.flow}, "param:host": {valueAction: "db1"}}})))
		m, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
			return m.Channel == e2eChannel && m.Ephemeral == tc.ephemeral && strings.Contains(m.Text, "Checked db1") && m.ThreadTS == root.TS
		})
		if err != nil {
			t.Errorf("%s: no result in the thread %s: %v\nmessages: %+v", tc.flow, root.TS, err, e.slack.MessageLog())
			continue
		}
		if tc.ephemeral && m.User != e2eUser {
			t.Errorf("%s: private result shown to %q, want %q", tc.flow, m.User, e2eUser)
		}
	}
}

func TestE2EFlowFormOverHTTP(t *testing.T) {
	t.Parallel()
	const secret = "forms-secret"
	e := startE2E(t, e2eOptions{cfg: func(c *Config) { httpMode(secret)(c); c.FlowForms = true }})
	e.formsOn()
	ctx := waitCtx(t)

	body, d := e.slack.SlashCommandBody(slacktest.SlashCommand{Command: "/flow", Text: "deploy", UserID: e2eUser, ChannelID: e2eChannel})
	if status, answer := e.post(t, ctx, "application/x-www-form-urlencoded", body, secret, time.Now(), nil); status != 200 || answer != "" {
		t.Fatalf("POST /flow = %d %q, want an empty 200", status, answer)
	}
	v := e.view(ctx, d.TriggerID)

	submit := func(values map[string]map[string]string) string {
		t.Helper()
		form, err := e.slack.ViewSubmissionBody(slacktest.ViewSubmission{ViewID: v.ID, UserID: e2eUser, Values: values})
		if err != nil {
			t.Fatal(err)
		}
		status, answer := e.post(t, ctx, "application/x-www-form-urlencoded", form, secret, time.Now(), nil)
		if status != 200 {
			t.Fatalf("POST view_submission = %d %q", status, answer)
		}
		e.slack.ViewSubmissionAnswered(v.ID, []byte(answer))
		return answer
	}
	answer := submit(map[string]map[string]string{flowBlock: {flowBlock: "deploy"}, "param:host": {valueAction: "web1"}, "param:service": {valueAction: "moon"}})
	var errs struct {
		ResponseAction string            `json:"response_action"`
		Errors         map[string]string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(answer), &errs); err != nil || errs.ResponseAction != "errors" || !strings.Contains(errs.Errors["param:service"], "prod, staging") {
		t.Errorf("answer to a bad choice = %q, want response_action errors on param:service", answer)
	}
	if answer := submit(map[string]map[string]string{flowBlock: {flowBlock: "deploy"}, "param:host": {valueAction: "web1"}}); answer != "" {
		t.Errorf("answer to a valid submission = %q, want an empty 200", answer)
	}
	e.response(ctx, d.ResponseURL, "Checked web1")
}

func TestE2EFlowFormWithinSlacksLimits(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: withForms})
	ctx := waitCtx(t)
	long := strings.Repeat("word ", 600) // 3000 characters
	manyChoices := make([]string, 150)
	for i := range manyChoices {
		manyChoices[i] = fmt.Sprintf("choice-%03d", i)
	}
	params := []bridge.Param{
		{Name: "few", Required: true, Description: long, Choices: []string{"a", strings.Repeat("b", 80)}},
		{Name: "many", Choices: manyChoices},
		{Name: "huge", Choices: []string{strings.Repeat("c", 200)}},
	}
	for i := range 120 {
		params = append(params, bridge.Param{Name: fmt.Sprintf("p%03d", i)})
	}
	flows := []bridge.Flow{{Name: "big", UUID: e2eFlow, Description: long, Allow: []string{"everyone"}, Params: params}}
	for i := range 150 {
		flows = append(flows, bridge.Flow{Name: fmt.Sprintf("f%03d", i), UUID: e2eFlow, Description: long, Allow: []string{"everyone"}})
	}
	if err := e.core.SetCatalog(flows, []bridge.Agent{{Name: "helper", UUID: e2eAgent, Default: true}}, nil); err != nil {
		t.Fatal(err)
	}
	// The fake refuses views past Slack's limits: the form is opened, so it kept within them.
	d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "big", UserID: e2eUser, ChannelID: e2eChannel}))
	e.ack(ctx, d)
	v := e.view(ctx, d.TriggerID)
	ids := blockIDs(t, v)
	if len(ids) != maxViewBlocks {
		t.Errorf("form has %d blocks, want Slack's maximum %d", len(ids), maxViewBlocks)
	}
	if n := strings.Count(ids[0], "|") + 1; n != maxOptions {
		t.Errorf("flow select has %d options, want %d", n, maxOptions)
	}
	for _, want := range []string{"input:param:few[a|" + strings.Repeat("b", 80) + "]", "input:param:many", "input:param:huge"} {
		if !slices.Contains(ids, want) {
			t.Errorf("form lacks %s (a select only where Slack can offer every choice): %v", want, ids[:4])
		}
	}
	for _, c := range e.slack.Calls() {
		if c.Method == "views.open" && c.Error != "" {
			t.Errorf("views.open refused: %s", c.Error)
		}
	}
}

func TestE2EFlowFormKeepsConfirmation(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: withForms})
	ctx := waitCtx(t)
	d := e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "guarded", UserID: e2eUser, ChannelID: e2eChannel}))
	e.ack(ctx, d)
	v := e.view(ctx, d.TriggerID)
	e.ack(ctx, e.sent(e.slack.SubmitView(ctx, slacktest.ViewSubmission{ViewID: v.ID, UserID: e2eUser,
		Values: map[string]map[string]string{flowBlock: {flowBlock: "guarded"}, "param:host": {valueAction: "db9"}}})))
	p := e.response(ctx, d.ResponseURL, "Run guarded with these parameters?")
	if !strings.Contains(string(p.Blocks), `"action_id":"confirm"`) {
		t.Errorf("confirmation = %s, want its Run button", p.Blocks)
	}
	if n := e.flowRuns(); n != 0 {
		t.Errorf("%d flow runs before the confirmation", n)
	}
}
