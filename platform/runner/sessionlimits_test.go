package runner_test

import (
	"bufio"
	"bytes"
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
	"github.com/astrabox/astrabox/platform/runner"
	"github.com/astrabox/astrabox/sandbox"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// flood is a model reply of n text deltas (the fake model streams text in
// pieces of 8 characters): a model that streams without end, as far as a
// reply is concerned.
func flood(n int) fakemodel.Reply { return fakemodel.Text(strings.Repeat("flooding", n)) }

// TestFloodingReplyIsEnded: a reply whose program writes past one of the
// Session's limits (the profile's session_limits) is ended at once, as a
// failed reply (data-turn-failure with the limit's code, finish with
// finishReason error, turn.ended failed), with what was stored of it
// bounded by the limit; the Session is READY and answers its next input.
// A Session whose log is full fails that input without running it, also
// once another server holds it.
func TestFloodingReplyIsEnded(t *testing.T) {
	e := servertest.New(t, servertest.Options{})
	const deltas = 20_000 // 160 KB of text, far past every limit below
	tests := []struct {
		name   string
		limits map[string]any
		code   sandbox.Code
		// frames and bytes bound what the program's frames of the reply
		// may be in the log.
		frames, bytes int
		// next is how the Session's next reply ends: "completed", or
		// failed with a code ("" for the rate: its bucket refills with
		// time, which a test does not wait for).
		next string
	}{
		{"reply_frames", map[string]any{"reply_frames": 50}, runner.CodeReplyFramesExceeded, 50, 1 << 20, "completed"},
		{"reply_bytes", map[string]any{"reply_bytes": 4096}, runner.CodeReplyBytesExceeded, deltas, 4096, "completed"},
		{"frames_per_second", map[string]any{"frames_per_second": 2}, runner.CodeFrameRateExceeded, 2 * 10, 1 << 20, ""},
		{"session_bytes", map[string]any{"session_bytes": 16 << 10}, runner.CodeSessionBytesExceeded, deltas, 16 << 10, string(runner.CodeSessionBytesExceeded)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sid := e.Session(agentWithLimits(t, e, tc.name, tc.limits))
			e.Model.Push(flood(deltas))
			in := send(t, e, sid, "flood the log")
			evs := follow(t, e, sid, 0, turnEnded(in))
			end := payloadOf(t, last(evs))
			if end["outcome"] != "failed" || end["error_code"] != string(tc.code) {
				t.Fatalf("the flooding reply ended %v, want failed with %s", end, tc.code)
			}
			frames, fbytes := 0, 0
			var failure, finish map[string]any
			var started, ended time.Time
			for _, ev := range evs {
				if ev.InputID != in || strings.Contains(ev.Type, ".") {
					continue
				}
				switch ev.Type {
				case "data-turn-accepted":
					started = ev.At
				case "start", "data-input-consumed":
				case "data-turn-failure":
					failure = payloadOf(t, ev)
				case "finish":
					finish, ended = payloadOf(t, ev), ev.At
				default:
					frames++
					fbytes += len(ev.Payload)
				}
			}
			if data, _ := failure["data"].(map[string]any); data == nil || data["code"] != string(tc.code) || !strings.Contains(data["message"].(string), tc.name) {
				t.Fatalf("data-turn-failure %v, want code %s and a message naming session_limits.%s", failure, tc.code, tc.name)
			}
			if finish["finishReason"] != "error" {
				t.Fatalf("finish %v, want finishReason error", finish)
			}
			if tc.code == runner.CodeFrameRateExceeded {
				// The bucket refills while the reply runs: what it let
				// pass is its burst and the rate over the reply's time.
				tc.frames += int(2*ended.Sub(started).Seconds()) + 1
			}
			if frames > tc.frames || fbytes > tc.bytes {
				t.Fatalf("%d frames of %d bytes of the flooding reply stored; the limit allows %d frames, %d bytes", frames, fbytes, tc.frames, tc.bytes)
			}
			if frames >= deltas {
				t.Fatalf("the whole flood (%d frames) was stored", frames)
			}
			waitState(t, e, sid, "READY")
			if tc.next == "" {
				return
			}
			if tc.code == runner.CodeSessionBytesExceeded {
				e.Restart() // the new holder counts the log it finds
			}

			requests := len(e.Model.Requests())
			e.Model.Push(fakemodel.Text("a short answer"))
			next := send(t, e, sid, "and now?")
			end = payloadOf(t, last(follow(t, e, sid, 0, turnEnded(next))))
			if tc.next == "completed" {
				if end["outcome"] != "completed" {
					t.Fatalf("the next reply ended %v, want completed", end)
				}
				return
			}
			if end["outcome"] != "failed" || end["error_code"] != tc.next {
				t.Fatalf("the next input ended %v, want failed with %s", end, tc.next)
			}
			if n := len(e.Model.Requests()); n != requests {
				t.Fatalf("an input to a full session reached the model (%d requests, was %d)", n, requests)
			}
		})
	}
}

// TestNativeStateLimit: the program's native state is mirrored (in
// chunks) while within the Session's native_state_bytes, and refused past
// it with NATIVE_STATE_TOO_LARGE, recorded as a native_state.refused
// control event, without the store taking more than the limit: here a box
// makes its conversation file sparse (64 MiB that cost the box nothing),
// which before cost the server the whole file, in memory and in the store.
func TestNativeStateLimit(t *testing.T) {
	const limit = 8 << 20
	e := servertest.New(t, servertest.Options{})
	sid := e.Session(agentWithLimits(t, e, "native", map[string]any{"native_state_bytes": limit}))
	// The process harness runs boxes on the host: the built-in agent's
	// conversation file is this path.
	state := "/tmp/.astrabox-agent/" + sid + "/conversation.jsonl"
	t.Cleanup(func() { os.RemoveAll("/tmp/.astrabox-agent/" + sid) })

	// Within the limit, and larger than a chunk: mirrored whole. (The
	// agent records the call's 3 MB argument.)
	e.Model.Push(fakemodel.Call("write_file", map[string]any{"path": "big.txt", "content": strings.Repeat("0123456789abcdef", 3<<20/16)}),
		fakemodel.Text("done"))
	send(t, e, sid, "grow your state a little")
	evs := follow(t, e, sid, 0, func(ev logEvent) bool {
		return ev.Type == "native_state.saved" && payloadOf(t, ev)["bytes"].(float64) >= 3<<20
	})
	saved := int(payloadOf(t, last(evs))["bytes"].(float64))
	stored, err := e.Store.NativeState(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	if saved < 3<<20 || len(stored) != saved || len(stored) > len(file) || !bytes.Equal(stored, file[:len(stored)]) {
		t.Fatalf("native state within the limit: %d bytes stored (saved %d), the file has %d; want the file's bytes", len(stored), saved, len(file))
	}

	// Past it: refused, and the store keeps what it had.
	e.Model.Push(fakemodel.Call("shell", map[string]any{"command": "truncate -s 64M " + state}), fakemodel.Text("done"))
	send(t, e, sid, "grow your state a lot")
	evs = follow(t, e, sid, last(evs).Seq, func(ev logEvent) bool {
		return ev.Type == "native_state.refused" || ev.Type == "native_state.saved" && payloadOf(t, ev)["bytes"].(float64) > limit
	})
	if last(evs).Type != "native_state.refused" {
		t.Fatalf("native state past the limit saved: %s", last(evs).Payload)
	}
	refused := payloadOf(t, last(evs))
	if refused["code"] != string(runner.CodeNativeStateTooLarge) || refused["limit"] != float64(limit) || refused["bytes"].(float64) < 64<<20 {
		t.Fatalf("native_state.refused %v", refused)
	}
	after, err := e.Store.NativeState(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) > limit {
		t.Fatalf("%d bytes of native state stored past the limit of %d", len(after), limit)
	}
	for _, ev := range follow(t, e, sid, 0, func(ev logEvent) bool { return ev.Seq == last(evs).Seq }) {
		if ev.Type == "native_state.saved" && payloadOf(t, ev)["bytes"].(float64) > limit {
			t.Fatalf("native_state.saved past the limit: %s", ev.Payload)
		}
	}
}

// TestSessionLimitsValidated: a profile's session_limits are checked when
// it is saved, each error naming its field; valid ones are kept.
func TestSessionLimitsValidated(t *testing.T) {
	e := servertest.New(t, servertest.Options{})
	tests := []struct {
		name   string
		limits any
		want   string // in the error; "" for accepted
	}{
		{"valid", map[string]any{"native_state_bytes": 1 << 20, "reply_bytes": 1 << 20, "reply_frames": 100, "session_bytes": 1 << 30, "frames_per_second": 10}, ""},
		{"negative", map[string]any{"reply_frames": -1}, "session_limits.reply_frames"},
		{"past the bound", map[string]any{"frames_per_second": 2_000_000}, "session_limits.frames_per_second"},
		{"unknown key", map[string]any{"reply_frame": 1}, "reply_frame"},
		{"not an object", 5, "session_limits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"backend": e.Backend, "session_limits": tc.limits}
			var out map[string]any
			status := e.Call("PUT", "/api/v1/runtime-profiles/limits", body, &out)
			if tc.want == "" {
				if status != 200 {
					t.Fatalf("PUT = %d %v", status, out)
				}
				e.Must(200, "GET", "/api/v1/runtime-profiles/limits", nil, &out)
				got, _ := json.Marshal(out["session_limits"])
				want, _ := json.Marshal(tc.limits)
				if !jsonEqual(got, want) {
					t.Fatalf("stored session_limits %s, want %s", got, want)
				}
				return
			}
			if status != 400 || out["code"] != "INVALID_REQUEST" || !strings.Contains(fmt.Sprint(out["message"]), tc.want) {
				t.Fatalf("PUT = %d %v, want 400 INVALID_REQUEST naming %s", status, out, tc.want)
			}
		})
	}
}

// agentWithLimits stores profile name on the Env's backend with the fake
// model and limits as its session_limits, and an Agent of the built-in
// engine on it; it returns the Agent's id.
func agentWithLimits(t *testing.T, e *servertest.Env, name string, limits map[string]any) string {
	t.Helper()
	profile := strings.ReplaceAll(name, "_", "-")
	e.Must(200, "PUT", "/api/v1/runtime-profiles/"+profile, map[string]any{"backend": e.Backend, "engine_kinds": []string{"astrabox"},
		"model":          map[string]any{"base_url": e.Model.URL(), "api_key": servertest.ModelKey, "models": []string{"fake-1"}},
		"session_limits": limits}, nil)
	var a struct {
		ID string `json:"agent_id"`
	}
	e.Must(201, "POST", "/api/v1/agents", map[string]any{"name": profile, "engine_kind": "astrabox", "runtime_profile": profile,
		"model": "fake-1", "permission_mode": "auto"}, &a)
	return a.ID
}

// send sends an input and returns its id.
func send(t *testing.T, e *servertest.Env, sid, content string) string {
	t.Helper()
	var rc struct {
		InputID string `json:"input_id"`
	}
	e.Must(201, "POST", "/api/v1/sessions/"+sid+"/turn-inputs", map[string]any{"content": content}, &rc)
	return rc.InputID
}

// logEvent is one event of the raw /events stream.
type logEvent struct {
	Seq     int64           `json:"seq"`
	Type    string          `json:"type"`
	InputID string          `json:"input_id"`
	Payload json.RawMessage `json:"payload"`
	At      time.Time       `json:"at"`
}

// follow reads the Session's log after seq until stop returns true for an
// event, and returns the events read.
func follow(t *testing.T, e *servertest.Env, sid string, after int64, stop func(logEvent) bool) []logEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/sessions/%s/events?after_seq=%d", e.URL, sid, after), nil)
	req.Header.Set(api.HeaderAPIKey, servertest.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
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
			t.Fatalf("bad event %q: %v", line, err)
		}
		out = append(out, ev)
		if stop(ev) {
			return out
		}
	}
	t.Fatalf("the log ended before the awaited event (%v) after %d events", sc.Err(), len(out))
	return nil
}

func turnEnded(inputID string) func(logEvent) bool {
	return func(ev logEvent) bool { return ev.Type == "turn.ended" && ev.InputID == inputID }
}

func last(evs []logEvent) logEvent { return evs[len(evs)-1] }

func payloadOf(t *testing.T, ev logEvent) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Payload, &m); err != nil {
		t.Fatalf("payload of %s: %v", ev.Type, err)
	}
	return m
}

// waitState polls the Session until it is in state.
func waitState(t *testing.T, e *servertest.Env, sid, state string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var s map[string]any
	for time.Now().Before(deadline) {
		e.Must(200, "GET", "/api/v1/sessions/"+sid, nil, &s)
		if s["state"] == state {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("session %s never reached %s: %v", sid, state, s)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}
