// Command flowbridge connects Slack, Discord and a terminal to an AI workspace's
// Agents and Flows.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interrupt = interrupts(cancel)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "flowbridge:", err)
		var ue *usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// interrupt hands the user's Ctrl-C to whoever reads it (the terminal
// console while it answers a line: it stops that line); nil in tests.
var interrupt <-chan struct{}

// interrupts delivers each SIGINT to a reader of the returned channel, if
// one is waiting; with none, SIGINT calls shutdown, as it always has.
func interrupts(shutdown func()) <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	out := make(chan struct{})
	go func() {
		for range sig {
			select {
			case out <- struct{}{}:
			default:
				shutdown()
			}
		}
	}()
	return out
}

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

const usage = `flowbridge connects Slack, Discord and a terminal to an AI workspace.

Usage:
  flowbridge dev [-replicas N]            try it: fake workspace + terminal chat, no account needed
  flowbridge run -config FILE             run the bridge with everything the config enables
  flowbridge check-config -config FILE    validate a config and print what it enables (-online: and reach the workspace)
  flowbridge sessions list|bind|reset     inspect or change conversation -> session mappings
  flowbridge audit -config FILE           list audited flow runs
  flowbridge feedback -config FILE        list or export the votes on agent replies
  flowbridge store check -config FILE     check the store file for damage (exit 1 if damaged)
  flowbridge store compact -config FILE   compact the bbolt store file (flowbridge stopped)
  flowbridge migrate [-apply]             show (and apply) the PostgreSQL store's schema migrations
  flowbridge slack-manifest -config FILE  print the Slack app manifest for the config
  flowbridge discord-invite -config FILE  print the Discord invite URL
  flowbridge health -config FILE          exit 0 when the running bridge's /healthz answers (container health checks)
  flowbridge version                      print the version

Run "flowbridge COMMAND -h" for a command's flags.
`

// run is the whole program with the OS injected, so tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &usageError{"no command given"}
	}
	env := &environment{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	// A path or address in the error may hold a value of a ${VAR}
	// reference (log.file = "/var/log/${TEAM}.log"): it reads as the reference.
	return env.refs.error(runCommand(ctx, env, args))
}

func runCommand(ctx context.Context, env *environment, args []string) error {
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(ctx, env, rest)
	case "dev":
		return cmdDev(ctx, env, rest)
	case "check-config":
		return cmdCheckConfig(ctx, env, rest)
	case "sessions":
		return cmdSessions(ctx, env, rest)
	case "audit":
		return cmdAudit(ctx, env, rest)
	case "feedback":
		return cmdFeedback(ctx, env, rest)
	case "store":
		return cmdStore(ctx, env, rest)
	case "migrate":
		return cmdMigrate(ctx, env, rest)
	case "slack-manifest":
		return cmdSlackManifest(env, rest)
	case "discord-invite":
		return cmdDiscordInvite(env, rest)
	case "health":
		return cmdHealth(ctx, env, rest)
	case "version", "-version", "--version":
		fmt.Fprintln(env.stdout, "flowbridge", version)
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(env.stdout, usage)
		return nil
	}
	fmt.Fprint(env.stderr, usage)
	return &usageError{fmt.Sprintf("unknown command %q", cmd)}
}

// environment is what run was given of the OS.
type environment struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// onServe, when set (tests), is told the running server's addresses.
	onServe func(serveInfo)
	// httpClient, when set (tests), reaches the workspace for
	// check-config -online.
	httpClient *http.Client
	// refs are the ${VAR} references of the config the command loaded
	// (config), which run redacts from the command's error.
	refs *references
}

// config notes cfg as the command's config, for run to redact its
// references from the error the command returns, and returns it.
func (env *environment) config(cfg *Config) *Config {
	env.refs = cfg.refs
	return cfg
}

func newFlagSet(env *environment, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "Usage: flowbridge %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses flags wherever they stand among the arguments
// ("sessions reset KEY -config F" as well as "-config F sessions reset KEY");
// the positional arguments are left in fs.Args().
func parseFlags(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return &usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			positional = append(positional, args[1:]...)
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	// Parse the positional arguments alone so fs.Args() returns them.
	return fs.Parse(append([]string{"--"}, positional...))
}

func configFlag(fs *flag.FlagSet, env *environment) *string {
	def := env.getenv("FLOWBRIDGE_CONFIG")
	if def == "" {
		def = "flowbridge.toml"
	}
	return fs.String("config", def, "config file (env FLOWBRIDGE_CONFIG)")
}
