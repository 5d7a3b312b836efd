package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/astrabox/astrabox/sandbox"
)

// Decode reads r's body, one JSON value, into v: a body over limit bytes
// is PAYLOAD_TOO_LARGE, an empty one, invalid JSON (including a value of
// the wrong type for a field) or trailing data after the value
// INVALID_REQUEST_BODY (sandbox error codes). Unknown fields are ignored.
// w is the request's writer (http.MaxBytesReader closes the connection
// after an oversized body).
func Decode(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return sandbox.Errorf(sandbox.CodePayloadTooLarge, "request body exceeds %d bytes", limit)
		case errors.Is(err, io.EOF):
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "request body is empty; a JSON object is required")
		}
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid JSON body: trailing data after the JSON value")
	}
	return nil
}

// ReadBody reads r's whole body, at most limit bytes, for a handler that
// needs the bytes themselves (to hash them for an Idempotency-Key, say):
// PAYLOAD_TOO_LARGE over the limit, INVALID_REQUEST_BODY when it cannot
// be read or is empty (only white space).
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, sandbox.Errorf(sandbox.CodePayloadTooLarge, "request body exceeds %d bytes", limit)
	}
	if err != nil {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "read request body: %v", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "request body is empty; a JSON object is required")
	}
	return b, nil
}

// DecodeBytes unmarshals b (a body ReadBody read) into v; invalid JSON is
// INVALID_REQUEST_BODY.
func DecodeBytes(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid JSON body: %v", err)
	}
	return nil
}
