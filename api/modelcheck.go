package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
)

// modelCheckTimeout bounds one model endpoint check.
const modelCheckTimeout = 20 * time.Second

// modelCheckRequest is the optional body of POST
// /api/v1/runtime-profiles/{name}/test-model.
type modelCheckRequest struct {
	// Model is the model name to ask (default: the profile's first).
	Model string `json:"model"`
}

// ModelCheck (addition) answers a model endpoint check: whether the
// profile's endpoint streamed a Chat Completions answer with its key.
type ModelCheck struct {
	OK    bool   `json:"ok"`
	Model string `json:"model"`
	// Status is the endpoint's HTTP status (0 when it was not reached).
	Status int `json:"status"`
	// LatencyMS is the time to the first streamed chunk, or to the
	// failure.
	LatencyMS int64 `json:"latency_ms"`
	// Message says what failed ("" when OK): the endpoint's own error
	// message, shortened, or why it could not be reached.
	Message string `json:"message,omitempty"`
}

// testModel (addition) checks a RuntimeProfile's model endpoint as the
// agent program would reach it: one streamed Chat Completions request
// with the profile's real key, read up to its first chunk and then
// closed. A failed check is still 200 with ok false; only an unknown
// profile, one without an endpoint, or no model to ask is an error.
func (s *Server) testModel(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		writeError(w, sandbox.Errorf(platform.CodeInvalid, "read request body: %v", err))
		return
	}
	var req modelCheckRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeBytes(body, &req); err != nil {
			writeError(w, asPlatformInvalid(err))
			return
		}
	}
	p, err := s.cat.RuntimeProfile(r.Context(), r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	if p.Model == nil || p.Model.BaseURL == "" {
		writeError(w, sandbox.Errorf(platform.CodeInvalid, "runtime profile %q has no model endpoint", p.Name))
		return
	}
	model := req.Model
	if model == "" && len(p.Model.Models) > 0 {
		model = p.Model.Models[0]
	}
	if model == "" {
		writeError(w, sandbox.Errorf(platform.CodeInvalid, "runtime profile %q lists no models; name one in the body ({\"model\": ...})", p.Name))
		return
	}
	key, err := s.cat.ModelKey(p)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), modelCheckTimeout)
	defer cancel()
	res := checkModel(ctx, http.DefaultClient, strings.TrimRight(p.Model.BaseURL, "/"), key, model)
	s.log.Info("model endpoint checked", "profile", p.Name, "model", model, "ok", res.OK, "status", res.Status, "ms", res.LatencyMS)
	writeJSON(w, http.StatusOK, res)
}

// checkModel sends one streamed chat completion to base and reads until
// the first chunk (or [DONE]).
func checkModel(ctx context.Context, c *http.Client, base, key, model string) ModelCheck {
	res := ModelCheck{Model: model}
	start := time.Now()
	done := func(msg string) ModelCheck {
		res.LatencyMS = time.Since(start).Milliseconds()
		res.Message = msg
		res.OK = msg == ""
		return res
	}
	payload, _ := json.Marshal(map[string]any{"model": model, "stream": true,
		"messages": []map[string]string{{"role": "user", "content": "Reply with OK."}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(payload))
	if err != nil {
		return done("bad model endpoint URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return done(fmt.Sprintf("no answer within %s", modelCheckTimeout))
		}
		return done("model endpoint unreachable") // the error text may name internal addresses
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return done(fmt.Sprintf("HTTP %d: %s", resp.StatusCode, endpointMessage([]byte(hideKey(string(b), key)))))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			return done("")
		}
		var chunk struct {
			Object string `json:"object"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return done("the stream is not Chat Completions chunks")
		}
		if chunk.Error != nil {
			return done("stream error: " + shorten(hideKey(chunk.Error.Message, key)))
		}
		return done("")
	}
	if ctx.Err() != nil {
		return done(fmt.Sprintf("no chunk within %s", modelCheckTimeout))
	}
	return done("the stream ended without a chunk")
}

// hideKey replaces key in s, an endpoint's text that may quote the
// request's credential: the key is write-only, even to the profile's
// editors. It runs before any shortening, which could cut the key.
func hideKey(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[model key]")
}

// endpointMessage is the message of an OpenAI-style error body, or the
// body itself, shortened.
func endpointMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return shorten(e.Error.Message)
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return shorten(s)
	}
	return "empty body"
}

// shorten bounds a message from the endpoint for the answer.
func shorten(s string) string {
	const limit = 300
	if len(s) > limit {
		return strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}
