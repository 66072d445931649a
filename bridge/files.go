package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/markdown"
	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Attachment is a file a user attached to a message, as the platform
// describes it. It is kept with the event in the inbox, so the content is
// fetched only when the message runs.
type Attachment struct {
	// ID is the platform's file ID, where it has one.
	ID string `json:"id,omitempty"`
	// Name is the file name the user sees.
	Name string `json:"name"`
	// Size is the size the platform reports, in bytes; the download is
	// bounded anyway.
	Size int64 `json:"size"`
	// MIME is the platform's content type, "" when unknown.
	MIME string `json:"mime,omitempty"`
	// URL is where the adapter downloads it from.
	URL string `json:"url"`
}

// File is content a reply carries as a file rather than as message text.
type File struct {
	Name    string
	Content []byte
}

// Errors a Fetcher returns.
var (
	// ErrFileTooLarge means the file is over the size the core asked for.
	ErrFileTooLarge = errors.New("file too large")
	// ErrFilesOff means the adapter does not read files (its files setting is off).
	ErrFilesOff = errors.New("reading files is turned off")
)

// Fetcher is implemented by responders whose platform can download the
// files of the message they answer.
type Fetcher interface {
	// Fetch copies the attachment's content into w as it arrives. The core's
	// w refuses a write past the file size limit with an error wrapping
	// ErrFileTooLarge; Fetch then stops reading and returns it.
	Fetch(ctx context.Context, a Attachment, w io.Writer) error
}

// cappedWriter keeps at most max bytes and refuses any write past them. It
// has no ReadFrom, so whatever copies into it (io.Copy, a platform SDK's
// download) passes every byte through Write and the bound.
type cappedWriter struct {
	buf  []byte
	max  int64
	over bool
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if int64(len(w.buf))+int64(len(p)) > w.max {
		w.over = true
		return 0, ErrFileTooLarge
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// fetch downloads a through f, bounded by max whatever the adapter does: the
// download's context ends with it, and a write past max marks it too large
// even if the adapter drops the error.
func fetch(ctx context.Context, f Fetcher, a Attachment, max int64) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &cappedWriter{max: max}
	err := f.Fetch(ctx, a, w)
	if w.over {
		return nil, ErrFileTooLarge
	}
	return w.buf, err
}

// FileSender is implemented by responders that can post a reply's File as an
// attachment. AcceptsFile reports whether they can for this reply (the
// feature is on, the platform can show it to the reply's audience, the file
// is within the platform's limits); otherwise the reply goes as text.
type FileSender interface {
	AcceptsFile(r Reply) bool
}

// FileLimits are the file policy: how many attached files a message may
// bring to the agent and how large, and when a reply becomes a file.
type FileLimits struct {
	// MaxFiles is how many files of one message are read.
	MaxFiles int
	// MaxFileBytes bounds each file read.
	MaxFileBytes int64
	// ReplyOver is the length, in characters, above which an agent reply or
	// flow result is posted as a file with a short summary; 0 never does.
	// A flow's JSON result is posted as a file whenever it is set.
	ReplyOver int
}

// summaryChars is how much of a reply posted as a file its message shows.
const summaryChars = 600

// skippedFile is an attached file that did not reach the agent, and why.
type skippedFile struct {
	name, why string
}

// readFiles downloads the event's text files and appends each to text,
// framed with its name. It returns the text to send and the files it left out.
func (b *Bridge) readFiles(ctx context.Context, ev Event, text string) (string, []skippedFile) {
	if len(ev.Files) == 0 {
		return text, nil
	}
	lim := b.cfg.Files
	var skipped []skippedFile
	f, ok := ev.reply.(Fetcher)
	var out strings.Builder
	out.WriteString(text)
	read := 0
	for _, a := range ev.Files {
		name := fileName(a.Name)
		if !ok {
			skipped = append(skipped, skippedFile{name, "files cannot be read here"})
			continue
		}
		if read >= lim.MaxFiles {
			skipped = append(skipped, skippedFile{name, fmt.Sprintf("only %d files are read per message", lim.MaxFiles)})
			continue
		}
		if a.Size > lim.MaxFileBytes {
			skipped = append(skipped, skippedFile{name, fmt.Sprintf("too large (%s; the limit is %s)", humanBytes(a.Size), humanBytes(lim.MaxFileBytes))})
			continue
		}
		if !textMIME(a.MIME) {
			skipped = append(skipped, skippedFile{name, "not a text file"})
			continue
		}
		data, err := fetch(ctx, f, a, lim.MaxFileBytes)
		switch {
		case errors.Is(err, ErrFilesOff):
			skipped = append(skipped, skippedFile{name, "reading files is turned off here"})
			continue
		case errors.Is(err, ErrFileTooLarge):
			skipped = append(skipped, skippedFile{name, fmt.Sprintf("too large (the limit is %s)", humanBytes(lim.MaxFileBytes))})
			continue
		case err != nil:
			b.log.Warn("file not downloaded", zap.String("platform", ev.Platform), zap.String("conversation", ev.Conversation), zap.String("file", name), zap.Error(err))
			skipped = append(skipped, skippedFile{name, "it could not be downloaded"})
			continue
		}
		content, isText := textContent(data)
		if !isText {
			skipped = append(skipped, skippedFile{name, "not a text file"})
			continue
		}
		read++
		if out.Len() > 0 {
			out.WriteString("\n\n")
		}
		out.WriteString(frameFile(name, content))
	}
	return out.String(), skipped
}

// frameFile puts a file's content in a Markdown code fence longer than any
// run of backticks in it, so that no line of the file can close the frame
// and text after it cannot pose as the user's words or as another file. The
// name is quoted with its own escapes, so it cannot break the header line.
func frameFile(name, content string) string {
	fence := strings.Repeat("`", max(3, longestRun(content, '`')+1))
	var s strings.Builder
	fmt.Fprintf(&s, "Attached file %s (%d bytes):\n%s\n%s", strconv.Quote(name), len(content), fence, content)
	if !strings.HasSuffix(content, "\n") {
		s.WriteString("\n")
	}
	s.WriteString(fence)
	return s.String()
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// fileName makes a platform's file name safe to show: one line, no control
// characters, bounded.
func fileName(name string) string {
	name = strings.Join(strings.Fields(sanitize(name)), " ")
	if name == "" {
		return "file"
	}
	return truncate.Bytes(name, 120)
}

// textMIME reports whether a content type may be text; "" (unknown) may.
// The content decides in the end.
func textMIME(mime string) bool {
	mime, _, _ = strings.Cut(strings.ToLower(strings.TrimSpace(mime)), ";")
	switch {
	case mime == "", strings.HasPrefix(mime, "text/"):
		return true
	case strings.HasPrefix(mime, "image/"), strings.HasPrefix(mime, "audio/"), strings.HasPrefix(mime, "video/"), strings.HasPrefix(mime, "font/"):
		return false
	}
	switch mime {
	case "application/pdf", "application/zip", "application/gzip", "application/x-gzip", "application/x-tar",
		"application/x-7z-compressed", "application/vnd.rar", "application/x-rar-compressed", "application/msword",
		"application/x-msdownload", "application/x-executable", "application/wasm":
		return false
	}
	return !strings.HasPrefix(mime, "application/vnd.openxmlformats") && !strings.HasPrefix(mime, "application/vnd.ms-")
}

// textContent reports whether data is text — valid UTF-8 without NUL bytes
// and with hardly any other control characters — and returns it cleaned as
// chat text is (a byte-order mark dropped, CR and control characters removed).
func textContent(data []byte) (string, bool) {
	s := strings.TrimPrefix(string(data), "\uFEFF")
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return "", false
	}
	controls := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != 0x1b {
			controls++
		}
	}
	if controls*100 > len(s) {
		return "", false
	}
	return sanitize(s), true
}

// skippedText tells the user which files did not reach the agent.
func skippedText(skipped []skippedFile, textGoes bool) string {
	var s strings.Builder
	if len(skipped) == 1 {
		fmt.Fprintf(&s, "The file %s was not sent to the agent: %s.", strconv.Quote(skipped[0].name), skipped[0].why)
	} else {
		s.WriteString("These files were not sent to the agent:")
		for _, f := range skipped {
			fmt.Fprintf(&s, "\n• %s: %s", strconv.Quote(f.name), f.why)
		}
	}
	if textGoes && len(skipped) == 1 {
		s.WriteString("\nYour message was sent without it.")
	} else if textGoes {
		s.WriteString("\nYour message was sent without them.")
	} else {
		s.WriteString("\nOnly text files are read; paste the content, or attach it as a text file.")
	}
	return s.String()
}

// asFile turns a long reply, or a flow's JSON result, into a short summary
// with the full text attached as a file, where the responder can post one.
// name is the file's name without extension.
func (b *Bridge) asFile(ev Event, r Reply, name string, jsonResult []byte) Reply {
	lim := b.cfg.Files
	fs, ok := ev.reply.(FileSender)
	if !ok || lim.ReplyOver <= 0 {
		return r
	}
	var out Reply
	switch {
	case jsonResult != nil:
		out = r
		out.File = &File{Name: name + ".json", Content: jsonResult}
		out.Text = fmt.Sprintf("The result is attached as *%s* (%s).", out.File.Name, humanBytes(int64(len(jsonResult))))
	case utf8.RuneCountInString(r.Text) > lim.ReplyOver:
		out = r
		out.File = &File{Name: name + ".md", Content: []byte(r.Text)}
		out.Text = summary(r.Text) + fmt.Sprintf("\n\n_The full text (%d characters) is attached as %s._", utf8.RuneCountInString(r.Text), out.File.Name)
	default:
		return r
	}
	if !fs.AcceptsFile(out) {
		return r
	}
	return out
}

// summary is the start of a long text, cut at a paragraph or line break
// where one is near, with any open code fence closed.
func summary(text string) string {
	cut := strings.TrimSuffix(truncate.Bytes(text, summaryChars), truncate.Mark)
	if i := strings.LastIndex(cut, "\n\n"); i > summaryChars/3 {
		cut = cut[:i]
	} else if i := strings.LastIndexByte(cut, '\n'); i > summaryChars/3 {
		cut = cut[:i]
	}
	cut = strings.TrimRight(cut, " \t\n")
	if strings.Count(cut, "```")%2 == 1 {
		cut += "\n```"
	}
	return cut + "\n…"
}

// fileBase is a file name made of a word such as a flow's name.
func fileBase(word string) string {
	word = strings.Trim(strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '-'
	}, word), "-")
	if word == "" {
		return "result"
	}
	return word[:min(len(word), 64)] // ASCII only
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1000:
		return fmt.Sprintf("%.0f KB", float64(n)/1000)
	}
	return fmt.Sprintf("%d bytes", n)
}

// jsonResult is a flow's output as pretty JSON when it is not a text
// response, nil otherwise.
func jsonResult(run *workspace.FlowRun) []byte {
	if _, ok := run.Response(); ok || len(run.Output) == 0 || string(run.Output) == "null" {
		return nil
	}
	return []byte(markdown.PrettyJSON(run.Output) + "\n")
}
