package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// probeTimeout bounds check-config -online's request.
const probeTimeout = 10 * time.Second

// probeSession is a session no workspace holds: the probe's chat request
// names it, so the API answers without any agent hearing anything.
const probeSession = "00000000-0000-0000-0000-000000000000"

// probeWorkspace reaches the workspace API as run would and says what is
// wrong when it cannot. The API offers no read-only request, so the probe
// is the cheapest authenticated one that changes nothing: a chat message
// with an empty body to a session that does not exist, in the first
// agent's name. A JSON 400 or 404 means the API was reached and took the
// token; 401 means it refused the token; anything else says where it went
// wrong, naming the key to change.
func probeWorkspace(ctx context.Context, cfg *Config, hc *http.Client) (string, error) {
	if len(cfg.Agents) == 0 {
		return "", errors.New("no agent to probe the workspace with")
	}
	base := strings.TrimRight(cfg.Workspace.BaseURL, "/")
	target := base + "/api/v1/workspaces/" + url.PathEscape(cfg.Workspace.WorkspaceUUID) +
		"/agents/" + url.PathEscape(cfg.Agents[0].UUID) + "/sessions/" + probeSession + "/chat"
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader("{}"))
	if err != nil {
		return "", fmt.Errorf("workspace.base_url: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+cfg.Workspace.APIToken.Value())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "flowbridge/"+version+" (check-config -online)")
	resp, err := hc.Do(req)
	if err != nil {
		return "", probeError(base, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return "", fmt.Errorf("workspace.api_token: the workspace at %s refused the API token (HTTP %d): set the token it issued", base, code)
	case (code == http.StatusBadRequest || code == http.StatusNotFound) && ct == "application/json":
		return fmt.Sprintf("reached %s, which took the API token (HTTP %d to a chat in no session, as expected)", base, code), nil
	case code == http.StatusNotFound || code == http.StatusMethodNotAllowed:
		return "", fmt.Errorf("workspace.base_url: %s answered HTTP %d (%s) to the API's chat path: is it the address of the workspace API, without /api/v1?", base, code, cmp.Or(ct, "no content type"))
	case code == http.StatusTooManyRequests || code >= 500:
		return "", fmt.Errorf("workspace: %s answered HTTP %d: the API is reachable but not serving now; try again later", base, code)
	default:
		return "", fmt.Errorf("workspace: %s answered HTTP %d (%s) to a chat in no session, where the API answers 400 or 404: is workspace.base_url the API's address?", base, code, cmp.Or(ct, "no content type"))
	}
}

// probeError says what a failed probe means, with the key to change.
func probeError(base string, err error) error {
	host := base
	if u, perr := url.Parse(base); perr == nil {
		host = u.Host
	}
	var dnsErr *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return fmt.Errorf("workspace.base_url: no such host %q: the name does not exist; set the address of your workspace's API (the example's workspace.example.com is a placeholder)", dnsErr.Name)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("workspace.base_url: looking up %q failed (%v): check the name and this machine's DNS", dnsErr.Name, dnsErr.Err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("workspace.base_url: connection refused at %s: nothing listens there; check the host and port", host)
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &certErr):
		return fmt.Errorf("workspace.base_url: the TLS certificate of %s is not trusted here: %v", host, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("workspace.base_url: no answer from %s within %s: check the address, and any firewall or proxy between", host, probeTimeout)
	}
	return fmt.Errorf("workspace.base_url: reaching %s: %w", host, err)
}
