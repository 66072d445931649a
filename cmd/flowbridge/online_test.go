package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestCheckConfigOnline: check-config -online reaches the workspace with
// the configured token and says what is wrong, naming the key to change;
// the unedited example's placeholder host is reported as such, where
// check-config alone passes it.
func TestCheckConfigOnline(t *testing.T) {
	t.Parallel()
	fake := workspacetest.NewServer(workspacetest.Options{WorkspaceUUID: "ws", Token: "good-token"})
	t.Cleanup(fake.Close)
	fake.AddAgent(workspacetest.Agent{UUID: "agent-1"})
	notAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(notAPI.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	noSuchHost := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, &net.DNSError{Err: "no such host", Name: "workspace.example.com", IsNotFound: true}
	}}}

	config := func(base string) string {
		return strings.NewReplacer(`"https://ws.example.com"`, `"`+base+`"`, `workspace_uuid = "ws"`, `workspace_uuid = "ws"`,
			`api_token = "token"`, `api_token = "${TOKEN}"`).Replace(testConfig("", ""))
	}
	tests := []struct {
		name, base, token string
		hc                *http.Client
		want              string // in the output, or in the error when fails
		fails             bool
	}{
		{name: "reached, token taken", base: fake.URL, token: "good-token", want: "online: reached " + fake.URL + ", which took the API token"},
		{name: "token refused", base: fake.URL, token: "wrong", fails: true, want: "workspace.api_token: the workspace at " + fake.URL + " refused the API token (HTTP 401)"},
		{name: "no such host", base: "https://workspace.example.com", token: "t", hc: noSuchHost, fails: true, want: `workspace.base_url: no such host "workspace.example.com"`},
		{name: "connection refused", base: closed, token: "t", fails: true, want: "workspace.base_url: connection refused at " + strings.TrimPrefix(closed, "http://")},
		{name: "not the API", base: notAPI.URL, token: "t", fails: true, want: "answered HTTP 404 (text/html) to the API's chat path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut strings.Builder
			env := &environment{getenv: mapEnv(map[string]string{"TOKEN": tt.token}), stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, httpClient: tt.hc}
			path := writeFile(t, config(tt.base))
			if err := cmdCheckConfig(t.Context(), env, []string{"-config", path}); err != nil {
				t.Fatalf("check-config without -online = %v, want it to pass", err)
			}
			out.Reset()
			err := cmdCheckConfig(t.Context(), env, []string{"-config", path, "-online"})
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if (err != nil) != tt.fails || !strings.Contains(got, tt.want) {
				t.Errorf("check-config -online = %v, output:\n%s\nwant fails=%v and %q", err, out.String(), tt.fails, tt.want)
			}
			if strings.Contains(got+errOut.String(), "good-token") {
				t.Errorf("check-config -online shows the token:\n%s", got)
			}
		})
	}
	// Nothing reached an agent: the probe names a session no one holds.
	for _, r := range fake.Requests() {
		if !strings.HasSuffix(r.Path, "/sessions/"+probeSession+"/chat") {
			t.Errorf("the probe sent %s %s, want only chats to the probe session", r.Method, r.Path)
		}
	}
}
