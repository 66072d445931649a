package discord

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
)

// gate holds requests that match until released, reporting each it holds.
type gate struct {
	next    http.RoundTripper
	match   func(r *http.Request, body []byte) bool
	limit   int // how many to hold; 0 means all
	arrived chan string
	release chan struct{}

	mu      sync.Mutex
	held    int
	matched int // requests that matched, held or not
}

// count returns how many requests matched so far.
func (g *gate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.matched
}

func newGate(match func(r *http.Request, body []byte) bool, limit int) *gate {
	return &gate{match: match, limit: limit, arrived: make(chan string, 16), release: make(chan struct{})}
}

func (g *gate) wrap(next http.RoundTripper) http.RoundTripper {
	g.next = next
	return g
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	if g.match(r, body) {
		g.mu.Lock()
		g.matched++
		hold := g.limit == 0 || g.held < g.limit
		if hold {
			g.held++
		}
		g.mu.Unlock()
		if hold {
			g.arrived <- r.URL.Path
			select {
			case <-g.release:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
	}
	return g.next.RoundTrip(r)
}

func receive(t *testing.T, ctx context.Context, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("waiting for a held request: %v", ctx.Err())
		return ""
	}
}

// faults fails the REST requests its rule picks, as an unreachable Discord
// would, and counts the attempts it failed.
type faults struct {
	next http.RoundTripper

	mu     sync.Mutex
	fail   func(*http.Request) error
	failed chan string
}

func newFaults(fail func(*http.Request) error) *faults {
	return &faults{fail: fail, failed: make(chan string, 64)}
}

func (f *faults) wrap(next http.RoundTripper) http.RoundTripper {
	f.next = next
	return f
}

func (f *faults) set(fail func(*http.Request) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

func (f *faults) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail != nil {
		if err := fail(r); err != nil {
			if r.Body != nil {
				r.Body.Close()
			}
			select {
			case f.failed <- r.URL.Path:
			default:
			}
			return nil, err
		}
	}
	return f.next.RoundTrip(r)
}

var errUnreachable = errors.New("dial tcp: connect: connection refused")

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
