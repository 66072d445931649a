package bridge_test

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/flowbridge/flowbridge/bridge"
)

func TestSplitArgs(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"  a  b\tc\n", []string{"a", "b", "c"}, false},
		{`a="b c"`, []string{"a=b c"}, false},
		{`a='b "c"'`, []string{`a=b "c"`}, false},
		{`a="b \"c\" \\ d"`, []string{`a=b "c" \ d`}, false},
		{`a=b\ c`, []string{"a=b c"}, false},
		{`a=“curly quotes”`, []string{"a=curly quotes"}, false},
		{`a=‘single curly’`, []string{"a=single curly"}, false},
		{`a=""`, []string{"a="}, false},
		{`""`, []string{""}, false},
		{"a=\"line1\nline2\"", []string{"a=line1\nline2"}, false},
		{`a="open`, nil, true},
		{`a='open`, nil, true},
		{`trailing\`, []string{`trailing\`}, false},
	}
	for _, tc := range cases {
		got, err := bridge.SplitArgs(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("SplitArgs(%q) error = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if tc.err && !errors.Is(err, bridge.ErrQuote) {
			t.Errorf("SplitArgs(%q) error = %v, want ErrQuote", tc.in, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("SplitArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseFlowArgs(t *testing.T) {
	name, params, err := bridge.ParseFlowArgs(`HealthCheck host=web1 service="nginx proxy" q=a=b`)
	want := map[string]string{"host": "web1", "service": "nginx proxy", "q": "a=b"}
	if err != nil || name != "healthcheck" || !maps.Equal(params, want) {
		t.Errorf("ParseFlowArgs = %q, %v, %v; want healthcheck, %v", name, params, err, want)
	}
	for _, bad := range []string{"f novalue", "f =x", "f a=1 a=2", `f a="x`} {
		if _, _, err := bridge.ParseFlowArgs(bad); err == nil {
			t.Errorf("ParseFlowArgs(%q) = nil error, want one", bad)
		} else if ae := (*bridge.ArgError)(nil); !errors.As(err, &ae) {
			t.Errorf("ParseFlowArgs(%q) error %T, want *ArgError", bad, err)
		}
	}
}

// FuzzParseFlowArgs checks the parser never panics and that any parameters,
// quoted with QuoteArg (as the Discord adapter rebuilds a command line), parse
// back to exactly themselves.
func FuzzParseFlowArgs(f *testing.F) {
	for _, s := range []string{`healthcheck host=web1 service="nginx proxy"`, `a="x\"y"`, `a='b`, "a=“b”", "x=\\", "k=\x00\xff", "k=a\nb"} {
		f.Add(s, "key", "value with \"quotes\" and = and \n")
	}
	f.Fuzz(func(t *testing.T, line, key, value string) {
		_, _, _ = bridge.ParseFlowArgs(line)
		// Invalid UTF-8 is read as U+FFFD, like the rest of the core does.
		if key == "" || !validKey(key) || !utf8.ValidString(value) {
			return
		}
		built := "flow " + bridge.QuoteArg(key+"="+value)
		_, params, err := bridge.ParseFlowArgs(built)
		if err != nil {
			t.Fatalf("ParseFlowArgs(%q) = %v", built, err)
		}
		if params[key] != value || len(params) != 1 {
			t.Fatalf("ParseFlowArgs(%q) = %q, want {%q: %q}", built, params, key, value)
		}
	})
}

func validKey(k string) bool {
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
