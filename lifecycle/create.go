package lifecycle

// Creating a sandbox: a request is planned against its profile and the
// backend's capabilities, recorded, then provisioned on the backend (or
// claimed from a warm pool).

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/astrabox/astrabox/egress/trust"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// CreateRequest is a create call, after the API decoded it.
type CreateRequest struct {
	Profile      string
	Backend      string
	Image        string
	Entrypoint   []string
	Env          map[string]string
	Metadata     map[string]string
	Resources    sandbox.Resources
	Timeout      *time.Duration // nil: the profile's; 0: never expires
	IdleTimeout  *time.Duration
	Network      *sandbox.NetworkPolicy
	Capabilities []sandbox.Capability
	// Recorded, when set, is called once with a copy of the new record as
	// soon as it is in the store (Pending, before the backend's create), so
	// that a caller running Create in the background learns the id at
	// once. A box claimed from a warm pool is Running at once; Recorded is
	// not called for it, and Create returns promptly. With Recorded, a
	// create the backend refuses keeps its record, Failed, for the
	// caller's clients to look up until the caller or the reconciler
	// deletes it; without, the record is forgotten at once (see Create).
	Recorded func(store.Sandbox)
	// Volumes are mounted into the box (see sandbox.Volume).
	Volumes []sandbox.Volume
	// SnapshotID starts the box from a snapshot (see fromSnapshot).
	SnapshotID string
	// CredentialProxy gives the box a Credential Vault (see
	// sandbox.Spec.CredentialProxy and credvault.go); Network must then be
	// limited.
	CredentialProxy bool
	// Owner is the user the sandbox belongs to, and their organization.
	Owner Owner
}

// Owner names who a sandbox belongs to.
type Owner struct {
	UserID string
	OrgID  string
	// Admin says the user acts as an administrator: they may start a box
	// from any user's snapshot and mount any user's named volume (see
	// owners.go). What they make is still theirs.
	Admin bool
}

// newID returns a sandbox id: 20 lower-case alphanumerics.
func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [20]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// plan merges a request over its profile into a backend and a Spec.
func (s *Service) plan(ctx context.Context, req CreateRequest) (string, sandbox.Spec, Profile, error) {
	if err := s.fromSnapshot(ctx, &req); err != nil {
		return "", sandbox.Spec{}, Profile{}, err
	}
	name := req.Profile
	if name == "" {
		name = "default"
	}
	prof, err := s.profile(ctx, name)
	if err != nil {
		return "", sandbox.Spec{}, prof, err
	}
	backend := firstNonEmpty(req.Backend, prof.Backend, s.cfg.DefaultBackend)
	if _, enabled := s.cfg.Backends[backend]; !enabled {
		for _, b := range s.cfg.Installed {
			if b == backend {
				return "", sandbox.Spec{}, prof, sandbox.Errorf(sandbox.CodeBackendDisabled, "backend %q is installed but not enabled on this server (enabled: %s)", backend, strings.Join(s.backendNames(), ", "))
			}
		}
		return "", sandbox.Spec{}, prof, sandbox.Errorf(sandbox.CodeInvalidRequest, "unknown backend %q (enabled: %s)", backend, strings.Join(s.backendNames(), ", "))
	}
	entrypoint := req.Entrypoint
	if len(entrypoint) == 0 {
		entrypoint = prof.Entrypoint
	}
	spec := sandbox.Spec{
		Image:        firstNonEmpty(req.Image, prof.Image, "host"),
		Entrypoint:   entrypoint,
		Env:          map[string]string{},
		Resources:    prof.Resources,
		Timeout:      prof.Timeout,
		IdleTimeout:  prof.IdleTimeout,
		Network:      sandbox.NetworkPolicy{Mode: prof.Network},
		Capabilities: append(append([]sandbox.Capability{}, prof.Capabilities...), req.Capabilities...),
		Metadata:     req.Metadata,
		Runtime:      prof.Runtime,
		Volumes:      req.Volumes,
	}
	for k, v := range prof.Env {
		spec.Env[k] = v
	}
	for k, v := range req.Env {
		spec.Env[k] = v
	}
	spec.Resources = req.Resources.WithDefaults(prof.Resources)
	if req.Timeout != nil {
		spec.Timeout = *req.Timeout
	}
	if req.IdleTimeout != nil {
		spec.IdleTimeout = *req.IdleTimeout
	}
	if req.Network != nil {
		spec.Network = *req.Network
	}
	if req.CredentialProxy {
		if err := s.credentialProxyReady(); err != nil {
			return "", spec, prof, err
		}
		spec.CredentialProxy = true
		for k, v := range trust.Env() {
			if _, set := spec.Env[k]; !set {
				spec.Env[k] = v
			}
		}
	}
	if err := spec.Validate(); err != nil {
		return "", spec, prof, err
	}
	if err := ValidateMetadata(spec.Metadata); err != nil {
		return "", spec, prof, err
	}
	if err := s.cfg.Limits.checkSpec(spec); err != nil {
		return "", spec, prof, err
	}
	if err := s.cfg.Backends[backend].Capabilities().Check(spec); err != nil {
		return "", spec, prof, sandbox.Errorf(sandbox.CodeCapability, "backend %s: %w", backend, err)
	}
	return backend, spec, prof, nil
}

// Create starts a sandbox and returns its record once it is Running (or
// the error that stopped it; the returned record then says Failed and the
// backend holds nothing of it). A create the backend refuses is never
// listed: its record is deleted as soon as the refusal is recorded in its
// events, unless req.Recorded told a caller the id. When the request's
// profile keeps a warm pool and the request fits the pool's boxes, a
// ready box is claimed instead.
func (s *Service) Create(ctx context.Context, req CreateRequest) (*store.Sandbox, error) {
	start := time.Now()
	backend, spec, prof, err := s.plan(ctx, req)
	if err != nil {
		return nil, err
	}
	if s.cfg.MaxSandboxes > 0 {
		n, err := s.cfg.Store.CountActive(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("count sandboxes: %w", err)
		}
		if n >= s.cfg.MaxSandboxes {
			return nil, sandbox.Errorf(sandbox.CodeTooManyRequests, "sandbox quota reached (%d active)", s.cfg.MaxSandboxes)
		}
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode spec: %w", err)
	}
	if err := s.claimVolumes(ctx, backend, spec.Volumes, req.Owner); err != nil {
		return nil, err
	}
	if prof.PoolSize > 0 && !spec.CredentialProxy { // pool boxes have no credential proxy
		rec, err := s.claim(ctx, poolKey(prof.Name, s.unit(ctx, backend), spec), spec, specJSON, req.Owner)
		if rec != nil || err != nil {
			createSeconds.observe(backend, time.Since(start))
			return rec, err
		}
	}
	now := s.stamp()
	rec := &store.Sandbox{
		ID: newID(), Backend: backend, Profile: prof.Name, State: sandbox.StatePending, Reason: "provisioning",
		Image: spec.Image, Spec: specJSON, Metadata: spec.Metadata, Entrypoint: spec.Entrypoint,
		CreatedAt: now, UpdatedAt: now, IdleTimeout: spec.IdleTimeout, LastActiveAt: now,
		Instance: s.Instance(ctx, backend), OwnerID: req.Owner.UserID, OrgID: req.Owner.OrgID,
	}
	if spec.Timeout > 0 {
		exp := now.Add(spec.Timeout)
		rec.ExpiresAt = &exp
	}
	if err := s.provision(ctx, rec, spec, req.Recorded); err != nil {
		return rec, err
	}
	if spec.CredentialProxy {
		if err := s.checkCredentialProxy(rec); err != nil {
			s.log.Warn("sandbox credential proxy failed; deleting the sandbox", "sandbox_id", rec.ID, "err", err)
			if derr := s.Delete(context.WithoutCancel(ctx), rec.ID, "credential_proxy_failed"); derr != nil {
				s.log.Warn("delete sandbox", "sandbox_id", rec.ID, "err", derr)
			}
			rec.State, rec.Reason = sandbox.StateFailed, "credential_proxy_failed: "+sandbox.MessageOf(err)
			return rec, err
		}
	}
	createSeconds.observe(backend, time.Since(start))
	s.log.Info("sandbox created", "sandbox_id", rec.ID, "backend", backend, "ms", time.Since(start).Milliseconds())
	return rec, nil
}

// provision records rec (Pending), creates its box on rec.Backend and
// records the outcome in rec and the store: Running, or Failed with the
// backend's client-safe message (its error, which it returns, goes to the
// log). A record another writer moved out of Pending meanwhile (a delete)
// keeps its state: provision then returns CONFLICT and leaves the box to
// that writer and the reconciler. recorded, when not nil, is called with
// a copy of rec once it is stored; when nil, the record of a create the
// backend refused is deleted once its Failed event is recorded: nobody
// knows its id, and a backend's failed create leaves nothing (what one
// leaves all the same is an orphan, which the reconciler removes).
func (s *Service) provision(ctx context.Context, rec *store.Sandbox, spec sandbox.Spec, recorded func(store.Sandbox)) error {
	if err := s.cfg.Store.CreateSandbox(ctx, rec); err != nil {
		return fmt.Errorf("record sandbox: %w", err)
	}
	s.emit(ctx, rec)
	if recorded != nil {
		recorded(*rec)
	}
	unlock := s.lock(rec.ID)
	defer unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CreateTimeout)
	defer cancel()
	info, err := s.cfg.Backends[rec.Backend].Create(cctx, rec.ID, spec)
	if err != nil {
		s.log.Warn("sandbox create failed", "sandbox_id", rec.ID, "backend", rec.Backend, "err", err)
		reason := "provision_failed: " + sandbox.MessageOf(err)
		moved := false // this call moved the record to Failed
		cur, uerr := s.update(context.WithoutCancel(ctx), rec.ID, func(cur *store.Sandbox) error {
			moved = cur.State == sandbox.StatePending
			if !moved {
				return errUnchanged // another writer (a delete) moved on
			}
			cur.State, cur.Reason = sandbox.StateFailed, reason
			return nil
		})
		if uerr == nil {
			*rec = *cur
		} else {
			rec.State, rec.Reason = sandbox.StateFailed, reason
		}
		if uerr == nil && moved && recorded == nil {
			if derr := s.cfg.Store.DeleteSandbox(context.WithoutCancel(ctx), rec.ID); derr != nil && !errors.Is(derr, store.ErrNotFound) {
				s.log.Warn("forget refused sandbox", "sandbox_id", rec.ID, "err", derr) // the reconciler removes it
			}
		}
		return err
	}
	s.tokens.Store(rec.ID, info.AccessToken)
	cur, err := s.update(context.WithoutCancel(ctx), rec.ID, func(cur *store.Sandbox) error {
		if cur.State != sandbox.StatePending {
			return sandbox.Errorf(sandbox.CodeConflict, "sandbox %s became %s while it was being created", cur.ID, cur.State)
		}
		cur.State, cur.Reason, cur.ProviderState = sandbox.StateRunning, "", info.StateBlob
		return nil
	})
	if cur != nil {
		*rec = *cur
	}
	return err
}
