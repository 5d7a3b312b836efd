package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/streamlog"
)

// TestEventsStream follows a sandbox's state events from a second replica
// (a server on the same store and notifier) while the first changes the
// sandbox, then resumes the finished stream from several points.
func TestEventsStream(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	replica := newServer(t, server.Config{Store: e.svc.Store(), Backends: map[string]sandbox.Provider{"process": e.p},
		DefaultBackend: "process", Notifier: e.n})
	rs := httptest.NewServer(replica.Handler)
	t.Cleanup(rs.Close)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		events []string
		err    error
	}
	seen, done := make(chan struct{}, 8), make(chan result, 1)
	go func() {
		var r result
		r.err = client.New(rs.URL, testKey).Events(ctx, sb.ID, 0, func(ev wire.StateEvent) error {
			r.events = append(r.events, fmt.Sprintf("%d:%s", ev.Seq, ev.State))
			seen <- struct{}{}
			return nil
		})
		done <- r
	}()
	for range 2 { // Pending and Running are recorded: the rest come live
		select {
		case <-seen:
		case r := <-done:
			t.Fatalf("the stream ended early: %v %v", r.events, r.err)
		}
	}
	if err := e.c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if want := "1:Pending,2:Running,3:Stopping,4:Terminated"; r.err != nil || strings.Join(r.events, ",") != want {
		t.Fatalf("events on the replica %v (%v), want %s", r.events, r.err, want)
	}
	stream := lifecycle.EventStream(sb.ID)
	if !e.n.notified(stream) || !e.n.subscribed(stream) {
		t.Fatalf("the replica was not woken through the notifier: notified %v, subscribed %v", e.n.notified(stream), e.n.subscribed(stream))
	}

	// Resuming the deleted sandbox's stream: by query or Last-Event-ID.
	tests := []struct {
		name, query, lastID string
		status              int
		want                string // frames as id:state
	}{
		{"from the start", "?after=0", "", 200, "1:Pending,2:Running,3:Stopping,4:Terminated"},
		{"after a seq", "?after=2", "", 200, "3:Stopping,4:Terminated"},
		{"Last-Event-ID", "", "3", 200, "4:Terminated"},
		{"query over Last-Event-ID", "?after=1", "3", 200, "2:Running,3:Stopping,4:Terminated"},
		{"past the end of a deleted sandbox", "?after=4", "", 404, ""},
		{"bad after", "?after=-1", "", 400, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, base := range []string{e.srv.URL, rs.URL} {
				status, frames := readEvents(t, base+"/v1/sandboxes/"+sb.ID+"/events"+tc.query, tc.lastID)
				if status != tc.status || strings.Join(frames, ",") != tc.want {
					t.Errorf("%s: %d %v, want %d %s", base, status, frames, tc.status, tc.want)
				}
			}
		})
	}
	if status, _ := readEvents(t, e.srv.URL+"/v1/sandboxes/nope/events", ""); status != 404 {
		t.Fatalf("events of an unknown sandbox: %d", status)
	}
}

// readEvents GETs an events stream to its end and returns the status and
// the frames as "id:state".
func readEvents(t *testing.T, url, lastID string) (int, []string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, url, nil)
	req.Header.Set(api.HeaderAPIKey, testKey)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var frames []string
	r := sse.NewReader(resp.Body, 0)
	for resp.StatusCode == 200 {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var ev wire.StateEvent
		if err := json.Unmarshal([]byte(f.Data), &ev); err != nil || f.Event != "state" || f.ID != strconv.FormatInt(ev.Seq, 10) {
			t.Fatalf("frame %+v: %v", f, err)
		}
		frames = append(frames, f.ID+":"+ev.State)
	}
	return resp.StatusCode, frames
}

// recordingNotifier is an in-process notifier that records which streams
// were notified and subscribed to.
type recordingNotifier struct {
	*streamlog.Local
	mu   sync.Mutex
	seen map[string]int // stream -> 1 notified | 2 subscribed
}

func newRecordingNotifier() *recordingNotifier {
	return &recordingNotifier{Local: streamlog.NewLocal(), seen: map[string]int{}}
}

func (n *recordingNotifier) Notify(name string) {
	n.mark(name, 1)
	n.Local.Notify(name)
}

func (n *recordingNotifier) Subscribe(name string) (<-chan struct{}, func()) {
	n.mark(name, 2)
	return n.Local.Subscribe(name)
}

func (n *recordingNotifier) mark(name string, bit int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen[name] |= bit
}

func (n *recordingNotifier) has(name string, bit int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen[name]&bit != 0
}

func (n *recordingNotifier) notified(name string) bool   { return n.has(name, 1) }
func (n *recordingNotifier) subscribed(name string) bool { return n.has(name, 2) }
