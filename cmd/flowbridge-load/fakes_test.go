package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
	"github.com/flowbridge/flowbridge/testkit/slacktest"
)

// TestSlackHotPostLimit: with -slack-post-limit the load run's
// chat.postMessage front takes a burst into one channel, then answers 429
// with Retry-After as slacktest does, and a refused post is not a reply;
// another channel has its own allowance. Without it nothing is refused.
func TestSlackHotPostLimit(t *testing.T) {
	for _, limit := range []bool{true, false} {
		var mu sync.Mutex
		var replies []loadkit.Marker
		hot := newSlackHot("UBOT", "BBOT", func(m loadkit.Marker, _ time.Time) {
			mu.Lock()
			defer mu.Unlock()
			replies = append(replies, m)
		})
		if limit {
			hot.limit = slacktest.NewPostLimiter(0)
		}
		mux := http.NewServeMux()
		hot.register(mux)
		srv := httptest.NewServer(mux)
		post := func(channel string, seq int) *http.Response {
			t.Helper()
			form := url.Values{"channel": {channel}, "text": {loadkit.Marker{Conv: 1, Seq: seq}.String()}}
			res, err := srv.Client().Post(srv.URL+"/api/chat.postMessage", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res
		}
		n := slacktest.DefaultPostBurst
		for i := range n {
			if res := post("C1", i); res.StatusCode != http.StatusOK {
				t.Fatalf("limit %v: post %d of a burst answered %d", limit, i, res.StatusCode)
			}
		}
		res := post("C1", n)
		if limit && (res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1") {
			t.Errorf("post past the burst answered %d, Retry-After %q; want 429 and 1", res.StatusCode, res.Header.Get("Retry-After"))
		}
		if !limit && res.StatusCode != http.StatusOK {
			t.Errorf("without the limit, post past a burst answered %d, want 200", res.StatusCode)
		}
		if res := post("C2", n+1); res.StatusCode != http.StatusOK {
			t.Errorf("limit %v: post into another channel answered %d, want 200", limit, res.StatusCode)
		}
		srv.Close()
		want, refused := n+2, 0
		if limit {
			want, refused = n+1, 1
		}
		if len(replies) != want || int(hot.refused.Load()) != refused {
			t.Errorf("limit %v: %d replies seen, %d refused; want %d and %d", limit, len(replies), hot.refused.Load(), want, refused)
		}
	}
}
