package modelapi

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
)

// CheckTimeout bounds one model endpoint check.
const CheckTimeout = 20 * time.Second

// Result is a model endpoint check: whether the endpoint streamed a Chat
// Completions answer with the key.
type Result struct {
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

// Check sends one streamed chat completion to base with key, as the agent
// program would, and reads until the first chunk (or [DONE]); the answer
// never holds the key, even when the endpoint quotes it.
func Check(ctx context.Context, c *http.Client, base, key, model string) Result {
	res := Result{Model: model}
	start := time.Now()
	done := func(msg string) Result {
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
			return done(fmt.Sprintf("no answer within %s", CheckTimeout))
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
		return done(fmt.Sprintf("no chunk within %s", CheckTimeout))
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
