package slacktest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// responseURL is a response_url the fake minted.
type responseURL struct {
	url      string
	kind     string // "commands" or "actions"
	channel  string
	user     string
	threadTS string
	created  time.Time
	uses     int
	original msgKey // the message replace_original and delete_original act on
}

// ResponsePost is one POST to a response_url, accepted or not.
type ResponsePost struct {
	Seq             uint64
	URL             string
	ResponseType    string // "in_channel", "ephemeral" or ""
	ReplaceOriginal bool
	DeleteOriginal  bool
	Text            string
	Blocks          json.RawMessage
	ThreadTS        string
	Body            json.RawMessage // the raw request body
	Status          int             // HTTP status the fake answered
	Error           string          // "" when accepted, else e.g. used_url, expired_url, no_text, invalid_blocks
	MessageTS       string          // the message created, replaced or deleted
	At              time.Time
}

// responseBody is what a response_url accepts (and a slash-command ack payload).
type responseBody struct {
	Text            string          `json:"text"`
	Blocks          json.RawMessage `json:"blocks"`
	Attachments     json.RawMessage `json:"attachments"`
	ResponseType    string          `json:"response_type"`
	ReplaceOriginal flexBool        `json:"replace_original"`
	DeleteOriginal  flexBool        `json:"delete_original"`
	ThreadTS        string          `json:"thread_ts"`
}

// flexBool accepts true and "true": Slack takes both for these flags.
type flexBool bool

func (b *flexBool) UnmarshalJSON(data []byte) error {
	s := strings.Trim(string(data), `"`)
	*b = s == "true" || s == "1"
	return nil
}

// NewResponseURL mints a response_url for channelID and userID, e.g. to
// put in an HTTP-mode slash command built by hand.
func (s *Server) NewResponseURL(channelID, userID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newResponseURLLocked("commands", channelID, userID, "")
}

func (s *Server) newResponseURLLocked(kind, channel, user, threadTS string) string {
	id := kind + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")
	u := &responseURL{url: s.URL() + "/response/" + id, kind: kind, channel: channel, user: user, threadTS: threadTS, created: s.now()}
	s.responseURLs[id] = u
	return u.url
}

func responseURLID(u string) string {
	_, id, _ := strings.Cut(u, "/response/")
	return id
}

// ResponseURLPosts returns every POST to a response_url so far, in order.
func (s *Server) ResponseURLPosts() []ResponsePost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.responsePosts)
}

// WaitResponse waits for the first response_url POST, past or future, that
// match accepts; rejected posts are included with Error set.
func (s *Server) WaitResponse(ctx context.Context, match func(ResponsePost) bool) (ResponsePost, error) {
	var found ResponsePost
	err := s.waitFor(ctx, "response_url post", func() bool {
		for _, p := range s.responsePosts {
			if match(p) {
				found = p
				return true
			}
		}
		return false
	})
	return found, err
}

// ResponseURLUsesLeft returns how many more posts the response_url accepts.
func (s *Server) ResponseURLUsesLeft(u string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.responseURLs[responseURLID(u)]
	if r == nil {
		return 0
	}
	return ResponseURLUses - r.uses
}

func (s *Server) handleResponseURL(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxAPIBody))
	s.mu.Lock()
	p := ResponsePost{URL: s.URL() + r.URL.Path, Body: raw, At: s.now(), Status: http.StatusOK}
	var body responseBody
	u := s.responseURLs[r.PathValue("id")]
	switch {
	case err != nil:
		p.Status, p.Error = http.StatusBadRequest, "invalid_payload"
	case u == nil:
		p.Status, p.Error = http.StatusNotFound, "no_service"
	case p.At.Sub(u.created) > ResponseURLLifetime:
		p.Status, p.Error = http.StatusNotFound, "expired_url"
	case u.uses >= ResponseURLUses:
		p.Status, p.Error = http.StatusNotFound, "used_url"
	case json.Unmarshal(raw, &body) != nil:
		p.Status, p.Error = http.StatusBadRequest, "invalid_payload"
	default:
		p.ResponseType, p.ReplaceOriginal, p.DeleteOriginal = body.ResponseType, bool(body.ReplaceOriginal), bool(body.DeleteOriginal)
		p.Text, p.ThreadTS = body.Text, body.ThreadTS
		if len(body.Blocks) > 0 && string(body.Blocks) != "null" {
			p.Blocks = body.Blocks
		}
		p.Status, p.Error, p.MessageTS = s.applyResponseLocked(u, body, p.Blocks)
	}
	p.Seq = s.bumpLocked()
	s.responsePosts = append(s.responsePosts, p)
	s.mu.Unlock()

	res := apiResult{status: p.Status, body: map[string]any{"ok": p.Error == ""}}
	if p.Error != "" {
		res.body["error"] = p.Error
	}
	writeJSON(w, res)
}

// applyResponseLocked does what Slack does with a response_url post:
// delete or replace the original message, or post a new one (ephemeral to
// the user unless in_channel).
func (s *Server) applyResponseLocked(u *responseURL, body responseBody, blocks json.RawMessage) (int, string, string) {
	orig, hasOrig := s.msgs[u.original]
	if hasOrig && orig.Deleted {
		hasOrig = false
	}
	if body.DeleteOriginal {
		if !hasOrig {
			return http.StatusNotFound, "message_not_found", ""
		}
		u.uses++
		orig.Deleted = true
		orig.ResponseURL = u.url
		s.recordLocked(orig, "response_url")
		return http.StatusOK, "", orig.TS
	}
	c := content{text: body.Text, blocks: string(blocks), attachments: string(body.Attachments)}
	if code, _ := c.check(); code != "" {
		return http.StatusBadRequest, code, ""
	}
	u.uses++
	if bool(body.ReplaceOriginal) && hasOrig {
		orig.Text, orig.Blocks, orig.Attachments = body.Text, blocks, rawOrNil(string(body.Attachments))
		if body.ResponseType != "" {
			orig.ResponseType = body.ResponseType
		}
		orig.ResponseURL = u.url
		orig.Edits++
		s.recordLocked(orig, "response_url")
		return http.StatusOK, "", orig.TS
	}
	m := &stored{fromApp: true, author: s.opts.BotUserID}
	m.Via, m.Channel, m.BotID, m.ResponseURL = "response_url", u.channel, s.opts.BotID, u.url
	m.ResponseType = body.ResponseType
	m.Ephemeral = body.ResponseType != "in_channel"
	if m.Ephemeral {
		m.User = u.user
	}
	m.ThreadTS = body.ThreadTS
	if m.ThreadTS == "" {
		m.ThreadTS = u.threadTS
	}
	m.Text, m.Blocks, m.Attachments = body.Text, blocks, rawOrNil(string(body.Attachments))
	m.TS = s.nextTSLocked()
	s.recordLocked(m, "response_url")
	if u.kind == "commands" {
		u.original = msgKey{m.Channel, m.TS}
	}
	return http.StatusOK, "", m.TS
}
