package sandbox

import (
	"encoding/json"
	"fmt"
)

// DecodeStateBlob reads a state blob (a box's record, or the blob handed
// to Attach) whose "version" member must be want, into a T; otherwise an
// error wrapping ErrBadStateBlob that names the box id.
func DecodeStateBlob[T any](id string, b []byte, want int) (T, error) {
	var (
		head struct {
			Version int `json:"version"`
		}
		v T
	)
	if err := json.Unmarshal(b, &head); err != nil {
		return v, fmt.Errorf("decode state of %s: %w: %v", id, ErrBadStateBlob, err)
	}
	if head.Version != want {
		return v, fmt.Errorf("state of %s: %w: version %d (this backend reads %d)", id, ErrBadStateBlob, head.Version, want)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("decode state of %s: %w: %v", id, ErrBadStateBlob, err)
	}
	return v, nil
}
