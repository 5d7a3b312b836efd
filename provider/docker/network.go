package docker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/internal/hostnet"
)

// The unrestricted network is one engine bridge network per owner, made on
// first use: boxes on it reach the internet through the engine's NAT, but
// not each other (inter-container traffic is off), and, through the host
// rules below, never cloud metadata or any link-local address, private
// ranges, or the host itself.

// networkName is the engine network of unrestricted boxes.
func (p *Provider) networkName() string { return p.cfg.Owner + "-net" }

// NetworkBridge is the name of the Linux bridge of the backend's
// unrestricted network, for the engine host's firewall (a remote engine's
// operator filters its egress: see Config.EgressFiltered).
func (p *Provider) NetworkBridge() string { return "sbxd" + p.hash }

// Chains of the host rules, one pair per owner.
func (p *Provider) chainOut() string { return "ASTRABOX-DKR-" + strings.ToUpper(p.hash) }
func (p *Provider) chainIn() string  { return "ASTRABOX-DKRIN-" + strings.ToUpper(p.hash) }

// reject refuses a packet at once (the box sees "no route to host")
// rather than letting its connection time out.
var reject = []string{"-j", "REJECT", "--reject-with", "icmp-admin-prohibited"}

// ensureNetwork creates the unrestricted network when it is missing and,
// for a local engine, (re)installs its host rules; it returns the
// network's name.
func (p *Provider) ensureNetwork(ctx context.Context) (string, error) {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	name := p.networkName()
	_, err := p.cli.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		noIPv6 := false // the rules filter IPv4 only: boxes get no IPv6
		_, err = p.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
			Driver:     "bridge",
			EnableIPv6: &noIPv6,
			Options: map[string]string{
				"com.docker.network.bridge.name":                 p.NetworkBridge(),
				"com.docker.network.bridge.enable_icc":           "false",
				"com.docker.network.bridge.enable_ip_masquerade": "true",
			},
			Labels: map[string]string{labelOwner: p.cfg.Owner, labelBackend: "docker"},
		})
		if cerrdefs.IsConflict(err) {
			err = nil // made meanwhile by another server of this owner
		}
	}
	if err != nil {
		return "", fmt.Errorf("network %s: %w", name, err)
	}
	p.netMade = true
	if p.local {
		if err := p.installRules(ctx); err != nil {
			return "", fmt.Errorf("network %s: %w", name, err)
		}
	}
	return name, nil
}

// installRules installs the host rules of the unrestricted network:
// traffic the bridge forwards (chain DOCKER-USER, which the engine
// consults first) to a blocked range is rejected, except DNS to the host's
// name servers; traffic from the bridge to the host itself (chain INPUT)
// is rejected unless it answers a connection the host opened. It is
// idempotent: the chains are refilled and each jump added once.
func (p *Provider) installRules(ctx context.Context) error {
	bridge, out, in := p.NetworkBridge(), p.chainOut(), p.chainIn()
	rules := [][]string{{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"}}
	// The engine forwards boxes' DNS queries to the host's name servers
	// from the box network: those in a blocked range stay reachable on 53.
	for _, ns := range hostnet.Nameservers() {
		if !hostnet.Blocked(ns) {
			continue
		}
		for _, proto := range []string{"udp", "tcp"} {
			rules = append(rules, []string{"-d", ns.String(), "-p", proto, "--dport", "53", "-j", "RETURN"})
		}
	}
	for _, r := range hostnet.BlockedRanges {
		rules = append(rules, append([]string{"-d", r.String()}, reject...))
	}
	inRules := [][]string{
		{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"},
		reject,
	}
	// One atomic commit: running boxes never meet an empty chain.
	if err := hostnet.Restore(ctx, p.iptab, "filter", map[string][][]string{out: rules, in: inRules}); err != nil {
		return err
	}
	for _, jump := range [][]string{{"DOCKER-USER", "-i", bridge, "-j", out}, {"INPUT", "-i", bridge, "-j", in}} {
		if p.iptables(ctx, append([]string{"-C"}, jump...)...) == nil {
			continue
		}
		if err := p.iptables(ctx, append([]string{"-I"}, jump...)...); err != nil {
			return err
		}
	}
	return nil
}

// removeRules undoes installRules; rules that are already gone are fine.
func (p *Provider) removeRules(ctx context.Context) {
	bridge, out, in := p.NetworkBridge(), p.chainOut(), p.chainIn()
	for _, jump := range [][]string{{"DOCKER-USER", "-i", bridge, "-j", out}, {"INPUT", "-i", bridge, "-j", in}} {
		for p.iptables(ctx, append([]string{"-D"}, jump...)...) == nil {
		}
	}
	for _, chain := range []string{out, in} {
		_ = p.iptables(ctx, "-F", chain)
		_ = p.iptables(ctx, "-X", chain)
	}
}

// removeNetworkIfUnused removes the unrestricted network and its host
// rules when no container is attached, if this Provider set them up or,
// with adopt, whichever Provider of the owner did. A network of that name
// without the owner's label is not the backend's: it and the rules stay.
func (p *Provider) removeNetworkIfUnused(ctx context.Context, adopt bool) error {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	if !p.netMade && !adopt {
		return nil
	}
	res, err := p.cli.NetworkInspect(ctx, p.networkName(), client.NetworkInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("inspect network %s: %w", p.networkName(), err)
	case res.Network.Labels[labelOwner] != p.cfg.Owner:
		return nil
	case len(res.Network.Containers) > 0:
		return nil
	default:
		if _, err := p.cli.NetworkRemove(ctx, p.networkName(), client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			if cerrdefs.IsConflict(err) || cerrdefs.IsPermissionDenied(err) {
				return nil // a box joined meanwhile
			}
			return fmt.Errorf("remove network %s: %w", p.networkName(), err)
		}
	}
	p.netMade = false
	if p.iptab != "" {
		p.removeRules(ctx)
	}
	return nil
}

func (p *Provider) iptables(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, p.iptab, append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// findIptables returns the iptables command to use, or "" when the
// unrestricted network cannot be guarded (none found, turned off, or this
// process is not root).
func findIptables(configured string) string {
	if configured == "none" || os.Geteuid() != 0 {
		return ""
	}
	candidates := []string{"/usr/sbin/iptables", "/sbin/iptables", "/usr/bin/iptables"}
	if configured != "" {
		candidates = []string{configured}
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return c
		}
	}
	return ""
}
