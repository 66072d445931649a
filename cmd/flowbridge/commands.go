package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/postgres"
	"github.com/flowbridge/flowbridge/sessionmap"
)

func newLogger(cfg LogConfig, w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(cfg.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	var enc zapcore.Encoder
	if cfg.Format == "console" {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05")
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		enc = zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level)), nil
}

func cmdRun(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "run", "run -config FILE")
	path := configFlag(fs, env)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	env.config(cfg)
	out, closeLog, err := logOutput(env, cfg, *path)
	if err != nil {
		return err
	}
	defer closeLog()
	log, err := newLogger(cfg.Log, cfg.refs.writer(out))
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	for _, w := range cfg.warnings() {
		log.Warn(w)
	}
	terminal := isTerminal(env.stdin)
	in := &countingReader{r: env.stdin}
	senv := *env
	senv.stdin = in
	if err := serve(ctx, &senv, cfg, log, serveOptions{configPath: *path, prompt: terminal}); err != nil {
		return cfg.refs.error(err)
	}
	if consoleOnly(cfg) && !terminal && in.n.Load() == 0 && ctx.Err() == nil {
		return errNoConsoleInput
	}
	return nil
}

// errNoConsoleInput is run's end when the console was all it served and
// its input was empty: started in a container without a terminal (docker
// run without -it), it would otherwise exit 0 at once, silently, and be
// restarted forever.
var errNoConsoleInput = errors.New("the console is the only adapter enabled, and its input (standard input, not a terminal) " +
	"ended before a line was read: there is nothing to serve.\n" +
	"  To chat in the console, run flowbridge in a terminal (with Docker: docker run -it …).\n" +
	"  To serve Slack or Discord, enable [slack] or [discord] and set [console] enabled = false")

// consoleOnly reports whether the console is the one adapter cfg enables.
func consoleOnly(cfg *Config) bool {
	return cfg.Console.Enabled && !cfg.Slack.Enabled && !cfg.Discord.Enabled
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// logOutput is where run writes its log: log.file when set; else standard
// error, unless the console chats in the terminal that standard error also
// shows, where log lines would land between the prompts: then
// flowbridge.log beside the config. A file's path is told once.
func logOutput(env *environment, cfg *Config, configPath string) (io.Writer, func(), error) {
	path := cfg.Log.File
	beside := path == "" && cfg.Console.Enabled && (sameTerminal(env.stderr, env.stdin) || sameTerminal(env.stderr, env.stdout))
	if beside {
		path = filepath.Join(filepath.Dir(configPath), "flowbridge.log")
	}
	if path == "" {
		return env.stderr, func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil && beside {
		// No file was asked for: the config's directory may be read-only
		// (a config mounted into a container), which must not stop the
		// console. The log then shares the terminal.
		fmt.Fprintf(env.stderr, "flowbridge: cannot write the log beside the config (%v); logging here, between the prompts ([log] file chooses a file)\n", cfg.refs.error(err))
		return env.stderr, func() {}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("log.file: %w", err)
	}
	fmt.Fprintf(env.stderr, "flowbridge: logging to %s\n", cfg.refs.redact(path))
	return f, func() { _ = f.Close() }, nil
}

func cmdDev(ctx context.Context, env *environment, args []string) (err error) {
	fs := newFlagSet(env, "dev", "dev [-v] [-store FILE | -replicas N [-database URL]]")
	verbose := fs.Bool("v", false, "log at debug level (logs go to stderr)")
	storePath := fs.String("store", "", "keep sessions in this file (default: a temporary file removed at exit)")
	replicas := fs.Int("replicas", 1, "run this many replicas on PostgreSQL, the terminal's lines going to each in turn")
	database := fs.String("database", cmp.Or(env.getenv("FLOWBRIDGE_DATABASE_URL"), devDatabase), "with -replicas: the PostgreSQL database, in whose fresh schema they run (env FLOWBRIDGE_DATABASE_URL)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *replicas < 1 || *replicas > 8:
		return &usageError{"dev -replicas: 1 to 8"}
	case *replicas > 1 && *storePath != "":
		return &usageError{"dev: -store is the bbolt file of one process; -replicas share PostgreSQL"}
	}
	fake, err := startEchoWorkspace()
	if err != nil {
		return err
	}
	defer fake.Close()
	if *storePath != "" {
		// The fake workspace's sessions live beside the store, so a second
		// run continues the conversations the store maps.
		statePath := *storePath + ".workspace.json"
		if f, err := os.Open(statePath); err == nil {
			err = fake.loadSessions(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("dev: %s: %w", statePath, err)
			}
		}
		defer func() {
			if werr := writeFileAtomic(statePath, fake.saveSessions); werr != nil && err == nil {
				err = fmt.Errorf("dev: keep the fake workspace's sessions: %w", werr)
			}
		}()
	}
	if *storePath == "" {
		dir, err := os.MkdirTemp("", "flowbridge-dev-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*storePath = filepath.Join(dir, "dev.db")
	}
	cfg := devConfig(fake.URL, *storePath)
	if *verbose {
		cfg.Log.Level = "debug"
	}
	log, lerr := newLogger(cfg.Log, env.stderr)
	if lerr != nil {
		return lerr
	}
	defer func() { _ = log.Sync() }()
	if *replicas > 1 {
		return devReplicas(ctx, env, cfg, *replicas, *database, log)
	}
	interactive := isTerminal(env.stdin)
	if interactive {
		fmt.Fprintln(env.stdout, devBanner)
	}
	return serve(ctx, env, cfg, log, serveOptions{prompt: interactive})
}

const devBanner = `flowbridge dev: a fake AI workspace and this terminal. Type a message to talk to the agent;
/flow help lists flows (try: /flow healthcheck host=web1 service=nginx), /agent help the rest. Ctrl-D quits.`

// devConfig is the configuration dev mode runs with.
func devConfig(baseURL, storePath string) *Config {
	cfg := defaultConfig()
	cfg.Workspace.BaseURL = baseURL
	cfg.Workspace.WorkspaceUUID = devWorkspace
	cfg.Workspace.APIToken = devToken
	cfg.Store.Path = storePath
	cfg.Admin.Listen = "127.0.0.1:0"
	// Replies already say what went wrong; log lines would only interleave
	// with them in the terminal. -v shows everything.
	cfg.Log = LogConfig{Level: "error", Format: "console"}
	cfg.Bridge.Admins = []string{"local"}
	cfg.Console.Enabled = true
	cfg.Agents = []AgentConfig{{Name: "helper", UUID: devAgentUUID, Description: "an agent that echoes with its turn number", Default: true}}
	cfg.Flows = []FlowConfig{
		{Name: "healthcheck", UUID: devFlowHC, Description: "check a service on a host", Timeout: Duration(30 * time.Second), Allow: []string{"everyone"},
			Params: []ParamConfig{{Name: "host", Description: "host name", Required: true}, {Name: "service", Description: "service name"}}},
		{Name: "slow", UUID: devFlowSlow, Description: "a flow that never finishes in time (shows a timeout)", Timeout: Duration(3 * time.Second), Allow: []string{"everyone"}},
		{Name: "inventory", UUID: devFlowJSON, Description: "returns structured output (shown as JSON)", Timeout: Duration(30 * time.Second), Allow: []string{"everyone"}},
	}
	return &cfg
}

// isTerminal reports whether r is an interactive terminal.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	// Through SyscallConn: Fd would put the file in blocking mode, and a
	// read of it could then not be cut short by closing it.
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	is := false
	_ = rc.Control(func(fd uintptr) { is = term.IsTerminal(int(fd)) })
	return is
}

// sameTerminal reports whether a and b are one terminal.
func sameTerminal(a, b any) bool {
	if !isTerminal(a) || !isTerminal(b) {
		return false
	}
	fa, erra := a.(*os.File).Stat()
	fb, errb := b.(*os.File).Stat()
	return erra == nil && errb == nil && os.SameFile(fa, fb)
}

func cmdCheckConfig(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "check-config", "check-config -config FILE [-online]")
	path := configFlag(fs, env)
	online := fs.Bool("online", false, "also reach the workspace API with the token and say what is wrong (sends one chat request to no session)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	env.config(cfg)
	stdout := cfg.refs.writer(env.stdout)
	fmt.Fprintf(stdout, "%s: OK\n", *path)
	fmt.Fprintf(stdout, "  workspace %s at %s\n", cfg.Workspace.WorkspaceUUID, cfg.Workspace.BaseURL)
	fmt.Fprintf(stdout, "  %d agent(s), %d flow(s); store %s\n", len(cfg.Agents), len(cfg.Flows), describeStore(cfg.Store))
	fmt.Fprintf(stdout, "  adapters: %s\n", strings.Join(enabledAdapters(cfg), ", "))
	for _, n := range slackNotes(cfg) {
		fmt.Fprintf(stdout, "  %s\n", n)
	}
	printSchedules(stdout, cfg)
	for _, w := range cfg.warnings() {
		fmt.Fprintf(stdout, "  warning: %s\n", w)
	}
	for _, n := range cfg.needs() {
		fmt.Fprintf(stdout, "  needs: %s\n", n)
	}
	if !*online {
		return nil
	}
	hc := env.httpClient
	if hc == nil {
		hc = &http.Client{}
	}
	said, err := probeWorkspace(ctx, cfg, hc)
	if err != nil {
		return fmt.Errorf("check-config -online: %w", err)
	}
	fmt.Fprintf(stdout, "  online: %s\n", said)
	return nil
}

// storeError adds, to an error that says the store file is damaged, the
// command that lists all of the damage.
func storeError(cfg *Config, err error) error {
	if errors.Is(err, sessionmap.ErrCorrupt) {
		return fmt.Errorf("%w (flowbridge store check -file %s lists all the damage)", err, cfg.Store.Path)
	}
	return err
}

// cmdStore runs the store subcommands: check, the full consistency check of
// the store file. A running bridge holds the file; check a copy of it from
// the admin listener's /backup with -file.
func cmdStore(ctx context.Context, env *environment, args []string) error {
	if len(args) > 0 && args[0] == "compact" {
		return cmdStoreCompact(env, args[1:])
	}
	if len(args) == 0 || args[0] != "check" {
		return &usageError{"usage: flowbridge store check|compact [-config FILE | -file STORE]"}
	}
	fs := newFlagSet(env, "store check", "store check [-config FILE | -file STORE]")
	path := configFlag(fs, env)
	file := fs.String("file", "", "check this store file instead of the config's (a copy taken from /backup, say)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{"usage: flowbridge store check [-config FILE | -file STORE]"}
	}
	target, pg, err := storeTarget(env, *path, *file)
	if err != nil {
		return err
	}
	if pg != nil {
		return checkDatabase(ctx, env, *pg)
	}
	err = sessionmap.CheckFile(target)
	if d, ok := errors.AsType[*sessionmap.DamageError](err); ok {
		fmt.Fprintf(env.stdout, "%s: damaged\n", target)
		for _, p := range d.Problems {
			fmt.Fprintf(env.stdout, "  %s\n", p)
		}
		if d.More > 0 {
			fmt.Fprintf(env.stdout, "  and %d more\n", d.More)
		}
		remedy := d.Remedy()
		fmt.Fprintf(env.stdout, "%s%s.\n", strings.ToUpper(remedy[:1]), remedy[1:])
		return fmt.Errorf("store %s is damaged", target)
	}
	if errors.Is(err, sessionmap.ErrLocked) {
		return fmt.Errorf("%w: stop it to check the file, or check a copy from its admin listener's /backup with -file", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "%s: OK, no damage found\n", target)
	return nil
}

// checkDatabase is store check for PostgreSQL: there is no file to walk, so
// it checks what the bridge needs of the database, that it answers and has
// the schema this flowbridge expects.
func checkDatabase(ctx context.Context, env *environment, cfg StoreConfig) error {
	st, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	current, _, err := st.MigrationStatus(ctx)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	fmt.Fprintf(env.stdout, "%s: OK, the database answers and its schema is at version %d, as this flowbridge expects\n", describeStore(cfg), current)
	fmt.Fprintln(env.stdout, "(the file check is for bbolt; PostgreSQL checks its own pages: see data checksums and amcheck in its manual)")
	return nil
}

// cmdMigrate shows the schema version of the configured PostgreSQL store
// and, with -apply, brings it up to date. flowbridge run migrates on start
// too; this is for applying migrations as a step of their own, before
// replicas of a new version start.
func cmdMigrate(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "migrate", "migrate [-config FILE] [-apply]")
	path := configFlag(fs, env)
	apply := fs.Bool("apply", false, "apply the pending migrations (without it, only show the version)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{"usage: flowbridge migrate [-config FILE] [-apply]"}
	}
	cfg, err := loadStoreConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	env.config(cfg)
	if cfg.Store.Driver != driverPostgres {
		fmt.Fprintf(env.stdout, "store.driver is %q: the file %s upgrades itself when flowbridge opens it; there is nothing to migrate\n", cfg.Store.Driver, cfg.Store.Path)
		return nil
	}
	st, err := openPostgres(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	where := describeStore(cfg.Store)
	current, latest, err := st.MigrationStatus(ctx)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	switch {
	case current > latest:
		return fmt.Errorf("%s: %w: version %d, this flowbridge knows up to %d; use the flowbridge that migrated it", where, postgres.ErrNewerSchema, current, latest)
	case current == latest:
		fmt.Fprintf(env.stdout, "%s: schema version %d of %d, up to date\n", where, current, latest)
		return nil
	case !*apply:
		fmt.Fprintf(env.stdout, "%s: schema version %d of %d; %d migration(s) pending: flowbridge migrate -apply applies them\n", where, current, latest, latest-current)
		return nil
	}
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if current, latest, err = st.MigrationStatus(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	fmt.Fprintf(env.stdout, "%s: migrated, schema version %d of %d\n", where, current, latest)
	return nil
}

func cmdSessions(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return &usageError{"usage: flowbridge sessions list|bind|reset [-config FILE] …"}
	}
	sub := args[0]
	fs := newFlagSet(env, "sessions "+sub, "sessions list [-prefix P] | bind KEY SESSION_UUID [-agent NAME] | reset KEY")
	path := configFlag(fs, env)
	prefix := fs.String("prefix", "", "list: only conversation keys starting with this")
	agent := fs.String("agent", "", "bind: the agent the session belongs to (default: the default agent)")
	asJSON := fs.Bool("json", false, "list: JSON lines instead of a table")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if sub == "bind" && fs.NArg() == 2 {
		if err := checkSessionUUID(fs.Arg(1)); err != nil {
			return err
		}
	}
	cfg, err := loadStoreConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	env.config(cfg)
	st, admin, err := openCLIStore(ctx, cfg)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
	}
	switch sub {
	case "list":
		var list []store.Session
		if st != nil {
			list, err = st.ListSessions(ctx, *prefix)
			err = storeError(cfg, err)
		} else {
			err = admin.get(ctx, "/api/sessions?prefix="+url.QueryEscape(*prefix), &list)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSONLines(env.stdout, list)
		}
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CONVERSATION\tAGENT\tSESSION\tLAST USED")
		for _, s := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Key, s.Agent, s.SessionUUID, s.LastUsed.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	case "bind":
		if fs.NArg() != 2 {
			return &usageError{"usage: flowbridge sessions bind KEY SESSION_UUID [-agent NAME]"}
		}
		name := *agent
		if name == "" {
			name = defaultAgentName(cfg)
		}
		if !hasAgent(cfg, name) {
			return fmt.Errorf("agent %q is not in the config", name)
		}
		now := time.Now()
		s := store.Session{Key: fs.Arg(0), Agent: name, SessionUUID: fs.Arg(1), Created: now, LastUsed: now}
		if st != nil {
			err = st.PutSession(ctx, s)
			if err == nil {
				err = st.SetConversationAgent(ctx, s.Key, name)
			}
		} else {
			err = admin.put(ctx, "/api/sessions", s)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "%s is now bound to session %s of agent %s\n", s.Key, s.SessionUUID, name)
		return nil
	case "reset":
		if fs.NArg() != 1 {
			return &usageError{"usage: flowbridge sessions reset KEY"}
		}
		found := false
		if st != nil {
			found, err = st.DeleteSession(ctx, fs.Arg(0))
		} else {
			err = admin.delete(ctx, "/api/sessions?key="+url.QueryEscape(fs.Arg(0)))
			found = err == nil
			if errors.Is(err, errAdminNotFound) {
				err = nil
			}
		}
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("no session is mapped for %s", fs.Arg(0))
		}
		fmt.Fprintf(env.stdout, "%s reset: its next message starts a new session\n", fs.Arg(0))
		return nil
	}
	return &usageError{fmt.Sprintf("unknown sessions command %q (list, bind, reset)", sub)}
}

// checkSessionUUID refuses a session ID that is not a UUID in its usual
// form, before a mapping that could never work is stored.
func checkSessionUUID(s string) error {
	if _, err := uuid.Parse(s); err != nil || len(s) != 36 {
		return &usageError{fmt.Sprintf("sessions bind: %q is not a session UUID: give it as the workspace shows it, e.g. 123e4567-e89b-12d3-a456-426614174000", s)}
	}
	return nil
}

func defaultAgentName(cfg *Config) string {
	for _, a := range cfg.Agents {
		if a.Default {
			return a.Name
		}
	}
	if len(cfg.Agents) > 0 {
		return cfg.Agents[0].Name
	}
	return ""
}

func hasAgent(cfg *Config, name string) bool {
	for _, a := range cfg.Agents {
		if a.Name == name {
			return true
		}
	}
	return false
}

func cmdAudit(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "audit", "audit -config FILE [-since 24h] [-until T] [-flow NAME] [-user ID] [-outcome ok|error|timeout|refused|…] [-limit N] [-json]")
	path := configFlag(fs, env)
	lf := newListFlags(fs, "at most this many entries (0: all)",
		[2]string{"flow", "only this flow"}, [2]string{"user", "only this user ID"}, [2]string{"outcome", "only this outcome"})
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadStoreConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	env.config(cfg)
	q := lf.query()
	filter, err := auditFilterFromQuery(q)
	if err != nil {
		return &usageError{err.Error()}
	}
	return listRecords(ctx, env, cfg, "/api/audit", q, func(st cliStore) ([]store.AuditEntry, error) { return st.Audit(ctx, filter) }, *lf.asJSON,
		"TIME\tPLATFORM\tUSER\tCHANNEL\tFLOW\tOUTCOME\tDURATION\tPARAMETERS",
		func(e store.AuditEntry) string {
			var ps []string
			for _, k := range slices.Sorted(maps.Keys(e.Params)) {
				ps = append(ps, tableValue(k)+"="+tableValue(e.Params[k]))
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", e.Time.UTC().Format(time.RFC3339), e.Platform, e.User, e.Channel, e.Flow, e.Outcome, e.Duration.Round(time.Millisecond), strings.Join(ps, " "))
		})
}

// tableValue quotes text from users that could break the table's layout or
// forge a row (spaces, quotes, newlines, other control characters).
func tableValue(v string) string {
	if v != "" && !strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == '"' || r == '\\' || !unicode.IsPrint(r) }) {
		return v
	}
	return strconv.Quote(v)
}

var errAdminNotFound = errors.New("not found")

// adminClient talks to a running bridge's admin API.
type adminClient struct {
	base, token string
	// viaLock says the client stands in for a store another process holds,
	// which is what a user must hear when it cannot be reached.
	viaLock bool
}

func (c *adminClient) do(ctx context.Context, method, path string, body io.Reader, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		if c.viaLock {
			return fmt.Errorf("the store is locked by a running flowbridge, and its admin API at %s did not answer: %w", c.base, err)
		}
		return fmt.Errorf("the admin API at %s did not answer: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return errAdminNotFound
	}
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("admin API %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

func (c *adminClient) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

func (c *adminClient) put(ctx context.Context, path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPut, path, strings.NewReader(string(b)), nil)
}

func (c *adminClient) delete(ctx context.Context, path string) error {
	return c.do(ctx, http.MethodDelete, path, nil, nil)
}

// cmdHealth asks the running bridge's admin listener for /healthz, for
// container health checks where no curl exists.
func cmdHealth(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "health", "health [-config FILE] [-ready]")
	path := configFlag(fs, env)
	ready := fs.Bool("ready", false, "ask /readyz instead of /healthz")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadStoreConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	env.config(cfg)
	if cfg.Admin.Listen == "" || cfg.Admin.Listen == "off" {
		return errors.New("admin.listen is off: nothing to ask")
	}
	host, port, err := net.SplitHostPort(cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("admin.listen: %w", err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	p := "/healthz"
	if *ready {
		p = "/readyz"
	}
	c := &adminClient{base: "http://" + net.JoinHostPort(host, port)}
	var status map[string]string
	if *ready {
		err = c.get(ctx, p, &status)
	} else {
		err = c.do(ctx, http.MethodGet, p, nil, nil)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	fmt.Fprintln(env.stdout, "ok")
	return nil
}

// writeJSONLines writes one JSON object per line, for scripts.
func writeJSONLines[T any](w io.Writer, list []T) error {
	enc := json.NewEncoder(w)
	for _, v := range list {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic writes path through write, to a temporary file renamed into
// place only on success, so a failure never leaves a half-written file.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing left to remove
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// cmdStoreCompact compacts a bbolt store file offline: bbolt reuses the
// pages expiry and pruning free but never gives them back, and run
// compacts only a file mostly free (sessionmap.DefaultCompactFree). The
// file is checked as at every start first, and must be the command's alone.
func cmdStoreCompact(env *environment, args []string) error {
	const use = "store compact [-config FILE | -file STORE]"
	fs := newFlagSet(env, "store compact", use)
	path := configFlag(fs, env)
	file := fs.String("file", "", "compact this store file instead of the config's")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{"usage: flowbridge " + use}
	}
	target, pg, err := storeTarget(env, *path, *file)
	if err != nil {
		return err
	}
	if pg != nil {
		return errors.New("store compact is for a bbolt file: PostgreSQL reclaims space itself (autovacuum; VACUUM FULL to give it back to the disk)")
	}
	if _, err := os.Stat(target); err != nil {
		return fmt.Errorf("store compact: %w", err)
	}
	st, err := sessionmap.Open(target, sessionmap.Options{Compact: true})
	if errors.Is(err, sessionmap.ErrLocked) {
		return fmt.Errorf("%w: stop flowbridge to compact its store (it compacts a file mostly free at every start)", err)
	}
	if err != nil {
		return err
	}
	c := st.Compaction()
	if err := st.Close(); err != nil {
		return err
	}
	if c.Err != nil {
		return fmt.Errorf("store %s not compacted (it is as it was): %w", target, c.Err)
	}
	fmt.Fprintf(env.stdout, "%s: compacted from %d to %d bytes\n", target, c.Before, c.After)
	return nil
}

// storeTarget is the store a `store` subcommand works on: file when given,
// else the config's store: its bbolt file, or (pg) its PostgreSQL settings.
func storeTarget(env *environment, path, file string) (target string, pg *StoreConfig, err error) {
	if file != "" {
		return file, nil, nil
	}
	cfg, err := loadStoreConfig(path, env.getenv)
	if err != nil {
		return "", nil, err
	}
	env.config(cfg)
	if cfg.Store.Driver == driverPostgres {
		return "", &cfg.Store, nil
	}
	return cfg.Store.Path, nil, nil
}
