package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return bytes.NewReader(b), nil
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
