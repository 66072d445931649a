package slacktest_test

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/flowbridge/flowbridge/testkit/docshape"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

func TestFileDownloadNeedsTheBotTokenAndScope(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{})
	_, u := srv.AddFile(slacktest.File{Name: "notes.txt", Content: []byte("hello\n")})
	var buf bytes.Buffer
	if err := newClient(t, srv, srv.BotToken()).GetFile(u, &buf); err != nil || buf.String() != "hello\n" {
		t.Fatalf("GetFile with the bot token = %q, %v; want the content", buf.String(), err)
	}
	buf.Reset()
	err := newClient(t, srv, "xoxb-someone-else").GetFile(u, &buf)
	if err == nil || !strings.Contains(err.Error(), "sign-in page") {
		t.Errorf("GetFile with another token = %v, want the sign-in redirect reported", err)
	}

	noRead := newServer(t, slacktest.Options{Scopes: []string{"chat:write", "files:write"}})
	_, u = noRead.AddFile(slacktest.File{Name: "notes.txt", Content: []byte("hello\n")})
	if err := newClient(t, noRead, noRead.BotToken()).GetFile(u, &buf); err == nil {
		t.Error("GetFile without files:read succeeded, want it refused")
	}
}

func TestUploadFlow(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		now = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	srv := newServer(t, slacktest.Options{Now: clock, Channels: []slacktest.Channel{{ID: "C1", Name: "general"}}})
	api := newClient(t, srv, srv.BotToken())
	ctx := t.Context()

	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("root", false))
	if err != nil {
		t.Fatal(err)
	}

	// The whole flow, through slack-go.
	sum, err := api.UploadFileContext(ctx, slack.UploadFileParameters{Filename: "r.md", FileSize: 5, Content: "hello", Channel: "C1", ThreadTimestamp: ts})
	if err != nil {
		t.Fatalf("UploadFileContext = %v", err)
	}
	f, ok := srv.UploadedFile(sum.ID)
	if !ok || string(f.Content) != "hello" || f.Channel != "C1" || f.ThreadTS != ts {
		t.Errorf("uploaded file = %+v, want hello shared in C1's thread %s", f, ts)
	}

	// The upload URL takes the announced length, once.
	up, err := api.GetUploadURLExternalContext(ctx, slack.GetUploadURLExternalParameters{FileName: "a.txt", FileSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) int {
		t.Helper()
		resp, err := srv.Client().Post(up.UploadURL, "application/octet-stream", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("toolong"); code != http.StatusBadRequest {
		t.Errorf("upload of 7 bytes for length 3: %d, want 400", code)
	}
	if code := post("abc"); code != http.StatusOK {
		t.Errorf("upload of the announced 3 bytes: %d, want 200", code)
	}
	if code := post("abc"); code != http.StatusNotFound {
		t.Errorf("second upload to the same URL: %d, want 404", code)
	}

	complete := func(id, channel, thread string) error {
		_, err := api.CompleteUploadExternalContext(ctx, slack.CompleteUploadExternalParameters{Files: []slack.FileSummary{{ID: id}}, Channel: channel, ThreadTimestamp: thread})
		return err
	}
	if err := complete(up.FileID, "C404", ""); err == nil || !strings.Contains(err.Error(), "channel_not_found") {
		t.Errorf("complete into an unknown channel = %v, want channel_not_found", err)
	}
	if err := complete(up.FileID, "C1", "1.000001"); err == nil || !strings.Contains(err.Error(), "invalid_arguments") {
		t.Errorf("complete into a thread that is no message = %v, want invalid_arguments", err)
	}
	if err := complete(up.FileID, "C1", ""); err != nil {
		t.Errorf("complete = %v", err)
	}

	// Not uploaded, or completed past the window: not found.
	never, err := api.GetUploadURLExternalContext(ctx, slack.GetUploadURLExternalParameters{FileName: "b.txt", FileSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := complete(never.FileID, "C1", ""); err == nil || !strings.Contains(err.Error(), "file_not_found") {
		t.Errorf("complete before the upload = %v, want file_not_found", err)
	}
	late, err := api.GetUploadURLExternalContext(ctx, slack.GetUploadURLExternalParameters{FileName: "c.txt", FileSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Post(late.UploadURL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	advance(slacktest.UploadWindow + time.Second)
	if err := complete(late.FileID, "C1", ""); err == nil || !strings.Contains(err.Error(), "file_not_found") {
		t.Errorf("complete after the upload window = %v, want file_not_found", err)
	}

	noWrite := newServer(t, slacktest.Options{Scopes: []string{"chat:write", "files:read"}})
	_, err = newClient(t, noWrite, noWrite.BotToken()).GetUploadURLExternalContext(ctx, slack.GetUploadURLExternalParameters{FileName: "a", FileSize: 1})
	if err == nil || !strings.Contains(err.Error(), "missing_scope") {
		t.Errorf("getUploadURLExternal without files:write = %v, want missing_scope", err)
	}
}

// fileShapes are Slack's documented file payloads.
var fileShapes = map[string]shape{
	"file": {Doc: slackDocs + "reference/objects/file-object",
		Fields: []string{"id:string", "created:int", "timestamp:int", "name:string", "title:string", "mimetype:string",
			"filetype:string", "pretty_type:string", "user:string", "user_team:string", "editable:bool", "size:int",
			"mode:string", "is_external:bool", "external_type:string", "is_public:bool", "public_url_shared:bool",
			"display_as_bot:bool", "username:string", "url_private:string", "url_private_download:string", "permalink:string"}},
	"files.getUploadURLExternal":   {Doc: slackDocs + "reference/methods/files.getUploadURLExternal", Fields: []string{"upload_url:string", "file_id:string"}},
	"files.completeUploadExternal": {Doc: slackDocs + "reference/methods/files.completeUploadExternal", Fields: []string{"files:[]completed_file"}},
	"completed_file":               {Doc: slackDocs + "reference/methods/files.completeUploadExternal", Fields: []string{"id:string", "title:string"}},
	"missing_scope_error":          {Doc: slackDocs + "apis/web-api/#evaluating-responses", Fields: []string{"error:string", "needed:string", "provided:string"}},
}

func TestFilePayloadsAsDocumented(t *testing.T) {
	t.Parallel()
	srv := newServer(t, slacktest.Options{Channels: []slacktest.Channel{{ID: "C1", Name: "general"}}})
	shapes := maps.Clone(slackShapes)
	maps.Copy(shapes, fileShapes)
	check := docshape.New(shapes)
	files := []slacktest.File{{Name: "a.log", Content: []byte("x")}, {Name: "b.png", Content: []byte("y")}}
	for _, body := range []func(slacktest.MessageEvent) ([]byte, slacktest.Delivery, error){srv.MessageEventBody, srv.AppMentionBody} {
		raw, _, err := body(slacktest.MessageEvent{Channel: "C1", User: "U1", Text: "see", Files: files})
		if err != nil {
			t.Fatal(err)
		}
		cb := docshape.DecodeJSON(t, "event", raw).(map[string]any)
		check.Check("event with files", cb, "event_callback")
		ev := cb["event"].(map[string]any)
		if ev["type"] == "message" && ev["subtype"] != "file_share" {
			t.Errorf("message with files has subtype %v, want file_share", ev["subtype"])
		}
		list, _ := ev["files"].([]any)
		if len(list) != 2 {
			t.Fatalf("event files = %v, want 2", ev["files"])
		}
		for _, f := range list {
			check.Check("event file", f, "file")
		}
	}

	rec := docshape.NewRecorder(srv.Client().Transport)
	api := slack.New(srv.BotToken(), slack.OptionAPIURL(srv.APIURL()), slack.OptionHTTPClient(&http.Client{Transport: rec}))
	if _, err := api.UploadFileContext(t.Context(), slack.UploadFileParameters{Filename: "r.md", FileSize: 2, Content: "hi", Channel: "C1"}); err != nil {
		t.Fatal(err)
	}
	for i, e := range rec.Exchanges() {
		method, ok := strings.CutPrefix(e.Path, "/api/")
		if !ok {
			continue // the upload URL answers text
		}
		check.Check(fmt.Sprintf("answer %d %s", i, method), docshape.DecodeJSON(t, method, e.Body), "api", method)
	}
	denied := newServer(t, slacktest.Options{Scopes: []string{}})
	rec = docshape.NewRecorder(denied.Client().Transport)
	api = slack.New(denied.BotToken(), slack.OptionAPIURL(denied.APIURL()), slack.OptionHTTPClient(&http.Client{Transport: rec}))
	if _, err := api.GetUploadURLExternalContext(t.Context(), slack.GetUploadURLExternalParameters{FileName: "a", FileSize: 1}); err == nil {
		t.Fatal("getUploadURLExternal without files:write succeeded")
	}
	for _, e := range rec.Exchanges() {
		check.Check("missing scope", docshape.DecodeJSON(t, "missing scope", e.Body), "api", "missing_scope_error")
	}
	for _, e := range check.Errs() {
		t.Error(e)
	}
}
