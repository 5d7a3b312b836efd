package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// eventsKeepAlive is how often an idle events stream sends a comment, so
// that proxies keep the connection and a departed client is noticed.
const eventsKeepAlive = 15 * time.Second

// sandboxEvents (addition) streams a sandbox's state transitions as SSE:
// first those recorded after `after` (or Last-Event-ID), then live ones as
// any replica records them, until the sandbox terminates or the client
// leaves. The seqs are the sandbox's own (its durable event stream: 1, 2,
// 3, ... without gaps), so a client resumes with the last id it saw.
func (s *Server) sandboxEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var after int64
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			httpx.WriteError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "after must be a non-negative event sequence number"))
			return
		}
		after = n
	} else if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	}
	// An unknown sandbox is 404 unless it left events after `after` (a
	// deleted one's end with Terminated).
	if _, err := s.svc.Get(r.Context(), id); err != nil {
		past, perr := s.svc.Events(r.Context(), id, after)
		if perr != nil {
			httpx.WriteError(w, perr)
			return
		}
		if len(past) == 0 {
			httpx.WriteError(w, err)
			return
		}
	}
	sw := sse.NewWriter(w)
	sw.Flush()
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		keep := time.NewTicker(eventsKeepAlive)
		defer keep.Stop()
		for {
			select {
			case <-keep.C:
				if sw.Comment("ping") != nil {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	})
	err := s.svc.FollowEvents(ctx, id, after, func(e store.Event) (bool, error) {
		ev := wire.StateEvent{Seq: e.Seq, SandboxID: e.SandboxID, State: string(e.State), Reason: e.Reason, At: e.At}
		if sw.Event(strconv.FormatInt(e.Seq, 10), "state", ev) != nil {
			return false, nil // the client left
		}
		return !e.State.Terminal(), nil
	})
	if err != nil && ctx.Err() == nil {
		// The store failed mid-stream: the client sees the stream end and
		// resumes from its last id.
		s.log.Warn("sandbox events stream", "sandbox_id", id, "err", err)
	}
}
