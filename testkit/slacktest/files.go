package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// UploadWindow is how long the fake keeps an upload URL from
// files.getUploadURLExternal open: the file must be uploaded and completed
// within it. Slack documents no exact figure; uploads abandoned for long are
// dropped.
const UploadWindow = 10 * time.Minute

// MaxUploadBytes is Slack's file size limit (1 GB).
const MaxUploadBytes = 1 << 30

// File is a file a user shares with a message (MessageEvent.Files), or one
// the app uploaded. The fake serves its content at its url_private.
type File struct {
	ID       string // minted when empty
	Name     string
	Title    string
	Mimetype string // e.g. "text/plain"; guessed from Name when empty
	Content  []byte
	// Body, when set, is what a download serves in place of Content, with
	// no Content-Length, while the file object still declares
	// len(Content): a file whose download is not what Slack said it was.
	Body func() io.Reader
	// Shares are the channels the file was shared to, with the thread when in one.
	Channel  string
	ThreadTS string
	// User is who shared it.
	User string
}

// upload is an upload URL handed out by files.getUploadURLExternal.
type upload struct {
	fileID, filename string
	length           int
	created          time.Time
	received         bool
	content          []byte
}

// fileTypes maps extensions to Slack's filetype and a MIME type.
var fileTypes = map[string][2]string{
	".txt": {"text", "text/plain"}, ".log": {"text", "text/plain"}, ".md": {"markdown", "text/markdown"},
	".json": {"json", "application/json"}, ".yaml": {"yaml", "application/x-yaml"}, ".yml": {"yaml", "application/x-yaml"},
	".png": {"png", "image/png"}, ".pdf": {"pdf", "application/pdf"}, ".zip": {"zip", "application/zip"},
}

func fileType(name string) (filetype, mimetype string) {
	if t, ok := fileTypes[strings.ToLower(path.Ext(name))]; ok {
		return t[0], t[1]
	}
	return "binary", "application/octet-stream"
}

// storeFileLocked keeps f for download and returns it with its ID.
func (s *Server) storeFileLocked(f File) File {
	if f.ID == "" {
		f.ID = s.nextIDLocked("F")
	}
	if f.Title == "" {
		f.Title = f.Name
	}
	if f.Mimetype == "" {
		_, f.Mimetype = fileType(f.Name)
	}
	if s.files == nil {
		s.files = make(map[string]File)
	}
	s.files[f.ID] = f
	return f
}

// fileJSON renders a file object as events and files.completeUploadExternal carry it
// (docs.slack.dev/reference/objects/file-object): hosted files are downloaded from
// url_private_download with the bot token.
func (s *Server) fileJSON(f File) map[string]any {
	filetype, _ := fileType(f.Name)
	base := s.URL() + "/files-pri/" + s.opts.TeamID + "-" + f.ID + "/"
	name := url.PathEscape(f.Name)
	out := map[string]any{
		"id": f.ID, "created": s.started.Unix(), "timestamp": s.started.Unix(), "name": f.Name, "title": f.Title,
		"mimetype": f.Mimetype, "filetype": filetype, "pretty_type": strings.ToUpper(filetype), "user": f.User,
		"user_team": s.opts.TeamID, "editable": false, "size": len(f.Content), "mode": "hosted",
		"is_external": false, "external_type": "", "is_public": false, "public_url_shared": false,
		"display_as_bot": false, "username": "",
		"url_private": base + name, "url_private_download": base + "download/" + name,
		"permalink": "https://" + s.opts.TeamName + ".slack.com/files/" + f.User + "/" + f.ID + "/" + name,
	}
	return out
}

// eventFilesLocked stores the files of a user's message and returns their objects.
func (s *Server) eventFilesLocked(e *MessageEvent) []map[string]any {
	out := make([]map[string]any, 0, len(e.Files))
	e.Files = slices.Clone(e.Files) // the caller's stay as given; IDs are filled in here
	for i, f := range e.Files {
		f.User, f.Channel, f.ThreadTS = e.User, e.Channel, e.ThreadTS
		f = s.storeFileLocked(f)
		e.Files[i] = f
		out = append(out, s.fileJSON(f))
	}
	return out
}

// UploadedFile returns a file by ID: one a user shared or one the app uploaded and completed.
func (s *Server) UploadedFile(id string) (File, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[id]
	return f, ok
}

// FileDownloads counts the requests for file content, served or refused.
func (s *Server) FileDownloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

// DownloadedBytes counts the bytes of file content the fake has written to
// clients (a client that stops reading leaves the rest unsent; the kernel's
// socket buffers hold a few MiB past what it read).
func (s *Server) DownloadedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloadedBytes
}

// hasScopeLocked reports whether the bot token has scope: every scope unless Options.Scopes lists them.
func (s *Server) hasScopeLocked(scope string) bool {
	return s.opts.Scopes == nil || slices.Contains(s.opts.Scopes, scope)
}

func (s *Server) missingScope(scope string) apiResult {
	res := fail("missing_scope")
	res.body["needed"] = scope
	res.body["provided"] = strings.Join(s.opts.Scopes, ",")
	return res
}

// filesGetUploadURLExternal hands out a one-use upload URL for length bytes.
func (s *Server) filesGetUploadURLExternal(p url.Values, _ *http.Request) apiResult {
	if !s.hasScopeLocked("files:write") {
		return s.missingScope("files:write")
	}
	name := p.Get("filename")
	length, err := strconv.Atoi(p.Get("length"))
	switch {
	case name == "" || p.Get("length") == "":
		return fail("invalid_arguments", "filename and length are required")
	case err != nil || length <= 0:
		return fail("missing_argument", "length must be a positive integer")
	case length > MaxUploadBytes:
		return fail("file_upload_size_restricted")
	}
	id := s.nextIDLocked("F")
	key := s.nextIDLocked("u")
	if s.uploads == nil {
		s.uploads = make(map[string]*upload)
	}
	s.uploads[key] = &upload{fileID: id, filename: name, length: length, created: s.now()}
	return ok(map[string]any{"upload_url": s.URL() + "/upload/v1/" + key, "file_id": id})
}

// handleUpload takes a file's bytes at its upload URL, raw or as a multipart form: once,
// within UploadWindow, exactly the length announced.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxUploadBytes+1))
	if err != nil {
		http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
		return
	}
	if mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "multipart/form-data" {
		data, err = multipartFile(data, params["boundary"])
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.uploads[key]
	switch {
	case !ok || u.received:
		http.Error(w, "unknown or used upload URL", http.StatusNotFound)
		return
	case s.now().Sub(u.created) > UploadWindow:
		http.Error(w, "upload URL expired", http.StatusGone)
		return
	case len(data) != u.length:
		http.Error(w, fmt.Sprintf("got %d bytes, files.getUploadURLExternal announced %d", len(data), u.length), http.StatusBadRequest)
		return
	}
	u.received, u.content = true, data
	s.bumpLocked()
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "OK - %d", len(data))
}

// multipartFile returns the content of the first file part of a form.
func multipartFile(body []byte, boundary string) ([]byte, error) {
	mr := multipart.NewReader(strings.NewReader(string(body)), boundary)
	for {
		p, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("multipart upload without a file part: %w", err)
		}
		if p.FileName() != "" {
			return io.ReadAll(p)
		}
	}
}

// filesCompleteUploadExternal finishes uploads: every file must have been uploaded within
// its window; with channel_id the files are shared there (in thread_ts, a message of that
// channel, when set) with initial_comment as the message's text.
func (s *Server) filesCompleteUploadExternal(p url.Values, _ *http.Request) apiResult {
	if !s.hasScopeLocked("files:write") {
		return s.missingScope("files:write")
	}
	var list []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(p.Get("files")), &list); err != nil || len(list) == 0 {
		return fail("invalid_arguments", "files must be a JSON array of {id, title}")
	}
	ch, thread := p.Get("channel_id"), p.Get("thread_ts")
	if ch == "" {
		ch = p.Get("channels")
	}
	switch {
	case strings.Contains(ch, ",") && thread != "":
		return fail("invalid_arguments", "thread_ts needs exactly one channel")
	case ch != "" && !s.knownChannelLocked(ch):
		return fail("channel_not_found")
	case thread != "" && ch == "":
		return fail("invalid_arguments", "thread_ts without a channel")
	}
	if thread != "" {
		root, ok := s.msgs[msgKey{ch, thread}]
		if !ok || root.Deleted {
			return fail("invalid_arguments", "thread_ts "+thread+" is not a message of "+ch)
		}
		if root.ThreadTS != "" && root.ThreadTS != root.TS {
			return fail("invalid_arguments", "thread_ts "+thread+" is a reply; give its parent's ts")
		}
	}
	ups := make([]*upload, len(list))
	keys := make([]string, len(list))
	for i, f := range list {
		for k, u := range s.uploads {
			if u.fileID == f.ID {
				ups[i], keys[i] = u, k
			}
		}
		switch u := ups[i]; {
		case u == nil:
			return fail("file_not_found", f.ID)
		case !u.received:
			return fail("file_not_found", f.ID+" was never uploaded to its upload_url")
		case s.now().Sub(u.created) > UploadWindow:
			return fail("file_not_found", f.ID+": the upload window has passed")
		}
	}
	var objs []map[string]any
	var ids []string
	for i, f := range list {
		u := ups[i]
		delete(s.uploads, keys[i])
		file := s.storeFileLocked(File{ID: u.fileID, Name: u.filename, Title: f.Title, Content: u.content, Channel: ch, ThreadTS: thread, User: s.opts.BotUserID})
		objs = append(objs, s.fileJSON(file))
		ids = append(ids, file.ID)
	}
	if ch != "" {
		m := &stored{fromApp: true, author: s.opts.BotUserID}
		m.Via, m.Channel, m.ThreadTS, m.BotID = "files.completeUploadExternal", ch, thread, s.opts.BotID
		m.TS = s.nextTSLocked()
		m.Text = p.Get("initial_comment")
		m.Files = ids
		m.Params = cloneValues(p)
		s.recordLocked(m, "files.completeUploadExternal")
	}
	return ok(map[string]any{"files": objs})
}

// serveFile answers GET url_private and url_private_download: the content to a request
// with the bot token (and files:read), and otherwise what Slack answers a browser without
// a session: a redirect to the sign-in page with redir set to the file's path.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("teamfile")
	if _, after, ok := strings.Cut(id, "-"); ok {
		id = after
	}
	s.mu.Lock()
	s.downloads++
	f, found := s.files[id]
	authorized := r.Header.Get("Authorization") == "Bearer "+s.opts.BotToken && s.hasScopeLocked("files:read")
	s.bumpLocked()
	s.mu.Unlock()
	switch {
	case !authorized:
		http.Redirect(w, r, "/signin?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
	case !found:
		http.NotFound(w, r)
	default:
		w.Header().Set("Content-Type", f.Mimetype)
		if f.Body != nil {
			n, _ := io.Copy(w, f.Body())
			s.mu.Lock()
			s.downloadedBytes += n
			s.mu.Unlock()
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(f.Content)))
		n, _ := w.Write(f.Content)
		s.mu.Lock()
		s.downloadedBytes += int64(n)
		s.mu.Unlock()
	}
}

// serveSignin is the workspace's sign-in page, where files.slack.com sends requests
// without a valid token.
func (s *Server) serveSignin(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, "<!DOCTYPE html><html><body>Sign in to "+s.opts.TeamName+"</body></html>")
}

// AddFile stores a file as if a user had shared it and returns its ID and
// url_private_download, for tests of downloads without an event.
func (s *Server) AddFile(f File) (id, downloadURL string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f = s.storeFileLocked(f)
	return f.ID, s.fileJSON(f)["url_private_download"].(string)
}
