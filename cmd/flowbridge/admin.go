package main

import (
	"github.com/flowbridge/flowbridge/internal/netlimit"

	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

type adminDeps struct {
	store    adminStore
	core     interface{ StoreReady() error }
	registry *prometheus.Registry
	adapters []namedAdapter
	log      *zap.Logger
}

// adminStore is what the admin listener serves of the store: its health,
// and the sessions and audit the CLI reads while a bridge holds a bbolt file.
// /backup is served when it is a backupStore too.
type adminStore interface {
	store.Sessions
	store.Audit
	store.Feedback
	Health() error
}

type adminServer struct {
	addr     string
	handler  atomic.Pointer[http.Handler]
	shutdown func()
}

// startAdmin listens on cfg.Listen before anything else starts, so that
// /readyz says why flowbridge is not ready while it waits for its store:
// until serve hands it the full handler (setHandler), /healthz answers and
// /readyz is 503 with starting's reason for the store. Beyond loopback a
// bearer token is required for all but the health checks.
func startAdmin(cfg AdminConfig, starting func() string, log *zap.Logger) (*adminServer, error) {
	return startAdminLimited(cfg, defaultAdminLimits, starting, log)
}

// startAdminLimited is startAdmin with the connection limits lim.
func startAdminLimited(cfg AdminConfig, lim adminLimits, starting func() string, log *zap.Logger) (*adminServer, error) {
	if cfg.Listen == "" || cfg.Listen == "off" {
		return &adminServer{shutdown: func() {}}, nil
	}
	if !isLoopback(cfg.Listen) && cfg.Token.IsZero() {
		return nil, fmt.Errorf("admin.token: required when admin.listen (%s) is not a loopback address", cfg.Listen)
	}
	ln, err := listenAdmin(cfg.Listen, log)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	s := &adminServer{addr: ln.Addr().String()}
	s.setHandler(startingHandler(starting))
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*s.handler.Load()).ServeHTTP(w, r) }),
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(netlimit.Listen(ln, lim.maxConns)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin listener stopped", zap.Error(err))
		}
	})
	s.shutdown = sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		wg.Wait()
	})
	return s, nil
}

// adminPorts is how many ports from admin.listen's on a replica tries.
const adminPorts = 10

// listenAdmin listens on addr or, when its port is taken (by another
// replica started on this host from the same config), on the next free one
// of the adminPorts from it, and logs which.
func listenAdmin(addr string, log *zap.Logger) (net.Listener, error) {
	ln, err := listen(addr)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return ln, err
	}
	host, port, _ := net.SplitHostPort(addr)
	first, perr := strconv.Atoi(port)
	if perr != nil || first == 0 {
		return nil, err
	}
	for p := first + 1; p < first+adminPorts && p <= 65535; p++ {
		next := net.JoinHostPort(host, strconv.Itoa(p))
		if ln, nerr := listen(next); nerr == nil {
			log.Warn("admin.listen's port is taken (by another replica on this host?); listening on the next free one",
				zap.String("configured", addr), zap.String("listen", next))
			return ln, nil
		}
	}
	return nil, fmt.Errorf("%w, and so are the next %d ports", err, adminPorts-1)
}

// setHandler serves h from now on.
func (s *adminServer) setHandler(h http.Handler) {
	if s.addr != "" {
		s.handler.Store(&h)
	}
}

// startingHandler is the admin listener while the store is not open yet.
func startingHandler(reason func() string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"store": reason()})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, msgStarting, http.StatusServiceUnavailable)
	})
	return mux
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func adminHandler(cfg AdminConfig, d adminDeps) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		status := map[string]string{}
		ready := true
		if err := d.store.Health(); err != nil {
			status["store"], ready = err.Error(), false
		} else if err := storeReady(d.core); err != nil {
			status["store"], ready = err.Error(), false
		} else {
			status["store"] = "ok"
		}
		for _, a := range d.adapters {
			if err := a.Ready(); err != nil {
				status[a.name], ready = err.Error(), false
			} else {
				status[a.name] = "ok"
			}
		}
		code := http.StatusOK
		if !ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, status)
	})
	private := http.NewServeMux()
	private.Handle("GET /metrics", promhttp.HandlerFor(d.registry, promhttp.HandlerOpts{Registry: d.registry}))
	private.HandleFunc("GET /backup", func(w http.ResponseWriter, _ *http.Request) {
		b, ok := d.store.(backupStore)
		if !ok {
			http.Error(w, msgNoBackup, http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="flowbridge-backup.db"`)
		if _, err := b.Backup(w); err != nil {
			d.log.Error("backup", zap.Error(err))
		}
	})
	private.HandleFunc("GET /api/sessions", func(w http.ResponseWriter, r *http.Request) {
		list, err := d.store.ListSessions(r.Context(), r.URL.Query().Get("prefix"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, http.StatusOK, list)
	})
	private.HandleFunc("PUT /api/sessions", func(w http.ResponseWriter, r *http.Request) {
		var s store.Session
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&s); err != nil || s.Key == "" || s.SessionUUID == "" || s.Agent == "" {
			http.Error(w, "body must be a session with Key, Agent and SessionUUID", http.StatusBadRequest)
			return
		}
		if err := d.store.PutSession(r.Context(), s); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	private.HandleFunc("DELETE /api/sessions", func(w http.ResponseWriter, r *http.Request) {
		found, err := d.store.DeleteSession(r.Context(), r.URL.Query().Get("key"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if !found {
			http.Error(w, "no such conversation", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	private.HandleFunc("GET /api/audit", listHandler(auditFilterFromQuery, d.store.Audit))
	private.HandleFunc("GET /api/feedback", listHandler(feedbackFilterFromQuery, d.store.Votes))
	// Profiles of the running bridge, for measuring it under load.
	private.HandleFunc("GET /debug/pprof/", pprof.Index)
	private.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	private.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	private.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.Handle("/", requireToken(cfg.Token.Value(), private))
	return mux
}

// msgStarting answers the admin API while the store is not open yet.
const msgStarting = "flowbridge is starting: its store is not open yet (see /readyz)"

// msgNoBackup is /backup's answer when the store is not a file flowbridge
// can copy: the database has its own tools.
const msgNoBackup = "flowbridge keeps its state in PostgreSQL (store.driver = \"postgres\"), which /backup cannot copy: back the database up with pg_dump (e.g. pg_dump --format=custom \"$FLOWBRIDGE_DATABASE_URL\" > flowbridge.dump) or your provider's backups."

func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="flowbridge admin"`)
			// A client without the token keeps no connection open.
			w.Header().Set("Connection", "close")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// auditFilterFromQuery reads since, until (RFC 3339 or a duration ago), flow,
// user, outcome and limit.
func auditFilterFromQuery(q url.Values) (store.AuditFilter, error) {
	var f store.AuditFilter
	var err error
	if f.Since, f.Until, f.Limit, err = timeAndLimit(q); err != nil {
		return f, err
	}
	f.Flow, f.User, f.Outcome = q.Get("flow"), q.Get("user"), q.Get("outcome")
	if f.Outcome != "" && !slices.Contains(store.Outcomes, f.Outcome) {
		return f, fmt.Errorf("outcome: %q is not one of %s", f.Outcome, strings.Join(store.Outcomes, ", "))
	}
	return f, nil
}

// parseWhen reads an RFC 3339 time, a date, or a duration meaning that long ago ("24h").
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (use 2026-01-02, RFC 3339 or a duration like 24h)", s)
}

func storeReady(core interface{ StoreReady() error }) error {
	if core == nil {
		return nil
	}
	return core.StoreReady()
}
