package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// sandboxEvents (addition) streams a sandbox's state transitions as SSE:
// first those recorded after `after` (or Last-Event-ID), then live ones,
// until the sandbox terminates or the client leaves.
func (s *Server) sandboxEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var after int64
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "after must be a non-negative event sequence number"))
			return
		}
		after = n
	} else if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	}
	live, stop := s.svc.Subscribe(id)
	defer stop()
	past, err := s.svc.Events(r.Context(), id, after)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(past) == 0 {
		if _, err := s.svc.Get(r.Context(), id); err != nil {
			writeError(w, err)
			return
		}
	}
	sw := sse.NewWriter(w)
	sw.Flush()
	send := func(e store.Event) bool {
		if e.Seq <= after {
			return true
		}
		after = e.Seq
		err := sw.Event(strconv.FormatInt(e.Seq, 10), "state", wire.StateEvent{Seq: e.Seq, SandboxID: e.SandboxID, State: string(e.State), Reason: e.Reason, At: e.At})
		return err == nil && !e.State.Terminal()
	}
	for _, e := range past {
		if !send(e) {
			return
		}
	}
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case e := <-live:
			if !send(e) {
				return
			}
		case <-keep.C:
			if sw.Comment("ping") != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
