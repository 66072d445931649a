package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowbridge/flowbridge/bridge"
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
	_ servedStore   = (*sessionmap.Store)(nil)
	_ bridge.Prober = (*sessionmap.Store)(nil)
	_ bridge.Prober = pgStore{}
	_ servedStore   = pgStore{}
	_ backupStore   = (*sessionmap.Store)(nil)
	_ statsStore    = (*sessionmap.Store)(nil)
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

// openStore opens the configured store for serve: the bbolt file, which one
// process holds at a time, or the PostgreSQL database, whose schema it
// brings up to date and which any number of processes share.
func openStore(ctx context.Context, cfg StoreConfig) (servedStore, error) {
	if cfg.Driver == driverPostgres {
		ctx, cancel := context.WithTimeout(ctx, pgOpenTimeout)
		defer cancel()
		st, err := postgres.Open(ctx, cfg.DSN.Value(), postgres.Options{})
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		return pgStore{st}, nil
	}
	return sessionmap.Open(cfg.Path, sessionmap.Options{Timeout: time.Second})
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
	st, err := sessionmap.Open(cfg.Store.Path, sessionmap.Options{Timeout: 200 * time.Millisecond})
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
