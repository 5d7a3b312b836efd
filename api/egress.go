package api

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/sandbox"
)

// Network policies: OpenSandbox's networkPolicy on create, its egress API
// (egress-api.yaml: GET, PATCH and DELETE /policy, and the Credential
// Vault of credvault.go) on port 18080 of a
// sandbox's endpoint, and the operator's route /v1/sandboxes/{id}/network-
// policy. The egress API is served by this server, never by code in the
// box, and needs what every endpoint needs (the API key or the endpoint's
// signed headers), which the box does not have: code inside the box reads
// its policy (on its gateway's port 18080, see package egress) but cannot
// widen it.

// toNetworkPolicy maps OpenSandbox's egress policy onto network modes:
// allow without deny rules is unrestricted; deny (the default when rules
// are given), with or without rules, and allow with deny rules are
// limited, through the egress proxy; an empty policy is none.
func toNetworkPolicy(p NetworkPolicy) (sandbox.NetworkPolicy, error) {
	rules := make([]sandbox.NetworkRule, 0, len(p.Egress))
	hasDeny := false
	for _, r := range p.Egress {
		if r.Action != "allow" && r.Action != "deny" {
			return sandbox.NetworkPolicy{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "egress rule action must be allow or deny, got %q", r.Action)
		}
		hasDeny = hasDeny || r.Action == "deny"
		rules = append(rules, sandbox.NetworkRule{Action: r.Action, Target: r.Target})
	}
	var np sandbox.NetworkPolicy
	switch p.DefaultAction {
	case "":
		if len(rules) == 0 {
			return sandbox.NetworkPolicy{Mode: sandbox.NetworkNone}, nil
		}
		np = sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "deny", Rules: rules}
	case "deny":
		np = sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "deny", Rules: rules}
	case "allow":
		if !hasDeny {
			return sandbox.NetworkPolicy{Mode: sandbox.NetworkUnrestricted}, nil
		}
		np = sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "allow", Rules: rules}
	default:
		return sandbox.NetworkPolicy{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "networkPolicy.defaultAction must be allow or deny, got %q", p.DefaultAction)
	}
	if err := egress.Validate(np); err != nil {
		return sandbox.NetworkPolicy{}, err
	}
	return np, nil
}

// credentialProxyPolicy is the network policy of a box created with
// credentialProxy.enabled: always limited, since only the egress proxy
// applies a Credential Vault. What toNetworkPolicy makes unrestricted
// (allow without deny rules) becomes limited with defaultAction allow and
// the given rules (which a vault's bindings need: their hosts must be
// explicitly allowed); what it makes none (an empty policy) becomes
// limited deny, widened at run time through the egress API.
func credentialProxyPolicy(p NetworkPolicy) (sandbox.NetworkPolicy, error) {
	np, err := toNetworkPolicy(p)
	if err != nil {
		return np, err
	}
	switch np.Mode {
	case sandbox.NetworkUnrestricted:
		np = sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "allow"}
		for _, r := range p.Egress {
			np.Rules = append(np.Rules, sandbox.NetworkRule{Action: r.Action, Target: r.Target})
		}
		if err := egress.Validate(np); err != nil {
			return sandbox.NetworkPolicy{}, err
		}
	case sandbox.NetworkNone:
		np = sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "deny"}
	}
	return np, nil
}

// egressRoutes adds the operator's network-policy routes.
func (s *Server) egressRoutes() {
	for _, prefix := range []string{"/v1", ""} {
		s.handle("GET "+prefix+"/sandboxes/{id}/network-policy", identity.ScopeRead, s.getNetworkPolicy)
		s.handle("PATCH "+prefix+"/sandboxes/{id}/network-policy", identity.ScopeWrite, s.patchNetworkPolicy)
		s.handle("PUT "+prefix+"/sandboxes/{id}/network-policy", identity.ScopeWrite, s.putNetworkPolicy)
	}
}

// getNetworkPolicy answers the sandbox's policy as OpenSandbox's
// NetworkPolicy.
func (s *Server) getNetworkPolicy(w http.ResponseWriter, r *http.Request) {
	np, err := s.svc.NetworkPolicy(r.Context(), r.PathValue("id"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, egress.ToWire(np))
}

// patchNetworkPolicy merges rules (a JSON array of NetworkRule) as the
// egress API's PATCH does, and answers the policy in force.
func (s *Server) patchNetworkPolicy(w http.ResponseWriter, r *http.Request) {
	var rules []sandbox.NetworkRule
	if !s.decodeEgressBody(w, r, &rules, false) {
		return
	}
	np, err := s.svc.UpdateNetworkPolicy(r.Context(), r.PathValue("id"), func(cur sandbox.NetworkPolicy) (sandbox.NetworkPolicy, error) {
		return egress.Merge(cur, rules)
	})
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, egress.ToWire(np))
}

// putNetworkPolicy replaces the policy of a limited sandbox (defaultAction
// and rules; a policy that would need another network mode is refused).
func (s *Server) putNetworkPolicy(w http.ResponseWriter, r *http.Request) {
	var p NetworkPolicy
	if !s.decodeEgressBody(w, r, &p, false) {
		return
	}
	want, err := toNetworkPolicy(p)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if want.Mode != sandbox.NetworkLimited {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeCapability, "a policy of network %s cannot replace one at run time: give defaultAction deny, or allow with deny rules", want.Mode))
		return
	}
	np, err := s.svc.UpdateNetworkPolicy(r.Context(), r.PathValue("id"), func(sandbox.NetworkPolicy) (sandbox.NetworkPolicy, error) {
		return want, nil
	})
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, egress.ToWire(np))
}

// decodeEgressBody reads a JSON body into v; text says to answer errors
// in plain text, as the egress API does.
func (s *Server) decodeEgressBody(w http.ResponseWriter, r *http.Request, v any, text bool) bool {
	body, err := httpx.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err == nil {
		err = httpx.DecodeBytes(body, v)
	}
	if err != nil {
		if text {
			http.Error(w, sandbox.MessageOf(err), sandbox.StatusOf(sandbox.CodeOf(err)))
		} else {
			httpx.WriteError(w, err)
		}
		return false
	}
	return true
}

// serveEgressAPI serves OpenSandbox's egress API for sandbox id (the
// proxy hands it the requests for port 18080, already authorized). Errors
// are plain text, as the specification has them.
func (s *Server) serveEgressAPI(w http.ResponseWriter, r *http.Request, id string) {
	textError := func(err error) {
		http.Error(w, sandbox.MessageOf(err), sandbox.StatusOf(sandbox.CodeOf(err)))
	}
	status := func(np sandbox.NetworkPolicy) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(egress.Status(np))
	}
	rest := r.PathValue("rest")
	if sub, ok := strings.CutPrefix(rest, "credential-vault"); ok && (sub == "" || strings.HasPrefix(sub, "/")) {
		s.serveCredentialVault(w, r, id, strings.TrimPrefix(sub, "/"))
		return
	}
	if rest != "policy" {
		http.Error(w, "this sandbox's egress API serves /policy and /credential-vault", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet:
		np, err := s.svc.NetworkPolicy(r.Context(), id)
		if err != nil {
			textError(err)
			return
		}
		status(np)
	case http.MethodPatch:
		var rules []sandbox.NetworkRule
		if !s.decodeEgressBody(w, r, &rules, true) {
			return
		}
		if len(rules) == 0 {
			http.Error(w, "the body must be a non-empty array of rules", http.StatusBadRequest)
			return
		}
		np, err := s.svc.UpdateNetworkPolicy(r.Context(), id, func(cur sandbox.NetworkPolicy) (sandbox.NetworkPolicy, error) {
			return egress.Merge(cur, rules)
		})
		if err != nil {
			textError(err)
			return
		}
		status(np)
	case http.MethodDelete:
		var targets []string
		if !s.decodeEgressBody(w, r, &targets, true) {
			return
		}
		np, err := s.svc.UpdateNetworkPolicy(r.Context(), id, func(cur sandbox.NetworkPolicy) (sandbox.NetworkPolicy, error) {
			return egress.Remove(cur, targets)
		})
		if err != nil {
			textError(err)
			return
		}
		status(np)
	default:
		w.Header().Set("Allow", "GET, PATCH, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}
