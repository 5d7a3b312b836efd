package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const testKey = "test-api-key"

// realModelKey is the key the fake model demands; it must never reach a
// box.
const realModelKey = "sk-real-model-key-0123456789"

// harness is a whole server on the process backend with a fake model.
type harness struct {
	t      *testing.T
	st     store.Store
	prov   sandbox.Provider
	ring   *vault.Ring
	srv    *server.Server
	hs     *httptest.Server
	model  *fakemodel.Server
	cancel context.CancelFunc
}

func newHarness(t *testing.T, script ...fakemodel.Reply) *harness {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{testenv.AstraboxBinary(t)}})
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, _ := vault.New(key)
	h := &harness{t: t, st: st, prov: p, ring: ring, model: fakemodel.New(t, script...).WithKey(realModelKey)}
	h.start()
	t.Cleanup(func() {
		h.stop()
		boxes, _ := p.List(context.Background())
		for _, b := range boxes {
			_ = p.Delete(context.Background(), b.ID)
		}
		st.Close()
	})
	return h
}

// start builds and starts a server on the harness's store and backend.
func (h *harness) start() {
	h.t.Helper()
	srv, err := server.New(server.Config{Store: h.st, Backends: map[string]sandbox.Provider{"process": h.prov},
		DefaultBackend: "process", Installed: []string{"process"}, APIKeyHash: api.HashKey(testKey), Vault: h.ring,
		ReconcileInterval: time.Second, LeaseTTL: 3 * time.Second, Logger: testLogger(h.t)})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.srv, h.cancel = srv, cancel
	h.hs = httptest.NewServer(srv.Handler)
	if err := srv.Start(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// stop closes the server; boxes and programs keep running.
func (h *harness) stop() {
	if h.hs == nil {
		return
	}
	h.hs.CloseClientConnections()
	h.hs.Close()
	h.srv.Close()
	h.cancel()
	h.hs = nil
}

// restart stops the server and starts a new one on the same store.
func (h *harness) restart() {
	h.stop()
	h.start()
}

// call makes an API request and decodes a JSON answer into out (when
// not nil); it returns the status.
func (h *harness) call(method, path string, body, out any, hdr ...string) int {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.hs.URL+path, rd)
	req.Header.Set(api.HeaderAPIKey, testKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// must is call that fails the test on another status than want.
func (h *harness) must(want int, method, path string, body, out any, hdr ...string) {
	h.t.Helper()
	var raw json.RawMessage
	got := h.call(method, path, body, &raw, hdr...)
	if got != want {
		h.t.Fatalf("%s %s = %d %s, want %d", method, path, got, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatal(err)
		}
	}
}

// agent creates a profile with the fake model and an agent on it, and
// returns the agent id.
func (h *harness) agent(mode string, profile map[string]any) string {
	h.t.Helper()
	p := map[string]any{"backend": "process", "engine_kinds": []string{"astrabox"},
		"model": map[string]any{"base_url": h.model.URL(), "api_key": realModelKey, "models": []string{"fake-1"}}}
	for k, v := range profile {
		p[k] = v
	}
	h.must(200, "PUT", "/api/v1/runtime-profiles/test", p, nil)
	var a struct {
		ID string `json:"agent_id"`
	}
	h.must(201, "POST", "/api/v1/agents", map[string]any{"name": "coder", "engine_kind": "astrabox", "runtime_profile": "test",
		"model": "fake-1", "permission_mode": mode, "instructions": "Be brief."}, &a)
	return a.ID
}

// session opens a conversation.
func (h *harness) session(agentID string) string {
	h.t.Helper()
	var s struct {
		ID string `json:"session_id"`
	}
	h.must(201, "POST", "/api/v1/agents/"+agentID+"/conversations", map[string]any{"title": "t"}, &s)
	return s.ID
}

type receipt struct {
	InputID         string `json:"input_id"`
	TurnID          string `json:"turn_id"`
	ClientMessageID string `json:"client_message_id"`
	Seq             int64  `json:"seq"`
	State           string `json:"state"`
}

func (h *harness) send(sid, content, cmid string) receipt {
	h.t.Helper()
	var rc receipt
	h.must(201, "POST", "/api/v1/sessions/"+sid+"/turn-inputs", map[string]any{"content": content, "client_message_id": cmid}, &rc)
	return rc
}

// logEvent is one event of the raw /events stream.
type logEvent struct {
	Seq     int64           `json:"seq"`
	Type    string          `json:"type"`
	TurnID  string          `json:"turn_id"`
	InputID string          `json:"input_id"`
	Payload json.RawMessage `json:"payload"`
}

// events follows the session's raw log after seq until stop returns true
// for an event, and returns every event read.
func (h *harness) events(sid string, after int64, stop func(logEvent) bool) []logEvent {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/sessions/%s/events?after_seq=%d", h.hs.URL, sid, after), nil)
	req.Header.Set(api.HeaderAPIKey, testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []logEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev logEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			h.t.Fatalf("bad event %q: %v", line, err)
		}
		out = append(out, ev)
		if stop(ev) {
			return out
		}
	}
	h.t.Fatalf("event stream ended before the awaited event (err %v); got %d events: %s", sc.Err(), len(out), summarize(out))
	return nil
}

// untilTurnEnded stops at the turn.ended of input.
func untilTurnEnded(inputID string) func(logEvent) bool {
	return func(e logEvent) bool { return e.Type == "turn.ended" && e.InputID == inputID }
}

func summarize(evs []logEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%d:%s ", e.Seq, e.Type)
	}
	return b.String()
}

// waitState polls the session until it is in state.
func (h *harness) waitState(sid, state string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var s map[string]any
	for time.Now().Before(deadline) {
		h.must(200, "GET", "/api/v1/sessions/"+sid, nil, &s)
		if s["state"] == state {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("session %s never reached %s: %v", sid, state, s)
	return nil
}

// frames returns the payloads of the UI frames among evs.
func frames(evs []logEvent) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if strings.Contains(e.Type, ".") {
			continue
		}
		var m map[string]any
		_ = json.Unmarshal(e.Payload, &m)
		out = append(out, m)
	}
	return out
}

// checkGapFree fails unless evs' seqs are consecutive.
func checkGapFree(t *testing.T, evs []logEvent, from int64) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != from+int64(i) {
			t.Fatalf("seq %d at position %d, want %d: %s", e.Seq, i, from+int64(i), summarize(evs))
		}
	}
}

// testLogger logs to the test at debug level when ASTRABOX_TEST_DEBUG is
// set, and at warn otherwise.
func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("ASTRABOX_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
