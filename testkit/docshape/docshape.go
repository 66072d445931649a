// Package docshape checks JSON payloads against tables of the fields a platform documents, for the fakes' tests: a fake looser than the platform hides bugs.
package docshape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A shape lists the fields a platform documents for a payload and always sends. Each field is
// "name:type"; a name ending in "?" may be absent (but, when present, is checked), and type
// is one of
//
//	string, int, number, bool, object, any   a JSON value of that kind (any: not null)
//	?T                                       present, null or T
//	[]T                                      an array, never null, of T
//	NAME                                     an object checked against the shape NAME
//
// variant adds shapes that apply to the same object, chosen by its content (an event by
// its type, a conversation by its kind).
type Shape struct {
	Doc     string
	Fields  []string
	Variant func(obj map[string]any) []string
}

// Checker checks payloads against a shape table and collects what is wrong.
type Checker struct {
	shapes map[string]Shape
	// never are the names of every field the table requires to be an array or an object:
	// no payload may carry them as null, wherever they appear.
	never map[string]bool
	errs  []string
	// seen counts the shapes checked, to report coverage.
	seen map[string]int
}

// New returns a Checker for a table of shapes.
func New(shapes map[string]Shape) *Checker {
	c := &Checker{shapes: shapes, never: map[string]bool{}, seen: map[string]int{}}
	for _, sh := range shapes {
		for _, f := range sh.Fields {
			name, typ, _ := strings.Cut(f, ":")
			if strings.HasPrefix(typ, "?") {
				continue
			}
			switch typ {
			case "string", "int", "number", "bool", "any":
			default:
				c.never[strings.TrimSuffix(name, "?")] = true
			}
		}
	}
	return c
}

// Fail records a problem.
func (c *Checker) Fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// Check checks v, found at where, against each of the shapes, and scans it once for
// forbidden nulls.
func (c *Checker) Check(where string, v any, shapes ...string) {
	for _, name := range shapes {
		c.value(where, name, v)
	}
	c.nulls(where, v)
}

func (c *Checker) value(where, typ string, v any) {
	if rest, ok := strings.CutPrefix(typ, "?"); ok {
		if v == nil {
			return
		}
		typ = rest
	}
	if v == nil {
		c.Fail("%s is null, want %s", where, typ)
		return
	}
	ok := true
	switch {
	case strings.HasPrefix(typ, "[]"):
		arr, isArr := v.([]any)
		ok = isArr
		for i, e := range arr {
			c.value(fmt.Sprintf("%s[%d]", where, i), typ[2:], e)
		}
	case typ == "string":
		_, ok = v.(string)
	case typ == "int":
		f, isNum := v.(float64)
		ok = isNum && f == math.Trunc(f)
	case typ == "number":
		_, ok = v.(float64)
	case typ == "bool":
		_, ok = v.(bool)
	case typ == "object":
		_, ok = v.(map[string]any)
	case typ == "any":
	default:
		obj, isObj := v.(map[string]any)
		ok = isObj
		if isObj {
			c.object(where, typ, obj)
		}
	}
	if !ok {
		c.Fail("%s = %v (%T), want %s", where, v, v, typ)
	}
}

func (c *Checker) object(where, name string, obj map[string]any) {
	sh, ok := c.shapes[name]
	if !ok {
		c.Fail("%s: no shape %q in the table", where, name)
		return
	}
	c.seen[name]++
	for _, f := range sh.Fields {
		key, typ, _ := strings.Cut(f, ":")
		key, optional := strings.CutSuffix(key, "?")
		v, present := obj[key]
		if !present {
			if !optional {
				c.Fail("%s.%s missing (%s: %s)", where, key, name, sh.Doc)
			}
			continue
		}
		c.value(where+"."+key, typ, v)
	}
	if sh.Variant != nil {
		for _, n := range sh.Variant(obj) {
			c.object(where, n, obj)
		}
	}
}

// nulls reports every field named in never that is null, at any depth.
func (c *Checker) nulls(where string, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if v[k] == nil && c.never[k] {
				c.Fail("%s.%s is null, want an array or object", where, k)
			}
			c.nulls(where+"."+k, v[k])
		}
	case []any:
		for i, e := range v {
			c.nulls(fmt.Sprintf("%s[%d]", where, i), e)
		}
	}
}

// Errs returns the problems found so far.
func (c *Checker) Errs() []string { return slices.Clone(c.errs) }

// Seen returns how often each shape was checked, to report coverage.
func (c *Checker) Seen() map[string]int { return c.seen }

// Exchange is one HTTP request and the answer a fake sent, as the client saw it.
type Exchange struct {
	Method, Path string
	Status       int
	Body         []byte
}

// Recorder is an http.RoundTripper that keeps every answer it passes on.
type Recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	got  []Exchange
}

// NewRecorder records what base answers.
func NewRecorder(base http.RoundTripper) *Recorder { return &Recorder{base: base} }

// RoundTrip implements http.RoundTripper.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.got = append(r.got, Exchange{Method: req.Method, Path: req.URL.EscapedPath(), Status: resp.StatusCode, Body: body})
	r.mu.Unlock()
	return resp, nil
}

// Exchanges returns what was recorded, in order.
func (r *Recorder) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// DecodeJSON decodes raw, reporting where it is when it is not JSON.
func DecodeJSON(t testing.TB, where string, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("%s: not JSON: %v: %s", where, err, raw)
		return nil
	}
	return v
}

// Tap reads every frame of a websocket connection, as sent, until the test ends.
type Tap struct {
	ws     *websocket.Conn
	mu     sync.Mutex
	frames [][]byte
	more   chan struct{} // closed and replaced on each frame
	done   chan struct{}
}

// NewTap reads ws in the background; reply, when set, answers each frame
// (a Socket Mode ack) and ends the reading when it fails. The connection is
// closed and the reader waited for when t ends.
func NewTap(t testing.TB, ws *websocket.Conn, reply func(ws *websocket.Conn, frame []byte) error) *Tap {
	tap := &Tap{ws: ws, more: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tap.done)
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if reply != nil && reply(ws, data) != nil {
				return
			}
			tap.mu.Lock()
			tap.frames = append(tap.frames, data)
			close(tap.more)
			tap.more = make(chan struct{})
			tap.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ws.Close()
		<-tap.done
	})
	return tap
}

// Wait waits up to 10 s for a frame that match accepts; what names it in the failure.
func (tap *Tap) Wait(t testing.TB, what string, match func(frame []byte) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		tap.mu.Lock()
		more := tap.more
		for _, f := range tap.frames {
			if match(f) {
				tap.mu.Unlock()
				return
			}
		}
		tap.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("no %s within 10s", what)
		}
	}
}

// All returns the frames read so far.
func (tap *Tap) All() [][]byte {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return slices.Clone(tap.frames)
}

// WriteJSON sends v on the tapped connection. Only for taps without a reply
// func: a websocket takes one writer at a time.
func (tap *Tap) WriteJSON(v any) error { return tap.ws.WriteJSON(v) }
