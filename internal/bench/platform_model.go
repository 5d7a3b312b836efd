package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// replyShape is what the bench model streams for every request: Deltas
// content fragments, Gap apart, the first after FirstDelay.
type replyShape struct {
	Deltas     int
	Gap        time.Duration
	FirstDelay time.Duration
}

// benchModel is the platform bench's stand-in for a model endpoint: an
// OpenAI Chat Completions server on loopback that answers every streaming
// request with text in the current replyShape (a finish_reason "stop"
// chunk, a usage chunk when asked, then "data: [DONE]"), never tool calls.
// It checks the bearer key, so a run proves the real key reached it. It is
// part of the bench command, not a model: it knows nothing of its input.
type benchModel struct {
	key  string
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed by close: cuts paced replies short

	mu    sync.Mutex
	shape replyShape

	served atomic.Int64 // streaming replies begun
}

// defaultShape is the reply of the first-token scenarios: four deltas at
// once.
var defaultShape = replyShape{Deltas: 4}

// maxModelBody bounds a request body the bench model reads.
const maxModelBody = 32 << 20

// deltaText is one content fragment (a few tokens' worth).
const deltaText = "lorem ipsum "

// startModel serves the bench model on a loopback port until close.
func startModel(key string) (*benchModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench model: listen: %w", err)
	}
	m := &benchModel{key: key, ln: ln, done: make(chan struct{}), shape: defaultShape}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.handle)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// URL is the endpoint's base URL (requests go to URL() + "/chat/completions").
func (m *benchModel) URL() string { return "http://" + m.ln.Addr().String() + "/v1" }

// setShape changes the replies of requests that arrive from now on.
func (m *benchModel) setShape(s replyShape) {
	m.mu.Lock()
	m.shape = s
	m.mu.Unlock()
}

// close stops the server, ending replies in progress.
func (m *benchModel) close() {
	close(m.done)
	_ = m.srv.Close()
}

func (m *benchModel) handle(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+m.key {
		http.Error(w, `{"error":{"message":"invalid API key","type":"invalid_request_error"}}`, http.StatusUnauthorized)
		return
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxModelBody)).Decode(&req); err != nil || !req.Stream {
		http.Error(w, `{"error":{"message":"the bench model serves streaming requests only","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	shape := m.shape
	m.mu.Unlock()
	n := m.served.Add(1)

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	head := fmt.Sprintf(`{"id":"chatcmpl-bench-%d","object":"chat.completion.chunk","created":%d,"model":%q,`,
		n, time.Now().Unix(), req.Model)
	send := func(body string) bool {
		if _, err := io.WriteString(w, "data: "+head+body+"}\n\n"); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if !m.pause(r.Context(), shape.FirstDelay) {
		return
	}
	for i := range max(shape.Deltas, 1) {
		if i > 0 && !m.pause(r.Context(), shape.Gap) {
			return
		}
		if !send(`"choices":[{"index":0,"delta":{"content":"` + deltaText + `"},"finish_reason":null}]`) {
			return
		}
	}
	if !send(`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]`) {
		return
	}
	if req.StreamOptions.IncludeUsage {
		send(fmt.Sprintf(`"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":%d,"total_tokens":%d}`,
			shape.Deltas*2, 20+shape.Deltas*2))
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// pause waits d (none when d <= 0); false when the client or the server
// went away first.
func (m *benchModel) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-m.done:
	}
	return false
}

// firstChunk is the reference of the time-to-first-token figures: one
// streaming request straight to the model (as a client of it would send),
// timed from the POST to the first chunk carrying content, read with hc.
// The rest of the stream is read to its end, so the connection is reused.
func (m *benchModel) firstChunk(ctx context.Context, hc *http.Client) (time.Duration, error) {
	body := `{"model":"bench-1","stream":true,"stream_options":{"include_usage":true},` +
		`"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"say something"}]}`
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("model request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+m.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("model request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("model request: status %s", resp.Status)
	}
	var first time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if first == 0 && strings.HasPrefix(line, "data: {") && strings.Contains(line, `"content":`) {
			first = time.Since(start)
		}
		if line == "data: [DONE]" {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("model stream: %w", err)
	}
	if first == 0 {
		return 0, errors.New("model stream: no content chunk")
	}
	return first, nil
}
