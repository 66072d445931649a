package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of Slack's request signing.
const (
	headerTimestamp = "X-Slack-Request-Timestamp"
	headerSignature = "X-Slack-Signature"
)

// maxSkew is Slack's replay window for signed requests.
const maxSkew = 5 * time.Minute

// Reasons a request fails verification; the HTTP handler answers 401 to all.
var (
	errMissingHeader = errors.New("missing signature or timestamp header")
	errBadTimestamp  = errors.New("malformed timestamp")
	errStale         = errors.New("timestamp outside the 5-minute window")
	errBadSignature  = errors.New("signature mismatch")
)

// verifySignature checks Slack's v0 signature of body: HMAC-SHA256 keyed with
// the signing secret over "v0:<timestamp>:<body>", compared in constant time,
// with the timestamp no more than five minutes from now.
func verifySignature(h http.Header, body []byte, secret string, now time.Time) error {
	if err := checkHeaders(h, now); err != nil {
		return err
	}
	ts, sig := h.Get(headerTimestamp), h.Get(headerSignature)
	got, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return errBadSignature
	}
	gotMAC, err := hex.DecodeString(got)
	if err != nil {
		return errBadSignature
	}
	if !hmac.Equal(gotMAC, sign(secret, ts, body)) {
		return errBadSignature
	}
	return nil
}

// checkHeaders checks what can be checked before the body is read: both
// headers are there, the signature has its form and the timestamp is within
// the window. A request failing it is refused before any of its body is read.
func checkHeaders(h http.Header, now time.Time) error {
	ts, sig := h.Get(headerTimestamp), h.Get(headerSignature)
	if ts == "" || sig == "" {
		return errMissingHeader
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errBadTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > maxSkew || d < -maxSkew {
		return errStale
	}
	if len(sig) != len("v0=")+2*sha256.Size || !strings.HasPrefix(sig, "v0=") {
		return errBadSignature
	}
	return nil
}

func sign(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return m.Sum(nil)
}
