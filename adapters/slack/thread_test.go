package slack

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCappedTransportStopsReading: an answer over the limit is refused as
// its bytes arrive, whether or not it declares its length, and no further
// than one byte past the limit is read.
func TestCappedTransportStopsReading(t *testing.T) {
	const limit = 1000
	for _, tt := range []struct {
		name     string
		declared bool
		size     int
		wantErr  bool
	}{
		{"within, declared", true, limit, false},
		{"within, chunked", false, limit, false},
		{"over, declared", true, 10 * limit, true},
		{"over, chunked", false, 1 << 20, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.declared {
					w.Header().Set("Content-Length", strconv.Itoa(tt.size))
				}
				for sent := 0; sent < tt.size; sent += 100 {
					if _, err := io.WriteString(w, strings.Repeat("x", min(100, tt.size-sent))); err != nil {
						return
					}
					if f, ok := w.(http.Flusher); ok && !tt.declared {
						f.Flush()
					}
				}
			}))
			defer srv.Close()
			counted := &countingTransport{base: srv.Client().Transport}
			c := &http.Client{Transport: cappedTransport{base: counted, max: limit}}
			resp, err := c.Get(srv.URL)
			var body []byte
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if got := errors.Is(err, errPageTooLarge); got != tt.wantErr {
				t.Fatalf("read %d bytes, err = %v; want errPageTooLarge %v", len(body), err, tt.wantErr)
			}
			if !tt.wantErr && len(body) != tt.size {
				t.Errorf("read %d bytes, want %d", len(body), tt.size)
			}
			if n := counted.read.Load(); n > limit+1 {
				t.Errorf("read %d bytes from the server, want at most %d", n, limit+1)
			}
		})
	}
}

func TestParseTS(t *testing.T) {
	for _, tt := range []struct {
		ts   string
		want int64
		ok   bool
	}{
		{"1716212345.000100", 1716212345_000100, true},
		{"1716212345.1", 1716212345_100000, true},
		{"1716212345.1234567", 1716212345_123456, true},
		{"1716212345", 0, false},
		{"x.1", 0, false},
		{"", 0, false},
	} {
		got, ok := parseTS(tt.ts)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseTS(%q) = %d, %v; want %d, %v", tt.ts, got, ok, tt.want, tt.ok)
		}
		if ok && parseBack(t, got) != got {
			t.Errorf("formatTS(%d) does not parse back", got)
		}
	}
}

func parseBack(t *testing.T, us int64) int64 {
	t.Helper()
	got, ok := parseTS(formatTS(us))
	if !ok {
		t.Fatalf("formatTS(%d) = %q does not parse", us, formatTS(us))
	}
	return got
}

func TestLabelMentions(t *testing.T) {
	names := map[string]string{"U0CAROL": "Carol", "U0EVE": "Eve <ops>"}
	for _, tt := range []struct{ in, want string }{
		{"cc <@U0CAROL>", "cc @Carol"},
		{"<@U0CAROL> and <@U0DAVE>", "@Carol and @U0DAVE"},
		{"<@U0CAROL|carol.s> said", "@carol.s said"},
		{"<@U0EVE>: <!here>", "@Eve <ops>: @here"},
		{"<@UBOT> hi <@U0CAROL", "hi <@U0CAROL"},
		{"a <@> b", "a @ b"},
	} {
		if got := inboundText(labelMentions(tt.in, names), "UBOT"); got != tt.want {
			t.Errorf("inboundText(labelMentions(%q)) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got, want := mentionedUsers("<@U1> <@U2|two> <#C1> <@U3>"), []string{"U1", "U3"}; !slices.Equal(got, want) {
		t.Errorf("mentionedUsers() = %q, want %q", got, want)
	}
}
