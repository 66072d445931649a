package bridge_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/workspace"
)

// TestWorkspaceAddressLeadingNowhere: a base URL whose host does not exist,
// or where nothing accepts connections, is a configuration problem that
// trying again will not fix: the user is told to tell an admin, not to try
// again in a moment.
func TestWorkspaceAddressLeadingNowhere(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	dials := map[string]func(ctx context.Context, network, addr string) (net.Conn, error){
		"no such host": func(context.Context, string, string) (net.Conn, error) {
			return nil, &net.DNSError{Err: "no such host", Name: "workspace.example.com", IsNotFound: true}
		},
		"connection refused": func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, closed)
		},
	}
	for name, dial := range dials {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			hc := &http.Client{Transport: &http.Transport{DialContext: dial}}
			h := newHarnessWith(t, defaultConfig(), workspace.Config{HTTPClient: hc, MaxRetries: 1}, nil)
			chat := h.ask("c/addr", "hello")
			rec := newRecorder()
			if err := h.do(command("c/addr", bridge.CommandFlow, "healthcheck host=web1", rec)); err != nil {
				t.Fatal(err)
			}
			flow := rec.last(t)
			for what, r := range map[string]bridge.Reply{"chat": chat, "flow": flow} {
				if r.Kind != bridge.ReplyError {
					t.Errorf("%s reply = %+v, want an error", what, r)
				}
				wantContains(t, what+" reply", r.Text, "configuration problem", "tell an admin", "check-config -online")
				if strings.Contains(r.Text, "try again in a moment") {
					t.Errorf("%s reply = %q, want no advice to try again", what, r.Text)
				}
			}
			wantContains(t, "flow reply", flow.Text, "was not run")
		})
	}
}
