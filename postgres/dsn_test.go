package postgres

import (
	"strings"
	"testing"
)

// TestDSNErrorsNameNoPassword: a DSN that does not parse is refused, by Open
// and Describe alike, with pgx's reason and without the password, also in
// the forms pgx cannot mask (key = value with spaces).
func TestDSNErrorsNameNoPassword(t *testing.T) {
	const pw = "s3cret-Pa55"
	tests := []struct {
		dsn, reason string
	}{
		{"postgres://u:" + pw + "@host:badport/db", "invalid port"},
		{"host=x password = " + pw + " port=abc", "invalid port"},
		{"host=x password = '" + pw + "' port=abc", "invalid port"},
		{"host=x password = " + pw + " cret port=abc", "keyword/value"},
		{"postgres://u@h/db?password=" + pw + "&sslmode=bogus", "sslmode is invalid"},
		{"postgres://u:" + pw + "@h/db?pool_max_conns=x", "pool_max_conns"},
	}
	for _, tt := range tests {
		_, derr := Describe(tt.dsn)
		_, oerr := Open(t.Context(), tt.dsn, Options{})
		for name, err := range map[string]error{"Describe": derr, "Open": oerr} {
			switch {
			case err == nil:
				t.Errorf("%s(a DSN with %s) = nil, want an error", name, tt.reason)
			case strings.Contains(err.Error(), pw):
				t.Errorf("%s(a DSN with %s) = %v: it shows the password", name, tt.reason, err)
			case !strings.Contains(err.Error(), tt.reason):
				t.Errorf("%s(a DSN with %s) = %v, want the reason", name, tt.reason, err)
			}
		}
	}
}

func TestDescribe(t *testing.T) {
	got, err := Describe("postgres://flow:s3cret@db.internal:6543/bridge?sslmode=disable")
	if want := "flow@db.internal:6543/bridge"; err != nil || got != want {
		t.Errorf("Describe = %q, %v, want %q", got, err, want)
	}
}
