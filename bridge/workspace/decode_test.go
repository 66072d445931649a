package workspace

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"meta":{"status":"SUCCESS"},"result":{"output":{"response":"ok"}}}`,
		`{"meta":{"agent_uuid":"a","message":"Message sent","start_at":1716212345123456789,"status":"SUBMITTED"},"result":{"output":"hi"}}`,
		`{"result":{"session_uuid":"s"}}`,
		`{"result":{"session_uuid":"6BA7B810-9DAD-11D1-80B4-00C04FD430C8"}}`,
		`{"meta":{"status":"FAILED","message":"disk full"},"result":{"error":{"code":5}}}`,
		`{"result":{"output":null}}`,
		`{"meta":{"start_at":1e400}}`,
		`<html>`,
		`{"result":`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if run, err := decodeFlowRun(data); err == nil {
			if !json.Valid(run.Output) {
				t.Errorf("decodeFlowRun(%q).Output = %q, not JSON", data, run.Output)
			}
			// A blank status (spaces only) is no claim either way.
			if s := strings.TrimSpace(run.Status); s != "" && !strings.EqualFold(s, "SUCCESS") {
				t.Errorf("decodeFlowRun(%q) succeeded with status %q", data, run.Status)
			}
			run.Response()
		} else if fe, ok := errors.AsType[*FlowFailedError](err); ok {
			if len(fe.Message) > maxFailureMessage+len("…") || fe.Status == "" {
				t.Errorf("decodeFlowRun(%q) = %#v, want a status and a short message", data, fe)
			}
		} else if !errors.Is(err, ErrBadResponse) {
			t.Errorf("decodeFlowRun(%q) = %v, want ErrBadResponse or a FlowFailedError", data, err)
		}
		if reply, err := decodeChatReply(data); err == nil {
			if s := strings.TrimSpace(reply.Status); s != "" && !strings.EqualFold(s, "SUBMITTED") {
				t.Errorf("decodeChatReply(%q) succeeded with status %q", data, reply.Status)
			}
		} else if !errors.Is(err, ErrBadResponse) && !errors.Is(err, ErrChatFailed) {
			t.Errorf("decodeChatReply(%q) = %v, want ErrBadResponse or ErrChatFailed", data, err)
		}
		if id, err := decodeSessionUUID(data); err == nil {
			if canonical, ok := ValidSessionID(id); !ok || canonical != id {
				t.Errorf("decodeSessionUUID(%q) = %q, not a canonical lower-case UUID", data, id)
			}
		} else if !errors.Is(err, ErrBadResponse) || len(err.Error()) > 1000 {
			// Quoted snippets of the body may escape every byte: 80 bytes
			// can take 320.
			t.Errorf("decodeSessionUUID(%q) = %.1000v, want a short ErrBadResponse", data, err)
		}
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2024, 5, 20, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"0", 0, true},
		{"7", 7 * time.Second, true},
		{" 30 ", 30 * time.Second, true},
		{"Mon, 20 May 2024 12:00:10 GMT", 10 * time.Second, true},
		{"Monday, 20-May-24 12:01:00 GMT", time.Minute, true},
		{"Mon, 20 May 2024 11:00:00 GMT", 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"99999999999999999999", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v, want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"0", "120", "Mon, 20 May 2024 12:00:10 GMT", "4294967296", "x"} {
		f.Add(seed)
	}
	now := time.Date(2024, 5, 20, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d, ok := parseRetryAfter(v, now); d < 0 || (!ok && d != 0) {
			t.Errorf("parseRetryAfter(%q) = %v, %v, want a non-negative delay", v, d, ok)
		}
	})
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"  padded\n", 20, "padded"},
		{"abcdef", 5, "ab…"},
		{"ééé", 5, "é…"},                 // a split rune is dropped, not mangled
		{"\xff\xfe ok", 20, "\uFFFD ok"}, // a run of bad bytes becomes one mark
	}
	for _, tt := range tests {
		if got := errorText([]byte(tt.in), tt.n); got != tt.want {
			t.Errorf("errorText(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
