package main

import (
	"bytes"
	"cmp"
	"encoding"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/flowbridge/flowbridge/adapters/console"
	"github.com/flowbridge/flowbridge/adapters/discord"
	"github.com/flowbridge/flowbridge/adapters/slack"
	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/postgres"
)

// Config is the whole TOML file; config.example.toml documents every key.
type Config struct {
	Workspace WorkspaceConfig `toml:"workspace"`
	Store     StoreConfig     `toml:"store"`
	Bridge    BridgeConfig    `toml:"bridge"`
	Admin     AdminConfig     `toml:"admin"`
	Log       LogConfig       `toml:"log"`
	Agents    []AgentConfig   `toml:"agents"`
	Flows     []FlowConfig    `toml:"flows"`
	Console   console.Config  `toml:"console"`
	Slack     slack.Config    `toml:"slack"`
	Discord   discord.Config  `toml:"discord"`
	// Schedules run flows on cron expressions (schedules.go).
	Schedules []ScheduleConfig `toml:"schedules"`

	// refs are the values taken from ${VAR} references, never to be shown.
	refs *references
}

// WorkspaceConfig is the AI workspace API to call.
type WorkspaceConfig struct {
	BaseURL           string        `toml:"base_url"`
	WorkspaceUUID     string        `toml:"workspace_uuid"`
	APIToken          bridge.Secret `toml:"api_token"`
	CreateSessionPath string        `toml:"create_session_path"`
	ChatTimeout       Duration      `toml:"chat_timeout"`
	MaxRetries        int           `toml:"max_retries"`
}

// StoreConfig chooses where the durable state lives: a bbolt file (the
// default, one process) or a PostgreSQL database that several replicas share.
type StoreConfig struct {
	// Driver is driverBBolt or driverPostgres.
	Driver string `toml:"driver"`
	// Path is the bbolt file; driver bbolt only.
	Path string `toml:"path"`
	// DSN is the PostgreSQL connection string; driver postgres only. It may
	// hold a password, so it is a Secret: never logged, never in an error.
	DSN bridge.Secret `toml:"dsn"`
	// ID is the store ID the bbolt file must carry (sessionmap.Options.ID):
	// set, a missing file or one of another ID is refused. "" checks
	// against the marker beside the file only. Driver bbolt only.
	ID string `toml:"id"`
	// AuditRetention drops audit entries older than this ("0s" keeps them forever).
	AuditRetention Duration `toml:"audit_retention"`
	// SessionRetention forgets sessions unused this long, with their
	// conversation's agent choice and context ("0s" keeps them forever).
	SessionRetention Duration `toml:"session_retention"`
	// ReplyRetention drops latest-reply records older than this ("0s"
	// keeps them forever).
	ReplyRetention Duration `toml:"reply_retention"`
	// LeaseTTL is how long a replica's lease on a conversation lasts unless
	// renewed: how long a dead replica's conversations wait for another.
	// Driver postgres only.
	LeaseTTL Duration `toml:"lease_ttl"`
	// OrderHold is how long at least, while another replica is live, the
	// replica holding a conversation's lease lets a message it has just
	// seen wait before the agent gets it, so that an earlier message of
	// the conversation another replica is recording at that moment goes
	// first ("0s": no wait); the measured recording time is added (see
	// bridge.ReplicaConfig). On bbolt no other replica is ever live.
	OrderHold Duration `toml:"order_hold"`
	// SyncInterval was the bbolt inbox journal's sync policy. The journal
	// is gone and every change is synced before it is acknowledged; the key
	// is still decoded so that a config setting it gets an error that says
	// so (see checkStore), and "0s", which asked for exactly that, passes.
	SyncInterval Duration `toml:"sync_interval"`
}

// BridgeConfig sets the core's limits.
type BridgeConfig struct {
	Admins      []string `toml:"admins"`
	QueueSize   int      `toml:"queue_size"`
	MaxInFlight int      `toml:"max_in_flight"`
	// MaxScheduledInFlight is the scheduled runs' own capacity.
	MaxScheduledInFlight int      `toml:"max_scheduled_in_flight"`
	DefaultFlowTimeout   Duration `toml:"default_flow_timeout"`
	DedupeTTL            Duration `toml:"dedupe_ttl"`
	ShutdownGrace        Duration `toml:"shutdown_grace"`
	// WorkingIndicatorDelay is how long an answer may take before Slack's
	// placeholder or reaction, or Discord's typing indicator, shows.
	WorkingIndicatorDelay Duration `toml:"working_indicator_delay"`
	MaxMessageBytes       int      `toml:"max_message_bytes"`
	MaxParams             int      `toml:"max_params"`
	MaxValueBytes         int      `toml:"max_value_bytes"`
	ChatPerMinute         float64  `toml:"chat_per_minute"`
	FlowsPerMinute        float64  `toml:"flows_per_minute"`
	RateBurst             int      `toml:"rate_burst"`
	// Files attached to messages and replies posted as files (see files.go).
	MaxFiles      int `toml:"max_files"`
	MaxFileBytes  int `toml:"max_file_bytes"`
	FileReplyOver int `toml:"file_reply_over"`
	// ThreadContextMessages and ThreadContextChars bound the earlier
	// messages of a thread (Slack) or reply chain (Discord) the first
	// message of a conversation brings the agent; 0 messages turns it off.
	ThreadContextMessages int `toml:"thread_context_messages"`
	ThreadContextChars    int `toml:"thread_context_chars"`
	// ProgressInterval is how often a running flow's message, and a slow
	// answer's placeholder, show the time elapsed; 0 turns it off.
	ProgressInterval Duration `toml:"progress_interval"`
	// Feedback puts 👍 / 👎 buttons on agent replies.
	Feedback bool `toml:"feedback"`
}

// AdminConfig is the admin HTTP listener.
type AdminConfig struct {
	Listen string        `toml:"listen"`
	Token  bridge.Secret `toml:"token"`
}

// LogConfig chooses the log level and encoding.
type LogConfig struct {
	Level  string `toml:"level"`
	Format string `toml:"format"`
	// File, when set, is where the log is appended instead of standard
	// error. Unset, run still writes it to flowbridge.log beside the config
	// when the console chats on the terminal standard error shows.
	File string `toml:"file"`
}

// AgentConfig is one [[agents]] entry.
type AgentConfig struct {
	Name        string   `toml:"name"`
	UUID        string   `toml:"uuid"`
	Description string   `toml:"description"`
	Default     bool     `toml:"default"`
	Channels    []string `toml:"channels"`
	// DefaultChannels are channel IDs whose conversations use this agent
	// unless /agent use chose another there.
	DefaultChannels []string `toml:"default_channels"`
	// Greeting opens a Slack assistant thread ("" names the agent).
	Greeting string `toml:"greeting"`
	// SuggestedPrompts are offered with the greeting, at most four.
	SuggestedPrompts []PromptConfig `toml:"suggested_prompts"`
}

// PromptConfig is one of an agent's suggested prompts.
type PromptConfig struct {
	Title   string `toml:"title"`
	Message string `toml:"message"`
}

// FlowConfig is one [[flows]] entry.
type FlowConfig struct {
	Name        string   `toml:"name"`
	UUID        string   `toml:"uuid"`
	Description string   `toml:"description"`
	Timeout     Duration `toml:"timeout"`
	Allow       []string `toml:"allow"`
	Public      bool     `toml:"public"`
	Confirm     bool     `toml:"confirm"`
	// Approvers and ApprovalTimeout: who answers a confirm = true flow's
	// request instead of its caller, and for how long it stays open.
	Approvers       []string      `toml:"approvers"`
	ApprovalTimeout Duration      `toml:"approval_timeout"`
	Params          []ParamConfig `toml:"params"`
}

// ParamConfig is one [[flows.params]] entry.
type ParamConfig struct {
	Name        string   `toml:"name"`
	Description string   `toml:"description"`
	Required    bool     `toml:"required"`
	Choices     []string `toml:"choices"`
	Suggestions []string `toml:"suggestions"`
}

// Duration reads "30s"-style strings. A TOML number is refused before it
// gets here (checkShape), since go-toml would take it as nanoseconds.
type Duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration: write a number with a unit, e.g. \"30s\", \"5m\" or \"2h\"", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration back as a string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// loadConfig reads a config file for run, check-config and every command that
// uses the whole of it: defaults, then the file decoded strictly, then ${ENV}
// references (of enabled sections), then validation. Every problem is
// reported at once, each with its key and, where the file sets it, its line.
func loadConfig(path string, getenv func(string) string) (*Config, error) {
	return loadFile(path, getenv, fullScope)
}

// loadSections reads a config file for a command that needs only some of it
// and no credential (slack-manifest, discord-invite). The whole file is
// decoded as strictly as for run, but only the named top-level sections have
// their ${ENV} references resolved, secrets are left empty, and check says
// what must be valid.
func loadSections(path string, getenv func(string) string, check func(*Config) error, sections ...string) (*Config, error) {
	return loadFile(path, getenv, scope{sections: sections, check: check})
}

// loadStoreConfig reads a config file for a command that reads or changes
// only the store, or asks the running bridge through the admin listener
// (sessions, audit, feedback, store check, migrate, health): [store],
// [admin] and [log] with their secrets (store.dsn, admin.token), and
// [agents] (sessions bind names one), checked as run checks them. No other
// section's ${ENV} reference is read, so these commands need neither the
// workspace's token nor any platform's.
func loadStoreConfig(path string, getenv func(string) string) (*Config, error) {
	return loadFile(path, getenv, scope{sections: []string{"store", "admin", "log", "agents"}, secrets: true, check: (*Config).validateStoreAccess})
}

// validateStoreAccess is Validate for the sections loadStoreConfig reads.
func (c *Config) validateStoreAccess() error {
	var ps problems
	checkBounds(&ps, reflect.ValueOf(c.Store), "store")
	checkBounds(&ps, reflect.ValueOf(c.Admin), "admin")
	checkBounds(&ps, reflect.ValueOf(c.Log), "log")
	c.checkStore(&ps)
	c.checkAdmin(&ps)
	c.checkLog(&ps)
	return errors.Join(ps...)
}

func loadFile(path string, getenv func(string) string, sc scope) (*Config, error) {
	data, err := readConfigFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("config: %w\n"+
			"  make one from the example: cp config.example.toml %s (then edit it; check it with check-config),\n"+
			"  give another file with -config FILE (or FLOWBRIDGE_CONFIG),\n"+
			"  or try flowbridge without any account: flowbridge dev", err, path)
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := parse(data, getenv, sc)
	if ce, ok := errors.AsType[*configError](err); ok {
		ce.path = path
	}
	return cfg, err
}

// maxConfigSize bounds a config file: a config of thousands of flows is a
// few megabytes; past this it is a mistake (a device, a log) to refuse, not
// to read into memory.
const maxConfigSize = 32 << 20

// readConfigFile reads the config at path, which must be a regular file of
// at most maxConfigSize bytes: /dev/zero would grow without end, a FIFO
// would hang the start until something writes to it.
func readConfigFile(path string) ([]byte, error) {
	notRegular := func(fi os.FileInfo) error {
		return fmt.Errorf("%s is %s, not a regular file: give the path of a TOML file", path, fileKind(fi.Mode()))
	}
	// Stat before opening: opening a FIFO blocks until a writer comes.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() { // replaced since the first look
		return nil, notRegular(fi)
	}
	tooLarge := fmt.Errorf("%s is larger than %d MiB: is it the config?", path, maxConfigSize>>20)
	if fi.Size() > maxConfigSize {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigSize { // grew since the Stat
		return nil, tooLarge
	}
	return data, nil
}

// fileKind names what a file that is not a regular one is.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// scope is how much of a config a command resolves and checks.
type scope struct {
	// sections, when set, are the only top-level keys whose ${ENV}
	// references are resolved; their secrets are then emptied, unread,
	// unless secrets is set.
	sections []string
	secrets  bool
	check    func(*Config) error
}

var fullScope = scope{check: (*Config).Validate}

func parse(data []byte, getenv func(string) string, sc scope) (*Config, error) {
	// go-toml stops at the first value of the wrong type and takes a bare
	// number for a Duration as nanoseconds, so the file is first decoded
	// into plain maps and compared with Config, collecting every problem;
	// then what fits is decoded into it and validated in the same pass.
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, decodeError(err)
	}
	pos := keyPositions(data)
	kept, shapeProblems := checkShape(doc, reflect.TypeFor[Config](), "")
	if len(shapeProblems) > 0 {
		// Decode what fits, so its problems are found in the same pass.
		var err error
		if data, err = toml.Marshal(kept); err != nil {
			return nil, newConfigError(shapeProblems, pos)
		}
	}
	cfg := defaultConfig()
	if err := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(&cfg); err != nil {
		if len(shapeProblems) > 0 {
			return nil, newConfigError(shapeProblems, pos)
		}
		return nil, decodeError(err)
	}
	refs := &references{}
	envProblems := expandEnv(reflect.ValueOf(&cfg).Elem(), "", getenv, sc, refs)
	followDefaults(&cfg, doc)
	if cfg.Workspace.MaxRetries == -1 { // how "none" was written before 0 meant it
		cfg.Workspace.MaxRetries = 0
	}
	// One problem per key: a key whose value was refused or whose variable
	// is unset is not also reported for what that left it.
	known := keyIndex{}
	for _, p := range slices.Concat(shapeProblems, envProblems) {
		known.add(problemKey(p))
	}
	problems := envProblems
	for _, p := range flatten(sc.check(&cfg)) {
		if !known.covers(problemKey(p)) {
			problems = append(problems, p)
		}
	}
	if len(shapeProblems)+len(problems) > 0 {
		return nil, newConfigError(refs.problems(slices.Concat(shapeProblems, problems)), pos)
	}
	cfg.refs = refs
	return &cfg, nil
}

// decodeError reports a file that is not TOML (or, should checkShape have
// let it through, does not fit Config) with its position.
func decodeError(err error) error {
	ce := &configError{errs: []error{err}}
	var strict *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case errors.As(err, &strict):
		for _, e := range strict.Errors {
			row, _ := e.Position()
			ce.lines = append(ce.lines, fmt.Sprintf("line %d: %s: unknown key", row, strings.Join(e.Key(), ".")))
		}
	case errors.As(err, &de):
		row, col := de.Position()
		key := strings.Join(de.Key(), ".")
		if key != "" {
			key = " (" + key + ")"
		}
		ce.lines = []string{fmt.Sprintf("line %d, column %d%s: %s", row, col, key, strings.TrimPrefix(de.Error(), "toml: "))}
	default:
		ce.lines = []string{err.Error()}
	}
	return ce
}

// problem is one thing wrong with a config, at its key path
// ("bridge.queue_size", "flows[0].allow[1]"; empty for the file as a whole).
type problem struct {
	key, msg string
}

func (p *problem) Error() string {
	if p.key == "" {
		return p.msg
	}
	return p.key + ": " + p.msg
}

// problems collects what Validate finds.
type problems []error

func (ps *problems) add(key, format string, args ...any) {
	*ps = append(*ps, &problem{key: key, msg: fmt.Sprintf(format, args...)})
}

func (ps *problems) addErr(err error) { *ps = append(*ps, flatten(err)...) }

// problemKey is the key an error is about: a problem's, or the leading
// "key: " of the adapters' "slack.bot_token: required".
func problemKey(err error) string {
	if p, ok := errors.AsType[*problem](err); ok {
		return p.key
	}
	key, _, ok := strings.Cut(err.Error(), ": ")
	if !ok || strings.ContainsAny(key, " \n") {
		return ""
	}
	return key
}

// flatten lists the leaves of joined errors, so each problem is one line.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// configError is every problem of a config file, one a line, each with the
// line of the file that sets its key when it does.
type configError struct {
	path  string // the file, when read from one
	lines []string
	errs  []error
}

// newConfigError lists errs in the order of the lines that set their keys,
// then those about keys the file does not set, as found.
func newConfigError(errs []error, pos positions) *configError {
	type entry struct {
		line int
		text string
	}
	entries := make([]entry, 0, len(errs))
	for _, err := range errs {
		e := entry{text: err.Error()}
		if line, ok := pos[problemKey(err)]; ok {
			e.line = line
			e.text = fmt.Sprintf("line %d: %s", line, e.text)
		}
		entries = append(entries, e)
	}
	slices.SortStableFunc(entries, func(a, b entry) int {
		if a.line == 0 || b.line == 0 {
			return b.line - a.line // any line before none
		}
		return a.line - b.line
	})
	ce := &configError{errs: errs}
	for _, e := range entries {
		ce.lines = append(ce.lines, e.text)
	}
	return ce
}

func (e *configError) Error() string {
	name := "config"
	if e.path != "" {
		name = "config " + e.path
	}
	if len(e.lines) == 1 {
		return name + ": " + e.lines[0]
	}
	return fmt.Sprintf("%s: %d problems:\n  %s", name, len(e.lines), strings.Join(e.lines, "\n  "))
}

func (e *configError) Unwrap() []error { return e.errs }

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	secretType      = reflect.TypeFor[bridge.Secret]()
)

// checkShape compares a document decoded into plain maps with the type it
// will fill, by toml tags, and returns one problem per unknown key, per value
// of the wrong type and per text value (durations) that does not parse, with
// the document less those values (nil when v itself is one), so the rest can
// still be decoded and validated.
func checkShape(v any, t reflect.Type, key string) (keep any, errs []error) {
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		s, ok := v.(string)
		if !ok {
			return nil, []error{wrongType(key, t, v)}
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return nil, []error{&problem{key: key, msg: err.Error()}}
		}
		return v, nil
	}
	ok := true
	switch t.Kind() {
	case reflect.Struct:
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, []error{wrongType(key, t, v)}
		}
		fields := tomlFields(t)
		kept := make(map[string]any, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ft, known := fields[k]
			if !known {
				errs = append(errs, unknownKey(joinKey(key, k), k, fields))
				continue
			}
			sub, subErrs := checkShape(m[k], ft, joinKey(key, k))
			errs = append(errs, subErrs...)
			if sub != nil {
				kept[k] = sub
			}
		}
		return kept, errs
	case reflect.Slice:
		list, isList := v.([]any)
		if !isList {
			return nil, []error{wrongType(key, t, v)}
		}
		kept := make([]any, 0, len(list))
		for i, item := range list {
			sub, subErrs := checkShape(item, t.Elem(), fmt.Sprintf("%s[%d]", key, i))
			errs = append(errs, subErrs...)
			if sub == nil {
				// Dropping one element would renumber the rest.
				return nil, errs
			}
			kept = append(kept, sub)
		}
		return kept, errs
	case reflect.String:
		_, ok = v.(string)
	case reflect.Bool:
		_, ok = v.(bool)
	case reflect.Int, reflect.Int64:
		_, ok = v.(int64)
	case reflect.Float64:
		switch v.(type) {
		case int64, float64:
		default:
			ok = false
		}
	}
	if !ok {
		return nil, []error{wrongType(key, t, v)}
	}
	return v, nil
}

// under reports whether key is, contains or lies within path: a problem at
// key is no news once path has been reported and left out.
func under(key, path string) bool {
	if key == "" || path == "" {
		return false
	}
	return key == path || strings.HasPrefix(key, path+".") || strings.HasPrefix(key, path+"[") ||
		strings.HasPrefix(path, key+".") || strings.HasPrefix(path, key+"[")
}

// keyIndex is a set of key paths that answers, for a key k, whether
// under(k, path) holds for any of them, by map lookups of k and its
// ancestors: a config of n problems is checked in n steps, not n².
type keyIndex struct {
	paths     map[string]bool // the paths added
	ancestors map[string]bool // every proper ancestor of one
}

func (x *keyIndex) add(path string) {
	if path == "" {
		return
	}
	if x.paths == nil {
		x.paths, x.ancestors = map[string]bool{}, map[string]bool{}
	}
	x.paths[path] = true
	for a := range keyAncestors(path) {
		x.ancestors[a] = true
	}
}

// covers reports whether key is, contains or lies within a path added.
func (x *keyIndex) covers(key string) bool {
	if key == "" || x.paths == nil {
		return false
	}
	if x.paths[key] || x.ancestors[key] {
		return true
	}
	for a := range keyAncestors(key) {
		if x.paths[a] {
			return true
		}
	}
	return false
}

// keyAncestors yields the keys key lies within, nearest last:
// "flows[1].params[0].name" gives flows, flows[1], flows[1].params and
// flows[1].params[0].
func keyAncestors(key string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for i := 1; i < len(key); i++ {
			if (key[i] == '.' || key[i] == '[') && !yield(key[:i]) {
				return
			}
		}
	}
}

// tomlFields maps a struct's toml keys to their field types.
func tomlFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		fields[name] = f.Type
	}
	return fields
}

func unknownKey(key, name string, fields map[string]reflect.Type) error {
	names := slices.Sorted(maps.Keys(fields))
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(name, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best != "" {
		return &problem{key: key, msg: fmt.Sprintf("unknown key (did you mean %s?)", best)}
	}
	return &problem{key: key, msg: "unknown key; the keys here are " + strings.Join(names, ", ")}
}

// editDistance is the Levenshtein distance of two short keys.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// wrongType says what a key takes and what the file gave, in TOML's terms.
func wrongType(key string, t reflect.Type, v any) error {
	msg := fmt.Sprintf("expected %s, got %s", expected(t), describe(v, t != secretType))
	switch {
	case t.Kind() == reflect.Int64 && reflect.PointerTo(t).Implements(textUnmarshaler):
		example := "30s"
		if n, ok := v.(int64); ok && n > 0 {
			example = fmt.Sprintf("%ds", n)
		}
		msg += fmt.Sprintf(": write a string with a unit, e.g. %s = %q", key[strings.LastIndexByte(key, '.')+1:], example)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		if s, ok := v.(string); ok {
			msg += fmt.Sprintf(": write [%q]", s)
		}
	}
	return &problem{key: key, msg: msg}
}

func expected(t reflect.Type) string {
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		if t.Kind() == reflect.Int64 {
			return `a duration such as "30s"`
		}
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	case reflect.Struct:
		return "a table"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "a list of tables ([[…]])"
		}
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(expected(t.Elem()), "a "), "an ") + "s"
	}
	return t.String()
}

// describe names a decoded TOML value; numbers and booleans are shown unless
// the key holds a secret, strings never are.
func describe(v any, show bool) string {
	switch v := v.(type) {
	case string:
		return "a string"
	case int64, float64:
		if show {
			return fmt.Sprintf("the number %v", v)
		}
		return "a number"
	case bool:
		if show {
			return fmt.Sprintf("%t", v)
		}
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a table"
	}
	return "a date or time"
}

// positions maps key paths ("bridge.queue_size", "flows[1].params[0].name")
// to the line of the file that sets them, so problems can name their line.
type positions map[string]int

// keyPositions walks the file's syntax; a file that does not parse gives
// what was found before the error (decoding reports the error itself).
// Lines come from the nodes' offsets through a lineIndex built once:
// the parser's own Shape counts lines from the start of the file at every
// call, which made a file of n keys take n² steps.
func keyPositions(data []byte) positions {
	w := posWalker{pos: positions{}, lines: newLineIndex(data)}
	arrays := map[string]int{} // an array of tables' path -> elements seen
	var p unstable.Parser
	p.Reset(data)
	table := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			path := ""
			it := e.Key()
			for it.Next() {
				n := it.Node()
				at := w.line(n)
				path = joinKey(path, string(n.Data))
				if it.IsLast() && e.Kind == unstable.ArrayTable {
					w.pos.set(path, at)
					i := arrays[path]
					arrays[path]++
					path = fmt.Sprintf("%s[%d]", path, i)
				} else if n, ok := arrays[path]; ok {
					path = fmt.Sprintf("%s[%d]", path, n-1)
				}
				w.pos.set(path, at)
			}
			table = path
		case unstable.KeyValue:
			w.keyValue(e, table)
		}
	}
	return w.pos
}

func (pos positions) set(path string, line int) {
	if _, ok := pos[path]; !ok {
		pos[path] = line
	}
}

// lineIndex holds the offsets of a file's newlines, in order.
type lineIndex []int

func newLineIndex(data []byte) lineIndex {
	var idx lineIndex
	for i, b := range data {
		if b == '\n' {
			idx = append(idx, i)
		}
	}
	return idx
}

// line is the 1-based line of the byte at offset: one more than the
// newlines before it, found by binary search.
func (idx lineIndex) line(offset int) int {
	n, _ := slices.BinarySearch(idx, offset)
	return n + 1
}

// posWalker records the lines of keys as keyPositions walks the syntax.
type posWalker struct {
	pos   positions
	lines lineIndex
}

func (w posWalker) line(n *unstable.Node) int { return w.lines.line(int(n.Raw.Offset)) }

// keyValue records a key = value line under table, and the keys of inline
// tables in its value.
func (w posWalker) keyValue(e *unstable.Node, table string) {
	path := table
	it := e.Key()
	for it.Next() {
		n := it.Node()
		path = joinKey(path, string(n.Data))
		w.pos.set(path, w.line(n))
	}
	w.value(e.Value(), path)
}

func (w posWalker) value(v *unstable.Node, path string) {
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			w.keyValue(it.Node(), path)
		}
	case unstable.Array:
		it := v.Children()
		for i := 0; it.Next(); i++ {
			n := it.Node()
			item := fmt.Sprintf("%s[%d]", path, i)
			w.pos.set(item, w.line(n))
			w.value(n, item)
		}
	}
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${VAR} in the strings of the config, after decoding, so
// a value can never change the TOML structure. A section with enabled = false
// is left alone: it needs nothing; so is a key its section's settings leave
// unread (unusedKeys). An unset variable is a problem naming the
// key: an empty token would only fail later, less clearly.
func expandEnv(v reflect.Value, path string, getenv func(string) string, sc scope, refs *references) []error {
	var errs []error
	switch v.Kind() {
	case reflect.Struct:
		if sc.sections == nil && isDisabled(v) {
			return nil
		}
		var unused []string
		if u, ok := v.Interface().(unusedKeys); ok {
			unused = u.UnusedKeys()
		}
		t := v.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
			if name == "" || name == "-" || path == "" && sc.sections != nil && !slices.Contains(sc.sections, name) {
				continue
			}
			if slices.Contains(unused, name) {
				// Not read in this mode: neither its variable nor its value.
				if f := v.Field(i); f.Kind() == reflect.String && strings.Contains(f.String(), "${") {
					f.SetString("")
				}
				continue
			}
			errs = append(errs, expandEnv(v.Field(i), joinKey(path, name), getenv, sc, refs)...)
		}
	case reflect.Slice:
		for i := range v.Len() {
			errs = append(errs, expandEnv(v.Index(i), fmt.Sprintf("%s[%d]", path, i), getenv, sc, refs)...)
		}
	case reflect.String:
		if sc.sections != nil && !sc.secrets && v.Type() == secretType {
			v.SetString("")
			return nil
		}
		s := v.String()
		if !strings.Contains(s, "${") {
			return nil
		}
		var missing []string
		out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
			name := ref[2 : len(ref)-1]
			val := getenv(name)
			if val == "" {
				missing = append(missing, name)
			}
			refs.add(path, name, val)
			return val
		})
		for _, m := range missing {
			errs = append(errs, &problem{key: path, msg: fmt.Sprintf("environment variable %s is not set", m)})
		}
		v.SetString(out)
	}
	return errs
}

// unusedKeys is a section whose settings leave some of its keys unread
// (slack.Config: a mode's credentials).
type unusedKeys interface {
	UnusedKeys() []string
}

// isDisabled reports whether a section has enabled = false.
func isDisabled(v reflect.Value) bool {
	t := v.Type()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); name == "enabled" && t.Field(i).Type.Kind() == reflect.Bool {
			return !v.Field(i).Bool()
		}
	}
	return false
}

func joinKey(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Validate returns every problem in the config, each naming its key: the same
// checks run makes before it starts, so check-config passes exactly what run
// accepts.
func (c *Config) Validate() error {
	var ps problems
	checkBounds(&ps, reflect.ValueOf(*c), "")
	c.checkWorkspace(&ps)
	c.checkStore(&ps)
	c.checkBridge(&ps)
	c.checkAdmin(&ps)
	c.checkLog(&ps)
	c.checkAgents(&ps)
	ps.addErr(c.validateFlows())
	c.checkAdapters(&ps)
	c.checkSchedules(&ps)
	return errors.Join(ps...)
}

func (c *Config) checkWorkspace(ps *problems) {
	w := c.Workspace
	if w.BaseURL == "" {
		ps.add("workspace.base_url", "required")
	} else if msg := baseURLProblem(w.BaseURL); msg != "" {
		ps.add("workspace.base_url", "%s", msg)
	}
	if w.WorkspaceUUID == "" {
		ps.add("workspace.workspace_uuid", "required")
	}
	if w.APIToken.IsZero() {
		ps.add("workspace.api_token", "required (e.g. api_token = \"${FLOWBRIDGE_API_TOKEN}\")")
	}
	if p := w.CreateSessionPath; !strings.HasPrefix(p, "/") || !strings.Contains(p, "{agent_uuid}") {
		ps.add("workspace.create_session_path", "%q must start with / and contain {agent_uuid}", p)
	}
	if slices.ContainsFunc(*ps, func(p error) bool { return under(problemKey(p), "workspace") }) {
		return
	}
	// run builds its client with workspace.New; whatever else New refuses
	// is refused here too.
	if _, err := workspace.New(w.clientConfig()); err != nil {
		ps.add("workspace", "%v", err)
	}
}

// clientConfig is the workspace client's configuration, the one run builds
// its client with and check-config validates.
func (w WorkspaceConfig) clientConfig() workspace.Config {
	cc := workspace.Config{
		BaseURL: w.BaseURL, WorkspaceUUID: w.WorkspaceUUID, Token: w.APIToken.Value(),
		CreateSessionPath: w.CreateSessionPath, ChatTimeout: w.ChatTimeout.D(), MaxRetries: w.MaxRetries,
	}
	if w.MaxRetries == 0 {
		cc.MaxRetries = -1 // none; the client's zero is its default
	}
	return cc
}

// baseURLProblem applies the workspace client's rules for its base URL.
func baseURLProblem(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a URL: %v", raw, errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Sprintf("%q is not an http(s) URL with a host", raw)
	case u.User != nil:
		return "must not carry a user name or password (the API token authenticates)"
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Sprintf("%q must not have a query or fragment", raw)
	case strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/api/v1"):
		return fmt.Sprintf("%q must not end in /api/v1: flowbridge adds it", raw)
	}
	return ""
}

// The store drivers.
const (
	driverBBolt    = "bbolt"
	driverPostgres = "postgres"
)

func (c *Config) checkStore(ps *problems) {
	st := c.Store
	switch st.Driver {
	case driverBBolt:
		if st.Path == "" {
			ps.add("store.path", "required with driver %q", driverBBolt)
		}
		checkStoreID(ps, st.ID)
	case driverPostgres:
		if st.DSN.IsZero() {
			ps.add("store.dsn", "required with driver %q (e.g. dsn = \"${FLOWBRIDGE_DATABASE_URL}\")", driverPostgres)
		} else if _, err := postgres.Describe(st.DSN.Value()); err != nil {
			ps.add("store.dsn", "%v", err)
		}
	default:
		ps.add("store.driver", "%q is not %q or %q", st.Driver, driverBBolt, driverPostgres)
	}
	if st.SyncInterval != 0 {
		ps.add("store.sync_interval", "was removed: every store change is now synced before it is acknowledged "+
			"(bbolt without its syncs can be left damaged by a power cut, not just behind); delete the key")
	}
}

func (c *Config) checkBridge(ps *problems) {
	b := c.Bridge
	for i, a := range b.Admins {
		if strings.TrimSpace(a) == "" {
			ps.add(fmt.Sprintf("bridge.admins[%d]", i), "empty: give a user ID")
		}
	}
}

func (c *Config) checkAdmin(ps *problems) {
	l := c.Admin.Listen
	if l == "" || l == "off" {
		return
	}
	_, port, err := net.SplitHostPort(l)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		ps.add("admin.listen", "%q is not a host:port address such as \"127.0.0.1:9090\" (or \"off\")", l)
		return
	}
	if c.Admin.Token.IsZero() && !isLoopback(l) {
		ps.add("admin.token", "required when admin.listen (%s) is not a loopback address", l)
	}
}

func (c *Config) checkLog(ps *problems) {
	switch c.Log.Level {
	case "", "debug", "info", "warn", "error":
	default:
		ps.add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "", "json", "console":
	default:
		ps.add("log.format", "%q is not json or console", c.Log.Format)
	}
}

// checkAgents checks the [[agents]] entries by the core's rules, and their
// greetings and prompts by Slack's.
func (c *Config) checkAgents(ps *problems) {
	_, agents := c.catalog()
	ps.addErr(bridge.CheckAgents(agents))
	for i, a := range c.Agents {
		checkPrompts(ps, fmt.Sprintf("agents[%d]", i), a)
	}
}

// validateFlows checks the [[flows]] entries by the core's rules, and their
// allow rules: run needs them valid, and so does the Slack manifest, which
// lists them.
func (c *Config) validateFlows() error {
	flows, _ := c.catalog()
	var ps problems
	ps.addErr(bridge.CheckFlows(flows))
	for i, f := range c.Flows {
		for j, rule := range f.Allow {
			if msg := c.allowProblem(rule); msg != "" {
				ps.add(fmt.Sprintf("flows[%d].allow[%d]", i, j), "%s", msg)
			}
		}
		for j, rule := range f.Approvers {
			if msg := c.approverProblem(rule); msg != "" {
				ps.add(fmt.Sprintf("flows[%d].approvers[%d]", i, j), "%s", msg)
			}
		}
	}
	return errors.Join(ps...)
}

var (
	slackID     = regexp.MustCompile(`^[A-Z][A-Z0-9]{2,}$`)
	snowflakeID = regexp.MustCompile(`^[0-9]{1,20}$`)
)

// allowForms is how a refused allow rule is told the rules bridge/access.go reads.
const allowForms = `"everyone", a user ID (Slack U0123ABC, Discord 123456789012345678), "user:ID", "group:ID" (Slack user group), "role:ID" (Discord role) or "channel:ID"`

// allowProblem says what is wrong with one allow rule ("" if nothing). A bare
// word is a user or group ID to the bridge, so a misspelt "everyone" would
// quietly admit no one: bare words must look like an ID of Slack, Discord or
// the console.
func (c *Config) allowProblem(rule string) string {
	kind, id, qualified := strings.Cut(rule, ":")
	if qualified {
		switch strings.ToLower(kind) {
		case "user", "group", "role", "channel":
			if id == "" || strings.ContainsFunc(id, unicode.IsSpace) {
				return fmt.Sprintf("%q needs an ID after %q, without spaces", rule, kind+":")
			}
			return ""
		}
		return fmt.Sprintf("%q: unknown kind %q; a rule is %s", rule, kind, allowForms)
	}
	consoleUser := cmp.Or(c.Console.User, console.DefaultConfig().User)
	if strings.EqualFold(rule, "everyone") || slackID.MatchString(rule) || snowflakeID.MatchString(rule) || rule == consoleUser {
		return ""
	}
	msg := fmt.Sprintf("%q is not a rule: write %s", rule, allowForms)
	if editDistance(strings.ToLower(rule), "everyone") <= 3 {
		msg = fmt.Sprintf("%q is not a rule (did you mean \"everyone\"?); write %s", rule, allowForms)
	}
	return msg
}

// approverProblem says what is wrong with one approver ("" if nothing):
// an allow rule that names people, never "everyone" nor a channel (the
// core's CheckFlows says so), and a bare word that looks like an ID.
func (c *Config) approverProblem(rule string) string {
	if bridge.ApproverProblem(rule) != "" {
		return "" // CheckFlows reports it
	}
	return c.allowProblem(rule)
}

// checkAdapters checks that something is enabled, and each enabled
// platform's section as its adapter's New will; on Discord also the commands
// the flows become, so check-config catches what Discord would refuse.
func (c *Config) checkAdapters(ps *problems) {
	if !c.Console.Enabled && !c.Slack.Enabled && !c.Discord.Enabled {
		ps.add("", "no adapter is enabled: set enabled = true in [console] (this terminal), [slack] or [discord]")
	}
	ps.addErr(checkPlatforms(c))
	if c.Discord.Enabled && c.Discord.CatchUpAge > discord.Duration(c.Bridge.DedupeTTL) {
		ps.add("discord.catch_up_age", "%s is longer than bridge.dedupe_ttl (%s): catch-up could read a message the inbox has forgotten answering, and answer it again; "+
			"lower catch_up_age or raise dedupe_ttl", fmtDuration(time.Duration(c.Discord.CatchUpAge)), fmtDuration(c.Bridge.DedupeTTL.D()))
	}
	if c.Discord.Enabled {
		// The adapter takes any digits (its fakes use short IDs); a server
		// ID in a file is a real snowflake, and a short one a typo.
		for i, g := range c.Discord.GuildIDs {
			if snowflakeID.MatchString(g) && !discordSnowflake.MatchString(g) {
				ps.add(fmt.Sprintf("discord.guild_ids[%d]", i), "%q is not a Discord server ID: those are 17 to 20 digits (Developer Mode on, then right-click the server → Copy Server ID)", g)
			}
		}
	}
}

// warnings are problems that do not stop flowbridge but that an operator
// should hear about from check-config.
func (c *Config) warnings() []string {
	w := c.scheduleWarnings()
	for i, f := range c.Flows {
		if len(f.Allow) == 0 {
			w = append(w, fmt.Sprintf("flows[%d] (%s): no allow rule, so no one can run it; add allow = [\"everyone\"] or a list of users, groups or channels", i, f.Name))
		}
		timeout := cmp.Or(f.Timeout, c.Bridge.DefaultFlowTimeout).D()
		if c.Discord.Enabled && timeout > discord.MaxFlowTimeout {
			w = append(w, fmt.Sprintf("flows[%d] (%s): timeout %s is longer than Discord can wait: Discord's interaction token lasts 15 minutes, so a later result cannot be delivered there, and a run started from Discord is given %s", i, f.Name, fmtDuration(timeout), fmtDuration(discord.MaxFlowTimeout)))
		}
	}
	if len(c.Bridge.Admins) == 0 {
		w = append(w, "bridge.admins: empty, so no one can switch agents with /agent use")
	}
	if c.Store.Driver == driverBBolt && !c.Store.DSN.IsZero() {
		w = append(w, fmt.Sprintf("store.dsn: set, but store.driver is %q, so the state is kept in the file %s, not in PostgreSQL; set driver = %q to use the database", driverBBolt, c.Store.Path, driverPostgres))
	}
	return w
}

// bridgeConfig converts the file's catalog and limits for the core.
func (c *Config) bridgeConfig() bridge.Config {
	bc := bridge.Config{
		Admins:             c.Bridge.Admins,
		QueueSize:          c.Bridge.QueueSize,
		MaxInFlight:        c.Bridge.MaxInFlight,
		ScheduledInFlight:  c.Bridge.MaxScheduledInFlight,
		DefaultFlowTimeout: c.Bridge.DefaultFlowTimeout.D(),
		IndicatorDelay:     c.Bridge.WorkingIndicatorDelay.D(),
		Replicas:           c.replicaConfig(),
		Feedback:           c.Bridge.Feedback,
		ProgressInterval:   c.Bridge.ProgressInterval.D(),
		Limits: bridge.Limits{
			MaxMessageBytes: c.Bridge.MaxMessageBytes, MaxParams: c.Bridge.MaxParams, MaxValueBytes: c.Bridge.MaxValueBytes,
			ChatPerMinute: c.Bridge.ChatPerMinute, FlowsPerMinute: c.Bridge.FlowsPerMinute, Burst: c.Bridge.RateBurst,
		},
	}
	bc.Files = c.fileLimits()
	bc.ThreadContext = bridge.ThreadContext{Messages: c.Bridge.ThreadContextMessages, Chars: c.Bridge.ThreadContextChars}
	bc.Flows, bc.Agents = c.catalog()
	return bc
}

func (c *Config) catalog() ([]bridge.Flow, []bridge.Agent) {
	flows := make([]bridge.Flow, 0, len(c.Flows))
	for _, f := range c.Flows {
		bf := bridge.Flow{Name: f.Name, UUID: f.UUID, Description: f.Description, Timeout: f.Timeout.D(), Allow: f.Allow, Public: f.Public, Confirm: f.Confirm,
			Approvers: f.Approvers, ApprovalTimeout: f.ApprovalTimeout.D()}
		for _, p := range f.Params {
			bf.Params = append(bf.Params, bridge.Param{Name: p.Name, Description: p.Description, Required: p.Required, Choices: p.Choices, Suggestions: p.Suggestions})
		}
		flows = append(flows, bf)
	}
	agents := make([]bridge.Agent, 0, len(c.Agents))
	for _, a := range c.Agents {
		prompts := make([]bridge.Prompt, 0, len(a.SuggestedPrompts))
		for _, p := range a.SuggestedPrompts {
			prompts = append(prompts, bridge.Prompt{Title: p.Title, Message: p.Message})
		}
		agents = append(agents, bridge.Agent{Name: a.Name, UUID: a.UUID, Description: a.Description, Default: a.Default, Channels: a.Channels, DefaultChannels: a.DefaultChannels,
			Greeting: a.Greeting, SuggestedPrompts: prompts})
	}
	return flows, agents
}

// replicaConfig is the core's lease settings, the same on every store: the
// order hold is paid only while another replica is live (bridge's
// orderhold.go), which on bbolt, locked to this process, none ever is.
func (c *Config) replicaConfig() bridge.ReplicaConfig {
	return bridge.ReplicaConfig{LeaseTTL: c.Store.LeaseTTL.D(), OrderHold: c.Store.OrderHold.D()}
}
