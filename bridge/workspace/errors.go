package workspace

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Sentinels for the statuses the API document lists, and for 429 and 503,
// matched by an *APIError through errors.Is.
var (
	ErrBadRequest   = errors.New("workspace API rejected the request as invalid")
	ErrUnauthorized = errors.New("workspace API rejected the API token")
	ErrNotFound     = errors.New("workspace API does not know the flow, agent or session")
	ErrTimeout      = errors.New("workspace API timed out running the flow")
	// ErrRateLimited is a 429: the API did not take the request.
	ErrRateLimited = errors.New("workspace API is rate limiting requests")
	// ErrUnavailable is a 503. Unlike a 429 it does not prove the request
	// was not acted on, so the client never sends it again.
	ErrUnavailable = errors.New("workspace API is unavailable")
)

// ErrUnreachable marks transport failures: a refused dial, a failed name
// lookup, a connection reset before the response, or the client's own
// deadline. The underlying error stays wrapped beside it.
var ErrUnreachable = errors.New("workspace API unreachable")

// ErrNotSent marks, beside ErrUnreachable, a request that provably never left
// this process (a refused dial, a failed name lookup): the API cannot have
// acted on it, so a flow can be reported as not run.
var ErrNotSent = errors.New("request not sent")

// ErrBadAddress marks, beside ErrUnreachable and ErrNotSent, a request that
// could not be sent because the configured address leads nowhere: its host
// name does not exist ("no such host") or nothing accepts connections at its
// port (connection refused). Unlike a timeout or a reset this is, most
// likely, a wrong base URL: trying again in a moment does not help.
var ErrBadAddress = errors.New("workspace API address leads nowhere")

// ErrBadResponse marks a 2xx response the client cannot use: not JSON, not
// the expected shape, larger than MaxResponseSize, or (Create Session) a
// session ID that is not a UUID.
var ErrBadResponse = errors.New("unexpected response from the workspace API")

// ErrFlowFailed is matched by a *FlowFailedError, ErrChatFailed by a
// *ChatFailedError.
var (
	ErrFlowFailed = errors.New("workspace API reported that the flow failed")
	ErrChatFailed = errors.New("workspace API reported that it did not take the chat message")
)

const (
	// maxAPIErrorBody is how much of an error body APIError keeps for logs.
	maxAPIErrorBody = 512
	// maxFailureMessage is how much of a failure text FlowFailedError and
	// ChatFailedError keep.
	maxFailureMessage = 500
)

// APIError is a non-2xx answer of the API.
type APIError struct {
	// Op is one of the Op constants.
	Op     string
	Status int
	// Body is the start of the response body, for logs; it may be cut.
	Body string
	// RetryAfter is the response's Retry-After, in seconds or as an HTTP
	// date, as a delay from its receipt; zero when absent or unreadable.
	RetryAfter time.Duration
}

// Error leaves out Op because callers wrap the error with the operation
// and the resource it was about.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("workspace API answered %d %s", e.Status, http.StatusText(e.Status))
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Is maps Status to ErrBadRequest, ErrUnauthorized, ErrNotFound, ErrTimeout,
// ErrRateLimited or ErrUnavailable.
func (e *APIError) Is(target error) bool {
	switch e.Status {
	case http.StatusBadRequest:
		return target == ErrBadRequest
	case http.StatusUnauthorized:
		return target == ErrUnauthorized
	case http.StatusNotFound:
		return target == ErrNotFound
	case http.StatusRequestTimeout:
		return target == ErrTimeout
	case http.StatusTooManyRequests:
		return target == ErrRateLimited
	case http.StatusServiceUnavailable:
		return target == ErrUnavailable
	}
	return false
}

// FlowFailedError is a flow run answered with HTTP 200 whose meta.status
// is present and not SUCCESS: the flow ran and did not succeed.
type FlowFailedError struct {
	// Status is meta.status as sent, e.g. "FAILED".
	Status string
	// Message is the first text among meta.message, result.error, error
	// and message, cut to about 500 bytes; empty when there is none.
	Message string
}

func (e *FlowFailedError) Error() string {
	return failureText("flow ended with status", e.Status, e.Message)
}

// Is matches ErrFlowFailed.
func (e *FlowFailedError) Is(target error) bool { return target == ErrFlowFailed }

// ChatFailedError is a chat message answered with HTTP 200 whose
// meta.status is present and not SUBMITTED.
type ChatFailedError struct {
	// Status is meta.status as sent.
	Status string
	// Message is found and cut as FlowFailedError.Message is.
	Message string
}

func (e *ChatFailedError) Error() string {
	return failureText("chat message answered with status", e.Status, e.Message)
}

// Is matches ErrChatFailed.
func (e *ChatFailedError) Is(target error) bool { return target == ErrChatFailed }

func failureText(what, status, message string) string {
	msg := "workspace API: " + what + " " + strconv.Quote(status)
	if message != "" {
		msg += ": " + message
	}
	return msg
}

// errorText is the start of b for an error message: cut to n bytes by
// truncate.Bytes, then made valid UTF-8 (a run of bad bytes becomes one
// U+FFFD) without the spaces around it.
func errorText(b []byte, n int) string {
	// Only what can be kept is copied, and a byte more to show the cut.
	s := truncate.Bytes(string(b[:min(len(b), n+1)]), n)
	return strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
}

// snippet quotes the start of a body for an error message.
func snippet(b []byte) string {
	return strconv.Quote(errorText(b, 80))
}

// badResponse describes an unusable 2xx body.
func badResponse(problem string, body []byte) error {
	return fmt.Errorf("%w: %s: %s", ErrBadResponse, problem, snippet(body))
}
