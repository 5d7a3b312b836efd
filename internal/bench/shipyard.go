package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	execdwire "github.com/astrabox/astrabox/execd/wire"
)

// benchShipyard measures exec round trips of one sandbox two ways: through
// the Shipyard Neo (Bay) facade (/shipyard/v1/sandboxes/{id}/shell/exec
// and /python/exec, as AstrBot calls them: one JSON request, one JSON
// answer, the history recorded) and through the OpenSandbox API (the
// Go SDK's execd client through the server's proxy: a streamed command,
// and code run in a python context). Both run `true` and the cell `1+1`.
//
// The process harness is left out: its boxes have no /workspace, which the
// facade runs everything in.
func benchShipyard(ctx context.Context, s *suite, t Target) ([]Result, error) {
	if t.Name == "process" {
		return nil, nil
	}
	sb, x, err := s.openBox(ctx, t)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: time.Minute}
	post := func(op string, body any) (map[string]any, error) {
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, "POST", s.base+"/shipyard/v1/sandboxes/"+sb.ID+"/"+op, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("shipyard %s: %w", op, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || out["success"] != true {
			return nil, fmt.Errorf("shipyard %s: %d %s", op, resp.StatusCode, raw)
		}
		return out, nil
	}
	cc, err := x.CreateContext(ctx, execdwire.CodeContext{Language: "python"})
	if err != nil {
		return nil, fmt.Errorf("python context: %w", err)
	}
	type way struct {
		name string
		run  func() error
		ds   []time.Duration
	}
	ways := []*way{
		{name: " shell via the Shipyard facade", run: func() error {
			_, err := post("shell/exec", map[string]any{"command": "true"})
			return err
		}},
		{name: " shell via the OpenSandbox API", run: func() error { return runTrueIn(ctx, x) }},
		{name: " python via the Shipyard facade", run: func() error {
			out, err := post("python/exec", map[string]any{"code": "1+1"})
			if err == nil && out["output"] != "2\n" {
				err = fmt.Errorf("shipyard python: output %q", out["output"])
			}
			return err
		}},
		{name: " python via the OpenSandbox API", run: func() error {
			ex, err := x.RunCode(ctx, execdwire.RunCodeRequest{Context: cc, Code: "1+1"})
			if err == nil && ex.Text() != "2" {
				err = fmt.Errorf("python: result %q", ex.Text())
			}
			return err
		}},
	}
	for i := range s.cfg.N + 1 {
		for _, w := range ways {
			start := time.Now()
			if err := w.run(); err != nil {
				return nil, err
			}
			if i > 0 { // the first warms connections and contexts up
				w.ds = append(w.ds, time.Since(start))
			}
		}
	}
	out := make([]Result, 0, len(ways))
	for _, w := range ways {
		note := ""
		if w.name == " python via the Shipyard facade" {
			note = "cell + display collection + history write"
		}
		out = append(out, latencyResult(w.name, note, w.ds))
	}
	return out, nil
}
