package slack

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func filesOn(c *Config) { c.Files = true }

func TestE2ESharedFilesReachTheAgent(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: filesOn, core: func(c *bridge.Config) { c.Files.MaxFileBytes = 1000 }})
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "check this", Files: []slacktest.File{
		{Name: "nginx.conf", Mimetype: "text/plain", Content: []byte("server { listen 80; }\n")},
		{Name: "diagram.png", Content: []byte("\x89PNG\r\n\x1a\n")},
		{Name: "dump.log", Mimetype: "text/plain", Content: []byte(strings.Repeat("y", 1001))},
	}})))
	e.reply(ctx, e2eDM, "You said: check this")
	notice, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		// Told in the answer, one message kept and posted once with it.
		return !m.Ephemeral && strings.Contains(m.Text, "not sent to the agent") && strings.Contains(m.Text, "You said")
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"diagram.png", "not a text file", "dump.log", "too large"} {
		if !strings.Contains(notice.Text, want) {
			t.Errorf("notice = %q, want it to contain %q", notice.Text, want)
		}
	}
	got := e.agentMessages()
	want := "check this\n\nAttached file \"nginx.conf\" (22 bytes):\n```\nserver { listen 80; }\n```"
	if len(got) != 1 || got[0] != want {
		t.Errorf("agent got %q, want %q", got, want)
	}
	if n := e.slack.FileDownloads(); n != 1 {
		t.Errorf("downloads = %d, want 1 (the text file within the limit)", n)
	}
}

func TestE2EFilesOffReportsThemAndSendsTheText(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{})
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "see file", Files: []slacktest.File{{Name: "a.txt", Content: []byte("x")}}})))
	e.reply(ctx, e2eDM, "You said: see file")
	if _, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		return !m.Ephemeral && strings.Contains(m.Text, "reading files is turned off here") && strings.Contains(m.Text, "You said")
	}); err != nil {
		t.Fatal(err)
	}
	if n := e.slack.FileDownloads(); n != 0 {
		t.Errorf("downloads = %d with files off, want 0", n)
	}
}

func TestE2ELongReplyIsUploadedInTheThread(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A long line of the agent's answer.\n", 400) // 14,000 characters
	e := startE2E(t, e2eOptions{cfg: filesOn, reply: func(int, string) string { return long },
		core: func(c *bridge.Config) { c.Files.ReplyOver = 4000 }})
	ctx := waitCtx(t)
	d := e.sent(e.slack.SendAppMention(ctx, slacktest.MessageEvent{Channel: e2eChannel, User: e2eUser, Text: "<@" + e.slack.BotUserID() + "> report"}))
	summary := e.reply(ctx, e2eChannel, "attached as reply.md")
	share, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return m.Via == "files.completeUploadExternal" })
	if err != nil {
		t.Fatal(err)
	}
	if summary.ThreadTS != d.TS || share.ThreadTS != d.TS {
		t.Errorf("summary in thread %q, file in thread %q; want both in %q", summary.ThreadTS, share.ThreadTS, d.TS)
	}
	if len(share.Files) != 1 {
		t.Fatalf("share carries files %v, want one", share.Files)
	}
	f, ok := e.slack.UploadedFile(share.Files[0])
	if !ok || f.Name != "reply.md" || string(f.Content) != long {
		t.Errorf("uploaded file = %q (%d bytes), want reply.md with the whole reply", f.Name, len(f.Content))
	}
	for _, m := range e.slack.Messages() {
		if m.Channel == e2eChannel && m.TS != summary.TS && m.TS != share.TS && m.Text != "" && !strings.Contains(m.Text, "Thinking") {
			t.Errorf("extra message %q: the reply should be one summary and one file", m.Text)
		}
	}
}

func TestE2EFailedUploadSendsTheText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 1000)
	e := startE2E(t, e2eOptions{cfg: filesOn, reply: func(int, string) string { return long },
		core: func(c *bridge.Config) { c.Files.ReplyOver = 1000 }})
	ctx := waitCtx(t)
	e.slack.FailNext("files.getUploadURLExternal", 1, "file_uploads_disabled")
	e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "go"})))
	// The whole reply is the answer (in a markdown block, which holds 12,000 characters).
	if _, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.Channel == e2eDM && m.BotID != "" && strings.Count(string(m.Blocks), "word") == 1000
	}); err != nil {
		t.Fatalf("the whole reply was not sent after the failed upload: %v", err)
	}
	// No message names a file that is not there.
	for _, m := range e.slack.Messages() {
		if strings.Contains(m.Text, "attached as") || strings.Contains(string(m.Blocks), "attached as") {
			t.Errorf("message %q says a file is attached; the upload was refused", m.Text)
		}
	}
}

// TestE2ESummaryFollowsTheUpload: the summary naming the file is posted
// once the file is there, not before.
func TestE2ESummaryFollowsTheUpload(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A long line of the agent's answer.\n", 400)
	e := startE2E(t, e2eOptions{cfg: filesOn, reply: func(int, string) string { return long },
		core: func(c *bridge.Config) { c.Files.ReplyOver = 4000 }})
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "report"})))
	e.reply(ctx, e2eDM, "attached as reply.md")
	uploaded, summarized := -1, -1
	for i, c := range e.slack.Calls() {
		switch {
		case c.Method == "files.completeUploadExternal" && c.Error == "" && uploaded < 0:
			uploaded = i
		case (c.Method == "chat.postMessage" || c.Method == "chat.update") && strings.Contains(c.Params.Get("text"), "attached as") && summarized < 0:
			summarized = i
		}
	}
	if uploaded < 0 || summarized < uploaded {
		t.Errorf("the summary was posted at call %d, the file completed at call %d: want the summary after the file", summarized, uploaded)
	}
}

// TestE2EOneSkippedFileIsIt: the note on one file not sent says "it".
func TestE2EOneSkippedFileIsIt(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: filesOn})
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "see the picture", Files: []slacktest.File{
		{Name: "diagram.png", Content: []byte("\x89PNG\r\n\x1a\n")},
	}})))
	notice := e.reply(ctx, e2eDM, "not sent to the agent")
	if !strings.Contains(notice.Text, "Your message was sent without it.") {
		t.Errorf("notice = %q, want it to say the message was sent without it (one file)", notice.Text)
	}
}

func TestE2EOnlyPublicResultsBecomeFiles(t *testing.T) {
	t.Parallel()
	e := startE2E(t, e2eOptions{cfg: filesOn, core: func(c *bridge.Config) { c.Files.ReplyOver = 10 }})
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "healthcheck host=web1 service=nginx", ChannelID: e2eChannel, UserID: e2eUser})))
	if _, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return strings.Contains(m.Text, "Checked web1 nginx") }); err != nil {
		t.Fatal(err)
	}
	if n := e.slack.CallCount("files.getUploadURLExternal"); n != 0 {
		t.Errorf("files.getUploadURLExternal called %d times for a private result, want 0: a Slack file cannot be ephemeral", n)
	}

	// A public result replaces its "Running…" through the response_url, then the file follows in the channel.
	e.ack(ctx, e.sent(e.slack.SendSlashCommand(ctx, slacktest.SlashCommand{Command: "/flow", Text: "publiccheck host=db1", ChannelID: e2eChannel, UserID: e2eUser})))
	share, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool { return m.Via == "files.completeUploadExternal" })
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := e.slack.UploadedFile(share.Files[0]); share.Channel != e2eChannel || f.Name != "publiccheck.md" || !strings.Contains(string(f.Content), "Checked db1") {
		t.Errorf("shared %s in %s with %q, want publiccheck.md with the result in %s", f.Name, share.Channel, f.Content, e2eChannel)
	}
	if _, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		return m.ResponseType == "in_channel" && strings.Contains(m.Text, "attached as publiccheck.md")
	}); err != nil {
		t.Errorf("summary not posted through the response_url: %v", err)
	}
}

func TestManifestAsksForFileScopesOnlyWithFiles(t *testing.T) {
	for _, on := range []bool{false, true} {
		js, err := Manifest(Config{Files: on}, nil, nil, "", "json")
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			OAuth struct {
				Scopes struct {
					Bot []string `json:"bot"`
				} `json:"scopes"`
			} `json:"oauth_config"`
		}
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatal(err)
		}
		for _, s := range FileScopes {
			if got := slices.Contains(m.OAuth.Scopes.Bot, s); got != on {
				t.Errorf("files = %v: %s in bot scopes %v = %v, want %v", on, s, m.OAuth.Scopes.Bot, got, on)
			}
		}
	}
}

// rssChild marks the process that TestE2EHugeFileStopsAtTheLimit runs to
// measure its own peak memory, apart from whatever the other tests used.
const rssChild = "FLOWBRIDGE_TEST_RSS_CHILD"

// letters is an endless stream of text, generated as it is read.
type letters struct{}

func (letters) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a' + byte(i%26)
	}
	return len(p), nil
}

func TestE2EHugeFileStopsAtTheLimit(t *testing.T) {
	// A file Slack declares as 10 bytes whose download serves 1 GiB: the
	// download stops at max_file_bytes, the user hears the file was not
	// sent, the agent gets none of it, and peak RSS stays under 100 MB.
	// The scenario runs in a child process, so that VmHWM is its own.
	if os.Getenv(rssChild) == "" {
		t.Parallel()
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestE2EHugeFileStopsAtTheLimit$", "-test.count=1")
		cmd.Env = append(os.Environ(), rssChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		_, after, ok := strings.Cut(string(out), "peak_rss_kb=")
		kb, err2 := strconv.Atoi(strings.Fields(after + " ")[0])
		if !ok || err2 != nil {
			t.Fatalf("child printed no peak RSS:\n%s", out)
		}
		t.Logf("peak RSS while downloading a 1 GiB file with max_file_bytes = 100000: %d MB", kb/1000)
		if kb > 100_000 {
			t.Errorf("peak RSS = %d MB, want under 100 MB", kb/1000)
		}
		return
	}
	const limit = 100_000
	e := startE2E(t, e2eOptions{cfg: filesOn, core: func(c *bridge.Config) { c.Files.MaxFileBytes = limit }})
	ctx := waitCtx(t)
	e.ack(ctx, e.sent(e.slack.SendMessage(ctx, slacktest.MessageEvent{Channel: e2eDM, User: e2eUser, Text: "read this", Files: []slacktest.File{{
		Name: "notes.txt", Mimetype: "text/plain", Content: []byte("0123456789"),
		Body: func() io.Reader { return io.LimitReader(letters{}, 1<<30) },
	}}})))
	e.reply(ctx, e2eDM, "You said: read this")
	notice, err := e.slack.WaitMessage(ctx, func(m slacktest.Message) bool {
		// Told in the answer, one message kept and posted once with it.
		return !m.Ephemeral && strings.Contains(m.Text, "not sent to the agent") && strings.Contains(m.Text, "You said")
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(notice.Text, `"notes.txt"`) || !strings.Contains(notice.Text, "too large") {
		t.Errorf("notice = %q, want notes.txt named as too large", notice.Text)
	}
	if got := e.agentMessages(); len(got) != 1 || got[0] != "read this" {
		t.Errorf("agent got %d messages (%d bytes in the first), want only the text", len(got), len(strings.Join(got, "")))
	}
	// The server writes until the client stops reading; socket buffers hold
	// a few MiB past that.
	if n := e.slack.DownloadedBytes(); n > limit+64<<20 {
		t.Errorf("the fake served %d bytes, want the download stopped near the limit", n)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fmt.Printf("peak_rss_kb=%s\n", strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
}
