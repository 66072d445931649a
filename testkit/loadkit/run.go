// Package loadkit is what flowbridge-load and flowbridge-chaos share: the
// bridge as a child process, its CPU, memory and syncs, its configuration,
// message markers and latency quantiles.
package loadkit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

const (
	// AgentUUID is the one agent every run configures.
	AgentUUID = "11111111-1111-1111-1111-111111111111"
	// SlackPingInterval is about how often Slack pings a Socket Mode socket.
	SlackPingInterval = 10 * time.Second
	// StartTimeout bounds a bridge's start until its platforms are connected.
	StartTimeout = 60 * time.Second
	// ShutdownGrace is the bridge's configured grace; StopTimeout is how
	// long it gets to exit before it is killed.
	ShutdownGrace = 2 * time.Second
	StopTimeout   = 15 * time.Second
	// DefaultIndicatorDelay is flowbridge's default working_indicator_delay.
	DefaultIndicatorDelay = 500 * time.Millisecond
)

// BaseConfig is the part of the bridge's configuration every run shares:
// the fake workspace, the store section's lines, room for every
// conversation's work (maxInFlight), the bridge section's other lines, the
// admin listener, the log level and the one agent. Each run adds its flows
// and platforms after it.
func BaseConfig(wsURL, storeLines string, maxInFlight int, bridgeLines, adminListen, logLevel string) string {
	return fmt.Sprintf(`[workspace]
base_url = %q
workspace_uuid = "ws-test"
api_token = "test-token"
chat_timeout = "2m"

[store]
%s
[bridge]
max_in_flight = %d
shutdown_grace = %q
%s
[admin]
listen = %q

[log]
level = %q
format = "json"

[[agents]]
name = "helper"
uuid = %q
default = true
`, wsURL, storeLines, maxInFlight, ShutdownGrace.String(), bridgeLines, adminListen, logLevel, AgentUUID)
}

// IndicatorDelayKey is the config line for the indicator delay, left out at
// flowbridge's default so that builds from before the key can be measured too.
func IndicatorDelayKey(d time.Duration) string {
	if d == DefaultIndicatorDelay {
		return ""
	}
	return fmt.Sprintf("working_indicator_delay = %q\n", d.String())
}

// TempDir says where a run's temporary directory goes (Parent, "" for the
// system's), whether it is kept, and where that is said.
type TempDir struct {
	Parent string
	Keep   bool
	Log    io.Writer
}

// InTempDir gives a run a temporary directory of its own: newEnv builds the
// run's environment in it, which is started, then run, then closed, and the
// directory removed (or kept and named), whatever happened.
func InTempDir[E interface {
	Start(context.Context) error
	Close() error
}, R any](ctx context.Context, td TempDir, newEnv func(dir string) E, run func(E, context.Context) (R, error)) (res R, err error) {
	dir, err := os.MkdirTemp(td.Parent, "flowbridge-load-")
	if err != nil {
		return res, err
	}
	e := newEnv(dir)
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if td.Keep {
			fmt.Fprintln(td.Log, "kept", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	if err := e.Start(ctx); err != nil {
		return res, err
	}
	return run(e, ctx)
}

// Pause waits d, or returns false when ctx ends first.
func Pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// FreePort returns a loopback address no one listens on now.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// WriteJSON writes v indented.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
