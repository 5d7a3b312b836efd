package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
)

// fast is the reconnect backoff of these tests.
var fast = client.WithBackoff(10*time.Millisecond, 200*time.Millisecond)

// frontDoor is a reverse proxy at a fixed address in front of a test
// server whose address changes when it restarts. A restart cuts the
// streams through it as a server going away does, and while the server
// is down the door answers 502.
type frontDoor struct {
	target atomic.Pointer[url.URL]
	srv    *httptest.Server
}

func newFrontDoor(t *testing.T, backend string) *frontDoor {
	d := &frontDoor{}
	d.point(t, backend)
	d.srv = httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(d.target.Load()) },
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	})
	t.Cleanup(func() {
		d.srv.CloseClientConnections()
		d.srv.Close()
	})
	return d
}

func (d *frontDoor) point(t *testing.T, backend string) {
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	d.target.Store(u)
}

// conversation opens a Session with a new auto-mode Agent.
func conversation(t *testing.T, env *servertest.Env, c *client.Client) string {
	t.Helper()
	a := newAgent(t, env, c, "auto")
	conv, err := c.CreateConversation(testCtx(t), a.ID, client.ConversationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return conv.SessionID
}

// checkContiguous fails unless evs are seqs first, first+1, ... in order.
func checkContiguous(t *testing.T, evs []client.Event, first int64) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != first+int64(i) {
			t.Fatalf("event %d has seq %d, want %d (a seq skipped or repeated)", i, e.Seq, first+int64(i))
		}
	}
}

// TestFollowSurvivesRestart: the server restarts while a tool runs; the
// follower and an AI stream reconnect through the same address, and each
// delivers every seq once, in order, to the reply's end.
func TestFollowSurvivesRestart(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	env, _ := newPlatform(t,
		fakemodel.Call("shell", map[string]any{"command": "until [ -e " + release + " ]; do sleep 0.05; done; echo released"}),
		fakemodel.Text("done after the restart"))
	door := newFrontDoor(t, env.URL)
	c := client.New(door.srv.URL, servertest.Key)
	sid := conversation(t, env, c)
	ctx := testCtx(t)

	var reconnects atomic.Int32
	events := make(chan client.Event, 4096)
	followed := make(chan error, 1)
	go func() {
		followed <- c.Follow(ctx, sid, 0, func(e client.Event) error {
			events <- e
			if e.Type == "turn.ended" {
				return client.ErrStop
			}
			return nil
		}, fast, client.OnReconnect(func(client.Reconnect) { reconnects.Add(1) }))
	}()
	stream, err := c.AIStream(ctx, sid, -1, true, fast)
	if err != nil {
		t.Fatal(err)
	}
	chunks := collect(t, stream)

	rc, err := c.SendInput(ctx, sid, "go", "")
	if err != nil {
		t.Fatal(err)
	}
	var evs []client.Event
	for len(evs) == 0 || evs[len(evs)-1].Type != "tool-input-available" {
		select {
		case e := <-events:
			evs = append(evs, e)
		case <-ctx.Done():
			t.Fatalf("no tool call; events %v", types(evs))
		}
	}
	env.Restart()
	door.point(t, env.URL)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-followed:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the follower never saw the reply end")
	}
	close(events)
	for e := range events {
		evs = append(evs, e)
	}
	checkContiguous(t, evs, 1)
	if reconnects.Load() == 0 {
		t.Fatal("the follower never reconnected: the restart did not cut its stream")
	}
	if last := evs[len(evs)-1]; last.TurnID != rc.TurnID {
		t.Fatalf("the follower stopped at %s of another turn", last.Type)
	}
	// What the follower delivered is the log as recorded.
	direct := client.New(env.URL, servertest.Key)
	logged := until(t, direct, sid, 0, turnEnded(rc.TurnID))
	if !slices.Equal(types(evs), types(logged)) {
		t.Fatalf("followed %v\nlogged   %v", types(evs), types(logged))
	}
	var output strings.Builder
	var frameSeqs []int64
	for _, e := range evs {
		if e.IsFrame() && e.TurnID == rc.TurnID {
			frameSeqs = append(frameSeqs, e.Seq)
		}
		if ch, err := e.Chunk(); err == nil && ch.Type == "tool-output-available" {
			output.Write(ch.Output)
		}
	}
	if !strings.Contains(output.String(), "released") {
		t.Fatalf("tool output %s; log %v", output.String(), types(evs))
	}
	// The reply's outcome is the server's business, not the follower's: a
	// model call made before the new server re-attached fails the reply
	// (MODEL_UNREACHABLE), which the follower must deliver just the same.
	t.Logf("the reply ended %s", evs[len(evs)-1].Payload)

	// The AI stream resumed too: the reply's frames once each, then the
	// end cursor.
	var got []client.Chunk
	select {
	case got = <-chunks:
	case <-ctx.Done():
		t.Fatal("the ai stream never ended")
	}
	checkReply(t, got, frameSeqs)
}

// TestAIStreamKeepsItsPlace: an AI stream that waits for the next reply
// loses its connection before its first chunk, and the reply runs to its
// end while the server cannot be reached; once it can, the stream
// delivers that reply, not the one after it.
func TestAIStreamKeepsItsPlace(t *testing.T) {
	env, direct := newPlatform(t, fakemodel.Text("said while the stream was away"))
	door := newFrontDoor(t, env.URL)
	sid := conversation(t, env, direct)
	ctx := testCtx(t)

	stream, err := client.New(door.srv.URL, servertest.Key).AIStream(ctx, sid, -1, true, fast)
	if err != nil {
		t.Fatal(err)
	}
	chunks := collect(t, stream)

	door.point(t, "http://127.0.0.1:1") // nothing listens: 502 until pointed back
	door.srv.CloseClientConnections()
	rc, err := direct.SendInput(ctx, sid, "hello", "")
	if err != nil {
		t.Fatal(err)
	}
	logged := until(t, direct, sid, 0, turnEnded(rc.TurnID))
	door.point(t, env.URL)

	select {
	case got := <-chunks:
		checkReply(t, got, replySpan(logged, rc.TurnID))
	case <-ctx.Done():
		t.Fatal("the ai stream lost its place: it waits for a later reply")
	}
}

// collect reads stream to its end in the background and hands over its
// chunks then (an error other than io.EOF fails t).
func collect(t *testing.T, stream *client.ChunkStream) <-chan []client.Chunk {
	chunks := make(chan []client.Chunk, 1)
	go func() {
		var got []client.Chunk
		for {
			ch, err := stream.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Errorf("ai stream: %v", err)
				}
				chunks <- got
				return
			}
			got = append(got, ch)
		}
	}()
	return chunks
}

// checkReply checks an AI stream's chunks: the frames with seqs want,
// then the transient cursor naming the finish frame.
func checkReply(t *testing.T, got []client.Chunk, want []int64) {
	t.Helper()
	if len(got) < 2 {
		t.Fatalf("ai stream gave %d chunks", len(got))
	}
	var seqs []int64
	for _, ch := range got[:len(got)-1] {
		seqs = append(seqs, ch.Seq)
	}
	if !slices.Equal(seqs, want) {
		t.Fatalf("ai stream chunk seqs %v, want %v", seqs, want)
	}
	first, finish, cursor := got[0], got[len(got)-2], got[len(got)-1]
	var cur struct {
		FrameSeq int64 `json:"frameSeq"`
	}
	_ = json.Unmarshal(cursor.Data, &cur)
	if first.Type != "data-turn-accepted" || finish.Type != "finish" || cursor.Type != "data-resume-cursor" ||
		!cursor.Transient || cursor.Seq != 0 || cur.FrameSeq != finish.Seq {
		t.Fatalf("reply opens with %s, ends with %s then %s", first.Raw, finish.Raw, cursor.Raw)
	}
}

func types(evs []client.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// replySpan is one reply's frame seqs in a log.
func replySpan(evs []client.Event, turnID string) []int64 {
	var seqs []int64
	for _, e := range evs {
		if e.IsFrame() && e.TurnID == turnID {
			seqs = append(seqs, e.Seq)
		}
	}
	return seqs
}

// TestFollowAndAIStreamFrom reads a finished conversation of two replies
// from several points.
func TestFollowAndAIStreamFrom(t *testing.T) {
	env, c := newPlatform(t, fakemodel.Text("first reply"), fakemodel.Text("second reply"))
	sid := conversation(t, env, c)
	ctx := testCtx(t)
	rc1, err := c.SendInput(ctx, sid, "one", "")
	if err != nil {
		t.Fatal(err)
	}
	until(t, c, sid, 0, turnEnded(rc1.TurnID))
	rc2, err := c.SendInput(ctx, sid, "two", "")
	if err != nil {
		t.Fatal(err)
	}
	all := until(t, c, sid, 0, turnEnded(rc2.TurnID))
	head := all[len(all)-1].Seq
	one, two := replySpan(all, rc1.TurnID), replySpan(all, rc2.TurnID)

	t.Run("follow", func(t *testing.T) {
		for _, after := range []int64{0, 1, one[3], head - 1} {
			evs := until(t, c, sid, after, func(e client.Event) bool { return e.Seq == head })
			checkContiguous(t, evs, after+1)
		}
	})
	t.Run("follow ends", func(t *testing.T) {
		boom := errors.New("boom")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		tests := []struct {
			name string
			ctx  context.Context
			sid  string
			fn   func(client.Event) error
			want func(error) bool
		}{
			{"callback error as is", ctx, sid, func(client.Event) error { return boom }, func(err error) bool { return err == boom }},
			{"ErrStop", ctx, sid, func(client.Event) error { return client.ErrStop }, func(err error) bool { return err == nil }},
			{"missing session", ctx, "ses_missing", nil, func(err error) bool { return client.CodeOf(err) == "SESSION_NOT_FOUND" }},
			{"context ends", cctx, sid, func(client.Event) error { return nil }, func(err error) bool { return errors.Is(err, context.Canceled) }},
		}
		for _, tt := range tests {
			if err := c.Follow(tt.ctx, tt.sid, 0, tt.fn, fast); !tt.want(err) {
				t.Errorf("%s: Follow returned %v", tt.name, err)
			}
		}
	})
	t.Run("ai stream", func(t *testing.T) {
		tests := []struct {
			name   string
			after  int64
			follow bool
			want   []int64
			err    error
		}{
			{"from the start", 0, false, one, nil},
			{"inside a reply restarts it", one[4], false, one, nil},
			{"at a reply's end, the next", one[len(one)-1], false, two, nil},
			{"past the last reply", two[len(two)-1], false, nil, client.ErrNoReply},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s, err := c.AIStream(ctx, sid, tt.after, tt.follow)
				if tt.err != nil || err != nil {
					if !errors.Is(err, tt.err) {
						t.Fatalf("AIStream: %v, want %v", err, tt.err)
					}
					return
				}
				defer s.Close()
				var got []client.Chunk
				for {
					ch, err := s.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, ch)
				}
				checkReply(t, got, tt.want)
			})
		}
		if _, err := c.AIStream(ctx, "ses_missing", 0, false); client.CodeOf(err) != "SESSION_NOT_FOUND" {
			t.Fatalf("missing session: %v", err)
		}
	})
}
