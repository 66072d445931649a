package slack

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/flowbridge/flowbridge/testkit/slacktest"
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

// TestReadThreadEndIsTheEnd: however a thread's replies are spread in time
// (even, bursts, lulls, a burst at the start or at the end), what is read
// before a mention is the messages just before it, in order, none missing
// between them and it, at most the wanted number, within maxThreadCalls
// calls; and for most threads, all the wanted ones.
func TestReadThreadEndIsTheEnd(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	s := slacktest.NewServer(slacktest.Options{Now: clock.Now})
	t.Cleanup(s.Close)
	a, err := New(e2eConfig(s), idleCore{t}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	const want = 20
	rng := rand.New(rand.NewPCG(33, 1))
	short := 0
	start := clock.Now()
	for round := range 40 {
		// Each round a day after the last: Tier 3's 50 calls a minute are not the subject.
		start = start.Add(24 * time.Hour)
		clock.Set(start)
		root := s.AddThreadMessage(slacktest.ThreadMessage{Channel: e2eChannel, User: "U0ALICE", Text: "root"})
		n := 1 + rng.IntN(600)
		at := start
		var ts []string
		for i := 1; i <= n; i++ {
			// Gaps from a microsecond to days, in runs of one kind.
			switch rng.IntN(4) {
			case 0:
				at = at.Add(time.Duration(1+rng.IntN(1000)) * time.Microsecond)
			case 1:
				at = at.Add(time.Duration(1+rng.IntN(60)) * time.Second)
			case 2:
				at = at.Add(time.Duration(1+rng.IntN(600)) * time.Minute)
			default:
				if rng.IntN(20) == 0 {
					at = at.Add(time.Duration(1+rng.IntN(30)) * 24 * time.Hour)
				} else {
					at = at.Add(time.Millisecond)
				}
			}
			clock.Set(at)
			ts = append(ts, s.AddThreadMessage(slacktest.ThreadMessage{Channel: e2eChannel, ThreadTS: root, User: "U0BOB", Text: fmt.Sprintf("reply %d", i)}))
		}
		clock.Set(at.Add(time.Second))
		start = at
		mention := s.AddThreadMessage(slacktest.ThreadMessage{Channel: e2eChannel, ThreadTS: root, User: "U0DAVE", Text: "and?"})
		before := s.CallCount("conversations.replies")
		end, err := a.readThreadEnd(t.Context(), route{Channel: e2eChannel, ContextOf: root, UserTS: mention}, want)
		if err != nil {
			t.Fatalf("round %d (%d replies): %v", round, n, err)
		}
		if calls := s.CallCount("conversations.replies") - before; calls > maxThreadCalls {
			t.Errorf("round %d: %d calls, want at most %d", round, calls, maxThreadCalls)
		}
		all := append([]string{root}, ts...)
		got := make([]string, len(end.msgs))
		for i, m := range end.msgs {
			got[i] = m.Timestamp
		}
		if len(got) > want || !slices.Equal(got, all[len(all)-len(got):]) {
			t.Fatalf("round %d (%d replies): read %d messages that are not the thread's last before the mention", round, n, len(got))
		}
		if len(got) < min(want, len(all)) {
			short++
		}
		if wantLeft := len(all) - len(got); len(got) > 0 && end.leftOut != wantLeft {
			t.Errorf("round %d: left out %d, want %d", round, end.leftOut, wantLeft)
		}
	}
	t.Logf("%d of 40 threads read short", short)
	if short > 4 {
		t.Errorf("%d of 40 threads read short of the %d wanted, want at most 4", short, want)
	}
}
