package discord

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
)

// maxUploadBytes is the largest reply file the adapter posts: Discord's upload
// limit in a guild without boosts (10 MiB), the smallest a bot meets.
const maxUploadBytes = 10 << 20

// cdnHosts are where Discord serves attachments. A download goes only there:
// the URL comes from a message, and the adapter fetches nothing else.
var cdnHosts = map[string]bool{"cdn.discordapp.com": true, "media.discordapp.net": true}

// attachmentsOf lists a message's files for the core.
func attachmentsOf(m *discordgo.Message) []bridge.Attachment {
	var out []bridge.Attachment
	for _, at := range m.Attachments {
		if at == nil || at.URL == "" {
			continue
		}
		out = append(out, bridge.Attachment{ID: at.ID, Name: at.Filename, Size: int64(at.Size), MIME: at.ContentType, URL: at.URL})
	}
	return out
}

// fetch downloads an attachment from Discord's CDN into w, which bounds
// it: a plain GET of its signed URL.
func (a *Adapter) fetch(ctx context.Context, at bridge.Attachment, w io.Writer) error {
	if !a.cfg.Files {
		return bridge.ErrFilesOff
	}
	u, err := url.Parse(at.URL)
	if err != nil || u.Scheme != "https" || !cdnHosts[u.Hostname()] {
		return fmt.Errorf("attachment %s: %q is not a Discord CDN URL", at.ID, at.URL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("attachment %s: %w", at.ID, err)
	}
	resp, err := a.session.Client.Do(req)
	if err != nil {
		return fmt.Errorf("attachment %s: %w", at.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("attachment %s: CDN answered %s", at.ID, resp.Status)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("attachment %s: %w", at.ID, err)
	}
	return nil
}

// acceptsFile reports whether the adapter posts a reply's file: with files
// on and within the upload limit.
func (a *Adapter) acceptsFile(r bridge.Reply) bool {
	return a.cfg.Files && r.File != nil && len(r.File.Content) <= maxUploadBytes
}

var (
	_ bridge.Fetcher    = (*messageResponder)(nil)
	_ bridge.FileSender = (*messageResponder)(nil)
	_ bridge.FileSender = (*interactionResponder)(nil)
)

// Fetch downloads a file of the user's message.
func (r *messageResponder) Fetch(ctx context.Context, at bridge.Attachment, w io.Writer) error {
	return r.a.fetch(ctx, at, w)
}

// AcceptsFile reports whether a reply's file can be posted.
func (r *messageResponder) AcceptsFile(rep bridge.Reply) bool { return r.a.acceptsFile(rep) }

// AcceptsFile reports whether a reply's file can be posted; an interaction's
// webhook carries files to ephemeral messages too.
func (r *interactionResponder) AcceptsFile(rep bridge.Reply) bool { return r.a.acceptsFile(rep) }

// discordFiles are a message's files as discordgo uploads them (multipart
// payload_json and files[n]); each call reads the content afresh.
func discordFiles(f *bridge.File) []*discordgo.File {
	if f == nil {
		return nil
	}
	return []*discordgo.File{{Name: f.Name, ContentType: contentType(f.Name), Reader: bytes.NewReader(f.Content)}}
}

func contentType(name string) string {
	if len(name) > 5 && name[len(name)-5:] == ".json" {
		return "application/json"
	}
	return "text/markdown; charset=utf-8"
}

// editWebhookWithFile sends an interaction message edit with a file, as
// multipart, on the token's own rate-limit bucket (see editWebhook).
func (a *Adapter) editWebhookWithFile(ctx context.Context, uri, bucket string, edit *discordgo.WebhookEdit, f *bridge.File) error {
	ct, body, err := discordgo.MultipartBodyWithJSON(edit, discordFiles(f))
	if err != nil {
		return err
	}
	_, err = a.session.RequestRaw(http.MethodPatch, uri, ct, body, bucket, 0, discordgo.WithContext(ctx))
	return err
}
