package docker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/internal/hostnet"
	"github.com/astrabox/astrabox/sandbox"
)

// Network mode limited, on a local engine with iptables and an egress
// Manager (Config.Egress). The boxes of an owner are attached to one
// engine bridge network of its own, "OWNER-lim", whose Linux bridge is
// LimitedBridge(): inter-container traffic off, no masquerade, no IPv6
// (and IPv6 off in each box). It is an ordinary bridge network, not an
// "internal" one: whether an internal network still gives containers a
// default route differs between engine versions, and without one a box's
// connections would fail in the box before any rule could redirect them.
// Host rules (hostnet.LimitedRules, on that bridge) send every TCP
// connection of its boxes to the egress proxy and every DNS query to the
// egress name server, both on the network's gateway address, where one
// egress gate (listeners of package egress) serves every box of the
// network; everything else a box sends to the host is rejected, and
// nothing is forwarded (the rejection sits in DOCKER-USER, which the
// engine consults before its own FORWARD rules and keeps first when it
// restarts). The rules fail closed: while no gate listens (the server is
// stopped), a box reaches nothing. Boxes name the gateway as their DNS
// server; the engine's embedded resolver in each box forwards to it.
//
// What is kept where: a box's policy, its address on the network and the
// network's gateway are in egress.json in the box's directory (mode
// 0600), written before each change takes effect; a restarted server
// reopens the gate from those files without asking the engine. Container
// labels are not used: they cannot change after create, and the policy
// changes at run time (SetNetworkPolicy). The network, its rules and the
// gate go when a delete leaves no container attached to the network (and
// at Close, likewise), so a server that stops with no limited box leaves
// none of them; while limited boxes exist they stay, also when the
// server stops (their boxes then reach nothing until a server is back).
//
// One gate listens on a gateway address, so on one engine host one
// server process at a time serves an owner's limited boxes.
//
// The gate's ports differ from the native backend's, so that on a host
// running both each backend's listeners and rules are told apart.
const (
	limitedProxyPort = 15101
	limitedDNSPort   = 15153
	egressFile       = "egress.json" // per box: egressRecord, mode 0600
)

// egressRecord is what a restarted server needs to serve a limited box.
type egressRecord struct {
	Policy  sandbox.NetworkPolicy `json:"policy"`
	Addr    netip.Addr            `json:"addr"`    // the box's address on the limited network
	Gateway netip.Addr            `json:"gateway"` // the network's gateway, where the gate listens
}

// limitedNetworkName is the engine network of limited boxes.
func (p *Provider) limitedNetworkName() string { return p.cfg.Owner + "-lim" }

// LimitedBridge is the name of the Linux bridge of the backend's limited
// network, which its host rules match.
func (p *Provider) LimitedBridge() string { return "sbxl" + p.hash }

// limitedRules are the host rules of the limited network.
func (p *Provider) limitedRules() hostnet.LimitedRules {
	h := strings.ToUpper(p.hash)
	return hostnet.LimitedRules{
		Iface: p.LimitedBridge(), NAT: "ASTRABOX-DKLNAT-" + h, In: "ASTRABOX-DKLIN-" + h, Fwd: "ASTRABOX-DKLFWD-" + h,
		Forward: "DOCKER-USER", ProxyPort: limitedProxyPort, DNSPort: limitedDNSPort,
	}
}

// limitedAvailable reports whether the backend offers network limited.
func (p *Provider) limitedAvailable() bool {
	return p.local && p.iptab != "" && p.cfg.Egress != nil
}

// bridgeFilterPath is where the kernel says whether bridged packets pass
// iptables: without that, boxes on one bridge would reach each other past
// the rules.
const bridgeFilterPath = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// ensureLimited makes the limited network when it is missing, (re)installs
// its host rules and opens its gate; it returns the network's name and
// gateway. Each successful call must be followed by one limitedDone, once
// the box's container has started or failed: until then no teardown
// removes the network.
func (p *Provider) ensureLimited(ctx context.Context) (string, netip.Addr, error) {
	p.limMu.Lock()
	defer p.limMu.Unlock()
	name := p.limitedNetworkName()
	gw, err := p.limitedNetwork(ctx)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("network %s: %w", name, err)
	}
	p.limMade = true // from here on, a failure leaves what removeLimitedIfUnused removes
	// Checked once the network exists: the engine turns bridge filtering
	// on when it makes a bridge without inter-container traffic.
	if b, err := os.ReadFile(bridgeFilterPath); err != nil || strings.TrimSpace(string(b)) != "1" {
		return "", netip.Addr{}, fmt.Errorf("network %s: bridged traffic bypasses iptables (%s is not 1; load br_netfilter)", name, bridgeFilterPath)
	}
	if err := p.limitedRules().Install(ctx, p.iptab); err != nil {
		return "", netip.Addr{}, fmt.Errorf("network %s: %w", name, err)
	}
	if _, err := p.gateAt(gw); err != nil {
		return "", netip.Addr{}, fmt.Errorf("network %s: %w", name, err)
	}
	p.limPending++
	return name, gw, nil
}

// limitedDone ends what a successful ensureLimited began.
func (p *Provider) limitedDone() {
	p.limMu.Lock()
	p.limPending--
	p.limMu.Unlock()
}

// limitedNetwork creates the limited network unless it exists, checks
// that it is the backend's, and returns its gateway. Called under limMu.
func (p *Provider) limitedNetwork(ctx context.Context) (netip.Addr, error) {
	name := p.limitedNetworkName()
	res, err := p.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		noIPv6 := false
		_, err = p.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
			Driver:     "bridge",
			EnableIPv6: &noIPv6,
			Options: map[string]string{
				"com.docker.network.bridge.name":                 p.LimitedBridge(),
				"com.docker.network.bridge.enable_icc":           "false",
				"com.docker.network.bridge.enable_ip_masquerade": "false",
			},
			Labels: map[string]string{labelOwner: p.cfg.Owner, labelBackend: "docker"},
		})
		if err != nil && !cerrdefs.IsConflict(err) { // conflict: made meanwhile by another server
			return netip.Addr{}, err
		}
		res, err = p.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	}
	if err != nil {
		return netip.Addr{}, err
	}
	n := res.Network
	if n.Labels[labelOwner] != p.cfg.Owner || n.Options["com.docker.network.bridge.name"] != p.LimitedBridge() ||
		n.Options["com.docker.network.bridge.enable_ip_masquerade"] != "false" || n.EnableIPv6 {
		return netip.Addr{}, errors.New("an engine network of that name exists that is not the backend's limited network (owner, bridge, masquerade or IPv6 differ): remove it")
	}
	for _, c := range n.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway, nil
		}
	}
	return netip.Addr{}, errors.New("the network has no IPv4 gateway")
}

// gateAt returns the gate listening on gw, opening it when there is none
// (or the egress Manager closed it). Called under limMu.
func (p *Provider) gateAt(gw netip.Addr) (*egress.Gate, error) {
	if p.limGate != nil && !p.limGate.Closed() && p.limGW == gw {
		return p.limGate, nil
	}
	if p.limGate != nil {
		_ = p.limGate.Close()
		p.limGate = nil
	}
	g, err := p.cfg.Egress.OpenGate(egress.GateConfig{
		Proxy:    netip.AddrPortFrom(gw, limitedProxyPort),
		DNS:      netip.AddrPortFrom(gw, limitedDNSPort),
		Gateway:  gw,
		FreeBind: true, // a restarted server may open it before the engine brings the bridge back
	})
	if err != nil {
		return nil, fmt.Errorf("network limited: %w", err)
	}
	p.limGate, p.limGW = g, gw
	return g, nil
}

// startEgress puts the started container of box id behind the gate of
// gateway gw with policy np, and records both. It runs before execd is
// waited for, so before any of the box's own code can connect.
func (p *Provider) startEgress(ctx context.Context, id, containerID, netName string, gw netip.Addr, np sandbox.NetworkPolicy) error {
	res, err := p.cli.ContainerInspect(ctx, containerID, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect container: %w", err)
	}
	var addr netip.Addr
	if ns := res.Container.NetworkSettings; ns != nil && ns.Networks[netName] != nil {
		addr = ns.Networks[netName].IPAddress
	}
	if !addr.Is4() {
		return fmt.Errorf("box %s has no IPv4 address on network %s", id, netName)
	}
	rec := egressRecord{Policy: np, Addr: addr, Gateway: gw}
	if err := p.writeEgress(id, rec); err != nil {
		return err
	}
	return p.serveEgress(id, rec)
}

// serveEgress puts box id behind the gate of rec.Gateway.
func (p *Provider) serveEgress(id string, rec egressRecord) error {
	p.limMu.Lock()
	defer p.limMu.Unlock()
	p.limMade = true
	g, err := p.gateAt(rec.Gateway)
	if err != nil {
		return err
	}
	_, err = g.Add(id, rec.Addr, rec.Policy)
	return err
}

func (p *Provider) writeEgress(id string, rec egressRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode egress record: %w", err)
	}
	path := filepath.Join(p.boxDir(id), egressFile)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("write egress record: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("write egress record: %w", err)
	}
	return nil
}

// readEgress returns box id's egress record; an os.ErrNotExist-wrapped
// error when it has none.
func (p *Provider) readEgress(id string) (egressRecord, error) {
	var rec egressRecord
	b, err := os.ReadFile(filepath.Join(p.boxDir(id), egressFile))
	if err != nil {
		return rec, fmt.Errorf("read egress record of %s: %w", id, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil || !rec.Addr.Is4() || !rec.Gateway.Is4() {
		return rec, fmt.Errorf("egress record of %s is corrupt", id)
	}
	return rec, nil
}

// releaseEgress takes box id, whose container is gone, from behind the
// gate; when it was limited and no box is attached to the limited network
// any more, the network, its rules and the gate go too. A failure to
// remove those is logged, not returned: the box is gone all the same, and
// the next delete or Close tries again.
func (p *Provider) releaseEgress(ctx context.Context, id string, wasLimited bool) {
	p.limMu.Lock()
	if p.limGate != nil {
		p.limGate.Remove(id)
	}
	p.limMu.Unlock()
	if !wasLimited {
		return
	}
	if err := p.removeLimitedIfUnused(ctx, false); err != nil {
		p.log.Warn("remove the limited network", "backend", "docker", "sandbox_id", id, "err", err)
	}
}

// removeLimitedIfUnused removes the limited network, then its host rules,
// and closes the gate, unless a container is attached to the network, a
// limited box is being created, or this Provider never used them and
// adopt is false (with adopt, what any Provider of the owner left goes).
// The engine refuses to remove a network with an endpoint, so the rules
// never go while a box is behind them.
func (p *Provider) removeLimitedIfUnused(ctx context.Context, adopt bool) error {
	p.limMu.Lock()
	defer p.limMu.Unlock()
	if (!p.limMade && !adopt) || p.limPending > 0 {
		return nil
	}
	name := p.limitedNetworkName()
	res, err := p.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("inspect network %s: %w", name, err)
	case res.Network.Labels[labelOwner] != p.cfg.Owner:
		return nil // not ours: leave it, and the rules, alone
	case len(res.Network.Containers) > 0:
		return nil
	default:
		if _, err := p.cli.NetworkRemove(ctx, name, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			if cerrdefs.IsConflict(err) || cerrdefs.IsPermissionDenied(err) {
				return nil // a box joined meanwhile
			}
			return fmt.Errorf("remove network %s: %w", name, err)
		}
	}
	if p.limGate != nil {
		_ = p.limGate.Close()
		p.limGate = nil
	}
	if p.iptab == "" {
		return nil // no rules were ever installed from here
	}
	if err := p.limitedRules().Remove(ctx, p.iptab); err != nil {
		return fmt.Errorf("network %s: %w", name, err)
	}
	return nil
}

// restoreEgress reopens, in a new Provider, the gate of the limited boxes
// that have an egress record, as a restarted server finds them. It needs
// neither the engine nor the boxes' containers: a record of a box whose
// container is gone costs a map entry until the box is deleted.
func (p *Provider) restoreEgress() {
	if !p.limitedAvailable() {
		return
	}
	entries, err := os.ReadDir(filepath.Join(p.cfg.DataDir, dirBoxes))
	if err != nil {
		return
	}
	installed := false
	for _, e := range entries {
		id := e.Name()
		if validID(id) != nil {
			continue
		}
		rec, err := p.readEgress(id)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err == nil {
			var st boxState
			if st, err = p.readState(id); err == nil && st.Network != sandbox.NetworkLimited {
				continue
			}
		}
		if err == nil && !installed {
			// The rules are back before any box is served: a host firewall
			// reload since may have removed them.
			if err = p.limitedRules().Install(context.Background(), p.iptab); err == nil {
				installed = true
			}
		}
		if err == nil {
			err = p.serveEgress(id, rec)
		}
		if err != nil {
			p.log.Error("restore egress proxy", "backend", "docker", "sandbox_id", id, "err", err)
		}
	}
}

// SetNetworkPolicy implements sandbox.PolicySetter. The new policy is
// recorded in the box's egress record first, then applied. A limited box
// whose record was lost (its box record restored by Attach) gets both
// back from the engine's view of its container.
func (p *Provider) SetNetworkPolicy(ctx context.Context, id string, np sandbox.NetworkPolicy) error {
	if err := validID(id); err != nil {
		return err
	}
	if np.Mode != sandbox.NetworkLimited {
		return sandbox.Errorf(sandbox.CodeCapability, "only the rules of network mode limited change at run time")
	}
	if err := egress.Validate(np); err != nil {
		return err
	}
	unlock := p.lock(id)
	defer unlock()
	st, err := p.readState(id)
	if err != nil {
		return err
	}
	if st.Network != sandbox.NetworkLimited {
		return sandbox.Errorf(sandbox.CodeCapability, "box %s does not have network mode limited", id)
	}
	if !p.limitedAvailable() {
		return sandbox.Errorf(sandbox.CodeCapability, "capability %s is not offered by this backend", sandbox.CapNetworkLimited)
	}
	rec, err := p.readEgress(id)
	if errors.Is(err, os.ErrNotExist) {
		return p.reopenEgress(ctx, id, st, np)
	}
	if err != nil {
		return err
	}
	rec.Policy = np
	if err := p.writeEgress(id, rec); err != nil {
		return err
	}
	if box := p.cfg.Egress.Box(id); box != nil {
		return box.SetPolicy(np)
	}
	// The gate was closed (the egress Manager was): open it again.
	return p.serveEgress(id, rec)
}

var _ sandbox.PolicySetter = (*Provider)(nil)

// reopenEgress serves a running limited box that has no egress record.
func (p *Provider) reopenEgress(ctx context.Context, id string, st boxState, np sandbox.NetworkPolicy) error {
	name, gw, err := p.ensureLimited(ctx)
	if err != nil {
		return err
	}
	defer p.limitedDone()
	return p.startEgress(ctx, id, cmp.Or(st.Container, p.containerName(id)), name, gw, np)
}
