package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// headerAPIKey carries the API key to an OpenSandbox lifecycle service.
const headerAPIKey = "OPEN-SANDBOX-API-KEY"

// remoteError is an error answer of the remote: its status and its
// {code, message} body.
type remoteError struct {
	remote  string
	status  int
	code    string
	message string
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("remote %s: HTTP %d %s: %s", e.remote, e.status, e.code, e.message)
}

// call sends one request to the remote's lifecycle API (path under /v1)
// with the API key, a JSON body when in is not nil, and decodes a 2xx
// answer into out when it is not nil. An error answer is returned as an
// error of this package's contract (see asSandboxError); a remote that
// cannot be reached is CodeUnavailable naming it.
func (p *Provider) call(ctx context.Context, method, path string, query url.Values, hdr http.Header, in, out any) error {
	u := *p.base
	u.Path = strings.TrimRight(u.Path, "/") + "/v1" + path
	u.RawQuery = query.Encode()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("remote %s: %w", p.cfg.Name, err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if p.cfg.APIKey != "" {
		req.Header.Set(headerAPIKey, p.cfg.APIKey)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("remote %s: %s %s: %w", p.cfg.Name, method, path, ctx.Err())
		}
		return sandbox.Errorf(sandbox.CodeUnavailable, "remote %s (%s) is unreachable: %v", p.cfg.Name, p.base.Host, scrub(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var e wire.ErrorResponse
		_ = json.Unmarshal(b, &e)
		if e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
			if len(e.Message) > 200 {
				e.Message = e.Message[:200]
			}
		}
		return p.asSandboxError(&remoteError{remote: p.cfg.Name, status: resp.StatusCode, code: e.Code, message: e.Message})
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return sandbox.Errorf(sandbox.CodeUnavailable, "remote %s: undecodable answer to %s %s: %v", p.cfg.Name, method, path, err)
	}
	return nil
}

// asSandboxError maps a remote's error answer onto the contract: 404 wraps
// ErrNotFound; 400 (and 422) keep the remote's code when it is one of
// AstraBox's, with its message, prefixed by the remote's name; 401 and
// 403 say the key was refused; 409 is CodeConflict; anything else is
// CodeUnavailable.
func (p *Provider) asSandboxError(re *remoteError) error {
	name := "remote " + p.cfg.Name
	switch re.status {
	case http.StatusNotFound:
		if sandbox.Code(re.code) == sandbox.CodeImageNotFound {
			return &sandbox.Error{Code: sandbox.CodeImageNotFound, Message: name + ": " + re.message, Err: re}
		}
		return fmt.Errorf("%w: %w", sandbox.ErrNotFound, re)
	case http.StatusUnauthorized, http.StatusForbidden:
		return &sandbox.Error{Code: sandbox.CodeUnavailable, Message: name + " refused this server's API key", Err: re}
	case http.StatusConflict:
		return &sandbox.Error{Code: sandbox.CodeConflict, Message: name + ": " + re.message, Err: re}
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		code := sandbox.Code(re.code)
		switch code {
		case sandbox.CodeCapability, sandbox.CodeLimitOutOfRange, sandbox.CodeImageNotFound, sandbox.CodeNotSupported, sandbox.CodeInvalidRequest:
		default:
			code = sandbox.CodeInvalidRequest
		}
		return &sandbox.Error{Code: code, Message: name + " refused: " + re.message, Err: re}
	case http.StatusTooManyRequests:
		return &sandbox.Error{Code: sandbox.CodeTooManyRequests, Message: name + ": " + re.message, Err: re}
	case http.StatusNotImplemented:
		return &sandbox.Error{Code: sandbox.CodeNotSupported, Message: name + ": " + re.message, Err: fmt.Errorf("%w: %w", sandbox.ErrUnsupported, re)}
	}
	return &sandbox.Error{Code: sandbox.CodeUnavailable, Message: fmt.Sprintf("%s answered HTTP %d", name, re.status), Err: re}
}

// scrub is the text of a transport error without the request URL's query
// (which never holds the key, but may hold a signed route).
func scrub(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// labelFilter is the `metadata` list filter for this owner's boxes, and
// for one of them when id is not empty.
func (p *Provider) labelFilter(id string) url.Values {
	f := url.Values{LabelOwner: {p.cfg.Owner}}
	if id != "" {
		f.Set(LabelID, id)
	}
	return url.Values{"metadata": {f.Encode()}}
}

// listOwned returns every box of this owner on the remote (of box id only,
// when id is not empty), following the pages.
func (p *Provider) listOwned(ctx context.Context, id string) ([]wire.Sandbox, error) {
	var out []wire.Sandbox
	for page := 1; ; page++ {
		q := p.labelFilter(id)
		q.Set("page", fmt.Sprint(page))
		q.Set("pageSize", "100")
		var resp wire.ListSandboxesResponse
		if err := p.call(ctx, http.MethodGet, "/sandboxes", q, nil, nil, &resp); err != nil {
			return nil, fmt.Errorf("list boxes: %w", err)
		}
		for _, sb := range resp.Items {
			// A remote that ignores the filter must not hand us others' boxes.
			if sb.Metadata[LabelOwner] == p.cfg.Owner && (id == "" || sb.Metadata[LabelID] == id) && sb.Metadata[LabelID] != "" {
				out = append(out, sb)
			}
		}
		if !resp.Pagination.HasNextPage || len(resp.Items) == 0 || page >= 1000 {
			return out, nil
		}
	}
}
