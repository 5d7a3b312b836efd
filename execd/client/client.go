// Package client is the Go client of execd, the in-box daemon. It is the one
// implementation of box operations (commands, sessions, code, files,
// terminals, ports) that every backend and the server reuse.
//
// A Client is safe for concurrent use. Every method takes a ctx that bounds
// the whole call, streaming included. Errors returned for an execd error
// answer are *APIError.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// Client talks to one execd.
type Client struct {
	base    string
	hc      *http.Client
	token   string
	header  http.Header
	sseOnly bool
	lines   bool
}

// Option configures a Client.
type Option func(*Client)

// WithToken sets the X-EXECD-ACCESS-TOKEN sent with every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHeader adds a header to every request (for example the endpoint
// token of the AstraBox server's proxy).
func WithHeader(key, value string) Option {
	return func(c *Client) {
		if c.header == nil {
			c.header = http.Header{}
		}
		c.header.Set(key, value)
	}
}

// WithEventStream makes execution streams use Server-Sent Events, the
// OpenSandbox encoding, instead of AstraBox's binary frames; output stays
// byte-exact (wire.FramingBytes) unless WithLineFraming is given too.
func WithEventStream() Option { return func(c *Client) { c.sseOnly = true } }

// WithLineFraming makes execution streams use OpenSandbox's own stream:
// Server-Sent Events framed one event per line (wire.FramingLines), where a
// failed shell command ends with its error event. By default the client
// asks for byte-exact output (wire.FramingBytes, or binary frames), which
// resumes by offset and rebuilds the output exactly; with this option,
// Execution.Stdout and Stderr join the lines with "\n" (so a last line
// without one gains it, and "\r\n" becomes "\n"). For measuring and
// testing what the OpenSandbox SDKs see.
func WithLineFraming() Option { return func(c *Client) { c.sseOnly, c.lines = true, true } }

// WithHTTPClient sets the HTTP client (and so the transport) to use.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithDialer makes every connection with dial, whatever the URL's host: for
// a unix socket or a provider's Dial. The URL then only supplies the path.
func WithDialer(dial func(ctx context.Context) (net.Conn, error)) Option {
	return func(c *Client) {
		c.hc = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dial(ctx)
			},
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}}
	}
}

// UnixDialer returns a dial function for WithDialer that connects to path.
func UnixDialer(path string) func(ctx context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
}

// New returns a Client for the execd at baseURL (for example
// "http://127.0.0.1:44772", or "http://execd" with WithDialer).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
	}}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL is the URL the client was made with.
func (c *Client) BaseURL() string { return c.base }

// HTTPClient is the HTTP client used, which reaches the box.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// Token is the access token sent, if any.
func (c *Client) Token() string { return c.token }

// APIError is an error answer from execd.
type APIError struct {
	Status  int
	Code    sandbox.Code
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("execd: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// CodeOf returns the execd error code of err, or "" when err is no APIError.
func CodeOf(err error) sandbox.Code {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// request is one HTTP call.
type request struct {
	method      string
	path        string
	query       url.Values
	body        io.Reader
	contentType string
	header      http.Header
	// contentLength, when set, is the exact body length (else chunked).
	contentLength *int64
}

// do sends req and returns the response for a 2xx status; any other status
// becomes an *APIError and the body is closed. The caller closes the body.
func (c *Client) do(ctx context.Context, req request) (*http.Response, error) {
	u := c.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, req.body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	c.setAuth(hr.Header)
	for k, vs := range req.header {
		hr.Header[k] = vs
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	if req.contentLength != nil {
		hr.ContentLength = *req.contentLength
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var er wire.ErrorResponse
	if json.Unmarshal(body, &er) != nil || er.Code == "" {
		er = wire.ErrorResponse{Code: string(sandbox.CodeInternal), Message: strings.TrimSpace(string(body))}
	}
	return nil, &APIError{Status: resp.StatusCode, Code: sandbox.Code(er.Code), Message: er.Message}
}

// doJSON sends in (if not nil) as JSON and decodes a JSON answer into out
// (if not nil).
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	req := request{method: method, path: path, query: query}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		req.body = strings.NewReader(string(b))
		req.contentType = "application/json"
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

// setAuth sets the access token and the extra headers on h.
func (c *Client) setAuth(h http.Header) {
	for k, vs := range c.header {
		h[k] = vs
	}
	if c.token != "" {
		h.Set(wire.HeaderAccessToken, c.token)
	}
}

// Ping checks that execd answers.
func (c *Client) Ping(ctx context.Context) error {
	return c.doJSON(ctx, http.MethodGet, "/ping", nil, nil, nil)
}

// RunningCommands returns how many commands execd is running (GET /status,
// an addition), which a server uses to tell an idle box from a busy one.
func (c *Client) RunningCommands(ctx context.Context) (int, error) {
	st, err := c.ServerStatus(ctx)
	if err != nil {
		return 0, err
	}
	return st.RunningCommands, nil
}

// ServerStatus returns execd's own status (GET /status, an addition): the
// commands it runs and the output it retains, and may retain.
func (c *Client) ServerStatus(ctx context.Context) (wire.ServerStatus, error) {
	var st wire.ServerStatus
	if err := c.doJSON(ctx, http.MethodGet, "/status", nil, nil, &st); err != nil {
		return wire.ServerStatus{}, err
	}
	return st, nil
}

// WaitReady pings until execd answers or ctx ends, backing off from 1 ms.
func (c *Client) WaitReady(ctx context.Context) error {
	delay := time.Millisecond
	for {
		err := c.Ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("execd not ready: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}
