package platformapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// keepaliveEvery is how often an idle event stream sends a comment.
const keepaliveEvery = 15 * time.Second

// afterSeq reads after_seq (or its alias, the Last-Event-ID header).
func afterSeq(r *http.Request) (int64, bool, error) {
	v := r.URL.Query().Get("after_seq")
	if v == "" {
		v = r.Header.Get("Last-Event-ID")
	}
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false, sandbox.Errorf(platform.CodeInvalid, "after_seq must be a non-negative sequence number")
	}
	return n, true, nil
}

// startKeepalive writes a comment to sw every keepaliveEvery until the
// returned stop is called; stop returns once no write is in flight, so a
// handler calls it before it returns.
func startKeepalive(ctx context.Context, sw *sse.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		keepalive(ctx, sw)
	}()
	return func() {
		cancel()
		<-done
	}
}

// keepalive writes a comment to sw every keepaliveEvery until ctx ends.
func keepalive(ctx context.Context, sw *sse.Writer) {
	t := time.NewTicker(keepaliveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if sw.Comment("keepalive") != nil {
				return
			}
		}
	}
}

// errAccessEnded is the cause of a stream's end when its caller may no
// longer read the Session.
var errAccessEnded = errors.New("the caller's access to the session ended")

// maxReauthFailures is how many checks in a row a stream survives that
// fail for another reason than the caller's access (a store that does not
// answer): the stream then ends, as it does at once when access ends.
const maxReauthFailures = 5

// watchAccess returns a context of r that ends, with cause errAccessEnded,
// once the caller of r may no longer read Session id: every
// Config.ReauthorizeEvery the request is authenticated again
// (Config.Reauthorize) and the Session checked for that caller. stop ends
// the watching; a handler calls it before it returns.
func (h *Handler) watchAccess(r *http.Request, id string) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	if h.cfg.Reauthorize == nil {
		return ctx, func() { cancel(nil) }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(h.cfg.ReauthorizeEvery)
		defer t.Stop()
		failures := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := h.reauthorize(r, id)
			if err == nil {
				failures = 0
				continue
			}
			if failures++; !accessEnded(err) && failures < maxReauthFailures {
				h.log.Warn("re-check a stream's caller", "session_id", id, "err", err)
				continue
			}
			h.log.Debug("a stream's caller lost access", "session_id", id, "err", err)
			cancel(errAccessEnded)
			return
		}
	}()
	return ctx, func() {
		cancel(nil)
		<-done
	}
}

// reauthorize checks that the caller of r may still read Session id.
func (h *Handler) reauthorize(r *http.Request, id string) error {
	p, err := h.cfg.Reauthorize(r)
	if err != nil {
		return err
	}
	if !p.Can(identity.ScopeRead) {
		return identity.Forbidden("reading session %s needs the %s permission", id, identity.ScopeRead)
	}
	return h.sess.CheckSession(identity.WithPrincipal(r.Context(), p), id)
}

// accessEnded reports whether a check failed on the caller's access (not
// on, say, a store that did not answer).
func accessEnded(err error) bool {
	switch sandbox.CodeOf(err) {
	case sandbox.CodeUnauthorized, identity.CodeTokenExpired, identity.CodeForbidden, platform.CodeSessionNotFound:
		return true
	}
	return false
}

// aiStream serves one reply in the AI SDK UI message stream protocol
// (PLATFORM.md): with after_seq, the reply that seq falls inside or else
// the next one (204 when there is none and follow is not asked); with
// follow=session and no after_seq, the reply in progress or the next one.
// It ends with an error chunk once its caller may no longer read the
// Session (watchAccess).
func (h *Handler) aiStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	if err := h.sess.CheckSession(ctx, id); err != nil {
		httpx.WriteError(w, err)
		return
	}
	n, hasAfter, err := afterSeq(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	follow := r.URL.Query().Get("follow") == "session"
	var start platform.ReplyStart
	switch {
	case hasAfter:
		start, err = h.sess.ResumeReply(ctx, id, n)
		if err == nil && !start.Found && !follow {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	case follow:
		start, err = h.sess.ActiveReply(ctx, id)
	default:
		err = sandbox.Errorf(platform.CodeInvalid, "give after_seq (resume) or follow=session")
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	reply, from := start.Reply, start.After
	w.Header().Set("x-vercel-ai-ui-message-stream", "v1")
	w.Header().Set(wire.HeaderStreamAfter, strconv.FormatInt(from, 10))
	sw := sse.NewWriter(w)
	sw.Flush()
	ctx, stopWatch := h.watchAccess(r, id)
	defer stopWatch()
	defer startKeepalive(ctx, sw)()
	turn := reply.TurnID
	err = h.sess.Follow(ctx, id, from, func(e store.LogEntry) (bool, error) {
		if !platform.IsFrame(e) || e.TurnID == "" {
			return true, nil
		}
		if turn == "" {
			if e.Type != string(wire.DataTurnAccepted) {
				return true, nil // the tail of an earlier reply
			}
			turn = e.TurnID
		}
		if e.TurnID != turn {
			return true, nil
		}
		if err := sw.EventJSON(strconv.FormatInt(e.Seq, 10), "", e.Payload); err != nil {
			return false, err
		}
		if e.Type != string(wire.ChunkFinish) {
			return true, nil
		}
		cursor := wire.Transient(wire.DataResumeCursor, map[string]any{"frameSeq": e.Seq, "turnId": turn}).JSON()
		if err := sw.EventJSON("", "", cursor); err != nil {
			return false, err
		}
		return false, sw.EventJSON("", "", []byte("[DONE]"))
	})
	if errors.Is(context.Cause(ctx), errAccessEnded) {
		_ = sw.Event("", "", map[string]string{"type": string(wire.ChunkError), "errorText": "access to the session ended"})
		return
	}
	if err != nil && ctx.Err() == nil {
		h.log.Debug("ai stream ended", "session_id", id, "err", err)
	}
}

// logEvent is one entry of the raw /events stream.
type logEvent struct {
	Seq       int64           `json:"seq"`
	Type      string          `json:"type"`
	TurnID    string          `json:"turn_id,omitempty"`
	InputID   string          `json:"input_id,omitempty"`
	MessageID string          `json:"message_id,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	At        time.Time       `json:"at"`
}

// sessionEvents (addition) streams the raw durable log as SSE after
// after_seq, following live until the client leaves or may no longer read
// the Session (watchAccess), or, with follow=false, until the end of what
// is recorded.
func (h *Handler) sessionEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	if err := h.sess.CheckSession(ctx, id); err != nil {
		httpx.WriteError(w, err)
		return
	}
	n, _, err := afterSeq(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	sw := sse.NewWriter(w)
	sw.Flush()
	send := func(e store.LogEntry) error {
		b, _ := json.Marshal(logEvent{Seq: e.Seq, Type: e.Type, TurnID: e.TurnID, InputID: e.InputID, MessageID: e.MessageID, Payload: e.Payload, At: e.At})
		return sw.EventJSON(strconv.FormatInt(e.Seq, 10), "", b)
	}
	if r.URL.Query().Get("follow") == "false" {
		entries, err := h.sess.ReadLog(ctx, id, n)
		if err != nil {
			return
		}
		for _, e := range entries {
			if send(e) != nil {
				return
			}
		}
		return
	}
	ctx, stopWatch := h.watchAccess(r, id)
	defer stopWatch()
	defer startKeepalive(ctx, sw)()
	_ = h.sess.Follow(ctx, id, n, func(e store.LogEntry) (bool, error) {
		if err := send(e); err != nil {
			return false, err
		}
		return true, nil
	})
}
