package workspace

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinels for the statuses the API document lists, matched by an
// *APIError through errors.Is.
var (
	ErrBadRequest   = errors.New("workspace API rejected the request as invalid")
	ErrUnauthorized = errors.New("workspace API rejected the API token")
	ErrNotFound     = errors.New("workspace API does not know the flow, agent or session")
	ErrTimeout      = errors.New("workspace API timed out running the flow")
)

// ErrUnreachable marks transport failures: a refused dial, a failed name
// lookup, a connection reset before the response, or the client's own
// deadline. The underlying error stays wrapped beside it.
var ErrUnreachable = errors.New("workspace API unreachable")

// ErrBadResponse marks a 2xx response the client cannot use: not JSON, not
// the expected shape, or larger than MaxResponseSize.
var ErrBadResponse = errors.New("unexpected response from the workspace API")

// maxAPIErrorBody is how much of an error body APIError keeps for logs.
const maxAPIErrorBody = 512

// APIError is a non-2xx answer of the API.
type APIError struct {
	// Op is one of the Op constants.
	Op     string
	Status int
	// Body is the start of the response body, for logs; it may be cut.
	Body string
}

// Error leaves out Op because callers wrap the error with the operation
// and the resource it was about.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("workspace API answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Is maps Status to ErrBadRequest, ErrUnauthorized, ErrNotFound or ErrTimeout.
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
	}
	return false
}

// truncate returns b as valid UTF-8 of at most about n bytes, marking a cut.
func truncate(b []byte, n int) string {
	cut := len(b) > n
	if cut {
		b = b[:n]
		// Drop a rune split by the cut rather than show a replacement.
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if cut {
		s += "…"
	}
	return s
}

// snippet quotes the start of a body for an error message.
func snippet(b []byte) string {
	return strconv.Quote(truncate(b, 80))
}

// badResponse describes an unusable 2xx body.
func badResponse(problem string, body []byte) error {
	return fmt.Errorf("%w: %s: %s", ErrBadResponse, problem, snippet(body))
}
