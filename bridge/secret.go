package bridge

// Secret holds a credential. Its String, GoString and text and JSON marshalling
// all redact, so no log line, error or config dump can print it by accident;
// only Value gives it out, at the one place that must send it.
type Secret string

const redacted = "[redacted]"

// Value returns the secret itself.
func (s Secret) Value() string { return string(s) }

// IsZero reports whether no secret is set.
func (s Secret) IsZero() bool { return s == "" }

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString redacts under %#v too.
func (s Secret) GoString() string { return s.String() }

// MarshalText redacts, which also covers JSON and zap's reflection encoders.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a secret from config text.
func (s *Secret) UnmarshalText(b []byte) error {
	*s = Secret(b)
	return nil
}
