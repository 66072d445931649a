package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/pelletier/go-toml/v2"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/flowbridge/flowbridge/bridge/workspace"
)

// Why a relay: the CPU a chat message costs is mostly in slack-go, discordgo,
// net/http and encoding/json, which flowbridge uses as the design prescribes.
// `-mode floor` runs this relay in flowbridge's place, as a child process
// reading the same configuration: it does only what any bridge on these
// libraries must do for a message (read the event, acknowledge it, one agent
// call, one reply) and none of flowbridge's own work (store, de-duplication,
// access rules, queues, rendering, indicators, metrics, logs). Its CPU per
// message is the floor under flowbridge's.
//
// `-mode durable-floor` runs it with -durable: it also makes the writes
// flowbridge's delivery promises need, and no more, each synced before the
// step it guards: a message recorded before it is acknowledged (so an
// acknowledged message is never lost), marked sent before the agent is
// asked (so a crash never sends it twice), its answer kept before it is
// posted (so a crash never answers twice, nor loses the answer), and marked
// posted after. They go to a plain file beside the store's, appended, with
// the writers of the moment sharing a sync (journal.go). It is the least any
// bridge keeping these promises pays on this disk.

// relayCommand is the child's first argument in floor mode.
const relayCommand = "relay"

// relayConfig is the part of flowbridge's configuration the relay reads.
type relayConfig struct {
	Workspace struct {
		BaseURL       string `toml:"base_url"`
		WorkspaceUUID string `toml:"workspace_uuid"`
		APIToken      string `toml:"api_token"`
	} `toml:"workspace"`
	Agents []struct {
		UUID string `toml:"uuid"`
	} `toml:"agents"`
	Slack struct {
		Enabled  bool   `toml:"enabled"`
		BotToken string `toml:"bot_token"`
		AppToken string `toml:"app_token"`
		APIURL   string `toml:"api_url"`
	} `toml:"slack"`
	Store struct {
		Path string `toml:"path"`
	} `toml:"store"`
	Discord struct {
		Enabled       bool     `toml:"enabled"`
		Token         string   `toml:"token"`
		ApplicationID string   `toml:"application_id"`
		GuildIDs      []string `toml:"guild_ids"`
		APIURL        string   `toml:"api_url"`
	} `toml:"discord"`
}

// journalName is the durable floor's file, beside flowbridge's store.
const journalName = "durable-floor.journal"

// runRelay is the child process: "relay -config PATH [-durable]", until ctx ends.
func runRelay(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet(relayCommand, flag.ContinueOnError)
	path := fs.String("config", "", "flowbridge's configuration file")
	durable := fs.Bool("durable", false, "keep the promises' records in a journal beside the store")
	if err := fs.Parse(args); err != nil {
		return err
	}
	data, err := os.ReadFile(*path)
	if err != nil {
		return err
	}
	var cfg relayConfig
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	if len(cfg.Agents) == 0 {
		return errors.New("relay: no agent configured")
	}
	ws, err := workspace.New(workspace.Config{BaseURL: cfg.Workspace.BaseURL, WorkspaceUUID: cfg.Workspace.WorkspaceUUID, Token: cfg.Workspace.APIToken})
	if err != nil {
		return err
	}
	r := &relay{ws: ws, agent: cfg.Agents[0].UUID, sessions: make(map[string]string)}
	if *durable {
		if r.j, err = openJournal(filepath.Join(filepath.Dir(cfg.Store.Path), journalName)); err != nil {
			return err
		}
		defer func() {
			records, syncs := r.j.stats()
			fmt.Fprintf(os.Stderr, "relay: %d records in %d syncs\n", records, syncs)
			r.j.close()
		}()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	if cfg.Slack.Enabled {
		wg.Go(func() {
			if err := r.runSlack(ctx, cfg); err != nil {
				cancel(fmt.Errorf("slack: %w", err))
			}
		})
	}
	if cfg.Discord.Enabled {
		wg.Go(func() {
			if err := r.runDiscord(ctx, cfg); err != nil {
				cancel(fmt.Errorf("discord: %w", err))
			}
		})
	}
	<-ctx.Done()
	wg.Wait()
	r.stop()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// relay answers each message with the agent's reply, one session per
// conversation, kept in memory.
type relay struct {
	ws    *workspace.Client
	agent string
	j     *journal // with -durable

	mu       sync.Mutex
	sessions map[string]string
	stopped  bool
	replies  sync.WaitGroup
}

// reply runs f in the background unless the relay is stopping: discordgo may
// still start a handler after Close, and a WaitGroup must not gain work once
// its Wait has begun.
func (r *relay) reply(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.replies.Go(f)
	}
}

// stop waits for the replies under way and refuses new ones.
func (r *relay) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.replies.Wait()
}

// record appends a record to the journal, durably; without -durable it does nothing.
func (r *relay) record(kind byte, key, text string) error {
	if r.j == nil {
		return nil
	}
	return r.j.append(kind, key, text)
}

// relay answers message key of conversation conv: marked sent, the agent
// asked, the answer kept, posted, marked posted.
func (r *relay) relay(ctx context.Context, key, conv, text string, post func(string) (string, error)) error {
	if err := r.record('s', key, ""); err != nil {
		return err
	}
	out, err := r.answer(ctx, conv, text)
	if err != nil {
		return err
	}
	if err := r.record('a', key, out); err != nil {
		return err
	}
	id, err := post(out)
	if err != nil {
		return err
	}
	return r.record('p', key, id)
}

// answer asks the agent in conversation key and returns its reply.
func (r *relay) answer(ctx context.Context, key, text string) (string, error) {
	r.mu.Lock()
	sess, ok := r.sessions[key]
	r.mu.Unlock()
	if !ok {
		var err error
		if sess, err = r.ws.CreateSession(ctx, r.agent); err != nil {
			return "", err
		}
		r.mu.Lock()
		r.sessions[key] = sess
		r.mu.Unlock()
	}
	reply, err := r.ws.Chat(ctx, r.agent, sess, text)
	if err != nil {
		return "", err
	}
	return reply.Output, nil
}

func (r *relay) runSlack(ctx context.Context, cfg relayConfig) error {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	api := slack.New(cfg.Slack.BotToken,
		slack.OptionHTTPClient(&http.Client{Timeout: 30 * time.Second, Transport: transport}),
		slack.OptionAPIURL(cfg.Slack.APIURL),
		slack.OptionAppLevelToken(cfg.Slack.AppToken))
	sm := socketmode.New(api)
	done := make(chan error, 1)
	go func() { done <- sm.RunContext(ctx) }()
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case evt := <-sm.Events:
			if err := r.slackEvent(ctx, api, sm, evt); err != nil {
				return err
			}
		}
	}
}

// slackEvent acknowledges an event and answers an app mention: recorded
// before the acknowledgement with -durable.
func (r *relay) slackEvent(ctx context.Context, api *slack.Client, sm *socketmode.Client, evt socketmode.Event) error {
	if evt.Request == nil || evt.Request.EnvelopeID == "" {
		return nil
	}
	req := *evt.Request
	outer, _ := evt.Data.(slackevents.EventsAPIEvent)
	m, ok := outer.InnerEvent.Data.(*slackevents.AppMentionEvent)
	if !ok || r.j == nil {
		if err := sm.Ack(req); err != nil || !ok {
			return err
		}
	}
	thread := m.ThreadTimeStamp
	if thread == "" {
		thread = m.TimeStamp
	}
	key := "slack/" + m.Channel + "/" + m.TimeStamp
	r.reply(func() {
		err := r.record('r', key, m.Text)
		if err == nil && r.j != nil {
			err = sm.Ack(req)
		}
		if err == nil {
			err = r.relay(ctx, key, m.Channel+"/"+thread, m.Text, func(out string) (string, error) {
				_, ts, err := api.PostMessageContext(ctx, m.Channel, slack.MsgOptionText(out, false), slack.MsgOptionTS(thread))
				return ts, err
			})
		}
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "relay: slack reply:", err)
		}
	})
	return nil
}

func (r *relay) runDiscord(ctx context.Context, cfg relayConfig) error {
	base, err := url.Parse(cfg.Discord.APIURL)
	if err != nil {
		return err
	}
	s, err := discordgo.New("Bot " + cfg.Discord.Token)
	if err != nil {
		return err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	s.Client = &http.Client{Timeout: 30 * time.Second, Transport: hostRewrite{base: base, next: transport}}
	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages
	s.ShouldReconnectOnError = false
	s.LogLevel = -1
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageCreate) {
		if m.Author == nil || m.Author.Bot {
			return
		}
		key := "discord/" + m.ID
		r.reply(func() {
			err := r.record('r', key, m.Content)
			if err == nil {
				err = r.relay(ctx, key, m.ChannelID, m.Content, func(out string) (string, error) {
					sent, err := s.ChannelMessageSendComplex(m.ChannelID, &discordgo.MessageSend{
						Content:         out,
						Reference:       m.Reference(),
						AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}},
					}, discordgo.WithContext(ctx))
					if err != nil {
						return "", err
					}
					return sent.ID, nil
				})
			}
			if err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "relay: discord reply:", err)
			}
		})
	})
	s.AddHandler(func(s *discordgo.Session, i *discordgo.InteractionCreate) {
		err := s.InteractionRespond(i.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource})
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "relay: discord interaction:", err)
		}
	})
	if err := s.Open(); err != nil {
		return err
	}
	defer s.Close()
	cmd := &discordgo.ApplicationCommand{Name: "flow", Description: "Run a flow", Options: []*discordgo.ApplicationCommandOption{
		{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "long", Description: "A flow that runs long"},
		{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "quick", Description: "A flow that returns at once"},
	}}
	for _, g := range cfg.Discord.GuildIDs {
		if _, err := s.ApplicationCommandBulkOverwrite(cfg.Discord.ApplicationID, g, []*discordgo.ApplicationCommand{cmd}, discordgo.WithContext(ctx)); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// hostRewrite sends discordgo's requests for discord.com to the fake.
type hostRewrite struct {
	base *url.URL
	next http.RoundTripper
}

func (t hostRewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	r2 := req.Clone(req.Context())
	r2.URL.Scheme, r2.URL.Host, r2.Host = t.base.Scheme, t.base.Host, t.base.Host
	return t.next.RoundTrip(r2)
}
