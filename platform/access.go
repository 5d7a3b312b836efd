package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Authorization. The Catalog's and the Sessions' methods act for the
// caller of their ctx (identity.PrincipalFrom), by these rules:
//
//   - An administrator (identity.ScopeAdmin) sees and changes everything.
//   - An Agent is seen by its owner, the users of its Admins, every user
//     of its organization when it is public, and the users of its
//     AllowedUserIDs when it is shared. Whoever sees it may open a
//     conversation with it; its owner and its Admins manage it (update,
//     delete, access).
//   - A Session is seen, and acted on, by the user that opened it only.
//   - Credential vaults, their assignment to Agents (vault_ids) and
//     changes to RuntimeProfiles are the administrators'; so is widening
//     the access of an Agent that holds vaults.
//   - Changing anything needs identity.ScopeWrite besides.
//
// A record the caller may not see answers as a missing one does (the same
// code and message: AGENT_NOT_FOUND, SESSION_NOT_FOUND), so that nothing
// tells a caller another user's record exists; a record it sees but may
// not change answers identity.CodeForbidden naming what is missing.
//
// A ctx without a principal (nil) is an internal caller (the runner, the
// server's own start-up work, tests) and has full access. The API always
// puts one in: every /api/v1 route is authenticated.

// principal returns the caller of ctx (nil: an internal caller).
func principal(ctx context.Context) *identity.Principal { return identity.PrincipalFrom(ctx) }

// canSeeAgent reports whether p may see (and so use) a.
func canSeeAgent(p *identity.Principal, a *store.Agent) bool {
	if p == nil || p.IsAdmin() {
		return true
	}
	if p.UserID == "" {
		return false
	}
	if a.OwnerID == p.UserID || slices.Contains(a.Admins, p.UserID) {
		return true
	}
	switch a.Visibility {
	case store.VisibilityPublic:
		return a.OrgID == p.OrgID
	case store.VisibilityShared:
		return slices.Contains(a.AllowedUserIDs, p.UserID)
	}
	return false
}

// canManageAgent reports whether p may manage a, as its owner, one of its
// Admins or an administrator (the write scope aside).
func canManageAgent(p *identity.Principal, a *store.Agent) bool {
	if p == nil || p.IsAdmin() {
		return true
	}
	return p.UserID != "" && (a.OwnerID == p.UserID || slices.Contains(a.Admins, p.UserID))
}

// canSeeSession reports whether p may see (and act on) s: its owner's.
func canSeeSession(p *identity.Principal, s *store.Session) bool {
	return p == nil || p.Owns(s.OwnerID)
}

// needWrite refuses a caller without the write scope (FORBIDDEN); what
// says what it was doing ("updating agent agt_...").
func needWrite(p *identity.Principal, what string) error {
	if p == nil || p.Can(identity.ScopeWrite) {
		return nil
	}
	return identity.Forbidden("%s needs the %s permission", what, identity.ScopeWrite)
}

// needAdmin refuses a caller that is not an administrator (FORBIDDEN).
func needAdmin(ctx context.Context, what string) error {
	if p := principal(ctx); p != nil && !p.IsAdmin() {
		return identity.Forbidden("%s needs the %s permission", what, identity.ScopeAdmin)
	}
	return nil
}

// agentNotFound is the answer to a missing Agent and to one the caller
// may not see alike.
func agentNotFound(id string) error {
	return sandbox.Errorf(CodeAgentNotFound, "agent %q not found", id)
}

// sessionNotFound is the answer to a missing Session and to another
// user's alike.
func sessionNotFound(id string) error {
	return sandbox.Errorf(CodeSessionNotFound, "session %q not found", id)
}

// visibleAgent returns the Agent if the caller of ctx may see it, else
// AGENT_NOT_FOUND.
func (s *Catalog) visibleAgent(ctx context.Context, id string) (*store.Agent, error) {
	a, err := s.agent(ctx, id)
	if err != nil {
		return nil, err
	}
	if !canSeeAgent(principal(ctx), a) {
		return nil, agentNotFound(id)
	}
	return a, nil
}

// manageableAgent returns the Agent if the caller of ctx may manage it:
// AGENT_NOT_FOUND when it may not see it, FORBIDDEN when it sees it but
// may not do what ("updating", "deleting", ...) to it.
func (s *Catalog) manageableAgent(ctx context.Context, id, what string) (*store.Agent, error) {
	a, err := s.visibleAgent(ctx, id)
	if err != nil {
		return nil, err
	}
	p := principal(ctx)
	if err := needWrite(p, fmt.Sprintf("%s agent %s", what, id)); err != nil {
		return nil, err
	}
	if !canManageAgent(p, a) {
		return nil, identity.Forbidden("%s agent %s needs the %s permission, or to be the agent's owner or one of its admins", what, id, identity.ScopeAdmin)
	}
	return a, nil
}

// checkVaultAssignment refuses a caller that is not an administrator
// assigning vaults to an Agent: a non-empty vault_ids on create (was is
// nil), or any change of them on update. An unchanged list (an Agent an
// administrator gave vaults, updated by its owner) passes.
func checkVaultAssignment(p *identity.Principal, was, want []string, create bool) error {
	if p == nil || p.IsAdmin() {
		return nil
	}
	if create && len(want) == 0 || !create && sameSet(was, want) {
		return nil
	}
	return identity.Forbidden("assigning credential vaults to an agent (vault_ids) needs the %s permission", identity.ScopeAdmin)
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// maxAccessUsers bounds AgentAccess.AllowedUserIDs and Admins.
const maxAccessUsers = 1000

// toAccess is the access part of a stored Agent.
func toAccess(a *store.Agent) wire.AgentAccess {
	vis := a.Visibility
	if vis == "" {
		vis = store.VisibilityPrivate
	}
	return wire.AgentAccess{Visibility: vis, AllowedUserIDs: nonNil(a.AllowedUserIDs), Admins: nonNil(a.Admins)}
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// validAccess checks and normalizes req: a known visibility, user ids
// trimmed, without blanks or repeats, at most maxAccessUsers of each.
func validAccess(req *wire.AgentAccess) error {
	switch req.Visibility {
	case store.VisibilityPrivate, store.VisibilityShared, store.VisibilityPublic:
	default:
		return invalid("visibility must be %s, %s or %s", store.VisibilityPrivate, store.VisibilityShared, store.VisibilityPublic)
	}
	for _, l := range []struct {
		name string
		ids  *[]string
	}{{"allowed_user_ids", &req.AllowedUserIDs}, {"admins", &req.Admins}} {
		if len(*l.ids) > maxAccessUsers {
			return invalid("%s holds more than %d users", l.name, maxAccessUsers)
		}
		out := make([]string, 0, len(*l.ids))
		for _, id := range *l.ids {
			id = strings.TrimSpace(id)
			if id == "" || len(id) > 200 {
				return invalid("%s holds an empty or over-long user id", l.name)
			}
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
		*l.ids = out
	}
	return nil
}

// AgentAccess returns who may see, use and manage an Agent the caller
// may see (AGENT_NOT_FOUND otherwise).
func (s *Catalog) AgentAccess(ctx context.Context, id string) (wire.AgentAccess, error) {
	a, err := s.visibleAgent(ctx, id)
	if err != nil {
		return wire.AgentAccess{}, err
	}
	return toAccess(a), nil
}

// visibilityRank orders the visibilities by how many users they show an
// Agent to (none or an unknown one: private).
func visibilityRank(v string) int {
	switch v {
	case store.VisibilityShared:
		return 1
	case store.VisibilityPublic:
		return 2
	}
	return 0
}

// widens reports whether req shows or hands a to someone a's access does
// not: a wider visibility, or an allowed user or admin a does not have.
func widens(a *store.Agent, req wire.AgentAccess) bool {
	sub := func(l, of []string) bool {
		for _, id := range l {
			if !slices.Contains(of, id) {
				return false
			}
		}
		return true
	}
	return visibilityRank(req.Visibility) > visibilityRank(a.Visibility) ||
		!sub(req.AllowedUserIDs, a.AllowedUserIDs) || !sub(req.Admins, a.Admins)
}

// checkVaultedAccess refuses a caller that is not an administrator
// widening the access of an Agent that holds credential vaults (which
// only an administrator assigns): more users would use the vaults'
// credentials. Narrowing it, or keeping it, passes.
func checkVaultedAccess(p *identity.Principal, a *store.Agent, req wire.AgentAccess) error {
	if p == nil || p.IsAdmin() || len(a.VaultIDs) == 0 || !widens(a, req) {
		return nil
	}
	return identity.Forbidden("widening the access of agent %s, which holds credential vaults, needs the %s permission", a.ID, identity.ScopeAdmin)
}

// SetAgentAccess replaces an Agent's visibility, allowed users and admins;
// its owner, one of its admins or an administrator may (FORBIDDEN for
// another caller that sees it, AGENT_NOT_FOUND for one that does not).
// The user ids are kept as given: naming a user that does not exist
// grants nothing. Only an administrator widens the access of an Agent
// that holds credential vaults (FORBIDDEN).
func (s *Catalog) SetAgentAccess(ctx context.Context, id string, req wire.AgentAccess) (wire.AgentAccess, error) {
	for {
		a, err := s.manageableAgent(ctx, id, "changing the access of")
		if err != nil {
			return wire.AgentAccess{}, err
		}
		if err := validAccess(&req); err != nil {
			return wire.AgentAccess{}, err
		}
		if err := checkVaultedAccess(principal(ctx), a, req); err != nil {
			return wire.AgentAccess{}, err
		}
		a.Visibility, a.AllowedUserIDs, a.Admins = req.Visibility, req.AllowedUserIDs, req.Admins
		a.UpdatedAt = s.stamp()
		err = s.st.UpdateAgent(ctx, a)
		if errors.Is(err, store.ErrConflict) {
			continue // changed meanwhile: check and replace the newer record
		}
		if errors.Is(err, store.ErrNotFound) {
			return wire.AgentAccess{}, agentNotFound(id)
		}
		if err != nil {
			return wire.AgentAccess{}, fmt.Errorf("update agent access: %w", err)
		}
		return toAccess(a), nil
	}
}

// visibleSession returns the Session's record if the caller of ctx may
// see it, else SESSION_NOT_FOUND.
func (s *Sessions) visibleSession(ctx context.Context, id string) (*store.Session, error) {
	rec, err := s.st.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, sessionNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	if !canSeeSession(principal(ctx), rec) {
		return nil, sessionNotFound(id)
	}
	return rec, nil
}

// CheckSession answers nil when the caller of ctx may see the Session
// (its own, or any for an administrator), else SESSION_NOT_FOUND, as for
// a missing one. It reads the record only: an event stream re-checks its
// caller with it while it lasts.
func (s *Sessions) CheckSession(ctx context.Context, id string) error {
	_, err := s.visibleSession(ctx, id)
	return err
}

// actableSession returns the Session's record if the caller of ctx may
// change it (what: "sending an input to", ...): SESSION_NOT_FOUND when
// it may not see it, FORBIDDEN without the write scope.
func (s *Sessions) actableSession(ctx context.Context, id, what string) (*store.Session, error) {
	rec, err := s.visibleSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := needWrite(principal(ctx), fmt.Sprintf("%s session %s", what, id)); err != nil {
		return nil, err
	}
	return rec, nil
}
