// Package client is the Go SDK of AstraBox: the lifecycle API (create,
// list, pause, renew, delete sandboxes) and, through the server's proxy,
// each sandbox's execd (commands, files, terminals, ports).
//
// A Client is safe for concurrent use; every method's ctx bounds the call.
// Error answers are *APIError with the server's stable code.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/sandbox"
)

// HeaderAPIKey carries the API key.
const HeaderAPIKey = "OPEN-SANDBOX-API-KEY"

// ExecdPort is the port of execd in every sandbox.
const ExecdPort = 44772

// Client talks to one AstraBox server.
type Client struct {
	base string
	key  string
	hc   *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the server at baseURL ("http://127.0.0.1:8080")
// using apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), key: apiKey, hc: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 32, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
	}}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// APIError is an error answer of the server.
type APIError struct {
	Status    int
	Code      sandbox.Code
	Message   string
	RequestID string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("astrabox: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// CodeOf returns the error code of err, or "".
func CodeOf(err error) sandbox.Code {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return execdclient.CodeOf(err)
}

// do makes a request of the sandbox API (/v1) and returns the response of
// a success; any other answer is returned as *APIError.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in any, header http.Header) (*http.Response, error) {
	return c.request(ctx, method, "/v1"+path, query, in, header)
}

// request sends a JSON request (in, when not nil) to path under the
// server's base URL with the API key, and returns the response of a
// success; any other answer is returned as *APIError.
func (c *Client) request(ctx context.Context, method, path string, query url.Values, in any, header http.Header) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if c.key != "" {
		req.Header.Set(HeaderAPIKey, c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, responseError(resp)
}

// responseError reads an error answer into an *APIError.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var er wire.ErrorResponse
	if json.Unmarshal(b, &er) != nil || er.Code == "" {
		er = wire.ErrorResponse{Code: string(sandbox.CodeInternal), Message: strings.TrimSpace(string(b))}
	}
	return &APIError{Status: resp.StatusCode, Code: sandbox.Code(er.Code), Message: er.Message, RequestID: resp.Header.Get("X-Request-ID")}
}

func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any, header http.Header) error {
	resp, err := c.do(ctx, method, path, query, in, header)
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

// CreateOptions are per-call options of Create and Renew.
type CreateOptions struct {
	// IdempotencyKey makes a retried call return the first call's answer.
	IdempotencyKey string
}

func idem(key string) http.Header {
	if key == "" {
		return nil
	}
	return http.Header{"Idempotency-Key": {key}}
}

// Create creates a sandbox and returns it once it is running.
func (c *Client) Create(ctx context.Context, req wire.CreateSandboxRequest, opts CreateOptions) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	err := c.doJSON(ctx, http.MethodPost, "/sandboxes", nil, req, &sb, idem(opts.IdempotencyKey))
	return &sb, err
}

// Get returns a sandbox.
func (c *Client) Get(ctx context.Context, id string) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	err := c.doJSON(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, nil, &sb, nil)
	return &sb, err
}

// ListOptions filters List.
type ListOptions struct {
	States   []string
	Metadata map[string]string
	Page     int
	PageSize int
}

// List returns a page of sandboxes.
func (c *Client) List(ctx context.Context, opts ListOptions) (*wire.ListSandboxesResponse, error) {
	q := url.Values{}
	for _, s := range opts.States {
		q.Add("state", s)
	}
	if len(opts.Metadata) > 0 {
		md := url.Values{}
		for k, v := range opts.Metadata {
			md.Set(k, v)
		}
		q.Set("metadata", md.Encode())
	}
	if opts.Page > 0 {
		q.Set("page", strconv.Itoa(opts.Page))
	}
	if opts.PageSize > 0 {
		q.Set("pageSize", strconv.Itoa(opts.PageSize))
	}
	var out wire.ListSandboxesResponse
	err := c.doJSON(ctx, http.MethodGet, "/sandboxes", q, nil, &out, nil)
	return &out, err
}

// Delete deletes a sandbox and returns once it is gone.
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, nil, nil, nil)
}

// Pause freezes a sandbox.
func (c *Client) Pause(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/pause", nil, nil, nil, nil)
}

// Resume thaws a paused sandbox.
func (c *Client) Resume(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/resume", nil, nil, nil, nil)
}

// Renew moves a sandbox's expiry to at.
func (c *Client) Renew(ctx context.Context, id string, at time.Time, opts CreateOptions) (time.Time, error) {
	var out wire.RenewResponse
	err := c.doJSON(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/renew-expiration", nil,
		wire.RenewRequest{ExpiresAt: at.UTC()}, &out, idem(opts.IdempotencyKey))
	return out.ExpiresAt, err
}

// PatchMetadata sets metadata keys; a nil value removes the key.
func (c *Client) PatchMetadata(ctx context.Context, id string, patch map[string]*string) (*wire.Sandbox, error) {
	var sb wire.Sandbox
	err := c.doJSON(ctx, http.MethodPatch, "/sandboxes/"+url.PathEscape(id)+"/metadata", nil, patch, &sb, nil)
	return &sb, err
}

// Endpoint returns how to reach port of a sandbox.
func (c *Client) Endpoint(ctx context.Context, id string, port int) (*wire.Endpoint, error) {
	var ep wire.Endpoint
	err := c.doJSON(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(id)+"/endpoints/"+strconv.Itoa(port), nil, nil, &ep, nil)
	return &ep, err
}

// Execd returns a client of the sandbox's execd, through the server's
// proxy on the API's own host (use_server_proxy): commands, files,
// terminals and ports of the box. A program is no browser, so it needs no
// origin of the box's own, and the server's endpoint domain need not
// resolve where the program runs.
func (c *Client) Execd(ctx context.Context, id string) (*execdclient.Client, error) {
	var ep wire.Endpoint
	err := c.doJSON(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(id)+"/endpoints/"+strconv.Itoa(ExecdPort),
		url.Values{"use_server_proxy": {"true"}}, nil, &ep, nil)
	if err != nil {
		return nil, err
	}
	scheme := "http://"
	if strings.HasPrefix(c.base, "https://") {
		scheme = "https://"
	}
	opts := []execdclient.Option{execdclient.WithHTTPClient(c.hc)}
	for k, v := range ep.Headers {
		opts = append(opts, execdclient.WithHeader(k, v))
	}
	return execdclient.New(scheme+ep.Endpoint, opts...), nil
}

// Events streams a sandbox's state transitions after seq (0: all) to fn
// until the sandbox terminates, fn returns an error, or ctx ends.
func (c *Client) Events(ctx context.Context, id string, after int64, fn func(wire.StateEvent) error) error {
	resp, err := c.do(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(id)+"/events", url.Values{"after": {strconv.FormatInt(after, 10)}}, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	r := sse.NewReader(resp.Body, 0)
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
		var ev wire.StateEvent
		if err := json.Unmarshal([]byte(f.Data), &ev); err != nil {
			return fmt.Errorf("decode event: %w", err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// PutProfile creates or replaces the stored RuntimeProfile name (an
// AstraBox addition); profile is its JSON object (see the server's
// OpenAPI file: backend, image, resources, poolSize, ...).
func (c *Client) PutProfile(ctx context.Context, name string, profile any) error {
	return c.doJSON(ctx, http.MethodPut, "/profiles/"+url.PathEscape(name), nil, profile, nil, nil)
}

// Metrics returns the server's Prometheus metrics text.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return "", fmt.Errorf("build request: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: HTTP %d: %v", resp.StatusCode, err)
	}
	return string(b), nil
}
