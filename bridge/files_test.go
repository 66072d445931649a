package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

// fileRecorder is a recorder whose platform serves files from a map and
// accepts files on replies.
type fileRecorder struct {
	*recorder
	files   map[string]string
	fetched []string
	noFiles bool
}

func (r *fileRecorder) Fetch(_ context.Context, a bridge.Attachment, w io.Writer) error {
	r.fetched = append(r.fetched, a.Name)
	c, ok := r.files[a.URL]
	if !ok {
		return errors.New("404")
	}
	_, err := io.WriteString(w, c)
	return err
}

var _ bridge.Fetcher = (*fileRecorder)(nil)

func (r *fileRecorder) AcceptsFile(bridge.Reply) bool { return !r.noFiles }

func TestFilesReachTheAgentFramedAndTheRestIsReported(t *testing.T) {
	cfg := defaultConfig()
	cfg.Files = bridge.FileLimits{MaxFiles: 2, MaxFileBytes: 100}
	h := newHarness(t, cfg, nil)
	rec := &fileRecorder{recorder: newRecorder(), files: map[string]string{
		"u/log": "error at line 3\n", "u/big": strings.Repeat("x", 101), "u/bin": "\x00\x01\x02",
		"u/two": "second", "u/three": "third",
	}}
	ev := event("t/c1", bridge.KindMessage, "what broke?", nil)
	ev = via(ev, rec)
	ev.Files = []bridge.Attachment{
		{Name: "app.log", URL: "u/log", Size: 16, MIME: "text/plain"},
		{Name: "photo.png", URL: "u/png", Size: 10, MIME: "image/png"},
		{Name: "big.txt", URL: "u/big", Size: 0},
		{Name: "data.bin", URL: "u/bin", Size: 3},
		{Name: "gone.txt", URL: "u/missing", Size: 3},
		{Name: "two.txt", URL: "u/two", Size: 6},
		{Name: "three.txt", URL: "u/three", Size: 5},
	}
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	replies := rec.all()
	if len(replies) != 1 || replies[0].Kind != bridge.ReplyAgent {
		t.Fatalf("replies = %+v, want the answer alone, the files not read told in it", replies)
	}
	// The note leads the answer: one message, kept and posted once with it.
	notice, _, _ := strings.Cut(replies[0].Text, "\n\n")
	wantContains(t, "notice", notice, `"photo.png": not a text file`, `"big.txt": too large`, `"data.bin": not a text file`,
		`"gone.txt": it could not be downloaded`, `"three.txt": only 2 files are read per message`, "Your message was sent without them.")
	if strings.Contains(notice, "app.log") || strings.Contains(notice, "two.txt") {
		t.Errorf("notice %q names a file that was sent", notice)
	}
	if slicesContain(rec.fetched, "photo.png") {
		t.Error("an image was downloaded; its type alone rules it out")
	}
	sess, ok, err := h.store.Session(t.Context(), "t/c1")
	if err != nil || !ok {
		t.Fatalf("Session = %v, %v", ok, err)
	}
	msgs := h.fake.Messages(sess.SessionUUID)
	if len(msgs) != 1 {
		t.Fatalf("agent got %q, want one message", msgs)
	}
	want := "what broke?\n\nAttached file \"app.log\" (16 bytes):\n```\nerror at line 3\n```\n\nAttached file \"two.txt\" (6 bytes):\n```\nsecond\n```"
	if msgs[0] != want {
		t.Errorf("agent got %q, want %q", msgs[0], want)
	}
}

func TestOnlyUnreadableFilesSendNothing(t *testing.T) {
	h := newHarness(t, defaultConfig(), nil)
	rec := &fileRecorder{recorder: newRecorder()}
	ev := event("t/c2", bridge.KindMessage, "", nil)
	ev = via(ev, rec)
	ev.Files = []bridge.Attachment{{Name: "x.png", URL: "u", MIME: "image/png"}}
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	replies := rec.all()
	if len(replies) != 1 || !strings.Contains(replies[0].Text, "Only text files are read") {
		t.Fatalf("replies = %+v, want one notice that only text files are read", replies)
	}
	if _, ok, _ := h.store.Session(t.Context(), "t/c2"); ok {
		t.Error("a session was created for a message with nothing to send")
	}
}

func TestLongReplyAndJSONResultArePostedAsFiles(t *testing.T) {
	cfg := defaultConfig()
	cfg.Files.ReplyOver = 50
	json := bridge.Flow{Name: "inventory", UUID: "flow-json", Timeout: 5e9, Allow: []string{"everyone"}, Public: true}
	cfg.Flows = append(cfg.Flows, json)
	long := strings.Repeat("word ", 40)
	h := newHarness(t, cfg, func(s *workspacetest.Server) {
		s.AddAgent(workspacetest.Agent{UUID: agentUUID, Reply: func(int, string) string { return long }})
		s.AddFlow(workspacetest.Flow{UUID: "flow-json", Output: map[string]any{"hosts": []string{"web1"}}})
	})

	rec := &fileRecorder{recorder: newRecorder()}
	ev := event("t/c3", bridge.KindMessage, "tell me", nil)
	ev = via(ev, rec)
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	r := rec.last(t)
	if r.File == nil || string(r.File.Content) != long || r.File.Name != "reply.md" {
		t.Fatalf("reply = %+v, want the whole text attached as reply.md", r)
	}
	wantContains(t, "summary", r.Text, "word word", "attached as reply.md", "200 characters")

	rec = &fileRecorder{recorder: newRecorder()}
	ev = command("t/c3", bridge.CommandFlow, "inventory", nil)
	ev = via(ev, rec)
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	r = rec.last(t)
	if r.File == nil || r.File.Name != "inventory.json" || !strings.Contains(string(r.File.Content), `"hosts": [`) {
		t.Fatalf("flow reply = %+v, want the JSON attached as inventory.json", r)
	}

	// A responder that cannot take the file gets the text, whole.
	rec = &fileRecorder{recorder: newRecorder(), noFiles: true}
	ev = event("t/c4", bridge.KindMessage, "again", nil)
	ev = via(ev, rec)
	if err := h.do(ev); err != nil {
		t.Fatal(err)
	}
	if r := rec.last(t); r.File != nil || r.Text != long {
		t.Errorf("reply = %+v, want the whole text and no file", r)
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// endlessFetcher is a platform whose download never ends, fetched in the ways
// an adapter might: through io.Copy, or with write errors ignored.
type endlessFetcher struct {
	*recorder
	ignoreErrors bool
	read         atomic.Int64
}

func (f *endlessFetcher) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	f.read.Add(int64(len(p)))
	return len(p), nil
}

func (f *endlessFetcher) Fetch(ctx context.Context, _ bridge.Attachment, w io.Writer) error {
	if !f.ignoreErrors {
		_, err := io.Copy(w, f)
		return err
	}
	buf := make([]byte, 4096)
	for range 1000 { // 4 MB, whatever w says
		if ctx.Err() != nil {
			return nil
		}
		f.Read(buf)
		w.Write(buf)
	}
	return nil
}

func TestFileDownloadStopsAtTheLimitWhateverTheAdapterDoes(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignoreErrors=%v", ignore), func(t *testing.T) {
			cfg := defaultConfig()
			cfg.Files = bridge.FileLimits{MaxFileBytes: 1000}
			h := newHarness(t, cfg, nil)
			f := &endlessFetcher{recorder: newRecorder(), ignoreErrors: ignore}
			ev := event("t/endless", bridge.KindMessage, "read this", nil)
			ev = via(ev, f)
			ev.Files = []bridge.Attachment{{Name: "small.txt", URL: "u", Size: 10, MIME: "text/plain"}}
			if err := h.do(ev); err != nil {
				t.Fatal(err)
			}
			if !ignore && f.read.Load() > 1000+64<<10 {
				t.Errorf("read %d bytes of the endless file, want at most the limit and one copy buffer", f.read.Load())
			}
			replies := f.all()
			if len(replies) == 0 {
				t.Fatal("no reply")
			}
			wantContains(t, "notice", replies[0].Text, `"small.txt"`, "too large")
			sess, ok, err := h.store.Session(t.Context(), "t/endless")
			if err != nil || !ok {
				t.Fatalf("Session = %v, %v", ok, err)
			}
			if msgs := h.fake.Messages(sess.SessionUUID); len(msgs) != 1 || msgs[0] != "read this" {
				t.Errorf("agent got %q, want only the text", msgs)
			}
		})
	}
}
