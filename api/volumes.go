package api

import (
	"net/http"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// toVolumes maps the request's volumes onto the contract's: host → a
// host path, pvc → a named volume (createIfNotExists false → MustExist).
// ossfs and deleteOnSandboxTermination are refused as not supported. The
// paths are checked by sandbox.Spec.Validate and the backend.
func toVolumes(in []wire.Volume) ([]sandbox.Volume, error) {
	out := make([]sandbox.Volume, 0, len(in))
	for _, v := range in {
		sv := sandbox.Volume{Name: v.Name, MountPath: v.MountPath, ReadOnly: v.ReadOnly, SubPath: v.SubPath}
		n := 0
		if v.Host != nil {
			n++
			sv.HostPath = v.Host.Path
			if sv.HostPath == "" {
				return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "volume %q: host.path is required", v.Name)
			}
		}
		if v.PVC != nil {
			n++
			sv.Claim = v.PVC.ClaimName
			if sv.Claim == "" {
				return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "volume %q: pvc.claimName is required", v.Name)
			}
			sv.MustExist = v.PVC.CreateIfNotExists != nil && !*v.PVC.CreateIfNotExists
			if v.PVC.DeleteOnSandboxTermination {
				return nil, sandbox.Errorf(sandbox.CodeCapability, "volume %q: deleteOnSandboxTermination is not supported (named volumes outlive their sandboxes; remove them with DELETE /v1/volumes/{name})", v.Name)
			}
		}
		if v.OSSFS != nil {
			return nil, sandbox.Errorf(sandbox.CodeCapability, "volume %q: ossfs volumes are not supported (available: host, pvc)", v.Name)
		}
		if n != 1 {
			return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "volume %q must have exactly one backend (host or pvc), got %d", v.Name, n)
		}
		out = append(out, sv)
	}
	return out, nil
}

// listVolumes answers GET /v1/volumes[?backend=NAME] (addition): the
// caller's named volumes of the enabled backends (an administrator's:
// every one), with the sandboxes using each.
func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	vols, err := s.svc.ListVolumes(r.Context(), callerOf(r.Context()), r.URL.Query().Get("backend"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	resp := wire.ListVolumesResponse{Items: make([]wire.VolumeInfo, 0, len(vols))}
	for _, v := range vols {
		item := wire.VolumeInfo{Name: v.Name, Backend: v.Backend, InUse: v.InUse}
		if !v.CreatedAt.IsZero() {
			at := v.CreatedAt.UTC().Truncate(time.Second)
			item.CreatedAt = &at
		}
		resp.Items = append(resp.Items, item)
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
}

// deleteVolume answers DELETE /v1/volumes/{name}[?backend=NAME]
// (addition): 204, 404 NOT_FOUND (also for another user's volume, unless
// the caller is an administrator), or 409 CONFLICT while a sandbox mounts
// it.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	httpx.NoContent(w, s.svc.DeleteVolume(r.Context(), callerOf(r.Context()), r.URL.Query().Get("backend"), r.PathValue("name")))
}
