// Package console is the terminal adapter: it reads chat lines from a reader and
// writes the bridge's replies to a writer, so flowbridge runs with no account.
package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
)

// Config is the [console] section.
type Config struct {
	Enabled bool `toml:"enabled"`
	// User is the user ID events carry; give it to admins or flow allow lists.
	User string `toml:"user"`
	// Name is how the user is shown in footers.
	Name string `toml:"name"`
}

// Validate reports config problems; the console needs none filled in.
func (c Config) Validate() error { return nil }

func (c Config) withDefaults() Config {
	if c.User == "" {
		c.User = "local"
	}
	if c.Name == "" {
		c.Name = c.User
	}
	return c
}

// Core is what the console needs of the bridge.
type Core interface {
	Handle(bridge.Event) error
}

// Conversation is the one conversation key the console uses.
const Conversation = "console/local"

// Adapter reads lines and hands them to the core one at a time: a line is taken
// only after the previous one has been answered, so a piped script gives a
// transcript in order.
type Adapter struct {
	cfg    Config
	core   Core
	in     io.Reader
	out    io.Writer
	prompt bool
	log    *zap.Logger

	mu       sync.Mutex // guards out and the last buttons shown
	buttons  []bridge.Button
	lastSent int
}

// Options are the console's I/O.
type Options struct {
	In  io.Reader
	Out io.Writer
	// Prompt prints "> " before each line (for an interactive terminal).
	Prompt bool
}

// New returns a console adapter; it starts nothing.
func New(cfg Config, core Core, opts Options, log *zap.Logger) *Adapter {
	return &Adapter{cfg: cfg.withDefaults(), core: core, in: opts.In, out: opts.Out, prompt: opts.Prompt, log: log.Named("console")}
}

// Ready reports the console as always ready.
func (a *Adapter) Ready() error { return nil }

// Run reads lines until the input ends or ctx is done, waiting for each line's
// replies before reading the next. It returns nil at the end of input.
func (a *Adapter) Run(ctx context.Context) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	// The reader goroutine may stay blocked in Read after ctx ends (a terminal
	// cannot be interrupted); it holds nothing and ends with the process.
	go func() {
		sc := bufio.NewScanner(a.in)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	a.write("")
	for {
		a.showPrompt()
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("console: read: %w", err)
			}
			return nil
		case line := <-lines:
			ev, ok := a.event(line)
			if !ok {
				continue
			}
			done := make(chan struct{})
			ev.Done = sync.OnceFunc(func() { close(done) })
			if err := a.core.Handle(ev); err != nil && !errors.Is(err, bridge.ErrBusy) && !errors.Is(err, bridge.ErrClosed) {
				return fmt.Errorf("console: %w", err)
			}
			select {
			case <-done:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// event turns a typed line into a bridge event: "/flow …" and "/agent …" are
// slash commands, "y"/"n" answer a pending confirmation, "/share" presses the
// last Share button, anything else is chat.
func (a *Adapter) event(line string) (bridge.Event, bool) {
	text := strings.TrimSpace(line)
	if text == "" {
		return bridge.Event{}, false
	}
	ev := bridge.Event{
		Platform:     "console",
		Conversation: Conversation,
		Channel:      "console",
		User:         bridge.User{ID: a.cfg.User, Name: a.cfg.Name},
		Reply:        &responder{a: a},
	}
	lower := strings.ToLower(text)
	if act, ok := a.pressed(lower); ok {
		ev.Kind, ev.Action = bridge.KindAction, act
		return ev, true
	}
	for _, cmd := range []string{bridge.CommandFlow, bridge.CommandAgent} {
		if lower == "/"+cmd || strings.HasPrefix(lower, "/"+cmd+" ") {
			ev.Kind, ev.Command, ev.Text = bridge.KindCommand, cmd, strings.TrimSpace(text[len(cmd)+1:])
			return ev, true
		}
	}
	ev.Kind, ev.Text = bridge.KindMessage, text
	return ev, true
}

// pressed maps a typed answer to a button of the last reply that had buttons.
func (a *Adapter) pressed(lower string) (bridge.Action, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.buttons {
		switch {
		case b.Action.ID == bridge.ActionShare && lower == "/share",
			b.Action.ID == bridge.ActionConfirm && (lower == "y" || lower == "yes"),
			b.Action.ID == bridge.ActionCancel && (lower == "n" || lower == "no"):
			a.buttons = nil
			return b.Action, true
		}
	}
	return bridge.Action{}, false
}

func (a *Adapter) showPrompt() {
	if a.prompt {
		a.mu.Lock()
		fmt.Fprint(a.out, "> ")
		a.mu.Unlock()
	}
}

func (a *Adapter) write(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s != "" {
		fmt.Fprint(a.out, s)
	}
}

// responder prints replies. The terminal cannot edit what it printed, so an
// update prints the new text; progress lines are marked as such.
type responder struct{ a *Adapter }

func (r *responder) Send(_ context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	if len(rep.Buttons) > 0 {
		r.a.buttons = rep.Buttons
	}
	r.a.lastSent++
	_, err := io.WriteString(r.a.out, render(rep))
	return bridge.MessageRef(fmt.Sprint(r.a.lastSent)), err
}

func (r *responder) Update(ctx context.Context, _ bridge.MessageRef, rep bridge.Reply) error {
	_, err := r.Send(ctx, rep)
	return err
}

var labels = map[bridge.ReplyKind]string{
	bridge.ReplyAgent:    "agent",
	bridge.ReplyFlow:     "flow",
	bridge.ReplyInfo:     "info",
	bridge.ReplyError:    "error",
	bridge.ReplyProgress: "…",
	bridge.ReplyConfirm:  "confirm",
}

// render formats a reply as plain terminal text: a label, the Markdown as is
// (it reads well in a terminal), the footer and how to press any buttons.
func render(r bridge.Reply) string {
	var b strings.Builder
	label := labels[r.Kind]
	if label == "" {
		label = "bot"
	}
	text := strings.TrimRight(r.Text, "\n")
	if strings.Contains(text, "\n") {
		fmt.Fprintf(&b, "%s:\n%s\n", label, indent(text))
	} else {
		fmt.Fprintf(&b, "%s: %s\n", label, text)
	}
	if r.Footer != "" {
		fmt.Fprintf(&b, "  — %s\n", r.Footer)
	}
	var hints []string
	for _, btn := range r.Buttons {
		switch btn.Action.ID {
		case bridge.ActionShare:
			hints = append(hints, "type /share to "+strings.ToLower(btn.Label))
		case bridge.ActionConfirm:
			hints = append(hints, "type y to "+strings.ToLower(btn.Label))
		case bridge.ActionCancel:
			hints = append(hints, "n to "+strings.ToLower(btn.Label))
		}
	}
	if len(hints) > 0 {
		fmt.Fprintf(&b, "  [%s]\n", strings.Join(hints, ", "))
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
