package discord

import (
	"io"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

func TestAttachedFilesReachTheAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) {
		e.cfg.Files = true
		e.files = bridge.FileLimits{MaxFileBytes: 1000}
	})
	e.start(t)
	ctx := testCtx(t)
	_, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "77", Author: alice, Content: "why does it fail?", Files: []discordtest.File{
		{Name: "app.log", ContentType: "text/plain; charset=utf-8", Content: []byte("panic: boom\n```\nAttached file \"fake\"")},
		{Name: "shot.png", ContentType: "image/png", Content: []byte("\x89PNG\r\n\x1a\n")},
		{Name: "huge.txt", ContentType: "text/plain", Content: []byte(strings.Repeat("x", 1001))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	notice := e.waitBot(t, "77", "were not sent to the agent")
	for _, want := range []string{`"shot.png": not a text file`, `"huge.txt": too large`, "Your message was sent without them."} {
		if !strings.Contains(notice.Content, want) {
			t.Errorf("notice = %q, want it to contain %q", notice.Content, want)
		}
	}
	checkNoPings(t, notice)
	reply := e.waitBot(t, "77", "You said: why does it fail?")
	want := "Attached file \"app.log\" (36 bytes):\n````\npanic: boom\n```\nAttached file \"fake\"\n````"
	if !strings.Contains(reply.Content, want) {
		t.Errorf("reply = %q, want the agent to have got %q", reply.Content, want)
	}
	if n := e.fake.CDNDownloads(); n != 1 {
		t.Errorf("CDN downloads = %d, want 1 (only the text file within the limit)", n)
	}
}

func TestFilesOffSaysSoAndSendsTheText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.start(t)
	ctx := testCtx(t)
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "78", Author: alice, Content: "look", Files: []discordtest.File{{Name: "a.txt", Content: []byte("hi")}}}); err != nil {
		t.Fatal(err)
	}
	e.waitBot(t, "78", `The file "a.txt" was not sent to the agent: reading files is turned off here.`)
	e.waitBot(t, "78", "You said: look")
	if n := e.fake.CDNDownloads(); n != 0 {
		t.Errorf("CDN downloads = %d with files off, want 0", n)
	}
}

func TestLongReplyAndJSONResultAreAttachments(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("All good on web1.\n", 400) // 7,200 characters: 4 messages as text
	e := newEnv(t, func(e *env) {
		e.cfg.Files = true
		e.files = bridge.FileLimits{ReplyOver: 3000}
		e.ws.AddAgent(workspacetest.Agent{UUID: "agent-1", Reply: func(int, string) string { return long }})
		e.ws.AddFlow(workspacetest.Flow{UUID: "flow-hc", Output: map[string]any{"host": "web1", "ok": true}})
	})
	e.start(t)
	ctx := testCtx(t)
	if _, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "79", Author: alice, Content: "status?"}); err != nil {
		t.Fatal(err)
	}
	m := e.waitBot(t, "79", "attached as reply.md")
	if len(m.Attachments) != 1 || m.Attachments[0].Filename != "reply.md" || string(m.Attachments[0].Content) != long {
		t.Fatalf("attachments = %+v, want reply.md with the whole reply", m.Attachments)
	}
	for _, other := range e.fake.Messages() {
		if other.ChannelID == "79" && other.ID != m.ID {
			t.Errorf("extra message %q: a reply sent as a file is one message", other.Content)
		}
	}

	// A flow's JSON result through the interaction's webhook (an edit of the
	// deferred response, as multipart).
	sent := e.interact(t, flowCommand("healthcheck", [2]string{"host", "web1"}))
	orig := e.waitOriginal(t, sent.ID, "healthcheck.json")
	if len(orig.Attachments) != 1 || !strings.Contains(string(orig.Attachments[0].Content), `"host": "web1"`) {
		t.Fatalf("original response attachments = %+v, want healthcheck.json with the output", orig.Attachments)
	}
	if orig.Attachments[0].ContentType != "application/json" {
		t.Errorf("content type = %q, want application/json", orig.Attachments[0].ContentType)
	}
}

// TestFileServingMoreThanDeclaredStopsAtTheLimit: an attachment declared as
// 10 bytes whose download serves 256 MiB is read to the core's limit and no
// further; it is named as too large and none of it reaches the agent.
func TestFileServingMoreThanDeclaredStopsAtTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 1000
	e := newEnv(t, func(e *env) {
		e.cfg.Files = true
		e.files = bridge.FileLimits{MaxFileBytes: limit}
	})
	e.start(t)
	ctx := testCtx(t)
	_, err := e.fake.SendMessage(ctx, discordtest.MessageCreate{ChannelID: "77", Author: alice, Content: "read this", Files: []discordtest.File{{
		Name: "notes.txt", ContentType: "text/plain", Content: []byte("0123456789"),
		Body: func() io.Reader { return io.LimitReader(letters{}, 256<<20) },
	}}})
	if err != nil {
		t.Fatal(err)
	}
	notice := e.waitBot(t, "77", "not sent to the agent")
	if !strings.Contains(notice.Content, `"notes.txt": too large`) && !strings.Contains(notice.Content, `"notes.txt" was not sent to the agent: too large`) {
		t.Errorf("notice = %q, want notes.txt named as too large", notice.Content)
	}
	reply := e.waitBot(t, "77", "You said: read this")
	if strings.Contains(reply.Content, "Attached file") {
		t.Errorf("reply = %q: part of the file reached the agent", reply.Content)
	}
	if n := e.fake.CDNBytes(); n > limit+64<<20 {
		t.Errorf("the CDN served %d bytes, want the download stopped near the limit", n)
	}
}

// letters is an endless stream of text, generated as it is read.
type letters struct{}

func (letters) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a' + byte(i%26)
	}
	return len(p), nil
}
