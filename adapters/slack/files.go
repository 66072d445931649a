package slack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	slackgo "github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/markdown"
)

// FileScopes are the bot scopes the files setting needs: files:read to
// download what users share, files:write to post replies as files.
var FileScopes = []string{"files:read", "files:write"}

// maxUploadBytes is Slack's file size limit (1 GB).
const maxUploadBytes = 1 << 30

// attachmentsOf lists a message's files for the core. A file the bot cannot
// download (an external file, one of a Slack Connect channel that needs
// files.info first, one hidden by the plan's limits) keeps no URL, so that
// the user hears it was not sent.
func attachmentsOf(files []slackgo.File) []bridge.Attachment {
	var out []bridge.Attachment
	for _, f := range files {
		at := bridge.Attachment{ID: f.ID, Name: f.Name, Size: int64(f.Size), MIME: f.Mimetype}
		if at.Name == "" {
			at.Name = f.Title
		}
		if f.Mode != "tombstone" && f.Mode != "hidden_by_limit" && !f.IsExternal && f.FileAccess != "check_file_info" {
			at.URL = f.URLPrivateDownload
			if at.URL == "" {
				at.URL = f.URLPrivate
			}
		}
		out = append(out, at)
	}
	return out
}

var (
	_ bridge.Fetcher    = (*responder)(nil)
	_ bridge.FileSender = (*responder)(nil)
)

// Fetch downloads a shared file from its url_private_download with the bot
// token into w, which bounds it. slack-go sends the token only to Slack's
// hosts and the API URL.
func (r *responder) Fetch(ctx context.Context, at bridge.Attachment, w io.Writer) error {
	if !r.a.cfg.Files {
		return bridge.ErrFilesOff
	}
	if at.URL == "" {
		return fmt.Errorf("file %s: Slack gives no download URL for it", at.ID)
	}
	if err := r.a.api.GetFileContext(ctx, at.URL, w); err != nil {
		return fmt.Errorf("file %s: %w", at.ID, err)
	}
	return nil
}

// AcceptsFile reports whether a reply's file is posted: with files on, for
// replies everyone in the conversation sees (a Slack file cannot be
// ephemeral, so a private reply stays text), within Slack's size limit.
func (r *responder) AcceptsFile(rep bridge.Reply) bool {
	return r.a.cfg.Files && !rep.Ephemeral && rep.File != nil && len(rep.File.Content) <= maxUploadBytes
}

// sendWithFile uploads the reply's file, then posts its summary, which
// names the file, in the same place. When Slack refuses the upload, the
// file's text is posted as the reply instead of the summary: no message
// names a file that is not there, and nothing is lost.
func (r *responder) sendWithFile(ctx context.Context, rep bridge.Reply) (bridge.MessageRef, error) {
	return r.Send(ctx, r.attach(ctx, rep))
}

// updateWithFile uploads the file, then puts the summary in place of ref;
// or, when the upload is refused, the file's text.
func (r *responder) updateWithFile(ctx context.Context, ref bridge.MessageRef, rep bridge.Reply) error {
	return r.Update(ctx, ref, r.attach(ctx, rep))
}

// attach uploads rep's file into the responder's channel and thread and
// returns the reply to post with it: its summary once the file is there,
// the file's text in its place when Slack refuses the upload.
func (r *responder) attach(ctx context.Context, rep bridge.Reply) bridge.Reply {
	f := rep.File
	rep.File = nil
	err := r.upload(ctx, f)
	if err == nil {
		return rep
	}
	r.a.log.Warn("file not uploaded; sending its text", zap.String("file", f.Name), zap.Error(err))
	rep.Text = string(f.Content)
	if strings.HasSuffix(f.Name, ".json") {
		rep.Text = markdown.CodeBlock("json", rep.Text)
	}
	return rep
}

// upload runs Slack's three-step upload: files.getUploadURLExternal, the
// bytes to the upload URL, files.completeUploadExternal sharing it where
// the responder posts.
func (r *responder) upload(ctx context.Context, f *bridge.File) error {
	unlock, err := r.a.locks.lock(ctx, r.Channel)
	if err != nil {
		return err
	}
	defer unlock()
	_, err = r.a.api.UploadFileContext(ctx, slackgo.UploadFileParameters{
		Filename: f.Name, Title: f.Name, FileSize: len(f.Content), Reader: bytes.NewReader(f.Content),
		Channel: r.Channel, ThreadTimestamp: r.Thread,
	})
	if err != nil {
		return fmt.Errorf("upload %s: %w", f.Name, err)
	}
	return nil
}
