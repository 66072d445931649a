package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// The secrets of a full session, each distinctive enough that finding it in
// output can only mean it leaked.
const (
	secretAPIToken      = "ws-api-token-9f8e7d6c5b4a"
	secretSlackBot      = "xoxb-7777-secret-bot-token-a1b2"
	secretSlackApp      = "xapp-1-A7777-secret-app-token-c3d4"
	secretSigning       = "5ec12e7-signing-secret-e5f6"
	secretDiscordToken  = "discord.secret-token.g7h8"
	secretAdminToken    = "admin-secret-token-i9j0"
	discordGuild        = "500000000000000001"
	discordChannel      = "10"
	slackChannel        = "C0GENERAL"
	slackUser           = "U0ALICE"
	stackAgentUUID      = "agent-1"
	stackFlowUUID       = "flow-hc"
	stackSlowAgentDelay = 3 * time.Second
)

// secretEnv is the environment the stack's config takes its secrets from.
func secretEnv() map[string]string {
	return map[string]string{
		"FB_API_TOKEN":     secretAPIToken,
		"FB_SLACK_BOT":     secretSlackBot,
		"FB_SLACK_APP":     secretSlackApp,
		"FB_SLACK_SIGNING": secretSigning,
		"FB_DISCORD":       secretDiscordToken,
		"FB_ADMIN":         secretAdminToken,
	}
}

// stack is a fake AI workspace, and optionally a fake Slack and a fake
// Discord, with a config file that points flowbridge at them.
type stack struct {
	ws      *workspacetest.Server
	slack   *slacktest.Server
	discord *discordtest.Server
	dir     string
	path    string // the config file
	admin   string // the admin listener's host:port
	env     map[string]string
}

type stackOptions struct {
	slack, discord bool
	adminToken     bool
	// flows is extra [[flows]] TOML.
	flows string
	// grace is [bridge] shutdown_grace (default 30s).
	grace string
	// slackListen, when set, runs Slack in HTTP mode on this address.
	slackListen string
}

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	s := &stack{dir: t.TempDir(), env: secretEnv(), admin: freePort(t)}
	s.ws = workspacetest.NewServer(workspacetest.Options{Token: secretAPIToken})
	t.Cleanup(s.ws.Close)
	s.ws.AddAgent(workspacetest.Agent{UUID: stackAgentUUID})
	s.ws.AddFlow(workspacetest.Flow{UUID: stackFlowUUID, Template: "checked {host}"})
	if o.slack {
		s.slack = slacktest.NewServer(slacktest.Options{BotToken: secretSlackBot, AppToken: secretSlackApp})
		t.Cleanup(s.slack.Close)
	}
	if o.discord {
		s.discord = discordtest.NewServer(discordtest.Options{Token: secretDiscordToken})
		t.Cleanup(s.discord.Close)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := s.discord.AddChannel(ctx, discordgo.Channel{ID: discordChannel, GuildID: discordGuild, Type: discordgo.ChannelTypeGuildText, Name: "general"}); err != nil {
			t.Fatal(err)
		}
	}
	s.path = filepath.Join(s.dir, "flowbridge.toml")
	s.writeConfig(t, o)
	return s
}

// config returns the config text for o.
func (s *stack) config(o stackOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
[workspace]
base_url = %q
workspace_uuid = "ws-test"
api_token = "${FB_API_TOKEN}"
max_retries = -1
[store]
path = %q
[bridge]
shutdown_grace = %q
[admin]
listen = %q
`, s.ws.URL, filepath.Join(s.dir, "store.db"), cmp.Or(o.grace, "30s"), s.admin)
	if o.adminToken {
		b.WriteString("token = \"${FB_ADMIN}\"\n")
	}
	b.WriteString(`
[log]
level = "debug"
[[agents]]
name = "helper"
uuid = "agent-1"
default = true
[[flows]]
name = "healthcheck"
uuid = "flow-hc"
description = "Check a host"
timeout = "30s"
allow = ["everyone"]
  [[flows.params]]
  name = "host"
  description = "Host name"
  required = true
`)
	b.WriteString(o.flows)
	b.WriteString("[console]\nenabled = true\n")
	if s.slack != nil {
		mode := "socket"
		if o.slackListen != "" {
			mode = "http"
		}
		fmt.Fprintf(&b, `
[slack]
enabled = true
mode = %q
bot_token = "${FB_SLACK_BOT}"
app_token = "${FB_SLACK_APP}"
signing_secret = "${FB_SLACK_SIGNING}"
api_url = %q
`, mode, s.slack.APIURL())
		if o.slackListen != "" {
			fmt.Fprintf(&b, "listen = %q\n", o.slackListen)
		}
	}
	if s.discord != nil {
		fmt.Fprintf(&b, `
[discord]
enabled = true
token = "${FB_DISCORD}"
application_id = %q
guild_ids = [%q]
api_url = %q
`, s.discord.ApplicationID(), discordGuild, s.discord.URL)
	}
	return b.String()
}

func (s *stack) writeConfig(t *testing.T, o stackOptions) {
	t.Helper()
	if err := os.WriteFile(s.path, []byte(s.config(o)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// running is flowbridge run in this process, fed through a pipe.
type running struct {
	stdin       *io.PipeWriter
	out, errOut *syncBuffer
	done        chan error
	cancel      context.CancelFunc
}

// start calls run("run", "-config", …) and waits for it to serve.
func (s *stack) start(t *testing.T) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	r := &running{stdin: pw, out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan error, 1), cancel: cancel}
	// The admin listener moves to the next free port when another test
	// took the configured one meanwhile: the stack asks where it is.
	admin := make(chan string, 1)
	e := &environment{getenv: mapEnv(s.env), stdin: pr, stdout: r.out, stderr: r.errOut, onServe: func(i serveInfo) { admin <- i.AdminAddr }}
	go func() { r.done <- cmdRun(ctx, e, []string{"-config", s.path}) }()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		select {
		case <-r.done:
		case <-time.After(60 * time.Second):
			t.Error("run did not return after cancel")
		}
	})
	r.errOut.waitFor(t, "flowbridge running", r.done)
	select {
	case a := <-admin:
		if a != "" {
			s.admin = a
		}
	default:
	}
	return r
}

// stop cancels run and returns its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("run did not return after cancel")
		return nil
	}
}

func (r *running) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		t.Fatalf("console input: %v", err)
	}
}

// waitCtx bounds a wait on a fake.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func slackHas(m slacktest.Message, text string) bool {
	return !m.Deleted && (strings.Contains(m.Text, text) || bytes.Contains(m.Blocks, []byte(text)))
}

// TestFullSessionLeaksNoSecret runs flowbridge at debug level with the
// console, Slack and Discord, chats and runs a flow on each, and then finds
// none of the secrets in anything it wrote or sent.
func TestFullSessionLeaksNoSecret(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{slack: true, discord: true, adminToken: true})
	r := s.start(t)
	ctx := waitCtx(t)

	// Console.
	r.send(t, "hello from the console")
	r.out.waitFor(t, "You said: hello from the console", r.done)
	r.send(t, "/flow healthcheck host=console-host")
	r.out.waitFor(t, "checked console-host", r.done)

	// Slack: a mention and a slash command.
	if _, err := s.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: slackChannel, User: slackUser, Text: "hello from slack"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "You said: hello from slack") }); err != nil {
		t.Fatalf("Slack chat reply: %v", err)
	}
	if _, err := s.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=slack-host", UserID: slackUser, ChannelID: slackChannel}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return slackHas(m, "checked slack-host") }); err != nil {
		t.Fatalf("Slack flow result: %v", err)
	}

	// Discord: a mention and the /flow command, once the commands are registered.
	bot := s.discord.BotUser().ID
	alice := discordgo.User{ID: "42", Username: "alice"}
	if _, err := s.discord.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.discord.SendMessage(ctx, discordtest.MessageCreate{GuildID: discordGuild, ChannelID: discordChannel, Author: alice, Content: "<@" + bot + "> hello from discord"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.discord.WaitMessage(ctx, func(m discordtest.Message) bool {
		return m.Author.ID == bot && strings.Contains(m.Content, "You said: hello from discord")
	}); err != nil {
		t.Fatalf("Discord chat reply: %v", err)
	}
	if _, err := s.discord.WaitRequest(ctx, func(r discordtest.Request) bool {
		return r.Route == discordtest.RouteGuildCommands && r.Status == http.StatusOK
	}); err != nil {
		t.Fatal(err)
	}
	sent, err := s.discord.SendInteraction(ctx, discordtest.Interaction{GuildID: discordGuild, ChannelID: discordChannel, User: alice, Data: discordFlow("healthcheck", "host", "discord-host")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.discord.WaitMessage(ctx, func(m discordtest.Message) bool {
		return m.InteractionID == sent.ID && strings.Contains(m.Content, "checked discord-host")
	}); err != nil {
		t.Fatalf("Discord flow result: %v", err)
	}

	// Every adapter is ready, and the admin listener's output is scanned too.
	var admin strings.Builder
	for _, p := range []string{"/readyz", "/metrics", "/api/audit"} {
		code, body := adminGet(t, s.admin, p, secretAdminToken)
		if code != http.StatusOK {
			t.Errorf("GET %s = %d %s", p, code, body)
		}
		admin.WriteString(body)
	}

	if err := r.stop(t); err != nil {
		t.Fatalf("run: %v\n%s", err, r.errOut)
	}

	logs := r.errOut.String()
	for _, want := range []string{`"text":"hello from the console"`, `"text":"hello from slack"`, `"text":"hello from discord"`, `"level":"debug"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the debug log lacks %s; the secret scan proves little without message logging", want)
		}
	}

	sources := map[string]string{"stdout": r.out.String(), "stderr": logs, "admin listener": admin.String()}
	var slackOut strings.Builder
	for _, m := range s.slack.MessageLog() {
		fmt.Fprintf(&slackOut, "%s %s %s %s %v\n", m.Text, m.Blocks, m.Attachments, m.Metadata, m.Params)
	}
	for _, p := range s.slack.ResponseURLPosts() {
		fmt.Fprintf(&slackOut, "%s\n", p.Body)
	}
	sources["Slack messages"] = slackOut.String()
	var discordOut strings.Builder
	for _, m := range s.discord.Messages() {
		fmt.Fprintf(&discordOut, "%s %+v %+v\n", m.Content, m.Embeds, m.Components)
	}
	for _, req := range s.discord.Requests() {
		fmt.Fprintf(&discordOut, "%s %s %s\n", req.Path, req.Query, req.Body)
	}
	sources["Discord messages and request bodies"] = discordOut.String()
	var wsOut strings.Builder
	for _, req := range s.ws.Requests() {
		fmt.Fprintf(&wsOut, "%s %s %s\n", req.Path, req.Query.Encode(), req.Body)
	}
	sources["workspace request paths and bodies"] = wsOut.String()

	for name, text := range sources {
		if text == "" && name != "admin listener" {
			t.Errorf("%s is empty; nothing was scanned", name)
		}
		for _, secret := range []string{secretAPIToken, secretSlackBot, secretSlackApp, secretSigning, secretDiscordToken, secretAdminToken} {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s contains the secret %q: …%s…", name, secret, text[max(0, i-200):min(len(text), i+len(secret)+50)])
			}
		}
	}
}

// discordFlow is the /flow NAME KEY:VALUE interaction Discord's client sends.
func discordFlow(name, key, value string) discordgo.ApplicationCommandInteractionData {
	sub := &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionSubCommand}
	if key != "" {
		sub.Options = []*discordgo.ApplicationCommandInteractionDataOption{{Name: key, Type: discordgo.ApplicationCommandOptionString, Value: value}}
	}
	return discordgo.ApplicationCommandInteractionData{Name: "flow", Options: []*discordgo.ApplicationCommandInteractionDataOption{sub}}
}

// adminGet asks the admin listener at addr for path, with a bearer token when given.
func adminGet(t *testing.T, addr, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
