package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/platform/wire"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// harness is servertest.Env with the session helpers of these tests.
type harness struct {
	*servertest.Env
	t     *testing.T
	model *fakemodel.Server
}

func newHarness(t *testing.T, script ...fakemodel.Reply) *harness {
	return newHarnessOn(t, "process", script...)
}

func newHarnessOn(t *testing.T, backend string, script ...fakemodel.Reply) *harness {
	t.Helper()
	e := servertest.New(t, servertest.Options{Backend: backend, Script: script})
	return &harness{Env: e, t: t, model: e.Model}
}

const realModelKey = servertest.ModelKey

func (h *harness) restart() { h.Restart() }
func (h *harness) call(method, path string, body, out any, hdr ...string) int {
	h.t.Helper()
	return h.Call(method, path, body, out, hdr...)
}
func (h *harness) must(want int, method, path string, body, out any, hdr ...string) {
	h.t.Helper()
	h.Must(want, method, path, body, out, hdr...)
}
func (h *harness) agent(mode string, profile map[string]any) string {
	h.t.Helper()
	return h.Agent(mode, profile)
}
func (h *harness) session(agentID string) string { h.t.Helper(); return h.Session(agentID) }

// receipt is an input's receipt.
type receipt = wire.Receipt

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
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/sessions/%s/events?after_seq=%d", h.URL, sid, after), nil)
	req.Header.Set(api.HeaderAPIKey, servertest.Key)
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
