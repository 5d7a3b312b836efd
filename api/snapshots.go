package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
)

// callerOf returns the caller of ctx as lifecycle asks about snapshots and
// volumes: the owner of what it makes, who sees only its own unless an
// administrator (Admin), who sees and uses every user's. What the caller
// may not see is answered NOT_FOUND, as a missing one is.
func callerOf(ctx context.Context) lifecycle.Owner {
	o := ownerOf(ctx)
	o.Admin = identity.PrincipalFrom(ctx).IsAdmin()
	return o
}

// toWireSnapshot shows a snapshot as the lifecycle API does. Snapshots
// are captured before the create call answers, so every listed one is
// Ready.
func toWireSnapshot(info sandbox.SnapshotInfo) wire.Snapshot {
	at := info.CreatedAt.UTC()
	return wire.Snapshot{ID: info.ID, SandboxID: info.SandboxID, Name: info.Name, CreatedAt: at,
		Status: wire.SnapshotStatus{State: "Ready", Reason: "snapshot_ready", LastTransitionAt: &at}}
}

// createSnapshot answers POST /sandboxes/{id}/snapshots: 202 with the
// snapshot, Ready (capture happens within the call, the sandbox paused
// meanwhile where the backend needs it), owned by the caller.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateSnapshotRequest
	if r.ContentLength != 0 {
		if err := s.decode(w, r, &req); err != nil {
			httpx.WriteError(w, err)
			return
		}
	}
	info, err := s.svc.CreateSnapshot(r.Context(), r.PathValue("id"), req.Name, callerOf(r.Context()))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/snapshots/"+info.ID)
	httpx.WriteJSON(w, http.StatusAccepted, toWireSnapshot(info))
}

// listSnapshots answers GET /snapshots?sandboxId=&state=&page=&pageSize=:
// the caller's snapshots (an administrator's: all).
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, pageSize := 1, 20
	for _, p := range []struct {
		name string
		dst  *int
		max  int
	}{{"page", &page, 1 << 20}, {"pageSize", &pageSize, 200}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > p.max {
				httpx.WriteError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "%s must be an integer from 1 to %d, got %q", p.name, p.max, v))
				return
			}
			*p.dst = n
		}
	}
	all, err := s.svc.ListSnapshots(r.Context(), callerOf(r.Context()), lifecycle.SnapshotFilter{SandboxID: q.Get("sandboxId")})
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	items := []wire.Snapshot{}
	for _, info := range all {
		items = append(items, toWireSnapshot(info))
	}
	if states := q["state"]; len(states) > 0 {
		keep := map[string]bool{}
		for _, st := range states {
			keep[st] = true
		}
		items = filterSnapshots(items, keep)
	}
	total := len(items)
	start := min((page-1)*pageSize, total)
	end := min(start+pageSize, total)
	pages := (total + pageSize - 1) / pageSize
	httpx.WriteJSON(w, http.StatusOK, wire.ListSnapshotsResponse{Items: items[start:end],
		Pagination: PaginationInfo{Page: page, PageSize: pageSize, TotalItems: total, TotalPages: pages, HasNextPage: page < pages}})
}

func filterSnapshots(items []wire.Snapshot, states map[string]bool) []wire.Snapshot {
	out := items[:0]
	for _, it := range items {
		if states[it.Status.State] {
			out = append(out, it)
		}
	}
	return out
}

// getSnapshot answers GET /snapshots/{sid}: 404 NOT_FOUND for another
// user's, unless the caller is an administrator.
func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	info, err := s.svc.GetSnapshot(r.Context(), callerOf(r.Context()), r.PathValue("sid"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, toWireSnapshot(info))
}

// deleteSnapshot answers DELETE /snapshots/{sid}: 204, or 404 NOT_FOUND
// for another user's, unless the caller is an administrator.
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	httpx.NoContent(w, s.svc.DeleteSnapshot(r.Context(), callerOf(r.Context()), r.PathValue("sid")))
}
