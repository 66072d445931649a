package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/postgres"
	"github.com/flowbridge/flowbridge/sessionmap"
)

// servedStore is the store serve runs the bridge on: the core's store.Store,
// and what the admin listener and maintain need beside it.
type servedStore interface {
	store.Store
	// Health reports whether the store can serve, for /readyz.
	Health() error
	Close() error
}

// backupStore is a store that copies itself while it serves: the bbolt
// file, for /backup. PostgreSQL has pg_dump.
type backupStore interface {
	Backup(w io.Writer) (int64, error)
}

// statsStore is a store that counts its records cheaply: the bbolt file,
// for /metrics.
type statsStore interface {
	Stats() sessionmap.Stats
}

// What admin and the metrics find by type assertion; a lost method must fail
// the build, not quietly answer 501 or drop the gauges.
var (
	_ servedStore = (*sessionmap.Store)(nil)
	_ servedStore = pgStore{}
	_ backupStore = (*sessionmap.Store)(nil)
	_ statsStore  = (*sessionmap.Store)(nil)
	// The wrapper is the whole store contract, leases and all.
	_ store.Store = pgStore{}
)

// pgOpenTimeout bounds connecting to PostgreSQL and migrating its schema at
// start-up (replicas starting together wait for each other's migration).
const pgOpenTimeout = 30 * time.Second

// pgPingTimeout bounds the ping behind /readyz.
const pgPingTimeout = 2 * time.Second

// pgStore is the PostgreSQL store as serve uses it: Health pings the
// database.
type pgStore struct{ *postgres.Store }

// Health pings the database within pgPingTimeout.
func (s pgStore) Health() error {
	ctx, cancel := context.WithTimeout(context.Background(), pgPingTimeout)
	defer cancel()
	return s.Ping(ctx)
}

// Backoff between attempts to reach PostgreSQL at start.
const (
	pgRetryMin = time.Second
	pgRetryMax = 30 * time.Second
)

// openStore opens the configured store for serve: the bbolt file, which one
// process holds at a time, or the PostgreSQL database, whose schema it
// brings up to date and which any number of processes share. A database
// that does not answer yet (at boot, beside its container) is waited for, as
// Slack and Discord are: tried again with backoff from pgRetryMin to
// pgRetryMax, each wait logged and its reason kept in wait for /readyz,
// until ctx ends. A login the server refuses, or a database it does not
// have, ends it at once: waiting would not change them.
func openStore(ctx context.Context, cfg StoreConfig, wait *storeWait, log *zap.Logger) (servedStore, error) {
	if cfg.Driver != driverPostgres {
		st, err := sessionmap.Open(cfg.Path, sessionmap.Options{Timeout: time.Second, ID: cfg.ID})
		if err != nil {
			return nil, err
		}
		id := st.Identity()
		log.Info("store opened", zap.String("path", cfg.Path), zap.String("store_id", id.ID), zap.Int64("generation", id.Generation))
		switch c := st.Compaction(); {
		case c.Err != nil:
			log.Warn("store not compacted; serving from the file as it was", zap.String("path", cfg.Path), zap.Int64("bytes", c.Before), zap.Error(c.Err))
		case c.Before > 0:
			log.Info("store compacted", zap.String("path", cfg.Path), zap.Int64("bytes_before", c.Before), zap.Int64("bytes_after", c.After))
		}
		if cfg.ID == "" {
			log.Info("store.id is not set: a start that finds the store file and its marker both gone (an emptied or unmounted volume) "+
				"cannot tell it from a first start; set it to have such a start refused", zap.String("store_id", id.ID))
		}
		return st, nil
	}
	where := describeStore(cfg)
	wait.set("connecting to " + where)
	delay := pgRetryMin
	for {
		octx, cancel := context.WithTimeout(ctx, pgOpenTimeout)
		st, err := postgres.Open(octx, cfg.DSN.Value(), postgres.Options{})
		cancel()
		if err == nil {
			return pgStore{st}, nil
		}
		if ctx.Err() != nil || permanentPG(err) {
			return nil, fmt.Errorf("store: %w", err)
		}
		wait.set(fmt.Sprintf("waiting for %s (next try in %s): %v", where, delay, err))
		log.Warn("PostgreSQL not reachable; waiting for it", zap.String("store", where), zap.Duration("retry_in", delay), zap.Error(err))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("store: %w (gave up waiting: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, pgRetryMax)
	}
}

// permanentPG reports whether the server refused the login or has no such
// database (SQLSTATE class 28, or 3D000).
func permanentPG(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (strings.HasPrefix(pgErr.Code, "28") || pgErr.Code == "3D000")
}

// storeWait is why the store is not open yet, for /readyz.
type storeWait struct {
	mu     sync.Mutex
	reason string
}

func (w *storeWait) set(reason string) {
	w.mu.Lock()
	w.reason = reason
	w.mu.Unlock()
}

func (w *storeWait) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reason == "" {
		return "opening the store"
	}
	return w.reason
}

// describeStore names the configured store for people: the bbolt file, or
// where the database is, without the DSN's password.
func describeStore(cfg StoreConfig) string {
	if cfg.Driver != driverPostgres {
		return cfg.Path
	}
	where, err := postgres.Describe(cfg.DSN.Value())
	if err != nil {
		return "PostgreSQL (" + err.Error() + ")"
	}
	return "PostgreSQL " + where
}

// cliStore is what sessions and audit use of a store they open themselves.
type cliStore interface {
	store.Sessions
	store.Audit
	store.Feedback
	Close() error
}

// openCLIStore opens the configured store for a command, or, when a running
// bridge holds the bbolt file's lock, returns a client of that bridge's admin
// API instead. PostgreSQL has no such lock: the command talks to the
// database, whatever number of replicas run.
func openCLIStore(ctx context.Context, cfg *Config) (cliStore, *adminClient, error) {
	if cfg.Store.Driver == driverPostgres {
		st, err := openMigrated(ctx, cfg.Store)
		if err != nil {
			return nil, nil, err // not a typed nil in the interface
		}
		return st, nil, nil
	}
	st, err := sessionmap.Open(cfg.Store.Path, sessionmap.Options{Timeout: 200 * time.Millisecond, ID: cfg.Store.ID})
	if err == nil {
		return st, nil, nil
	}
	if !errors.Is(err, sessionmap.ErrLocked) || cfg.Admin.Listen == "" || cfg.Admin.Listen == "off" {
		return nil, nil, storeError(cfg, err)
	}
	return nil, &adminClient{base: "http://" + cfg.Admin.Listen, token: cfg.Admin.Token.Value(), viaLock: true}, nil
}

// openMigrated opens the PostgreSQL store for a command, leaving its schema
// alone: a command reads and writes records, and does not migrate as a side
// effect. A schema this flowbridge does not match is refused, with the way out.
func openMigrated(ctx context.Context, cfg StoreConfig) (*postgres.Store, error) {
	st, err := openPostgres(ctx, cfg)
	if err != nil {
		return nil, err
	}
	current, latest, err := st.MigrationStatus(ctx)
	switch {
	case err != nil:
	case current < latest:
		err = fmt.Errorf("the database's schema is at version %d, and this flowbridge needs %d: run flowbridge migrate -apply (or start flowbridge run, which migrates)", current, latest)
	case current > latest:
		err = fmt.Errorf("%w: version %d, this flowbridge knows up to %d; use the flowbridge that migrated it", postgres.ErrNewerSchema, current, latest)
	}
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	return st, nil
}

// openPostgres connects to the configured database without migrating it.
func openPostgres(ctx context.Context, cfg StoreConfig) (*postgres.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, pgOpenTimeout)
	defer cancel()
	st, err := postgres.Open(ctx, cfg.DSN.Value(), postgres.Options{NoMigrate: true})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return st, nil
}

// storeCollector exports a store's counters as gauges, read at each scrape.
type storeCollector struct {
	st                           statsStore
	sessions, inbox, audit, size *prometheus.Desc
}

func newStoreCollector(st statsStore) *storeCollector {
	return &storeCollector{
		st:       st,
		sessions: prometheus.NewDesc("flowbridge_store_sessions", "Conversation-to-session mappings in the store.", nil, nil),
		inbox:    prometheus.NewDesc("flowbridge_store_inbox_entries", "Inbox entries in the store, answered ones not yet expired included.", nil, nil),
		audit:    prometheus.NewDesc("flowbridge_store_audit_entries", "Audit entries in the store.", nil, nil),
		size:     prometheus.NewDesc("flowbridge_store_bytes", "Size of the store's data in bytes.", nil, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sessions
	ch <- c.inbox
	ch <- c.audit
	ch <- c.size
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.Stats()
	if !s.Open {
		return // closed or damaged: /readyz says which
	}
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(s.Sessions))
	ch <- prometheus.MustNewConstMetric(c.inbox, prometheus.GaugeValue, float64(s.Inbox))
	ch <- prometheus.MustNewConstMetric(c.audit, prometheus.GaugeValue, float64(s.AuditEntries))
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(s.FileSize))
}

// checkStoreID adds a problem when store.id is set but is not a store ID.
func checkStoreID(ps *problems, id string) {
	if id != "" && !sessionmap.ValidID(id) {
		ps.add("store.id", "%q is not a store ID (26 characters of A-Z and 2-7, as the log and the marker beside the store file show it)", id)
	}
}
