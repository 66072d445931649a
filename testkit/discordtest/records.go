package discordtest

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/bwmarrin/discordgo"
)

// Request is one REST request as the fake received and answered it.
type Request struct {
	Method string
	// Path is the escaped path, e.g. "/api/v9/webhooks/APP/TOKEN/messages/@original".
	Path  string
	Query string
	// Route is the matched pattern, one of the Route constants, or "" for an unknown route.
	Route         string
	Authorization string
	Header        http.Header
	Body          []byte
	// Status is the HTTP status the fake answered; 0 while the request is in flight.
	Status int
	// Code is Discord's JSON error code of a refused request, 0 on success.
	Code int
	// Error is the message of a refused request, with the fake's reason.
	Error string
	At    time.Time
}

// Source says how a message came to be.
type Source int

// Message sources.
const (
	// SourceUser is a message a test dispatched with SendMessage.
	SourceUser Source = iota
	// SourceChannel is a bot message sent with POST /channels/{id}/messages.
	SourceChannel
	// SourceInteraction is the original response of an interaction (callback type 4 or 5).
	SourceInteraction
	// SourceFollowup is a follow-up message, POST /webhooks/{app}/{token}.
	SourceFollowup
)

// Message is a message as the fake stores it. Slices and pointers are shared with the
// fake's copy: treat them as read-only.
type Message struct {
	ID        string
	ChannelID string
	// GuildID is empty in a DM.
	GuildID         string
	Author          discordgo.User
	Content         string
	Embeds          []*discordgo.MessageEmbed
	Components      []discordgo.MessageComponent
	AllowedMentions *discordgo.MessageAllowedMentions
	Reference       *discordgo.MessageReference
	Flags           discordgo.MessageFlags
	Source          Source
	// InteractionID is set for interaction responses and follow-ups.
	InteractionID string
	// WebhookID is set for a user message sent by a webhook.
	WebhookID string
	// Pings lists whom the message would notify on Discord given its content and
	// allowed_mentions: "everyone", "here", "role:ID", "user:ID". A bridge wants none.
	Pings []string
	// Mentions are the users the message mentions, as dispatched with it.
	Mentions []discordgo.User
	// Member is the author's guild member (roles) of a user message in a guild.
	Member *discordgo.Member
	// Nonce is the nonce the message was created with, if any.
	Nonce string
	// ThreadID is the thread started from this message, if any.
	ThreadID  string
	Timestamp time.Time
	// Edits counts accepted edits; Edited is the time of the last one.
	Edits   int
	Edited  time.Time
	Deleted bool
	// Attachments are the message's files: a user's, or those the bot uploaded.
	Attachments []Attachment

	rawComponents json.RawMessage
}

// Ephemeral reports whether only the interaction's user sees the message.
func (m Message) Ephemeral() bool { return m.Flags&discordgo.MessageFlagsEphemeral != 0 }

// Loading reports whether the message is a deferred response still "thinking".
func (m Message) Loading() bool { return m.Flags&discordgo.MessageFlagsLoading != 0 }

// Buttons returns the buttons of all action rows, in order.
func (m Message) Buttons() []discordgo.Button {
	var out []discordgo.Button
	for _, c := range m.Components {
		row, ok := c.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, rc := range row.Components {
			if b, ok := rc.(*discordgo.Button); ok {
				out = append(out, *b)
			}
		}
	}
	return out
}

// InteractionResponse is one callback, POST /interactions/{id}/{token}/callback, accepted
// or refused.
type InteractionResponse struct {
	InteractionID string
	Type          discordgo.InteractionResponseType
	// Data is the decoded data; components are in Message (for types 4 and 7).
	Data *discordgo.InteractionResponseData
	Body []byte
	At   time.Time
	// Code is 0 for an accepted callback, else Discord's error code (10062, 40060, 50035…).
	Code int
	// Late is how long after the dispatch the callback came, by Options.Now.
	Late time.Duration
}

// CommandOverwrite is one accepted bulk overwrite, PUT .../commands.
type CommandOverwrite struct {
	// GuildID is empty for global commands.
	GuildID  string
	Commands []*discordgo.ApplicationCommand
	At       time.Time
}

// Connection is one gateway websocket connection.
type Connection struct {
	// Index counts connections from 1.
	Index int
	// Query is the URL query discordgo dialled with, e.g. "v=9&encoding=json".
	Query      string
	Heartbeats int
	Acks       int
	// SessionID is the session the connection joined by IDENTIFY or RESUME.
	SessionID string
	// ClientCloseCode is the code of the client's close frame, 0 if it sent none.
	ClientCloseCode int
	// ServerCloseCode is the code the fake closed with, 0 if none (a drop has none).
	ServerCloseCode int
	Dropped         bool
	Closed          bool
}

// Handshake is one IDENTIFY (op 2) or RESUME (op 6) the fake received.
type Handshake struct {
	// Conn is the Connection.Index it came on.
	Conn int
	// Op is 2 for IDENTIFY, 6 for RESUME.
	Op    int
	Token string
	// Intents are those of an IDENTIFY.
	Intents discordgo.Intent
	Shard   *[2]int
	// SessionID is the new session of an IDENTIFY, or the one a RESUME asked for.
	SessionID string
	// Seq is the sequence a RESUME asked to continue after.
	Seq int64
	// Resumed reports whether a RESUME was accepted; Replayed counts the dispatches resent.
	Resumed  bool
	Replayed int
	// CloseCode is set when the fake refused the handshake by closing (4004, 4014…).
	CloseCode int
	// Invalidated is set when the fake answered with op 9 (SetInvalidSessions).
	Invalidated bool
	// Skipped lists the sequence numbers a RESUME's replay left out (SetReplayGap).
	Skipped []int64
	Raw     json.RawMessage
	At      time.Time
}

// RateLimit scripts 429 answers for a route.
type RateLimit struct {
	// Count is how many of the next requests on the route get 429 (default 1).
	Count int
	// RetryAfter goes in Retry-After (whole seconds, rounded up), X-RateLimit-Reset-After
	// and the body's retry_after (both fractional seconds); discordgo sleeps the latter.
	RetryAfter time.Duration
	// Global marks a global limit (X-RateLimit-Global, "global": true, scope "global").
	Global bool
	// Bucket goes in X-RateLimit-Bucket (default a hash-like name of the route).
	Bucket string
}
