package aisdk_test

// Reading the session's raw log, and running npm and node.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/sse"
)

// readEvents follows a session's /events after seq until stop returns true
// for an event, and returns the events read.
func readEvents(ctx context.Context, t *testing.T, env *servertest.Env, sid string, after int64, stop func(logEvent) bool) []logEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/sessions/%s/events?after_seq=%d", env.URL, sid, after), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderAPIKey, servertest.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /events: %d %s", resp.StatusCode, b)
	}
	var out []logEvent
	r := sse.NewReader(resp.Body, 0)
	for {
		f, err := r.Next()
		if err != nil {
			t.Fatalf("/events of %s ended before the awaited event: %v; read %s", sid, err, summarize(out))
		}
		var e logEvent
		if err := json.Unmarshal([]byte(f.Data), &e); err != nil {
			t.Fatalf("/events: bad event %q: %v", f.Data, err)
		}
		out = append(out, e)
		if stop(e) {
			return out
		}
	}
}

// untilTurnEnded stops at the turn.ended of an input.
func untilTurnEnded(inputID string) func(logEvent) bool {
	return func(e logEvent) bool { return e.Type == "turn.ended" && e.InputID == inputID }
}

// firstFrame returns the first UI frame of a turn.
func firstFrame(t *testing.T, evs []logEvent, turnID string) logEvent {
	t.Helper()
	for _, e := range evs {
		if e.TurnID == turnID && !strings.Contains(e.Type, ".") {
			return e
		}
	}
	t.Fatalf("turn %s has no frame: %s", turnID, summarize(evs))
	return logEvent{}
}

// frameOf returns a turn's first frame of a type.
func frameOf(t *testing.T, evs []logEvent, turnID, typ string) logEvent {
	t.Helper()
	for _, e := range evs {
		if e.TurnID == turnID && e.Type == typ {
			return e
		}
	}
	t.Fatalf("turn %s has no %s frame: %s", turnID, typ, summarize(evs))
	return logEvent{}
}

// textOf returns a text-delta frame's delta.
func textOf(t *testing.T, e logEvent) string {
	t.Helper()
	var f struct {
		Delta string `json:"delta"`
	}
	if err := json.Unmarshal(e.Payload, &f); err != nil || f.Delta == "" {
		t.Fatalf("frame %d %s has no delta: %s", e.Seq, e.Type, e.Payload)
	}
	return f.Delta
}

// messageIDOf returns a start frame's messageId.
func messageIDOf(t *testing.T, e logEvent) string {
	t.Helper()
	var f struct {
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal(e.Payload, &f); err != nil || f.MessageID == "" {
		t.Fatalf("start frame %d has no messageId: %s", e.Seq, e.Payload)
	}
	return f.MessageID
}

func summarize(evs []logEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%d:%s ", e.Seq, e.Type)
	}
	return b.String()
}
