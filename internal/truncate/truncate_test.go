package truncate

import (
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestBytes(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 5, "hello"},
		{"hello", 10, "hello"},
		{"hello world", 8, "hello…"},
		{"héllo", 5, "h…"},    // é is two bytes; "hé…" would be six
		{"héllo", 6, "héllo"}, // fits exactly
		{"日本語です", 9, "日本…"},   // three bytes each
		{"😀😀", 7, "😀…"},       // four bytes
		{"😀😀", 6, "…"},        // no rune fits beside the mark
		{"abc", 2, "ab"},      // too small for the mark
		{"日本", 2, ""},         // nor for a rune
		{"abc", 0, ""},
		{"", 0, ""},
	} {
		if got := Bytes(tt.s, tt.n); got != tt.want {
			t.Errorf("Bytes(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func FuzzBytes(f *testing.F) {
	f.Add("héllo wörld, 日本語 😀", 7)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 || !utf8.ValidString(s) {
			return
		}
		got := Bytes(s, n)
		switch {
		case len(got) > n:
			t.Fatalf("Bytes(%q, %d) = %q: %d bytes", s, n, got, len(got))
		case !utf8.ValidString(got):
			t.Fatalf("Bytes(%q, %d) = %q: not UTF-8", s, n, got)
		case len(utf16.Encode([]rune(got))) > n:
			t.Fatalf("Bytes(%q, %d) = %q: more UTF-16 units than the limit", s, n, got)
		case got != s && len(s) <= n:
			t.Fatalf("Bytes(%q, %d) = %q, want it whole", s, n, got)
		}
	})
}
