package discordtest_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/testkit/discordtest"
	"github.com/flowbridge/flowbridge/testkit/docshape"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func files(n, size int) []*discordgo.File {
	out := make([]*discordgo.File, n)
	for i := range out {
		out[i] = &discordgo.File{Name: fmt.Sprintf("f%d.txt", i), ContentType: "text/plain", Reader: bytes.NewReader(bytes.Repeat([]byte("x"), size))}
	}
	return out
}

func TestUploadedFilesAreServedByTheCDN(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{})
	if err := fake.AddChannel(t.Context(), discordgo.Channel{ID: "3000", GuildID: "1", Type: discordgo.ChannelTypeGuildText}); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, fake, bridgeIntents)
	sent, err := s.ChannelMessageSendComplex("3000", &discordgo.MessageSend{Content: "report", AllowedMentions: noMentions,
		Files: []*discordgo.File{{Name: "report.md", ContentType: "text/markdown", Reader: strings.NewReader("# all good\n")}}}, discordgo.WithContext(ctx(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Attachments) != 1 || sent.Attachments[0].Filename != "report.md" || sent.Attachments[0].Size != 11 {
		t.Fatalf("attachments = %+v, want report.md of 11 bytes", sent.Attachments)
	}
	u := sent.Attachments[0].URL
	if !strings.HasPrefix(u, "https://cdn.discordapp.com/attachments/3000/") {
		t.Errorf("url = %q, want a CDN URL in the channel", u)
	}
	get := func(u string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, u, nil) // no Authorization: the CDN needs none
		resp, err := fake.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(u); code != http.StatusOK || body != "# all good\n" {
		t.Errorf("GET %s = %d %q, want 200 and the file", u, code, body)
	}
	if code, _ := get(strings.Replace(u, "hm=", "hm=0", 1)); code != http.StatusNotFound {
		t.Errorf("GET with a wrong signature = %d, want 404", code)
	}
}

func TestUploadLimits(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{AttachmentSizeLimit: 1024})
	if err := fake.AddChannel(t.Context(), discordgo.Channel{ID: "3000", GuildID: "1", Type: discordgo.ChannelTypeGuildText}); err != nil {
		t.Fatal(err)
	}
	s := newSession(t, fake, bridgeIntents)
	for _, tc := range []struct {
		name   string
		files  []*discordgo.File
		status int
		code   int
	}{
		{"eleven files", files(11, 10), http.StatusBadRequest, discordtest.CodeInvalidFormBody},
		{"one file over the guild's upload limit", files(1, 1025), http.StatusRequestEntityTooLarge, discordtest.CodeRequestTooLarge},
	} {
		_, err := s.ChannelMessageSendComplex("3000", &discordgo.MessageSend{Content: "x", AllowedMentions: noMentions, Files: tc.files}, discordgo.WithContext(ctx(t)), discordgo.WithRestRetries(0))
		if restStatus(err) != tc.status || restCode(err) != tc.code {
			t.Errorf("%s: err = %v, want %d with code %d", tc.name, err, tc.status, tc.code)
		}
	}
	// A request over 25 MiB is refused from its Content-Length, before its body is read:
	// with Expect: 100-continue the client never sends the body.
	req, err := http.NewRequestWithContext(ctx(t), http.MethodPost, fake.URL+"/api/v9/channels/3000/messages", io.LimitReader(zeros{}, discordtest.MaxUploadRequest+1))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = discordtest.MaxUploadRequest + 1
	req.Header.Set("Authorization", "Bot "+fake.Token())
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	req.Header.Set("Expect", "100-continue")
	tr := &http.Transport{ExpectContinueTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a request of 25 MiB + 1 byte: status %d, want 413", resp.StatusCode)
	}
	if _, err := s.ChannelMessageSendComplex("3000", &discordgo.MessageSend{Files: files(10, 10)}, discordgo.WithContext(ctx(t))); err != nil {
		t.Errorf("ten files and no content: %v, want them accepted", err)
	}
}

// attachmentShape is resources/message#attachment-object: what Discord always sends.
var attachmentShape = map[string]shape{
	"attachment": {Doc: discordDocs + "resources/message#attachment-object",
		Fields: []string{"id:string", "filename:string", "size:int", "url:string", "proxy_url:string", "content_type?:string"}},
}

func TestAttachmentsAsDocumented(t *testing.T) {
	t.Parallel()
	fake := newFake(t, discordtest.Options{})
	if err := fake.AddChannel(t.Context(), discordgo.Channel{ID: "3000", GuildID: "1", Type: discordgo.ChannelTypeGuildText}); err != nil {
		t.Fatal(err)
	}
	rec := docshape.NewRecorder(fake.Transport())
	s := newSession(t, fake, bridgeIntents)
	s.Client = &http.Client{Transport: rec}
	if _, err := s.ChannelMessageSendComplex("3000", &discordgo.MessageSend{Content: "x", AllowedMentions: noMentions, Files: files(2, 3)}, discordgo.WithContext(ctx(t))); err != nil {
		t.Fatal(err)
	}
	check := docshape.New(attachmentShape)
	for _, e := range rec.Exchanges() {
		m, _ := docshape.DecodeJSON(t, "message", e.Body).(map[string]any)
		list, _ := m["attachments"].([]any)
		if len(list) != 2 {
			t.Fatalf("attachments = %v, want 2", m["attachments"])
		}
		for _, a := range list {
			check.Check("attachment", a, "attachment")
		}
	}
	for _, e := range check.Errs() {
		t.Error(e)
	}
}
