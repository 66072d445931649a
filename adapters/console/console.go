// Package console is the terminal adapter: it reads chat lines from a reader and
// writes the bridge's replies to a writer, so flowbridge runs with no account.
package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

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

// DefaultConfig returns the configuration defaults; New fills an empty User
// with them, and an empty Name with the user.
func DefaultConfig() Config { return Config{User: "local"} }

func (c Config) withDefaults() Config {
	if c.User == "" {
		c.User = DefaultConfig().User
	}
	if c.Name == "" {
		c.Name = c.User
	}
	return c
}

// Core is what the console needs of the bridge. Receive's receipt says
// when a line is recorded (nil, or an error for a line it refused after
// telling the user why: bridge.ErrBusy, ErrClosed, ErrNotSaved; or one it
// answered before: ErrDuplicate) and when the core has finished with it.
type Core interface {
	Receive(bridge.Event) *bridge.Receipt
	// Attach registers the console with the core and hands it the lines
	// left unanswered by a previous process (a store kept with dev
	// -store), which it answers here.
	Attach(platform string, p bridge.Platform) (resumed, told int, err error)
}

// The console is the core's platform for its lines.
var _ bridge.Platform = (*Adapter)(nil)

// Responder answers a line in this terminal, whether typed now or read back
// from the inbox after a restart.
func (a *Adapter) Responder(bridge.Event) (bridge.Responder, error) {
	return &responder{a: a}, nil
}

// Acknowledge has nothing to tell: a terminal waits for the answer itself.
func (a *Adapter) Acknowledge(context.Context, bridge.Event) error { return nil }

// Prepare has nothing to look up: the console's user is the configured one.
func (a *Adapter) Prepare(context.Context, *bridge.Event) bool { return true }

// Earlier has nothing to read: the console's lines start no thread.
func (a *Adapter) Earlier(context.Context, bridge.Event, int) ([]bridge.Earlier, error) {
	return nil, nil
}

// Platform is the console's platform name in events.
const Platform = "console"

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
	ansi   bool
	log    *zap.Logger

	mu       sync.Mutex // guards out and the last buttons shown
	buttons  []bridge.Button
	lastSent int

	// run and lines name each line's event (its inbox key), so that a
	// line is answered once like any platform's event.
	run   string
	lines int
	// waiting are lines typed while an earlier one was answered, in order.
	waiting []inputLine
	// interrupt is Options.Interrupt.
	interrupt <-chan struct{}
}

// Options are the console's I/O and how it shows replies.
type Options struct {
	In  io.Reader
	Out io.Writer
	// Prompt prints "> " before each line (for an interactive terminal).
	Prompt bool
	// Interrupt delivers the user's Ctrl-C. The console reads it only
	// while it answers a line, which it then stops (as /stop); at other
	// times Ctrl-C is the sender's to handle (flowbridge shuts down).
	Interrupt <-chan struct{}
	// Style is how replies' Markdown is shown; the zero value, StyleAuto,
	// styles it with ANSI sequences when Out is a terminal and prints plain
	// text otherwise.
	Style Style
}

// New returns a console adapter; it starts nothing.
func New(cfg Config, core Core, opts Options, log *zap.Logger) *Adapter {
	return &Adapter{
		cfg:       cfg.withDefaults(),
		core:      core,
		in:        opts.In,
		out:       opts.Out,
		prompt:    opts.Prompt,
		ansi:      opts.Style.ansi(opts.Out),
		log:       log.Named("console"),
		interrupt: opts.Interrupt,
		run:       strconv.FormatInt(time.Now().UnixNano(), 36),
	}
}

// Ready reports the console as always ready.
func (a *Adapter) Ready() error { return nil }

// Run reads lines until the input ends or ctx is done, waiting for each line's
// replies before reading the next. It returns nil at the end of input or when
// ctx is done, and an error only when reading fails: whatever happens to one
// line (too long, refused by the core) is told to the user and the next line
// is read.
func (a *Adapter) Run(ctx context.Context) error {
	if _, _, err := a.core.Attach(Platform, a); err != nil {
		return fmt.Errorf("console: %w", err)
	}
	lines := make(chan inputLine)
	readErr := make(chan error, 1)
	// The reader goroutine may stay blocked in Read after ctx ends (a terminal
	// cannot be interrupted); it holds nothing and ends with the process.
	go func() {
		r := bufio.NewReaderSize(a.in, 64<<10)
		for {
			line, err := readLine(r, maxLineBytes)
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				readErr <- err
				return
			}
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
	}()
	taken := 0
	for {
		a.showPrompt()
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("console: read: %w", err)
			}
			if taken == 0 {
				a.log.Warn("the console's input ended before any line was read: nothing to chat with, the console stops (is standard input a terminal?)")
			} else {
				a.log.Info("end of the console's input; the console stops", zap.Int("lines", taken))
			}
			return nil
		case line := <-lines:
			taken++
			a.take(ctx, line, lines)
			for len(a.waiting) > 0 && ctx.Err() == nil {
				next := a.waiting[0]
				a.waiting = a.waiting[1:]
				a.take(ctx, next, lines)
			}
		}
	}
}

// take handles one line and returns once it has been answered or ctx is
// done. Lines typed meanwhile (more) are read: "/stop" is taken at once,
// to stop this one; the others wait their turn (a.waiting).
func (a *Adapter) take(ctx context.Context, line inputLine, more <-chan inputLine) {
	if line.tooLong {
		a.log.Info("input line refused as too long", zap.Int("bytes", line.size))
		a.print(bridge.Reply{Kind: bridge.ReplyError, Text: fmt.Sprintf(msgLineTooLong, line.size, maxLineBytes)})
		return
	}
	ev, local, ok := a.route(line.text)
	switch {
	case !ok:
		return
	case local != nil:
		a.print(*local)
		return
	}
	a.lines++
	ev.Key = fmt.Sprintf("%s/line/%s/%d", Platform, a.run, a.lines)
	rec := a.core.Receive(ev)
	switch err := rec.Wait(context.Background()); {
	case errors.Is(err, bridge.ErrClosed):
		// Kept for the next start; nothing of it runs in this process.
		a.print(bridge.Reply{Kind: bridge.ReplyError, Text: msgKeptForRestart})
		return
	case err == nil, errors.Is(err, bridge.ErrBusy):
		// Answered, or refused with a notice the core sends; either way the
		// receipt is finished once it is written.
	case errors.Is(err, bridge.ErrDuplicate), errors.Is(err, bridge.ErrNotSaved):
		// Answered before, or the user told already: nothing more of it
		// is written here.
		a.log.Debug("line refused by the core", zap.Error(err))
		return
	default:
		a.log.Error("line not taken", zap.Error(err))
		a.print(bridge.Reply{Kind: bridge.ReplyError, Text: msgNotTaken})
		return
	}
	for {
		select {
		case <-rec.Finished():
			return
		case <-ctx.Done():
			return
		case <-a.interrupt:
			a.take(ctx, inputLine{text: "/" + commandStop}, nil)
		case next := <-more:
			if isStop(next) {
				a.take(ctx, next, nil)
				continue
			}
			a.waiting = append(a.waiting, next)
		}
	}
}

// isStop reports whether a typed line is the /stop command.
func isStop(line inputLine) bool {
	return !line.tooLong && strings.EqualFold(strings.TrimSpace(line.text), "/"+commandStop)
}

// route turns a typed line into a bridge event, or into a reply the console
// gives itself. "/flow …" and "/agent …" are slash commands, "y"/"n" answer a
// pending confirmation, "/share" presses the last Share button, "/help" and
// any other "/word" are answered here, "//…" is chat with one slash removed,
// and anything else is chat. ok is false for a blank line.
func (a *Adapter) route(line string) (ev bridge.Event, local *bridge.Reply, ok bool) {
	text := strings.TrimSpace(line)
	if text == "" {
		return bridge.Event{}, nil, false
	}
	ev = bridge.Event{
		Platform:     Platform,
		Conversation: Conversation,
		Channel:      "console",
		User:         bridge.User{ID: a.cfg.User, Name: a.cfg.Name},
	}
	pressed := func(id string) bool {
		act, ok := a.press(id)
		if ok {
			ev.Kind, ev.Action = bridge.KindAction, act
		}
		return ok
	}
	switch strings.ToLower(text) {
	case "y", "yes":
		if pressed(bridge.ActionConfirm) {
			return ev, nil, true
		}
	case "n", "no":
		if pressed(bridge.ActionCancel) {
			return ev, nil, true
		}
	}
	if rest, ok := strings.CutPrefix(text, "/"); ok && !strings.HasPrefix(rest, "/") {
		word, args := splitCommand(rest)
		switch cmd := strings.ToLower(word); cmd {
		case bridge.CommandFlow, bridge.CommandAgent:
			ev.Kind, ev.Command, ev.Text = bridge.KindCommand, cmd, args
			return ev, nil, true
		case commandStop:
			ev.Kind, ev.Action = bridge.KindAction, bridge.Action{ID: bridge.ActionStop}
			return ev, nil, true
		case commandShare:
			if pressed(bridge.ActionShare) {
				return ev, nil, true
			}
			return ev, &bridge.Reply{Kind: bridge.ReplyError, Text: msgNothingToShare}, true
		case commandHelp:
			return ev, &bridge.Reply{Kind: bridge.ReplyInfo, Text: msgHelp}, true
		default:
			r := unknownCommand(word)
			return ev, &r, true
		}
	}
	if strings.HasPrefix(text, "//") {
		text = text[1:]
	}
	ev.Kind, ev.Text = bridge.KindMessage, text
	return ev, nil, true
}

// press takes the button with the action id from the last reply that had
// buttons, if it is there.
func (a *Adapter) press(id string) (bridge.Action, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.buttons {
		if b.Action.ID == id {
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

// print writes a reply the console gives itself.
func (a *Adapter) print(r bridge.Reply) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := io.WriteString(a.out, render(r, a.ansi)); err != nil {
		a.log.Warn("reply not written", zap.Error(err))
	}
}

// The console explains itself in /agent help, and shows that long work is
// still running.
var (
	_ bridge.Talker     = (*responder)(nil)
	_ bridge.Progresser = (*responder)(nil)
)

// responder prints replies. The terminal cannot edit what it printed, so an
// update prints the new text; progress lines are marked as such.
type responder struct{ a *Adapter }

// HowToTalk opens /agent help in the terminal, where there are no mentions,
// DMs or threads.
func (r *responder) HowToTalk() string { return msgHowToTalk }

func (r *responder) Send(_ context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	if len(rep.Buttons) > 0 {
		r.a.buttons = rep.Buttons
	}
	r.a.lastSent++
	_, err := io.WriteString(r.a.out, render(rep, r.a.ansi))
	return bridge.MessageRef(fmt.Sprint(r.a.lastSent)), err
}

func (r *responder) Update(ctx context.Context, _ bridge.MessageRef, rep bridge.Reply) error {
	_, err := r.Send(ctx, rep)
	return err
}

// Progress prints a tick while a flow runs or the agent thinks, as the chat
// platforms rewrite their message: the first line of the progress text
// ("Running *slow*… 15 seconds so far."), which the terminal cannot
// rewrite in place, so each tick is a line of its own.
func (r *responder) Progress(_ context.Context, _ bridge.MessageRef, rep bridge.Reply) error {
	first, _, _ := strings.Cut(strings.TrimSpace(rep.Text), "\n")
	rep = bridge.Reply{Kind: bridge.ReplyProgress, Text: first}
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	_, err := io.WriteString(r.a.out, render(rep, r.a.ansi))
	return err
}
