// Package workspace is the HTTP client of the AI workspace API described in workspace-api.md.
//
// A request is sent again only where the API provably did not act on it. A
// flow run (RunFlowSync) is sent at most once, unless the request never left
// this process (a failed dial or name lookup); a 429 or 503 answer to it comes
// back at once as an *APIError matching ErrRateLimited or ErrUnavailable, with
// its RetryAfter. A chat message (Chat) and a Create Session request may
// in addition be sent again after a 429 whose Retry-After is at most 30 s,
// once that pause has passed; never after a 503, a timeout, or a connection
// that broke once the request may have been written. Every call, its
// attempts, pauses and the reading of the response body included, ends by a
// deadline: ChatTimeout for Chat and CreateSession, the flow's timeout in
// timeout plus FlowMargin (at most MaxFlowMargin) for RunFlowSync.
package workspace

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MaxIdleConns is how many idle connections the client keeps to the API: as
// many as the bridge lets run at once by default, so calls reuse connections.
const MaxIdleConns = 256

// Defaults applied by New to zero fields of Config.
const (
	// DefaultCreateSessionPath is a guess: the API document names Create
	// Session but does not show its method, path or payload.
	DefaultCreateSessionPath = "/api/v1/workspaces/{workspace_uuid}/agents/{agent_uuid}/sessions"
	DefaultUserAgent         = "flowbridge/dev"
	DefaultChatTimeout       = 120 * time.Second
	DefaultFlowMargin        = MaxFlowMargin
	DefaultMaxRetries        = 2
	// MaxFlowMargin bounds Config.FlowMargin, so that a flow run, however
	// the API answers (hanging past the timeout it was given, dripping its
	// body), ends within its timeout plus at most a second.
	MaxFlowMargin = time.Second
	// DefaultFlowTimeout is the API's own wait when no timeout is sent.
	DefaultFlowTimeout = 60 * time.Second
	// MaxResponseSize bounds every response body the client reads.
	MaxResponseSize = 8 << 20
)

// Operation names passed to Config.Observe and stored in APIError.Op.
const (
	OpRunFlow       = "run_flow"
	OpChat          = "chat"
	OpCreateSession = "create_session"
)

const (
	// maxRetryAfter bounds how long the client honours a Retry-After; a
	// server asking for longer is answered with its own error at once.
	maxRetryAfter = 30 * time.Second
	// dialBackoff is the first pause before re-dialling; it doubles.
	dialBackoff = 100 * time.Millisecond
	// maxErrorBody is how much of a non-2xx body is read; APIError keeps less.
	maxErrorBody = 4 << 10
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API's scheme and host, with an optional path prefix,
	// but without the /api/v1 part, e.g. "https://ws.example.com".
	BaseURL       string
	WorkspaceUUID string
	// Token is sent only as "Authorization: Bearer", never in a URL.
	Token string
	// CreateSessionPath is a template with {workspace_uuid} and
	// {agent_uuid}; default DefaultCreateSessionPath.
	CreateSessionPath string
	// UserAgent defaults to DefaultUserAgent; cmd passes "flowbridge/<version>".
	UserAgent string
	// HTTPClient is optional; only its Transport is used, so tests can
	// inject an in-memory RoundTripper. It is never modified.
	HTTPClient *http.Client
	// ChatTimeout is the deadline of a whole Chat or CreateSession call,
	// every attempt, pause and body read included; default DefaultChatTimeout.
	ChatTimeout time.Duration
	// FlowMargin is added to a flow's timeout, rounded up to whole seconds,
	// for the deadline of a whole RunFlowSync call, so the API's 408 arrives
	// first; default DefaultFlowMargin, at most MaxFlowMargin.
	FlowMargin time.Duration
	// MaxRetries bounds how many times a call is sent again: after a dial
	// that failed (any call), or after a 429 with a Retry-After of at most
	// 30 s (Chat and CreateSession only); 0 means DefaultMaxRetries,
	// negative means none.
	MaxRetries int
	// Observe, when set, is called after every HTTP attempt, e.g. for
	// metrics; op is one of the Op constants, status is 0 for transport errors.
	Observe func(op string, status int, elapsed time.Duration)
}

// Client calls the AI workspace API. It is safe for concurrent use.
type Client struct {
	baseURL           string
	workspacePath     string // "/api/v1/workspaces/<escaped uuid>"
	workspaceUUID     string
	authorization     string // "Bearer <token>", or "" for no token: built once, not per request
	createSessionPath string
	userAgent         string
	hc                *http.Client
	chatTimeout       time.Duration
	flowMargin        time.Duration
	maxRetries        int
	observe           func(op string, status int, elapsed time.Duration)
}

// New returns a Client for cfg. It validates the configuration and opens no connection.
func New(cfg Config) (*Client, error) {
	var problems []error
	base, err := parseBaseURL(cfg.BaseURL)
	if err != nil {
		problems = append(problems, err)
	}
	if cfg.WorkspaceUUID == "" {
		problems = append(problems, errors.New("workspace UUID is empty"))
	}
	sessionPath := cfg.CreateSessionPath
	if sessionPath == "" {
		sessionPath = DefaultCreateSessionPath
	}
	if !strings.HasPrefix(sessionPath, "/") || !strings.Contains(sessionPath, "{agent_uuid}") {
		problems = append(problems, fmt.Errorf("create session path %q must start with / and contain {agent_uuid}", sessionPath))
	}
	if cfg.ChatTimeout < 0 || cfg.FlowMargin < 0 {
		problems = append(problems, errors.New("chat timeout and flow margin must not be negative"))
	}
	if cfg.FlowMargin > MaxFlowMargin {
		problems = append(problems, fmt.Errorf("flow margin %s is longer than %s", cfg.FlowMargin, MaxFlowMargin))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("workspace client: %w", errors.Join(problems...))
	}

	c := &Client{
		baseURL:           base,
		workspacePath:     "/api/v1/workspaces/" + url.PathEscape(cfg.WorkspaceUUID),
		workspaceUUID:     cfg.WorkspaceUUID,
		authorization:     bearer(cfg.Token),
		createSessionPath: sessionPath,
		userAgent:         cmp.Or(cfg.UserAgent, DefaultUserAgent),
		chatTimeout:       cmp.Or(cfg.ChatTimeout, DefaultChatTimeout),
		flowMargin:        cmp.Or(cfg.FlowMargin, DefaultFlowMargin),
		maxRetries:        cfg.MaxRetries,
		observe:           cfg.Observe,
	}
	switch {
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	case c.maxRetries < 0:
		c.maxRetries = 0
	}
	var transport http.RoundTripper
	if cfg.HTTPClient != nil {
		transport = cfg.HTTPClient.Transport
	}
	if transport == nil {
		// A private clone keeps our connection pool and settings out of
		// the process-wide default.
		t := http.DefaultTransport.(*http.Transport).Clone()
		// The default keeps 2 idle connections per host; with hundreds of
		// calls in flight every other call would dial anew.
		t.MaxIdleConnsPerHost = MaxIdleConns
		t.MaxIdleConns = MaxIdleConns
		transport = t
	}
	c.hc = &http.Client{
		Transport: transport,
		// A redirected POST loses its body or its method; surface the 3xx
		// as an APIError instead of following it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

func parseBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return "", errors.New("base URL is empty")
	case err != nil:
		return "", fmt.Errorf("base URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("base URL %q: scheme must be http or https", raw)
	case u.Host == "":
		return "", fmt.Errorf("base URL %q has no host", raw)
	case u.User != nil:
		return "", fmt.Errorf("base URL must not carry credentials; use the API token")
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("base URL %q must not have a query or fragment", raw)
	}
	base := strings.TrimRight(u.String(), "/")
	if strings.HasSuffix(base, "/api/v1") {
		return "", fmt.Errorf("base URL %q must not end in /api/v1: the client adds it", raw)
	}
	return base, nil
}

// request is one API call; its attempts share everything, the deadline included.
type request struct {
	op    string
	path  string // already escaped
	query string // already encoded, without "?"
	body  []byte
	// timeout bounds the whole call: every attempt, pause and body read.
	timeout time.Duration
	// resendOn429 allows sending the request again after a 429 with a
	// short Retry-After: the API said it did not take it. Never for a
	// flow run, whose effects may not be repeatable.
	resendOn429 bool
}

// do sends r and returns the body of a 2xx response. It sends r again only
// when the API provably did not act on it: the dial failed, or (with
// r.resendOn429) the API answered 429 with a Retry-After within
// maxRetryAfter that ends before the call's deadline.
func (c *Client) do(ctx context.Context, r request) ([]byte, error) {
	dctx, cancel := context.WithTimeoutCause(ctx, r.timeout, errClientDeadline)
	defer cancel()
	for attempt := 0; ; attempt++ {
		body, wait, err := c.attempt(ctx, dctx, r, attempt)
		if err == nil {
			return body, nil
		}
		if wait < 0 || attempt >= c.maxRetries {
			return nil, err
		}
		if deadline, ok := dctx.Deadline(); ok && time.Until(deadline) <= wait {
			// The pause would outlast the call: answer now, not at the deadline.
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-dctx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w while waiting to retry after: %v", callerError(ctx), err)
			}
			return nil, err
		}
	}
}

// bearer is the Authorization header's value for token, "" for none.
func bearer(token string) string {
	if token == "" {
		return ""
	}
	return "Bearer " + token
}

// attempt sends r once under dctx, the call's deadline derived from the
// caller's ctx. wait >= 0 means the request may be sent again after that
// pause because it provably was not acted on.
func (c *Client) attempt(ctx, dctx context.Context, r request, n int) (body []byte, wait time.Duration, err error) {
	target := c.baseURL + r.path
	if r.query != "" {
		target += "?" + r.query
	}
	req, err := http.NewRequestWithContext(dctx, http.MethodPost, target, bytes.NewReader(r.body))
	if err != nil {
		return nil, -1, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.authorization != "" {
		req.Header.Set("Authorization", c.authorization)
	}

	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		c.report(r.op, 0, start)
		err = transportError(ctx, dctx, r.timeout, err)
		if ctx.Err() == nil && dctx.Err() == nil && neverSent(err) {
			return nil, dialBackoff << n, err
		}
		return nil, -1, err
	}
	// The deadline bounds the body read too: closing the body when it
	// passes ends a read in progress whatever the transport, even one
	// whose body does not watch the request's context.
	var once sync.Once
	closeBody := func() { once.Do(func() { resp.Body.Close() }) }
	stop := context.AfterFunc(dctx, closeBody)
	defer func() {
		stop()
		closeBody()
	}()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		c.report(r.op, resp.StatusCode, start)
		apiErr := &APIError{Op: r.op, Status: resp.StatusCode, Body: errorText(data, maxAPIErrorBody)}
		retryAfter, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		if ok {
			apiErr.RetryAfter = retryAfter
		}
		if r.resendOn429 && resp.StatusCode == http.StatusTooManyRequests && ok && retryAfter <= maxRetryAfter {
			return nil, retryAfter, apiErr
		}
		return nil, -1, apiErr
	}

	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	c.report(r.op, resp.StatusCode, start)
	if err != nil {
		return nil, -1, transportError(ctx, dctx, r.timeout, err)
	}
	if len(data) > MaxResponseSize {
		return nil, -1, fmt.Errorf("%w: status %d with a body larger than %d MiB", ErrBadResponse, resp.StatusCode, MaxResponseSize>>20)
	}
	return data, -1, nil
}

func (c *Client) report(op string, status int, start time.Time) {
	if c.observe != nil {
		c.observe(op, status, time.Since(start))
	}
}

// errClientDeadline is the cause of a call's context that ran out.
var errClientDeadline = errors.New("client deadline")

// transportError classifies err from sending a request or reading its
// response: the caller's own cancellation stays recognisable, anything
// else is ErrUnreachable while keeping the underlying error.
func transportError(ctx, dctx context.Context, limit time.Duration, err error) error {
	if ctx.Err() != nil {
		return callerError(ctx)
	}
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		err = uerr.Err
	}
	if errors.Is(context.Cause(dctx), errClientDeadline) {
		return fmt.Errorf("%w: no complete response within %s: %w", ErrUnreachable, limit, context.DeadlineExceeded)
	}
	if notSent(err) && badAddress(err) {
		return fmt.Errorf("%w: %w: %w: %w", ErrUnreachable, ErrNotSent, ErrBadAddress, err)
	}
	if notSent(err) {
		return fmt.Errorf("%w: %w: %w", ErrUnreachable, ErrNotSent, err)
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, err)
}

// badAddress reports whether err, a request that was not sent, says the
// address leads nowhere: no such host, or connection refused.
func badAddress(err error) bool {
	if dnsErr, ok := errors.AsType[*net.DNSError](err); ok && dnsErr.IsNotFound {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// notSent reports whether err proves the request never left: a failed dial
// or name lookup of any kind.
func notSent(err error) bool {
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	opErr, ok := errors.AsType[*net.OpError](err)
	return ok && opErr.Op == "dial"
}

// callerError is the error for a ctx the caller ended, satisfying
// errors.Is with context.Canceled or context.DeadlineExceeded and, when
// different, with the cause.
func callerError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// neverSent reports whether err proves the request never left this
// process: a failed dial or name lookup. Anything later (a reset, a
// timeout after the request was written) may have reached the API.
func neverSent(err error) bool {
	if dnsErr, ok := errors.AsType[*net.DNSError](err); ok {
		// An unknown name will not appear within a retry's pause.
		return !dnsErr.IsNotFound
	}
	opErr, ok := errors.AsType[*net.OpError](err)
	return ok && opErr.Op == "dial"
}

// parseRetryAfter reads a Retry-After value in delay-seconds or HTTP-date
// form relative to now.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second, true
	}
	if v[0] >= '0' && v[0] <= '9' {
		// Too large for uint32 or not an integer: not a delay we honour.
		return 0, false
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
