package execd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// writeJSON answers with status and v encoded as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with err's code, the status execd's table gives it
// (wire.StatusOf) and its client-safe message (sandbox.MessageOf).
func writeError(w http.ResponseWriter, err error) {
	code := sandbox.CodeOf(err)
	writeJSON(w, wire.StatusOf(code), wire.ErrorResponse{Code: string(code), Message: sandbox.MessageOf(err)})
}

// decodeJSON reads one JSON value of at most limit bytes from r's body into
// v. An empty body is an error unless allowEmpty. Errors carry
// CodeInvalidRequest or CodePayloadTooLarge.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any, allowEmpty bool) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return sandbox.Errorf(sandbox.CodePayloadTooLarge, "request body exceeds %d bytes", limit)
		case errors.Is(err, io.EOF) && allowEmpty:
			return nil
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

// queryInt64 parses query parameter name; def when absent. Errors carry
// CodeInvalidRequest.
func queryInt64(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "query parameter %s must be a non-negative integer, got %q", name, v)
	}
	return n, nil
}

// queryBool parses query parameter name ("1", "true", ...); false when absent.
func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, sandbox.Errorf(sandbox.CodeInvalidRequest, "query parameter %s must be a boolean, got %q", name, v)
	}
	return b, nil
}

// fsError converts an os error on path into a coded error.
func fsError(op, path string, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &sandbox.Error{Code: sandbox.CodeFileNotFound, Message: fmt.Sprintf("%s %s: no such file or directory", op, path), Err: err}
	case errors.Is(err, os.ErrPermission):
		return &sandbox.Error{Code: sandbox.CodeInvalidPath, Message: fmt.Sprintf("%s %s: permission denied", op, path), Err: err}
	case errors.Is(err, os.ErrExist):
		return &sandbox.Error{Code: sandbox.CodeAlreadyExists, Message: fmt.Sprintf("%s %s: already exists", op, path), Err: err}
	}
	return &sandbox.Error{Code: sandbox.CodeRuntime, Message: fmt.Sprintf("%s %s: %v", op, path, err), Err: err}
}
