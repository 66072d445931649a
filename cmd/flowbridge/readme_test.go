package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// TestReadmeCommandsRunTheBuiltBinary: the README builds ./flowbridge and
// does not put it on the PATH, so a command written as bare "flowbridge …"
// fails with "command not found" when typed as shown.
func TestReadmeCommandsRunTheBuiltBinary(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	bare := regexp.MustCompile(`^\s*(\$ )?flowbridge (run|dev|check-config|sessions|audit|feedback|store|migrate|slack-manifest|discord-invite|health|version)(\s|$)`)
	inBlock := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock && bare.MatchString(line) {
			t.Errorf("README.md:%d runs a bare flowbridge, which the steps never install: %q; write ./flowbridge", i+1, strings.TrimSpace(line))
		}
	}
}

// TestGitignoreCoversTheReadmeSteps: what the README's steps leave in the
// checkout (the binary, the config copied from the example, its log, the
// store and its marker, the Slack manifest, the export shown) is ignored,
// so git status stays clean and no token in flowbridge.toml is committed.
func TestGitignoreCoversTheReadmeSteps(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"flowbridge", "flowbridge.toml", "flowbridge.log", "flowbridge.db", "flowbridge.db.created",
		"flowbridge.db.damaged", "slack-manifest.yaml", "slack-manifest.json", "thumbs-down.csv"} {
		cmd := exec.Command(git, "check-ignore", "--no-index", "-q", path)
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			t.Errorf("git check-ignore %s: %v, want it ignored by .gitignore", path, err)
		}
	}
	for _, path := range []string{"config.example.toml", "cmd/flowbridge/main.go", "README.md"} {
		cmd := exec.Command(git, "check-ignore", "--no-index", "-q", path)
		cmd.Dir = root
		if cmd.Run() == nil {
			t.Errorf("git check-ignore %s: ignored, want it tracked", path)
		}
	}
}

// TestExampleRetryCommentIsTrue: the example's comment on max_retries says
// what the client does: a 503 is not sent again, whatever its Retry-After,
// and a 429 with a short Retry-After is, for a chat message.
func TestExampleRetryCommentIsTrue(t *testing.T) {
	t.Parallel()
	example := string(readExample(t))
	end := strings.Index(example, "\nmax_retries =")
	if end < 0 {
		t.Fatal("config.example.toml has no max_retries")
	}
	comment := example[strings.LastIndex(example[:end], "\n\n")+1 : end]
	for _, want := range []string{"A 503 is never sent again", "after a 429 whose\n# Retry-After is at most 30s"} {
		if !strings.Contains(comment, want) {
			t.Errorf("max_retries comment does not say %q:\n%s", want, comment)
		}
	}
	if strings.Contains(comment, "429/503") {
		t.Errorf("max_retries comment says 503s are retried:\n%s", comment)
	}

	cfg, err := parseConfig([]byte(example), mapEnv(map[string]string{"FLOWBRIDGE_API_TOKEN": "tok"}))
	if err != nil {
		t.Fatal(err)
	}
	for status, wantSent := range map[int]int{http.StatusServiceUnavailable: 1, http.StatusTooManyRequests: 2} {
		fake := workspacetest.NewServer(workspacetest.Options{WorkspaceUUID: "ws", Token: "tok"})
		t.Cleanup(fake.Close)
		fake.AddAgent(workspacetest.Agent{UUID: "agent", Status: status, StatusCount: 1, Header: http.Header{"Retry-After": {"1"}}, Body: "busy"})
		wc := cfg.Workspace.clientConfig()
		wc.BaseURL, wc.WorkspaceUUID, wc.Token = fake.URL, "ws", "tok"
		c, err := workspace.New(wc)
		if err != nil {
			t.Fatal(err)
		}
		session, err := c.CreateSession(t.Context(), "agent")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Chat(t.Context(), "agent", session, "hello")
		sent := 0
		for _, r := range fake.Requests() {
			if strings.HasSuffix(r.Path, "/chat") {
				sent++
			}
		}
		if sent != wantSent {
			t.Errorf("a chat answered %d with Retry-After: 1 was sent %d times with the example's max_retries, want %d", status, sent, wantSent)
		}
	}
}
