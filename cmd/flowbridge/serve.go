package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/adapters/console"
	"github.com/flowbridge/flowbridge/adapters/discord"
	"github.com/flowbridge/flowbridge/adapters/slack"
	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/sessionmap"
)

// serveInfo tells tests where the running bridge listens.
type serveInfo struct {
	AdminAddr string
}

// serveOptions are what differs between run and dev.
type serveOptions struct {
	// configPath is re-read on SIGHUP; "" disables reload.
	configPath string
	// prompt shows "> " on the console.
	prompt bool
	// httpClient reaches the workspace (nil: a default client).
	httpClient *http.Client
}

// adapter is a running platform connection.
type adapter interface {
	Run(ctx context.Context) error
	Ready() error
}

type namedAdapter struct {
	name string
	adapter
}

// ended wraps an adapter so that once its Run has returned, Ready says so:
// an adapter that stops while the others go on (the console at the end of its
// input) shows in /readyz, not only in the log.
type ended struct {
	adapter
	done atomic.Bool
}

func (e *ended) Run(ctx context.Context) error {
	defer e.done.Store(true)
	return e.adapter.Run(ctx)
}

func (e *ended) Ready() error {
	if e.done.Load() {
		return errors.New("stopped")
	}
	return e.adapter.Ready()
}

// serve runs the bridge until ctx ends, the console's input ends (when it is
// the only adapter) or an adapter fails; then it shuts down in order: the bridge
// stops taking events and finishes in-flight work within the grace period, the
// adapters disconnect, and the store closes last.
func serve(ctx context.Context, env *environment, cfg *Config, log *zap.Logger, opts serveOptions) (err error) {
	st, admin, err := openServing(ctx, cfg, log)
	if err != nil && ctx.Err() != nil {
		// Stopped (SIGTERM) while the store was opened or waited for:
		// nothing has been taken in yet, so this is a shutdown, not a
		// failure to start.
		log.Info("stopped before the store opened", zap.Error(err))
		return nil
	}
	if err != nil {
		return storeError(cfg, err)
	}
	defer admin.shutdown()
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close store: %w", cerr)
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := bridge.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if ss, ok := st.(statsStore); ok {
		if err := reg.Register(newStoreCollector(ss)); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	wcfg := cfg.Workspace.clientConfig()
	wcfg.UserAgent, wcfg.HTTPClient, wcfg.Observe = "flowbridge/"+version, opts.httpClient, metrics.ObserveAPI
	ws, err := workspace.New(wcfg)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	bcfg := cfg.bridgeConfig()
	bcfg.Metrics = metrics
	b, err := bridge.New(bcfg, ws, st, log.Named("bridge"))
	if err != nil {
		return err
	}

	adapters, err := buildAdapters(env, cfg, b, log, opts)
	if err != nil {
		return err
	}
	sched, err := newScheduler(cfg, b, st, adapters, log)
	if err != nil {
		return err
	}
	for i := range adapters {
		adapters[i].adapter = &ended{adapter: adapters[i].adapter}
	}

	admin.setHandler(adminHandler(cfg.Admin, adminDeps{store: st, core: b, registry: reg, adapters: adapters, log: log.Named("admin")}))
	if env.onServe != nil {
		env.onServe(serveInfo{AdminAddr: admin.addr})
	}

	adCtx, cancelAdapters := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelAdapters()
	var wg sync.WaitGroup
	failed := make(chan error, len(adapters))
	consoleDone := make(chan struct{})
	for _, a := range adapters {
		wg.Go(func() {
			err := a.Run(adCtx)
			switch {
			case a.name == "console" && len(adapters) == 1:
				close(consoleDone)
			case err == nil && adCtx.Err() == nil:
				log.Warn("adapter stopped; the others keep running", zap.String("adapter", a.name))
			}
			if err != nil {
				failed <- fmt.Errorf("%s: %w", a.name, err)
			}
		})
	}
	var mwg sync.WaitGroup
	mwg.Go(func() {
		maintain(adCtx, st, retention{
			dedupe: cfg.Bridge.DedupeTTL.D(), audit: cfg.Store.AuditRetention.D(),
			sessions: cfg.Store.SessionRetention.D(), replies: cfg.Store.ReplyRetention.D(),
		}, log)
	})
	// Requests for approval nobody answered in time are told to their
	// requesters (bridge.ExpireApprovals) by every process, each taken once.
	mwg.Go(func() { b.ExpireApprovalsEvery(adCtx, time.Minute) })
	if sched != nil {
		mwg.Go(func() {
			if err := sched.Run(adCtx); err != nil {
				log.Error("schedules stopped", zap.Error(err))
			}
		})
	}

	hup := make(chan os.Signal, 1)
	if opts.configPath != "" {
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	log.Info("flowbridge running", zap.String("version", version), zap.String("store", cfg.Store.Driver), zap.Int("flows", len(cfg.Flows)), zap.Int("agents", len(cfg.Agents)), zap.String("admin", admin.addr))

	var runErr error
wait:
	for {
		select {
		case <-ctx.Done():
			log.Info("signal received; shutting down")
			break wait
		case <-consoleDone:
			break wait
		case runErr = <-failed:
			log.Error("adapter stopped", zap.Error(runErr))
			break wait
		case <-hup:
			reload(opts.configPath, env, cfg, b, adapters, log)
		}
	}

	graceCtx, cancelGrace := context.WithTimeout(context.Background(), cfg.Bridge.ShutdownGrace.D())
	defer cancelGrace()
	if err := b.Shutdown(graceCtx); err != nil {
		log.Warn("in-flight work was cut off at the end of the grace period", zap.Duration("grace", cfg.Bridge.ShutdownGrace.D()))
	}
	cancelAdapters()
	wg.Wait()
	b.Close() // events recorded after Shutdown began, for the next start
	mwg.Wait()
	admin.shutdown()
	log.Info("flowbridge stopped")
	return runErr
}

// openServing opens the store and the admin listener. A bbolt file opens
// first, so that a second process on the same file hears that it is locked
// rather than that the admin port is taken; PostgreSQL, which may take a
// while to answer, is waited for behind the listener, whose /readyz says why
// flowbridge is not ready yet.
func openServing(ctx context.Context, cfg *Config, log *zap.Logger) (servedStore, *adminServer, error) {
	var wait storeWait
	if cfg.Store.Driver != driverPostgres {
		st, err := openStore(ctx, cfg.Store, &wait, log)
		if err != nil {
			return nil, nil, err
		}
		admin, err := startAdmin(cfg.Admin, wait.String, log.Named("admin"))
		if err != nil {
			_ = st.Close()
			return nil, nil, err
		}
		return st, admin, nil
	}
	admin, err := startAdmin(cfg.Admin, wait.String, log.Named("admin"))
	if err != nil {
		return nil, nil, err
	}
	st, err := openStore(ctx, cfg.Store, &wait, log)
	if err != nil {
		admin.shutdown()
		return nil, nil, err
	}
	return st, admin, nil
}

// buildAdapters creates every adapter the config enables.
func buildAdapters(env *environment, cfg *Config, b *bridge.Bridge, log *zap.Logger, opts serveOptions) ([]namedAdapter, error) {
	var out []namedAdapter
	if cfg.Console.Enabled {
		out = append(out, namedAdapter{"console", console.New(cfg.Console, b, console.Options{In: env.stdin, Out: env.stdout, Prompt: opts.prompt, Interrupt: interrupt}, log)})
	}
	more, err := platformAdapters(cfg, b, log)
	if err != nil {
		return nil, err
	}
	return append(out, more...), nil
}

// reload re-reads the config file and applies what can change while running:
// flows, agents, admins, the limits on user input and Slack's signing
// secret. Keys that need a restart are named in the log. An invalid file is
// rejected and the running config kept. Changes are measured against the
// config the process started with, which is what a restart would replace.
func reload(path string, env *environment, started *Config, b *bridge.Bridge, adapters []namedAdapter, log *zap.Logger) {
	cfg, err := loadConfig(path, env.getenv)
	if err != nil {
		log.Error("reload rejected; the running config stays", zap.Error(err))
		return
	}
	flows, agents := cfg.catalog()
	if err := b.SetCatalog(flows, agents, cfg.Bridge.Admins); err != nil {
		log.Error("reload rejected; the running config stays", zap.Error(err))
		return
	}
	b.SetLimits(cfg.bridgeConfig().Limits)
	live, restart := splitReload(changedKeys(*started, *cfg))
	for _, a := range adapters {
		inner := a.adapter
		if e, ok := inner.(*ended); ok {
			inner = e.adapter
		}
		if s, ok := inner.(signingSecretSetter); ok && slices.Contains(live, "slack.signing_secret") {
			s.SetSigningSecret(cfg.Slack.SigningSecret.Value())
		}
		if s, ok := inner.(commandSyncer); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := s.SyncCommands(ctx); err != nil {
				log.Error("commands not updated after reload", zap.String("adapter", a.name), zap.Error(err))
			}
			cancel()
		}
	}
	log.Info("config reloaded", zap.Int("flows", len(flows)), zap.Int("agents", len(agents)), zap.Strings("applied", live))
	if len(restart) > 0 {
		log.Warn("these keys changed but take effect only after a restart", zap.Strings("keys", restart))
	}
}

// signingSecretSetter is implemented by adapters that verify signed requests
// and can take a new secret while running.
type signingSecretSetter interface {
	SetSigningSecret(secret string)
}

// Reload finds these by type assertion; a lost method must fail the build,
// not reload in silence.
var (
	_ signingSecretSetter = (*slack.Adapter)(nil)
	_ commandSyncer       = (*discord.Adapter)(nil)
)

// expiringStore is what maintain needs of a store.
type expiringStore interface {
	ExpireInbox(ctx context.Context, before time.Time) (int, error)
	PruneAudit(ctx context.Context, before time.Time) (int, error)
	PruneAnswers(ctx context.Context, before time.Time) (int, error)
}

// sessionPruner is a store that forgets old sessions (both stores);
// replyPruner one that drops old latest replies on their own (the bbolt
// file: PostgreSQL's carry no time and go with their session). maintain
// finds them by type assertion.
type (
	sessionPruner interface {
		PruneSessions(ctx context.Context, before time.Time) (int, error)
	}
	replyPruner interface {
		PruneReplies(ctx context.Context, before time.Time) (int, error)
	}
)

var (
	_ sessionPruner = (*sessionmap.Store)(nil)
	_ sessionPruner = pgStore{}
	_ replyPruner   = (*sessionmap.Store)(nil)
)

// retention is how long maintain keeps each kind of record; zero keeps the
// audit, sessions and replies for ever.
type retention struct {
	dedupe, audit, sessions, replies time.Duration
}

// pruneEvery is how many of maintain's minutes pass between prunes of
// sessions and replies, which read every record of theirs, unlike expiry's
// index.
const pruneEvery = 60

// maintain expires answered inbox entries older than the dedupe TTL (until
// then a platform retry is recognised), and old audit entries and records
// of the answers offered for feedback (kept as long as the audit), every
// minute: expiry is chunked and cheap, and freed pages are reused before
// the file grows. Every hour, from its first minute, it also forgets
// sessions and latest replies past their retention, where the store can. Replicas sharing a database each
// run it; their deletions skip one another's rows.
func maintain(ctx context.Context, st expiringStore, keep retention, log *zap.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for tick := 0; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if _, err := st.ExpireInbox(ctx, now.Add(-keep.dedupe)); err != nil {
				log.Warn("expiring inbox", zap.Error(err))
			}
			if keep.audit > 0 {
				if _, err := st.PruneAudit(ctx, now.Add(-keep.audit)); err != nil {
					log.Warn("pruning audit", zap.Error(err))
				}
				if _, err := st.PruneAnswers(ctx, now.Add(-keep.audit)); err != nil {
					log.Warn("pruning feedback answers", zap.Error(err))
				}
			}
			if tick%pruneEvery == 0 {
				pruneConversations(ctx, st, now, keep, log)
			}
		}
	}
}

// pruneConversations forgets the sessions and latest replies past their
// retention, and logs how many went.
func pruneConversations(ctx context.Context, st expiringStore, now time.Time, keep retention, log *zap.Logger) {
	if ps, ok := st.(sessionPruner); ok && keep.sessions > 0 {
		n, err := ps.PruneSessions(ctx, now.Add(-keep.sessions))
		if err != nil {
			log.Warn("pruning sessions", zap.Error(err))
		} else if n > 0 {
			log.Info("sessions unused past store.session_retention forgotten", zap.Int("sessions", n), zap.Duration("retention", keep.sessions))
		}
	}
	if rp, ok := st.(replyPruner); ok && keep.replies > 0 {
		n, err := rp.PruneReplies(ctx, now.Add(-keep.replies))
		if err != nil {
			log.Warn("pruning latest replies", zap.Error(err))
		} else if n > 0 {
			log.Info("latest replies past store.reply_retention dropped", zap.Int("replies", n), zap.Duration("retention", keep.replies))
		}
	}
}

// listen opens addr, reporting a clear error when it is taken.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}
