package opensandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// stateVersion is the version of boxState this package writes and reads.
const stateVersion = 1

// boxState is the state blob of a box: the remote's id of it. It holds no
// secret.
type boxState struct {
	Version int    `json:"version"`
	Remote  string `json:"remote"`
}

// request is the remote create request for spec under id.
func (p *Provider) request(id string, spec sandbox.Spec) (wire.CreateSandboxRequest, error) {
	if spec.Workspace != nil {
		return wire.CreateSandboxRequest{}, sandbox.Errorf(sandbox.CodeCapability, "capability %s is not supported by remote %s", sandbox.CapPersistentWorkspace, p.cfg.Name)
	}
	if spec.Runtime != "" {
		return wire.CreateSandboxRequest{}, sandbox.Errorf(sandbox.CodeCapability, "runtime %s is not offered by remote %s (it offers no choice of runtime)", spec.Runtime, p.cfg.Name)
	}
	p.mu.Lock()
	astrabox := p.astrabox
	p.mu.Unlock()
	req := wire.CreateSandboxRequest{
		Image:      &wire.ImageSpec{URI: spec.Image},
		Env:        spec.Env,
		Entrypoint: spec.Entrypoint,
		Metadata:   maps.Clone(spec.Metadata),
	}
	if req.Metadata == nil {
		req.Metadata = map[string]string{}
	}
	req.Metadata[LabelOwner], req.Metadata[LabelID] = p.cfg.Owner, id
	if len(req.Entrypoint) == 0 && !astrabox {
		// OpenSandbox requires one with an image; this is its own default.
		req.Entrypoint = []string{"tail", "-f", "/dev/null"}
	}
	if spec.Timeout > 0 {
		// Whole seconds, rounded up, and at least the specification's
		// minimum: the remote never expires a box before this server does.
		s := max(int64((spec.Timeout+time.Second-1)/time.Second), 60)
		req.Timeout = &s
	}
	r := spec.Resources
	lim := map[string]string{}
	if r.MilliCPU > 0 {
		lim["cpu"] = strconv.FormatInt(r.MilliCPU, 10) + "m"
	}
	if r.MemoryBytes > 0 {
		lim["memory"] = strconv.FormatInt(r.MemoryBytes, 10)
	}
	if astrabox && r.PIDs > 0 {
		lim["pids"] = strconv.FormatInt(r.PIDs, 10)
	}
	if astrabox && r.DiskBytes > 0 {
		lim["ephemeral-storage"] = strconv.FormatInt(r.DiskBytes, 10)
	}
	if len(lim) > 0 {
		req.ResourceLimits = lim
	}
	switch spec.Network.Mode {
	case sandbox.NetworkNone, "":
		req.NetworkPolicy = &wire.NetworkPolicy{DefaultAction: "deny"}
	case sandbox.NetworkLimited:
		np := &wire.NetworkPolicy{DefaultAction: "deny"}
		for _, a := range spec.Network.Allow {
			np.Egress = append(np.Egress, wire.NetworkRule{Action: "allow", Target: a})
		}
		req.NetworkPolicy = np
	case sandbox.NetworkUnrestricted:
		req.NetworkPolicy = &wire.NetworkPolicy{DefaultAction: "allow"}
	}
	if p.cfg.Backend != "" {
		req.Extensions = map[string]string{"backend": p.cfg.Backend}
	}
	if astrabox && (spec.Network.Mode == sandbox.NetworkNone || spec.Network.Mode == "") {
		// The deny-all policy above is what an OpenSandbox server knows
		// (its egress proxy refuses everything); another AstraBox takes
		// this extension for no network at all.
		if req.Extensions == nil {
			req.Extensions = map[string]string{}
		}
		req.Extensions["network"] = string(sandbox.NetworkNone)
	}
	return req, nil
}

// Create implements sandbox.Provider (see the package doc). A remote that
// refuses a capability is remembered (Capabilities). A box that does not
// reach Running within Config.StartTimeout is deleted again.
func (p *Provider) Create(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	if err := p.Capabilities().Check(spec); err != nil {
		return sandbox.Info{}, sandbox.Errorf(sandbox.CodeCapability, "remote %s: %w", p.cfg.Name, err)
	}
	req, err := p.request(id, spec)
	if err != nil {
		return sandbox.Info{}, err
	}
	if h := p.ready(ctx); h.Status != sandbox.Healthy {
		return sandbox.Info{}, sandbox.Errorf(sandbox.CodeUnavailable, "remote %s is %s: %s", p.cfg.Name, h.Status, h.Reason)
	}
	unlock := p.lock(id)
	defer unlock()
	if sb, err := p.find(ctx, id); err == nil {
		return p.waitRunning(ctx, id, sb)
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		return sandbox.Info{}, fmt.Errorf("create %s: %w", id, err)
	}
	hdr := http.Header{"Idempotency-Key": {"astrabox-" + p.cfg.Owner + "-" + id}}
	var sb wire.Sandbox
	if err := p.call(ctx, http.MethodPost, "/sandboxes", nil, hdr, req, &sb); err != nil {
		p.learn(spec, err)
		// The remote may have made the box although the answer was lost.
		p.cleanup(id)
		return sandbox.Info{}, fmt.Errorf("create %s: %w", id, err)
	}
	if sb.ID == "" {
		p.cleanup(id)
		return sandbox.Info{}, sandbox.Errorf(sandbox.CodeUnavailable, "remote %s answered a create without an id", p.cfg.Name)
	}
	p.remember(id, sb.ID)
	info, err := p.waitRunning(ctx, id, sb)
	if err != nil {
		p.cleanup(id)
		return sandbox.Info{}, err
	}
	return info, nil
}

// cleanup deletes whatever the remote has of box id after a failed create,
// on a context of its own (the create's may be what ended).
func (p *Provider) cleanup(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.deleteLocked(ctx, id); err != nil {
		p.log.Warn("remove a box whose create failed", "sandbox_id", id, "err", err)
	}
}

// waitRunning polls the remote's box until it is Running and returns its
// Info; a box that fails, or is still not Running after StartTimeout (or
// when ctx ends), is an error.
func (p *Provider) waitRunning(ctx context.Context, id string, sb wire.Sandbox) (sandbox.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	return p.waitFor(ctx, id, sb, sandbox.StateRunning)
}

// waitFor polls box id (remote record sb) until it is in state want.
func (p *Provider) waitFor(ctx context.Context, id string, sb wire.Sandbox, want sandbox.State) (sandbox.Info, error) {
	delay := 50 * time.Millisecond
	for {
		info := p.info(id, sb)
		switch {
		case info.State == want:
			return info, nil
		case info.State.Terminal():
			return info, sandbox.Errorf(sandbox.CodeRuntime, "box %s on remote %s is %s: %s", id, p.cfg.Name, info.State, info.Reason)
		}
		select {
		case <-ctx.Done():
			return info, sandbox.Errorf(sandbox.CodeTimeout, "box %s on remote %s is still %s, not %s: %v", id, p.cfg.Name, info.State, want, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
		if err := p.call(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(sb.ID), nil, nil, nil, &sb); err != nil {
			if errors.Is(err, sandbox.ErrNotFound) {
				return info, sandbox.Errorf(sandbox.CodeRuntime, "box %s vanished from remote %s while becoming %s", id, p.cfg.Name, want)
			}
			return info, err
		}
	}
}

// learn remembers the capabilities of spec that a create refusal err names.
func (p *Provider) learn(spec sandbox.Spec, err error) {
	var e *sandbox.Error
	if !errors.As(err, &e) || e.Code != sandbox.CodeCapability {
		return
	}
	need := append([]sandbox.Capability{}, spec.Capabilities...)
	switch spec.Network.Mode {
	case sandbox.NetworkLimited:
		need = append(need, sandbox.CapNetworkLimited)
	case sandbox.NetworkUnrestricted:
		need = append(need, sandbox.CapNetworkUnrestricted)
	}
	var re *remoteError
	msg := e.Message
	if errors.As(err, &re) {
		msg = re.message
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range need {
		if len(need) == 1 || strings.Contains(msg, string(c)) || (strings.HasPrefix(string(c), "network-") && strings.Contains(msg, "network")) {
			p.refused[c] = msg
			p.log.Warn("remote refused a capability; it is no longer offered", "backend", p.cfg.Name, "capability", c, "reason", msg)
		}
	}
}

// info is the Info of box id from the remote's record sb.
func (p *Provider) info(id string, sb wire.Sandbox) sandbox.Info {
	st, err := sandbox.ParseState(sb.Status.State)
	reason := sb.Status.Reason
	if sb.Status.Message != "" {
		reason = strings.TrimPrefix(reason+": "+sb.Status.Message, ": ")
	}
	if err != nil {
		st, reason = sandbox.StateFailed, "remote state "+strconv.Quote(sb.Status.State)
	}
	blob, _ := json.Marshal(boxState{Version: stateVersion, Remote: sb.ID})
	return sandbox.Info{ID: id, State: st, Reason: reason, CreatedAt: sb.CreatedAt, AccessToken: p.token(id), StateBlob: blob}
}

func (p *Provider) remember(id, remote string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remote[id] = remote
}

func (p *Provider) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.remote[id]; ok {
		delete(p.endpoints, r)
	}
	delete(p.remote, id)
}

// find returns the remote's record of box id: by the remote id this
// Provider knows, else by its labels. A box that is gone (no record, or
// Terminated) wraps ErrNotFound.
func (p *Provider) find(ctx context.Context, id string) (wire.Sandbox, error) {
	p.mu.Lock()
	rid, known := p.remote[id]
	p.mu.Unlock()
	if known {
		var sb wire.Sandbox
		err := p.call(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(rid), nil, nil, nil, &sb)
		switch {
		case err == nil && sb.Metadata[LabelID] == id && sb.Status.State != string(sandbox.StateTerminated):
			return sb, nil
		case err != nil && !errors.Is(err, sandbox.ErrNotFound):
			return sb, err
		}
		p.forget(id)
	}
	boxes, err := p.listOwned(ctx, id)
	if err != nil {
		return wire.Sandbox{}, err
	}
	for _, sb := range boxes {
		if sb.Status.State != string(sandbox.StateTerminated) {
			p.remember(id, sb.ID)
			return sb, nil
		}
	}
	return wire.Sandbox{}, fmt.Errorf("box %s on remote %s: %w", id, p.cfg.Name, sandbox.ErrNotFound)
}

// Inspect implements sandbox.Provider.
func (p *Provider) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	sb, err := p.find(ctx, id)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("inspect %s: %w", id, err)
	}
	return p.info(id, sb), nil
}

// List implements sandbox.Provider: every box of this owner the remote has
// and has not terminated.
func (p *Provider) List(ctx context.Context) ([]sandbox.Info, error) {
	boxes, err := p.listOwned(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.Info, 0, len(boxes))
	for _, sb := range boxes {
		if sb.Status.State != string(sandbox.StateTerminated) {
			out = append(out, p.info(sb.Metadata[LabelID], sb))
		}
	}
	return out, nil
}

// Delete implements sandbox.Provider: it returns once the remote no longer
// has the box (or has it Terminated).
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := p.lock(id)
	defer unlock()
	return p.deleteLocked(ctx, id)
}

func (p *Provider) deleteLocked(ctx context.Context, id string) error {
	for {
		sb, err := p.find(ctx, id)
		if errors.Is(err, sandbox.ErrNotFound) {
			p.forget(id)
			return nil
		}
		if err != nil {
			return fmt.Errorf("delete %s: %w", id, err)
		}
		if sb.Status.State != string(sandbox.StateStopping) {
			err := p.call(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(sb.ID), nil, nil, nil, nil)
			if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				return fmt.Errorf("delete %s: %w", id, err)
			}
			continue // confirm that it is gone
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete %s: still stopping on remote %s: %w", id, p.cfg.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Pause implements sandbox.Provider; it returns once the remote says
// Paused.
func (p *Provider) Pause(ctx context.Context, id string) error {
	return p.transition(ctx, id, "pause", sandbox.StatePaused)
}

// Resume implements sandbox.Provider; it returns once the remote says
// Running.
func (p *Provider) Resume(ctx context.Context, id string) error {
	return p.transition(ctx, id, "resume", sandbox.StateRunning)
}

func (p *Provider) transition(ctx context.Context, id, op string, want sandbox.State) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := p.lock(id)
	defer unlock()
	sb, err := p.find(ctx, id)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, id, err)
	}
	if sb.Status.State == string(want) {
		return nil // a second pause or resume is a no-op
	}
	if err := p.call(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(sb.ID)+"/"+op, nil, nil, nil, nil); err != nil {
		if op == "pause" && sandbox.CodeOf(err) == sandbox.CodeNotSupported {
			p.mu.Lock()
			p.refused[sandbox.CapPause] = sandbox.MessageOf(err)
			p.mu.Unlock()
			return fmt.Errorf("%s %s: %w: %w", op, id, sandbox.ErrUnsupported, err)
		}
		return fmt.Errorf("%s %s: %w", op, id, err)
	}
	if _, err := p.waitFor(ctx, id, sb, want); err != nil {
		return fmt.Errorf("%s %s: %w", op, id, err)
	}
	return nil
}

// Renew implements sandbox.Renewer: the remote's expiry of box id becomes
// at, unless it is there already or the remote keeps the box without one.
func (p *Provider) Renew(ctx context.Context, id string, at time.Time) error {
	if err := validID(id); err != nil {
		return err
	}
	sb, err := p.find(ctx, id)
	if err != nil {
		return fmt.Errorf("renew %s: %w", id, err)
	}
	if sb.ExpiresAt == nil || !sb.ExpiresAt.Before(at) {
		return nil
	}
	var out wire.RenewResponse
	if err := p.call(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(sb.ID)+"/renew-expiration", nil, nil,
		wire.RenewRequest{ExpiresAt: at.UTC()}, &out); err != nil {
		return fmt.Errorf("renew %s: %w", id, err)
	}
	return nil
}

// Attach implements sandbox.Attacher: the remote id in blob is checked
// against the box's labels (a blob of another box, or of a box the remote
// no longer has, is ErrNotFound) and remembered.
func (p *Provider) Attach(ctx context.Context, id string, blob []byte) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	st, err := sandbox.DecodeStateBlob[boxState](id, blob, stateVersion)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	if st.Remote == "" {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w: no remote id", id, sandbox.ErrBadStateBlob)
	}
	var sb wire.Sandbox
	if err := p.call(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(st.Remote), nil, nil, nil, &sb); err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	if sb.Metadata[LabelOwner] != p.cfg.Owner || sb.Metadata[LabelID] != id || sb.Status.State == string(sandbox.StateTerminated) {
		return sandbox.Info{}, fmt.Errorf("attach %s: remote box %s is not this box: %w", id, st.Remote, sandbox.ErrNotFound)
	}
	p.remember(id, sb.ID)
	return p.info(id, sb), nil
}

var (
	_ sandbox.Attacher = (*Provider)(nil)
	_ sandbox.Renewer  = (*Provider)(nil)
)
