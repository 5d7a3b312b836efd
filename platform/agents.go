package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// toAgent is the wire form of a stored Agent.
func toAgent(a *store.Agent) wire.Agent {
	tools := a.Tools
	if tools == nil {
		tools = []string{}
	}
	vaults := a.VaultIDs
	if vaults == nil {
		vaults = []string{}
	}
	acc := toAccess(a)
	return wire.Agent{ID: a.ID, Name: a.Name, EngineKind: a.EngineKind, RuntimeProfile: a.RuntimeProfile, Model: a.Model,
		Instructions: a.Instructions, PermissionMode: a.PermissionMode, Tools: tools, VaultIDs: vaults, OwnerID: a.OwnerID,
		Visibility: acc.Visibility, AllowedUserIDs: acc.AllowedUserIDs, Admins: acc.Admins, Version: a.Version,
		CreatedAt: stamp(a.CreatedAt), UpdatedAt: stamp(a.UpdatedAt)}
}

// validateAgent checks req against the installed engines, the profile and
// the vaults it names (see checkVaultIDs).
func (s *Catalog) validateAgent(ctx context.Context, req *wire.AgentRequest) error {
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" || len(req.Name) > 200 {
		return invalid("name is required (at most 200 characters)")
	}
	if req.EngineKind == "" {
		req.EngineKind = "astrabox"
	}
	ad, err := s.cfg.Engines.Get(req.EngineKind)
	if err != nil {
		kinds := make([]string, 0, len(s.cfg.Engines))
		for k := range s.cfg.Engines {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		return sandbox.Errorf(CodeEngineNotInstalled, "engine kind %q is not installed (installed: %s)", req.EngineKind, strings.Join(kinds, ", "))
	}
	d := ad.Descriptor()
	if req.PermissionMode == "" {
		req.PermissionMode = d.PermissionModes[0]
	}
	if !slices.Contains(d.PermissionModes, req.PermissionMode) {
		return invalid("permission_mode %q is not one of %s for engine kind %s", req.PermissionMode, strings.Join(d.PermissionModes, ", "), req.EngineKind)
	}
	for _, t := range req.Tools {
		if !slices.Contains(d.Tools, t) {
			return invalid("tool %q is not a tool of engine kind %s (tools: %s)", t, req.EngineKind, strings.Join(d.Tools, ", "))
		}
	}
	if len(req.Instructions) > 64<<10 {
		return invalid("instructions exceed 64 KiB")
	}
	if req.RuntimeProfile == "" {
		return invalid("runtime_profile is required")
	}
	p, err := s.RuntimeProfile(ctx, req.RuntimeProfile)
	if err != nil {
		return err
	}
	if len(p.EngineKinds) > 0 && !slices.Contains(p.EngineKinds, req.EngineKind) {
		return invalid("runtime profile %q does not allow engine kind %s (engine_kinds: %s)", p.Name, req.EngineKind, strings.Join(p.EngineKinds, ", "))
	}
	if d.Image != "" && (p.Image == "" || p.Image == "host") {
		return invalid("engine kind %s runs in an image with its program installed: runtime profile %q names no image (make image-%s imports one named %q)", req.EngineKind, p.Name, req.EngineKind, d.Image)
	}
	if p.Model == nil || p.Model.BaseURL == "" {
		return invalid("runtime profile %q has no model endpoint (model.base_url)", p.Name)
	}
	if req.Model == "" {
		if len(p.Model.Models) == 0 {
			return invalid("model is required (the model name sent to the endpoint)")
		}
		req.Model = p.Model.Models[0]
	}
	if len(p.Model.Models) > 0 && !slices.Contains(p.Model.Models, req.Model) {
		return invalid("model %q is not offered by runtime profile %q (models: %s)", req.Model, p.Name, strings.Join(p.Model.Models, ", "))
	}
	return s.checkVaultIDs(ctx, req.VaultIDs)
}

// CreateAgent validates and stores a new Agent, private and owned by the
// caller. Only an administrator may give it vaults (FORBIDDEN).
func (s *Catalog) CreateAgent(ctx context.Context, req wire.AgentRequest) (wire.Agent, error) {
	p := principal(ctx)
	if err := needWrite(p, "creating an agent"); err != nil {
		return wire.Agent{}, err
	}
	if err := checkVaultAssignment(p, nil, req.VaultIDs, true); err != nil {
		return wire.Agent{}, err
	}
	if err := s.validateAgent(ctx, &req); err != nil {
		return wire.Agent{}, err
	}
	now := s.stamp()
	a := &store.Agent{ID: NewID("agt", now), Name: req.Name, EngineKind: req.EngineKind, RuntimeProfile: req.RuntimeProfile,
		Model: req.Model, Instructions: req.Instructions, PermissionMode: req.PermissionMode, Tools: req.Tools, VaultIDs: req.VaultIDs,
		Visibility: store.VisibilityPrivate, CreatedAt: now, UpdatedAt: now}
	if p != nil {
		a.OwnerID, a.OrgID = p.UserID, p.OrgID
	}
	if err := s.st.CreateAgent(ctx, a); err != nil {
		return wire.Agent{}, fmt.Errorf("create agent: %w", err)
	}
	return toAgent(a), nil
}

// GetAgent returns an Agent the caller may see, or AGENT_NOT_FOUND.
func (s *Catalog) GetAgent(ctx context.Context, id string) (wire.Agent, error) {
	a, err := s.visibleAgent(ctx, id)
	if err != nil {
		return wire.Agent{}, err
	}
	return toAgent(a), nil
}

func (s *Catalog) agent(ctx context.Context, id string) (*store.Agent, error) {
	a, err := s.st.GetAgent(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, agentNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get agent: %w", err)
	}
	return a, nil
}

// UpdateAgent replaces an Agent's fields (its owner and access stay as
// they are); with req.Version it updates only that version
// (VERSION_CONFLICT otherwise). Its owner, one of its admins or an
// administrator may; only an administrator may change its vaults.
func (s *Catalog) UpdateAgent(ctx context.Context, id string, req wire.AgentRequest) (wire.Agent, error) {
	validated := false
	for {
		a, err := s.manageableAgent(ctx, id, "updating")
		if err != nil {
			return wire.Agent{}, err
		}
		if err := checkVaultAssignment(principal(ctx), a.VaultIDs, req.VaultIDs, false); err != nil {
			return wire.Agent{}, err
		}
		if !validated {
			if err := s.validateAgent(ctx, &req); err != nil {
				return wire.Agent{}, err
			}
			validated = true
		}
		if req.Version != nil && *req.Version != a.Version {
			return wire.Agent{}, sandbox.Errorf(CodeVersionConflict, "agent %s is at version %d, not %d", id, a.Version, *req.Version)
		}
		a.Name, a.EngineKind, a.RuntimeProfile, a.Model = req.Name, req.EngineKind, req.RuntimeProfile, req.Model
		a.Instructions, a.PermissionMode, a.Tools, a.VaultIDs = req.Instructions, req.PermissionMode, req.Tools, req.VaultIDs
		a.UpdatedAt = s.stamp()
		err = s.st.UpdateAgent(ctx, a)
		if errors.Is(err, store.ErrConflict) && req.Version == nil {
			continue // changed meanwhile: replace the newer record
		}
		if errors.Is(err, store.ErrConflict) {
			return wire.Agent{}, sandbox.Errorf(CodeVersionConflict, "agent %s changed meanwhile", id)
		}
		if errors.Is(err, store.ErrNotFound) {
			return wire.Agent{}, agentNotFound(id)
		}
		if err != nil {
			return wire.Agent{}, fmt.Errorf("update agent: %w", err)
		}
		return toAgent(a), nil
	}
}

// DeleteAgent removes an Agent; its owner, one of its admins or an
// administrator may. Its Sessions stay readable; new inputs to them fail
// with AGENT_NOT_FOUND.
func (s *Catalog) DeleteAgent(ctx context.Context, id string) error {
	if _, err := s.manageableAgent(ctx, id, "deleting"); err != nil {
		return err
	}
	err := s.st.DeleteAgent(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return agentNotFound(id)
	}
	if err != nil {
		return fmt.Errorf("delete agent: %w", err)
	}
	return nil
}

// ListAgents pages the Agents the caller may see by id: up to limit after
// cursor, and the cursor of the next page ("" at the end). The store keeps
// no index of who sees what: the records are read in batches and filtered,
// until a page is full or the records end.
func (s *Catalog) ListAgents(ctx context.Context, cursor string, limit int) ([]wire.Agent, string, error) {
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	p := principal(ctx)
	batch := limit + 1
	if p != nil && !p.IsAdmin() {
		batch = max(batch, 200)
	}
	var seen []*store.Agent
	for after := cursor; len(seen) <= limit; {
		as, err := s.st.ListAgents(ctx, after, batch)
		if err != nil {
			return nil, "", fmt.Errorf("list agents: %w", err)
		}
		for _, a := range as {
			if canSeeAgent(p, a) {
				seen = append(seen, a)
			}
		}
		if len(as) < batch {
			break
		}
		after = as[len(as)-1].ID
	}
	next := ""
	if len(seen) > limit {
		seen = seen[:limit]
		next = seen[limit-1].ID
	}
	out := make([]wire.Agent, len(seen))
	for i, a := range seen {
		out[i] = toAgent(a)
	}
	return out, next, nil
}
