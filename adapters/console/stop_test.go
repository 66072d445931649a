package console_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/adapters/console"
)

func TestStopTypedWhileALineIsAnswered(t *testing.T) {
	// The agent takes an hour: "/stop", typed while it works, stops it; the
	// console goes on with the next line.
	for _, how := range []string{"/stop", "ctrl-c"} {
		t.Run(how, func(t *testing.T) {
			b := newBridge(t, nil, time.Hour)
			in, typing := io.Pipe()
			out := &lockedBuffer{}
			interrupt := make(chan struct{})
			a := console.New(console.Config{User: "u1", Name: "ann"}, b, console.Options{In: in, Out: out, Interrupt: interrupt}, zaptest.NewLogger(t))
			done := make(chan error, 1)
			go func() { done <- a.Run(t.Context()) }()
			if _, err := io.WriteString(typing, "a slow question\n"); err != nil {
				t.Fatal(err)
			}
			if how == "/stop" {
				if _, err := io.WriteString(typing, "/stop\n"); err != nil {
					t.Fatal(err)
				}
			} else {
				// Taken only while the line is answered.
				select {
				case interrupt <- struct{}{}:
				case <-t.Context().Done():
					t.Fatal("the console did not read Ctrl-C while it answered a line")
				}
			}
			if _, err := io.WriteString(typing, "/help\n"); err != nil {
				t.Fatal(err)
			}
			typing.Close()
			if err := <-done; err != nil {
				t.Fatalf("Run = %v", err)
			}
			got := out.String()
			stopped, help := strings.Index(got, "Stopped"), strings.Index(got, "Console commands")
			if stopped < 0 || help < stopped {
				t.Errorf("output = %q, want the stop notice, then the help of the next line", got)
			}
			if strings.Contains(got, "You said") {
				t.Errorf("output = %q: the stopped line was answered", got)
			}
		})
	}
}
