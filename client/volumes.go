package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/astrabox/astrabox/api/wire"
)

// ListVolumes returns the server's named volumes (of backend, or of every
// enabled backend when it is "").
func (c *Client) ListVolumes(ctx context.Context, backend string) ([]wire.VolumeInfo, error) {
	q := url.Values{}
	if backend != "" {
		q.Set("backend", backend)
	}
	var out wire.ListVolumesResponse
	err := c.doJSON(ctx, http.MethodGet, "/volumes", q, nil, &out, nil)
	return out.Items, err
}

// DeleteVolume removes named volume name and its files (from backend, or
// from the one backend that has it when backend is ""). A volume that a
// sandbox mounts is refused with CONFLICT.
func (c *Client) DeleteVolume(ctx context.Context, backend, name string) error {
	q := url.Values{}
	if backend != "" {
		q.Set("backend", backend)
	}
	return c.doJSON(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(name), q, nil, nil, nil)
}
