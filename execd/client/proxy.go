package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// ProxyURL is the URL, through execd's port proxy, of path (with an
// optional query) on port inside the box. It is only reachable with the
// client's HTTP client and access token: use ProxyRequest and ProxyDo, or
// DialProxy.
func (c *Client) ProxyURL(port int, path string) string {
	return c.base + proxyPath(port, path)
}

func proxyPath(port int, path string) string {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return "/proxy/" + strconv.Itoa(port) + path
}

// ProxyRequest returns a request for path (with an optional query) on port
// inside the box, through execd's port proxy, carrying the access token.
// ctx governs the whole exchange, body included.
func (c *Client) ProxyRequest(ctx context.Context, method string, port int, path string, body io.Reader) (*http.Request, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("build proxy request: port %d is not in 1..65535", port)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.ProxyURL(port, path), body)
	if err != nil {
		return nil, fmt.Errorf("build proxy request: %w", err)
	}
	c.setAuth(req.Header)
	return req, nil
}

// ProxyDo sends req (from ProxyRequest) with the client's HTTP client and
// returns the upstream's response whatever its status; the caller closes
// its body. When execd cannot reach the port, the error is an *APIError
// with code UPSTREAM_UNREACHABLE.
func (c *Client) ProxyDo(req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("proxy %s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp, nil
	}
	// Tell execd's own answer from an upstream's by its error body.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var er wire.ErrorResponse
	if json.Unmarshal(head, &er) == nil && sandbox.Code(er.Code) == sandbox.CodeUpstreamUnreachable {
		resp.Body.Close()
		return nil, &APIError{Status: resp.StatusCode, Code: sandbox.Code(er.Code), Message: er.Message}
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return resp, nil
}

// DialProxy opens a WebSocket to path (with an optional query) on port
// inside the box through execd's port proxy, with the client's HTTP client
// and access token. ctx bounds the handshake only; opts may be nil. The
// caller closes the connection.
func (c *Client) DialProxy(ctx context.Context, port int, path string, opts *websocket.DialOptions) (*websocket.Conn, error) {
	return c.dialWebSocket(ctx, proxyPath(port, path), opts)
}
