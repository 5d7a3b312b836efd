package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/internal/hostnet"
	"github.com/astrabox/astrabox/internal/procfs"
	"github.com/astrabox/astrabox/sandbox"
)

// Network mode limited. A box gets a veth pair as in mode unrestricted,
// but its host end is named "abl<slot>" and nothing it sends is forwarded:
// every TCP connection is redirected to the box's egress proxy and every
// DNS query (UDP and TCP port 53, to any address) to the box's name
// server, both listening on the host end's address (package egress). The
// rules are host configuration, installed once for all such interfaces
// (abl+), like those of mode unrestricted, and they fail closed: while no
// proxy listens for a box (its server is stopped) its connections are
// refused, and nothing of a limited box is ever forwarded or masqueraded.
//
//	nat PREROUTING -i abl+ -j ASTRABOX-LIM-NAT:
//	    DNS to any address -> REDIRECT to dnsPort; other TCP -> REDIRECT to proxyPort
//	filter INPUT   -i abl+ -j ASTRABOX-LIM-IN:
//	    replies; redirected connections to proxyPort and dnsPort; REJECT the rest
//	filter FORWARD -i abl+ / -o abl+ -j ASTRABOX-LIM-FWD: REJECT
//
// REDIRECT sends a packet to the primary address of the interface it came
// in on, so a box only ever reaches its own proxy, and the proxy checks
// too that a connection comes from its box's address. Per box there are
// only the proxy's listeners (closed on delete, and when the server
// stops) and a policy file in the box's directory, from which a restarted
// server opens them again.
const (
	limitedIfPrefix = "abl"
	chainLimNAT     = "ASTRABOX-LIM-NAT"
	chainLimIn      = "ASTRABOX-LIM-IN"
	chainLimFwd     = "ASTRABOX-LIM-FWD"
	proxyPort       = 15001
	dnsPort         = 15053
	policyFile      = "egress.json"
)

// limitedRules are the host rules of mode limited, one set for every
// limited box interface (see hostnet.LimitedRules).
var limitedRules = hostnet.LimitedRules{
	Iface: limitedIfPrefix + "+", NAT: chainLimNAT, In: chainLimIn, Fwd: chainLimFwd,
	Forward: "FORWARD", ProxyPort: proxyPort, DNSPort: dnsPort,
}

// ensureLimited installs (once per process, or again when a host firewall
// reload removed them) the rules of mode limited.
func (f *firewall) ensureLimited() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ctx := context.Background()
	if f.limited && limitedRules.InPlace(ctx, f.iptables) {
		return nil
	}
	if f.iptables == "" {
		return fmt.Errorf("network limited needs iptables, which is not installed")
	}
	if err := limitedRules.Install(ctx, f.iptables); err != nil {
		return err
	}
	f.limited = true
	return nil
}

// limitedLink is the addressing of a limited box in slot.
func limitedLink(network netip.Prefix, slot int) (boxLink, error) {
	l, err := linkFor(network, slot)
	l.hostIf = limitedIfPrefix + strconv.Itoa(slot)
	return l, err
}

// openEgress opens the egress proxy of box id on the host end of link,
// with policy np, and records np in the box's directory.
func (p *Provider) openEgress(id string, l boxLink, np sandbox.NetworkPolicy) error {
	if err := p.writePolicy(id, np); err != nil {
		return err
	}
	p.closeEgress(id)
	g, err := p.cfg.Egress.OpenGate(egress.GateConfig{
		Proxy:    netip.AddrPortFrom(l.hostIP, proxyPort),
		DNS:      netip.AddrPortFrom(l.hostIP, dnsPort),
		Gateway:  l.hostIP,
		FreeBind: true,
	})
	if err != nil {
		return fmt.Errorf("network limited: %w", err)
	}
	if _, err := g.Add(id, l.boxIP, np); err != nil {
		_ = g.Close()
		return err
	}
	p.mu.Lock()
	p.gates[id] = g
	p.mu.Unlock()
	return nil
}

// closeEgress closes box id's egress proxy, if it has one.
func (p *Provider) closeEgress(id string) {
	p.mu.Lock()
	g := p.gates[id]
	delete(p.gates, id)
	p.mu.Unlock()
	if g != nil {
		_ = g.Close()
	}
}

func (p *Provider) writePolicy(id string, np sandbox.NetworkPolicy) error {
	b, err := json.Marshal(np)
	if err != nil {
		return fmt.Errorf("encode egress policy: %w", err)
	}
	path := filepath.Join(p.boxDir(id), policyFile)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("write egress policy: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("write egress policy: %w", err)
	}
	return nil
}

// restoreEgress opens again the proxies of the limited boxes still
// running, as a restarted server finds them.
func (p *Provider) restoreEgress() {
	entries, err := os.ReadDir(filepath.Join(p.cfg.DataDir, dirBoxes))
	if err != nil {
		return
	}
	for _, e := range entries {
		id := e.Name()
		b, err := os.ReadFile(filepath.Join(p.boxDir(id), policyFile))
		if err != nil {
			continue
		}
		var np sandbox.NetworkPolicy
		st, serr := p.readState(id)
		if json.Unmarshal(b, &np) != nil || serr != nil || st.PID <= 0 || procfs.StartTime(st.PID) != st.PIDStart {
			continue
		}
		if err := hostFirewall.ensureLimited(); err != nil {
			p.log.Error("restore egress firewall", "err", err)
			return
		}
		l, err := limitedLink(p.network, st.Slot)
		if err == nil {
			err = p.openEgress(id, l, np)
		}
		if err != nil {
			p.log.Error("restore egress proxy", "sandbox_id", id, "err", err)
		}
	}
}

// SetNetworkPolicy implements sandbox.PolicySetter.
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
	if _, err := p.readState(id); err != nil {
		return err
	}
	var box *egress.Box
	if p.cfg.Egress != nil {
		box = p.cfg.Egress.Box(id)
	}
	if box == nil {
		if _, err := os.Stat(filepath.Join(p.boxDir(id), policyFile)); errors.Is(err, os.ErrNotExist) {
			return sandbox.Errorf(sandbox.CodeCapability, "box %s does not have network mode limited", id)
		}
		return fmt.Errorf("box %s: its egress proxy is not running", id)
	}
	if err := p.writePolicy(id, np); err != nil {
		return err
	}
	return box.SetPolicy(np)
}

var _ sandbox.PolicySetter = (*Provider)(nil)

// prepareLimited checks a limited policy and installs the mode's rules,
// before anything of the box is made.
func (p *Provider) prepareLimited(np sandbox.NetworkPolicy) error {
	if p.cfg.Egress == nil {
		return sandbox.Errorf(sandbox.CodeCapability, "capability %s is not offered by this backend", sandbox.CapNetworkLimited)
	}
	if err := egress.Validate(np); err != nil {
		return err
	}
	if err := hostFirewall.ensureLimited(); err != nil {
		return fmt.Errorf("network limited: %w", err)
	}
	return nil
}

// startLimited opens the egress proxy of box id in slot, points the box's
// resolver at it, and returns the box's link.
func (p *Provider) startLimited(id string, slot int, np sandbox.NetworkPolicy, cfg *initConfig) (boxLink, error) {
	l, err := limitedLink(p.network, slot)
	if err != nil {
		return l, err
	}
	if err := p.openEgress(id, l, np); err != nil {
		return l, err
	}
	cfg.Etc["resolv.conf"] = fmt.Sprintf("# network mode limited: AstraBox's egress name server\nnameserver %s\n", l.hostIP)
	return l, nil
}
