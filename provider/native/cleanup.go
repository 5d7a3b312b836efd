package native

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/internal/boxbin"
)

// Close releases what this Provider set up on the host that no box needs:
// a server calls it when it stops (its boxes keep running, and the next
// server re-attaches them), tests and benchmarks when they are done. It
// closes the egress proxies of limited boxes this Provider opened. When
// the data dir holds no box it also releases the binary's tmpfs, the
// cgroup parent and the data dir's empty directories; when no box of any
// data dir holds a slot (no box runs on the host) it removes the host
// firewall rules of modes unrestricted and limited. The Provider must not
// be used afterwards.
func (p *Provider) Close() error {
	p.mu.Lock()
	gates := p.gates
	p.gates = map[string]*egress.Gate{}
	p.mu.Unlock()
	for _, g := range gates {
		_ = g.Close()
	}
	var errs []error
	boxes, err := os.ReadDir(filepath.Join(p.cfg.DataDir, dirBoxes))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("native: %w", err))
	}
	if err == nil && len(boxes) == 0 {
		if err := boxbin.Release(filepath.Join(p.cfg.DataDir, dirBin)); err != nil {
			errs = append(errs, err)
		}
		if err := p.cg.removeParent(); err != nil {
			errs = append(errs, err)
		}
		for _, d := range []string{dirBin, dirBoxes} {
			if err := os.Remove(filepath.Join(p.cfg.DataDir, d)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("native: %w", err))
			}
		}
	}
	if err := p.removeFirewall(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeFirewall removes the host firewall of boxes with network when no
// box on the host holds a slot. It holds the slot registry's lock
// exclusive meanwhile, so that no create sets up the firewall and takes a
// slot in between (a create after it installs the rules anew).
func (p *Provider) removeFirewall() error {
	if !hostFirewall.available() {
		return nil
	}
	unlock, err := p.slotsLock(true)
	if err != nil {
		return err
	}
	defer unlock()
	if len(p.slotsInUse()) > 0 {
		return nil
	}
	return hostFirewall.removeAll()
}

// firewallChains are the chains of modes unrestricted and limited, by
// table.
var firewallChains = map[string][]string{
	"filter": {chainForward, chainInput, chainLimIn, chainLimFwd},
	"nat":    {chainLimNAT},
}

// removeAll removes every rule that jumps into the firewall's chains, the
// masquerading of box networks (whatever network each server used), and
// the chains.
func (f *firewall) removeAll() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installed = map[netip.Prefix]string{}
	f.limited = false
	var errs []error
	for _, tc := range [][2]string{{"filter", "INPUT"}, {"filter", "FORWARD"}, {"nat", "PREROUTING"}, {"nat", "POSTROUTING"}} {
		out, err := f.run("-t", tc[0], "-S", tc[1])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			rule := strings.Fields(line)
			if len(rule) < 2 || rule[0] != "-A" || !ours(rule) {
				continue
			}
			if _, err := f.run(append([]string{"-t", tc[0], "-D"}, rule[1:]...)...); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for table, chains := range firewallChains {
		for _, c := range chains {
			if _, err := f.run("-t", table, "-S", c); err != nil {
				continue // not there
			}
			if _, err := f.run("-t", table, "-F", c); err != nil {
				errs = append(errs, err)
			}
			if _, err := f.run("-t", table, "-X", c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ours reports whether rule (iptables -S, without "-A") is one the
// firewall put into a built-in chain.
func ours(rule []string) bool {
	s := " " + strings.Join(rule, " ") + " "
	for _, chains := range firewallChains {
		for _, c := range chains {
			if strings.Contains(s, " -j "+c+" ") {
				return true
			}
		}
	}
	return strings.Contains(s, " ! -o "+hostIfPrefix+"+ -j MASQUERADE ")
}
