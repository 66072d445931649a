package slack

import (
	"fmt"
	"net/url"
	"strings"
)

// Bounds on the platform identifiers an event may carry. Slack's IDs are a
// letter and a few upper-case letters and digits (T0123ABCD, C…, D…, U…),
// about eleven characters today; the bounds leave room for growth while
// keeping a hostile or broken payload from naming conversations, sessions
// and inbox keys of any size.
const (
	maxIDLen      = 32   // team, channel, user
	maxTSLen      = 32   // "1716212345.000100"
	maxTriggerLen = 128  // "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	maxURLLen     = 2048 // response_url
	maxActionID   = 255  // Slack's limit on action_id
	maxValueLen   = 2000 // Slack's limit on a button's value
)

// invalidFieldError names the field of a payload that is not a well-formed
// Slack identifier. Its text never carries the value itself, which may be
// tens of kilobytes.
type invalidFieldError struct {
	field string
	size  int
}

func (e *invalidFieldError) Error() string {
	return fmt.Sprintf("%s is not a Slack identifier (%d bytes)", e.field, e.size)
}

// field is one value of a payload with the form it must have.
type field struct {
	name  string
	value string
	valid func(string) bool
}

// checkFields returns an *invalidFieldError for the first field whose value
// does not have its form, or nil.
func checkFields(fields ...field) error {
	for _, f := range fields {
		if !f.valid(f.value) {
			return &invalidFieldError{field: f.name, size: len(f.value)}
		}
	}
	return nil
}

// optional accepts "" besides what valid accepts.
func optional(valid func(string) bool) func(string) bool {
	return func(s string) bool { return s == "" || valid(s) }
}

// isID accepts a Slack object ID: upper-case letters and digits.
func isID(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// isTS accepts a message timestamp: digits, a dot, digits.
func isTS(s string) bool {
	if len(s) > maxTSLen {
		return false
	}
	sec, frac, ok := strings.Cut(s, ".")
	return ok && digits(sec) && digits(frac)
}

// isTrigger accepts a trigger_id: digits, letters and dots.
func isTrigger(s string) bool {
	if s == "" || len(s) > maxTriggerLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '.' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// isResponseURL accepts an absolute http(s) URL of bounded length.
func isResponseURL(s string) bool {
	if len(s) > maxURLLen {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// shorterThan accepts strings of at most n bytes.
func shorterThan(n int) func(string) bool {
	return func(s string) bool { return len(s) <= n }
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
