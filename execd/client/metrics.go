package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/sandbox"
)

// Metrics returns the box's current CPU and memory usage.
func (c *Client) Metrics(ctx context.Context) (wire.Metrics, error) {
	var m wire.Metrics
	err := c.doJSON(ctx, http.MethodGet, "/metrics", nil, nil, &m)
	return m, err
}

// WatchMetrics calls fn with the box's metrics once a second until fn
// returns an error (which it returns), ctx ends (ctx's error), or execd
// ends the stream (nil, or the *APIError execd reported).
func (c *Client) WatchMetrics(ctx context.Context, fn func(wire.Metrics) error) error {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/metrics/watch"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sr := sse.NewReader(resp.Body, 0)
	for {
		f, err := sr.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("read metrics stream: %w", err)
		}
		if f.Event == wire.EventError {
			var er wire.ErrorResponse
			_ = jsonUnmarshal([]byte(f.Data), &er)
			return &APIError{Status: wire.StatusOf(sandbox.Code(er.Code)), Code: sandbox.Code(er.Code), Message: er.Message}
		}
		var m wire.Metrics
		if err := jsonUnmarshal([]byte(f.Data), &m); err != nil {
			return fmt.Errorf("decode metrics: %w", err)
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}
