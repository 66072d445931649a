package discordtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Upload limits (reference.mdx "Uploading Files", message.mdx): a request carries at most
// 10 files and 25 MiB in all; each file is also bounded by the guild's upload limit, which
// interactions report as attachment_size_limit (Options.AttachmentSizeLimit).
const (
	MaxAttachments     = 10
	MaxUploadRequest   = 25 << 20
	MaxAttachmentBytes = attachmentSizeLimit
)

// CodeRequestTooLarge is Discord's "Request entity too large".
const CodeRequestTooLarge = 40005

// cdnHost is where Discord serves attachments; the fake's Transport sends it to the fake.
const cdnHost = "cdn.discordapp.com"

// File is a file a user attaches to a message in SendMessage.
type File struct {
	Name        string
	ContentType string
	Content     []byte
	// Body, when set, is what the CDN serves in place of Content, with no
	// Content-Length, while the attachment still declares len(Content): a
	// file whose download is not what its size said.
	Body func() io.Reader
}

// Attachment is a file on a message, the user's or one the bot uploaded, as the fake
// stores it. URL is its CDN address, which the fake serves to a plain GET.
type Attachment struct {
	ID          string
	Filename    string
	ContentType string
	Size        int
	URL         string
	Content     []byte
	// Body, when set, is served in place of Content (File.Body).
	Body func() io.Reader
}

// wireAttachment renders an attachment as Discord sends it (message.mdx attachment object).
func wireAttachment(a Attachment) map[string]any {
	w := map[string]any{"id": a.ID, "filename": a.Filename, "size": a.Size, "url": a.URL, "proxy_url": strings.Replace(a.URL, cdnHost, "media.discordapp.net", 1)}
	if a.ContentType != "" {
		w["content_type"] = a.ContentType
	}
	return w
}

func wireAttachments(list []Attachment) []map[string]any {
	out := make([]map[string]any, 0, len(list))
	for _, a := range list {
		out = append(out, wireAttachment(a))
	}
	return out
}

// storeAttachmentsLocked gives files their IDs and signed CDN URLs in channelID and keeps
// them for download.
func (s *Server) storeAttachmentsLocked(channelID string, files []Attachment) []Attachment {
	out := make([]Attachment, len(files))
	for i, f := range files {
		f.ID = s.newIDLocked()
		f.Size = len(f.Content)
		path := "/attachments/" + channelID + "/" + f.ID + "/" + url.PathEscape(f.Filename)
		// Discord's CDN links are signed and expire (ex, is, hm); the fake checks hm.
		ex := strconv.FormatInt(s.now().Add(24*60*60*1e9).Unix(), 16)
		f.URL = "https://" + cdnHost + path + "?ex=" + ex + "&is=" + ex + "&hm=" + s.cdnSignature(path, ex) + "&"
		if s.cdn == nil {
			s.cdn = make(map[string]Attachment)
		}
		s.cdn[path] = f
		out[i] = f
	}
	return out
}

func (s *Server) cdnSignature(path, ex string) string {
	m := hmac.New(sha256.New, []byte(s.opts.Token))
	m.Write([]byte(path + "|" + ex))
	return hex.EncodeToString(m.Sum(nil))
}

// serveCDN answers GET /attachments/{channel}/{id}/{name}: the file, to anyone holding the
// signed link (no Authorization needed, as on Discord's CDN), 404 for a wrong signature.
func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	s.mu.Lock()
	a, ok := s.cdn[path]
	s.cdnGets++
	s.mu.Unlock()
	q := r.URL.Query()
	if !ok || !hmac.Equal([]byte(q.Get("hm")), []byte(s.cdnSignature(path, q.Get("ex")))) {
		http.Error(w, "This content is no longer available.", http.StatusNotFound)
		return
	}
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	var n int64
	if a.Body != nil {
		n, _ = io.Copy(w, a.Body())
	} else {
		w.Header().Set("Content-Length", strconv.Itoa(len(a.Content)))
		k, _ := w.Write(a.Content)
		n = int64(k)
	}
	s.mu.Lock()
	s.cdnBytes += n
	s.mu.Unlock()
}

// CDNBytes counts the bytes of attachments the fake's CDN has written to
// clients (one that stops reading leaves the rest unsent; socket buffers hold
// a few MiB past what it read).
func (s *Server) CDNBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cdnBytes
}

// CDNDownloads counts the GET requests the fake's CDN served or refused.
func (s *Server) CDNDownloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cdnGets
}

// parseMessageCall reads a message body sent as JSON or, with files, as multipart/form-data:
// payload_json and files[n] parts (reference.mdx "Uploading Files"). It enforces the number
// and size of files.
func (s *Server) parseMessageCall(c *call) (msgBody, *apiError) {
	mt, params, err := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return parseMessageBody(c.body)
	}
	if len(c.body) > MaxUploadRequest {
		return msgBody{}, newAPIError(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "Request entity too large")
	}
	mr := multipart.NewReader(bytes.NewReader(c.body), params["boundary"])
	var (
		payload []byte
		files   []Attachment
		fe      formErrors
	)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return msgBody{}, errBadJSON(fmt.Errorf("multipart: %w", err))
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return msgBody{}, errBadJSON(fmt.Errorf("multipart: %w", err))
		}
		name := p.FormName()
		switch {
		case name == "payload_json":
			payload = data
		case strings.HasPrefix(name, "files[") && strings.HasSuffix(name, "]"):
			if p.FileName() == "" {
				fe.add(name, "BASE_TYPE_REQUIRED", "a file part needs a filename")
				continue
			}
			if len(data) > s.opts.AttachmentSizeLimit {
				return msgBody{}, newAPIError(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "Request entity too large")
			}
			files = append(files, Attachment{Filename: p.FileName(), ContentType: p.Header.Get("Content-Type"), Content: data})
		default:
			fe.add(name, "DISCORDTEST", "unknown form field; discordgo sends payload_json and files[n]")
		}
	}
	if len(files) > MaxAttachments {
		fe.add("attachments", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxAttachments)
	}
	if err := fe.err(); err != nil {
		return msgBody{}, err
	}
	b, aerr := parseMessageBody(payload)
	if aerr != nil {
		return b, aerr
	}
	b.files = files
	return b, nil
}
