package slack

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Slack's published example (docs.slack.dev/authentication/verifying-requests-from-slack),
// as quoted in slackapi/python-slack-sdk's signature verifier test.
const (
	docSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	docTimestamp = "1531420618"
	docBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	docSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestVerifySignature(t *testing.T) {
	docTime := time.Unix(1531420618, 0)
	header := func(ts, sig string) http.Header {
		h := http.Header{}
		if ts != "" {
			h.Set(headerTimestamp, ts)
		}
		if sig != "" {
			h.Set(headerSignature, sig)
		}
		return h
	}
	tests := []struct {
		name   string
		header http.Header
		body   string
		secret string
		now    time.Time
		want   error
	}{
		{"slack example", header(docTimestamp, docSignature), docBody, docSecret, docTime, nil},
		{"4 minutes late", header(docTimestamp, docSignature), docBody, docSecret, docTime.Add(4 * time.Minute), nil},
		{"4 minutes early", header(docTimestamp, docSignature), docBody, docSecret, docTime.Add(-4 * time.Minute), nil},
		{"stale", header(docTimestamp, docSignature), docBody, docSecret, docTime.Add(5*time.Minute + time.Second), errStale},
		{"from the future", header(docTimestamp, docSignature), docBody, docSecret, docTime.Add(-6 * time.Minute), errStale},
		{"body changed", header(docTimestamp, docSignature), docBody + "x", docSecret, docTime, errBadSignature},
		{"wrong secret", header(docTimestamp, docSignature), docBody, "other", docTime, errBadSignature},
		{"no v0 prefix", header(docTimestamp, docSignature[3:]), docBody, docSecret, docTime, errBadSignature},
		{"not hex", header(docTimestamp, "v0=zz"), docBody, docSecret, docTime, errBadSignature},
		{"missing signature", header(docTimestamp, ""), docBody, docSecret, docTime, errMissingHeader},
		{"missing timestamp", header("", docSignature), docBody, docSecret, docTime, errMissingHeader},
		{"timestamp not a number", header("12a", docSignature), docBody, docSecret, docTime, errBadTimestamp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verifySignature(tt.header, []byte(tt.body), tt.secret, tt.now)
			if !errors.Is(err, tt.want) {
				t.Errorf("verifySignature() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSignMatchesSlackExample(t *testing.T) {
	got := "v0=" + hex.EncodeToString(sign(docSecret, docTimestamp, []byte(docBody)))
	if got != docSignature {
		t.Errorf("sign(example) = %s, want %s", got, docSignature)
	}
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set(headerTimestamp, ts)
	h.Set(headerSignature, "v0="+hex.EncodeToString(sign("k", ts, []byte("b"))))
	if err := verifySignature(h, []byte("b"), "k", now); err != nil {
		t.Errorf("verifySignature(fresh) = %v, want nil", err)
	}
}
